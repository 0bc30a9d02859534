/**
 * PL306: a training script compiles a model that trains in BF16. Under torch.compile te.* modules run eager between
 * compiled graphs (TE 2.20.2 turns its own compile support off on torch 2.11), while torchao's float8 training is
 * traced with the model: its casts fuse into the neighbouring kernels. On real training code compiled, torchao was the
 * faster FP8 (data/compiled-ab-h200.json), so for a model the script compiles, the FP8 offered is torchao's, through
 * the fallback's fp8_for_compile, which checks the GPU and torchao when it runs. Turning PL306 off leaves the te.*
 * conversion of the layers, the FP8 that pays eager.
 */
import { MODEL_WORD } from '../analysis/calls';
import { compiledRunsText } from '../analysis/gain-layer';
import type { ModelIR, NotableCall } from '../analysis/ir';
import { escapeRegExp } from '../analysis/spans';
import { folderOf, isWithin, slashed } from '../engine/paths';
import type { Finding, RuleContext, RuleModule, WorkspaceFacts } from './types';

/** The model a compile call compiles, as written, and where it is written (what the fix wraps). */
export interface CompiledModel {
  text: string;
  start: number;
  end: number;
}

/**
 * The model `torch.compile(model, ...)` or `model.compile(...)` (nn.Module.compile, in place) compiles: a name
 * (`model`, `self.model`) that reads as a model; undefined for a function or anything else.
 */
export function compiledModel(call: NotableCall, text: string): CompiledModel | undefined {
  if (call.kind !== 'compile' || call.text.startsWith('@')) return undefined;
  let found: CompiledModel | undefined;
  const span = call.argSpans?.$0;
  if (call.args.$0 !== undefined && span) {
    // `torch.compile(model)`, `th.compile(model)`; `net.compile(x)` on a module passes x on as torch.compile's option.
    if (call.receiver && MODEL_WORD.test(call.receiver)) return undefined;
    found = { text: call.args.$0, start: span.startOffset, end: span.endOffset };
  } else if (call.receiver && text.startsWith(call.receiver, call.span.startOffset)) {
    // `model.compile()`: nn.Module.compile compiles the module in place.
    found = { text: call.receiver, start: call.span.startOffset, end: call.span.startOffset + call.receiver.length };
  }
  if (!found || !/^[A-Za-z_][\w.]*$/.test(found.text) || !MODEL_WORD.test(found.text)) return undefined;
  const last = found.text.split('.').pop()!;
  // `def model(...)`: a function that happens to have a model's name.
  if (new RegExp(`^[ \\t]*(?:async[ \\t]+)?def[ \\t]+${escapeRegExp(last)}[ \\t]*\\(`, 'm').test(text)) return undefined;
  return found;
}

/**
 * Whether te.* layers are this script's business: a file that builds them in the script's folder (or below it), or
 * imported by the script (`from model import GPT`, `from pkg.model import GPT`). Where the paths are not known, any
 * te.* layer of the analysed files counts.
 */
export function teInReach(ir: ModelIR, workspace: WorkspaceFacts): boolean {
  if (!workspace.teFiles || !workspace.path) return workspace.anyTeLayers === true;
  return inReach(ir, workspace.path, workspace.teFiles).length > 0;
}

/**
 * Whether the model the script trains is known and FP8 is predicted to slow every one of its Linears down: among the
 * files in reach that build candidates, none gains. Where the paths are not known, the workspace's answer.
 */
export function fp8Loses(ir: ModelIR, workspace: WorkspaceFacts): boolean {
  if (!workspace.path || (!workspace.fp8GainFiles && !workspace.fp8LoseFiles)) return workspace.anyFp8Gains === false;
  if (inReach(ir, workspace.path, workspace.fp8GainFiles ?? []).length) return false;
  return inReach(ir, workspace.path, workspace.fp8LoseFiles ?? []).length > 0;
}

/** The files among `files` in the script's folder (or below it) or imported by it by package (`from pkg.model import GPT`). */
export function inReach(ir: ModelIR, script: string, files: readonly string[]): string[] {
  const dir = folderOf(script);
  const imported = ir.imports.map((b) => b.target.replace(/^\.+/, '').split('.'));
  // A bare module name (`from model import GPT`) is the script's folder's; a dotted one names its package's path.
  return files.map(slashed).filter((file) => isWithin(file, dir) || imported.some((parts) => parts.some((_, i) => {
    if (i === 0) return false;
    const mod = parts.slice(0, i + 1).join('/');
    return file.endsWith(`/${mod}.py`) || file.endsWith(`/${mod}/__init__.py`);
  })));
}

export const compiledRules: RuleModule = {
  codes: ['PL306'],
  check({ ir, text, workspace, settings }: RuleContext): Finding[] {
    if (settings.targetGpu === 'ampere') return [];
    // A training script: a model compiled elsewhere (an inference server) is not trained in FP8.
    if (!ir.calls.some((c) => c.kind === 'backward' || c.kind === 'optimizer_step')) return [];
    // FP8 is there already, or another stack owns the layers (te.* layers, a torchao / accelerate conversion, QLoRA).
    if (ir.importsTe || ir.fp8Conversions.length || ir.quantization.length || workspace.otherStack || teInReach(ir, workspace)) return [];
    // The model's layers are known, and FP8 is predicted to slow every one of them down (a GPT-2 small).
    if (!settings.convertLosingLayers && fp8Loses(ir, workspace)) return [];
    const findings: Finding[] = [];
    ir.calls.forEach((call, callIndex) => {
      const arg = compiledModel(call, text)?.text;
      if (!arg) return;
      const inPlace = call.args.$0 === undefined;
      const written = inPlace ? `fp8_for_compile(${arg}).compile()` : `torch.compile(fp8_for_compile(${arg}))`;
      findings.push({
        code: 'PL306', span: call.span, severity: 'information', callIndex,
        message: `${arg} is compiled but trains in BF16; ${written} adds torchao FP8, which compiles`,
        explanation: {
          facts: [
            `Under torch.compile, te.* modules run eager between compiled graphs, while torchao's float8 training is traced with the model and its casts fuse into the neighbouring kernels. ${compiledRunsText()}.`,
          ],
          consequence: 'As written the compiled model runs its GEMMs in BF16; FP8 GEMMs ran 1.8-1.9x faster on Hopper.',
          fix: `The fix wraps the model: ${written}. fp8_for_compile, from the project's FP8 fallback module, converts the model with torchao's convert_to_float8_training (tensorwise) where the GPU has FP8 (compute capability 8.9 or more) and torchao is installed, keeps the lm-head, layers off the multiple-of-16 rule and layers too small to gain in BF16, logs what it did, and returns the model unchanged elsewhere; parameters and checkpoint keys stay the same. Runs without torch.compile stay in BF16: to train eager in FP8, turn PL306 off and convert the layers to te.* instead.`,
        },
      });
    });
    return findings;
  },
};
