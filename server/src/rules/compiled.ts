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
import type { NotableCall } from '../analysis/ir';
import { escapeRegExp } from '../analysis/spans';
import type { Finding, RuleContext, RuleModule } from './types';

/** The model a `torch.compile(...)` call compiles, as written (`model`, `self.model`); undefined for a function. */
export function compiledModelArg(call: NotableCall, text: string): string | undefined {
  if (call.kind !== 'compile' || call.text.startsWith('@')) return undefined;
  const arg = call.args.$0;
  if (!arg || !call.argSpans?.$0 || !/^[A-Za-z_][\w.]*$/.test(arg) || !MODEL_WORD.test(arg)) return undefined;
  const last = arg.split('.').pop()!;
  // `def model(...)`: a function that happens to have a model's name.
  if (new RegExp(`^[ \\t]*(?:async[ \\t]+)?def[ \\t]+${escapeRegExp(last)}[ \\t]*\\(`, 'm').test(text)) return undefined;
  return arg;
}

export const compiledRules: RuleModule = {
  codes: ['PL306'],
  check({ ir, text, workspace, settings }: RuleContext): Finding[] {
    if (settings.targetGpu === 'ampere') return [];
    // A training script: a model compiled elsewhere (an inference server) is not trained in FP8.
    if (!ir.calls.some((c) => c.kind === 'backward' || c.kind === 'optimizer_step')) return [];
    // FP8 is there already, or another stack owns the layers (te.* layers, a torchao / accelerate conversion, QLoRA).
    if (ir.importsTe || ir.fp8Conversions.length || ir.quantization.length || workspace.otherStack || workspace.anyTeLayers) return [];
    // The model's layers are known, and FP8 is predicted to slow every one of them down (a GPT-2 small).
    if (workspace.anyFp8Gains === false && !settings.convertLosingLayers) return [];
    const findings: Finding[] = [];
    ir.calls.forEach((call, callIndex) => {
      const arg = compiledModelArg(call, text);
      if (!arg) return;
      findings.push({
        code: 'PL306', span: call.span, severity: 'information', callIndex,
        message: `${arg} is compiled but trains in BF16; torch.compile(fp8_for_compile(${arg})) adds torchao FP8, which compiles`,
        explanation: {
          facts: [
            `Under torch.compile, te.* modules run eager between compiled graphs, while torchao's float8 training is traced with the model and its casts fuse into the neighbouring kernels. ${compiledRunsText()}.`,
          ],
          consequence: 'As written the compiled model runs its GEMMs in BF16; FP8 GEMMs ran 1.8-1.9x faster on Hopper.',
          fix: `The fix wraps the argument: torch.compile(fp8_for_compile(${arg})). fp8_for_compile, from the project's FP8 fallback module, converts the model with torchao's convert_to_float8_training (tensorwise) where the GPU has FP8 (compute capability 8.9 or more) and torchao is installed, keeps the lm-head, layers off the multiple-of-16 rule and layers too small to gain in BF16, logs what it did, and returns the model unchanged elsewhere; parameters and checkpoint keys stay the same. Runs without torch.compile stay in BF16: to train eager in FP8, turn PL306 off and convert the layers to te.* instead.`,
        },
      });
    });
    return findings;
  },
};
