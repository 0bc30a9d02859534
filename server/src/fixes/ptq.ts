/**
 * "Quantize to FP8 after training (with calibration)": inserts `quantize_fp8_for_inference(model, calib_batches)`, a
 * post-training quantization block that
 *  - calibrates on batches the file already has (its validation / eval loader, found next to the training loop), or
 *    on the function's `calib_batches` parameter when the file has none: never a placeholder;
 *  - keeps the lm-head(s) the analysis found by role, and any Linear whose weight is shared with an embedding, in high
 *    precision (embeddings are never quantized: ModelOpt 0.47 disables nn.Embedding quantizers, torchao's filter takes
 *    only nn.Linear);
 *  - uses the library the environment has, chosen when it runs: NVIDIA Model Optimizer (FP8_DEFAULT_CFG, static
 *    scales from the calibration batches), else torchao (float8 dynamic activation + weight where the GPU has FP8
 *    GEMMs, float8 weight-only elsewhere), else it says which package to install and returns the model unchanged;
 *  - prints the logit difference and next-token agreement before/after on a few batches.
 */
import type { Layer, PtqQuantizeCall } from '../analysis/ir';
import type { Finding } from '../rules/types';
import { WRAPPER_END_MARKER, wrapperRanges } from '../analysis/known';
import { findTrainingSteps } from './autocast';
import { calibrationBoundFix, calibrationLoopFix, e4m3Fix, EVAL_SOURCE, gpuGuardFix, modeloptHeadFix, modeloptSaveFix } from './ptq-edits';
import { GPU_NAMES } from '../rules/autocast';
import { insteadOn } from '../rules/ptq';
import type { Statement, SourceModel } from './source';
import { outcome, refuse, type Fix, type FixContext, type FixOutcome } from './types';

export const PTQ_FUNCTION = 'quantize_fp8_for_inference';


function statementText(model: SourceModel, s: Statement): string {
  return model.text.slice(s.start, s.end);
}

/** Offset after the last line of a statement's whole block. */
function blockEnd(s: Statement): number {
  let last = s;
  while (last.children.length) last = last.children[last.children.length - 1];
  return last.lineEnd;
}

function textOfBlock(model: SourceModel, s: Statement): string {
  return model.text.slice(s.lineStart, blockEnd(s));
}

/** Attribute names of the lm-heads the analysis found by role (`lm_head`, `decoder`, `output`). */
export function headNames(layers: readonly Layer[]): string[] {
  const names = layers.filter((l) => l.role === 'lm_head' && (l.kind === 'linear' || l.kind === 'parallel-linear'))
    .map((l) => (l.attr ?? (l.path ?? l.name).replace(/^self\./, '').split('.').pop() ?? '').replace(/\[\*\]$/, ''))
    .filter((n) => /^[A-Za-z_]\w*$/.test(n));
  return [...new Set(names)];
}

interface CallSite { at: number; indent: string; model: string; source: string }

/**
 * Where to call the new function: right after the outermost training loop, in its scope, when that scope (or the
 * function's parameters) names a held-out data source and the trained model (`X.parameters()` given to the optimizer).
 */
function callSite(model: SourceModel): CallSite | undefined {
  const steps = findTrainingSteps(model);
  if (!steps.length) return undefined;
  let loop = steps[0].loop;
  while (loop.parent && /^(async\s+)?(for|while)\b/.test(statementText(model, loop.parent))) loop = loop.parent;
  const scope = loop.parent;
  const scopeText = scope ? textOfBlock(model, scope) : model.text.slice(0, blockEnd(loop));
  const source = EVAL_SOURCE.exec(scopeText.slice(0, scopeText.length))?.[1];
  const trained = /\b([A-Za-z_]\w*)\s*\.\s*parameters\s*\(\s*\)/.exec(scopeText)?.[1] ?? (/\bmodel\b/.test(scopeText) ? 'model' : undefined);
  if (!source || !trained) return undefined;
  return { at: blockEnd(loop), indent: loop.indent, model: trained, source };
}

/**
 * After the file's leading imports, definitions and classes, before the first other top-level statement (the script
 * part, a `__main__` guard): whatever runs at top level, and so whatever calls the new function, comes after it.
 */
function definitionSite(model: SourceModel): number {
  // The inserted FP8 fallback wrapper (a try: block among the imports) is part of the definitions.
  const wrappers = model.text.includes(WRAPPER_END_MARKER) ? wrapperRanges(model.text) : [];
  const inWrapper = (s: Statement): boolean => wrappers.some(([a, b]) => s.lineEnd > a && s.lineStart < b);
  const first = model.statements.find((s) => !inWrapper(s) && !/^(import|from|def|class|async\s+def|@|["'])/.test(statementText(model, s)));
  return first ? first.lineStart : model.text.length;
}

/** The Python of the block, for the lm-head names found by role. */
export function ptqFunctionText(heads: readonly string[]): string {
  const headSet = heads.length ? `{${heads.map((h) => JSON.stringify(h)).join(', ')}}` : 'set()';
  const moEntries = heads.map((h) => [
    '            if isinstance(cfg["quant_cfg"], list):  # ModelOpt >= 0.47: ordered entries',
    `                cfg["quant_cfg"].append({"quantizer_name": "*${h}*", "enable": False})`,
    '            else:',
    `                cfg["quant_cfg"]["*${h}*"] = {"enable": False}`,
  ].join('\n')).join('\n');
  return `

# FP8 post-training quantization for inference (inserted by Precision Lens).
def ${PTQ_FUNCTION}(model, calib_batches, num_calib_batches=64, check_batches=4):
    """Quantizes a trained model's Linear layers to FP8 (E4M3) for inference, calibrating on \`calib_batches\`.

    The lm-head (found by its role: ${heads.join(', ') || 'none found in this file'}) and any Linear tied to an embedding
    stay in high precision; embeddings are not quantized. Uses NVIDIA Model Optimizer when installed (FP8_DEFAULT_CFG:
    fake-quant with scales calibrated here; deploy with mto.save or export_tensorrt_llm_checkpoint), else torchao
    (float8 dynamic activation + weight on GPUs with FP8, float8 weight-only elsewhere), else returns the model as is.
    Prints the logit difference and next-token agreement against the model before quantization.
    """
    import copy
    import itertools

    import torch

    def run(m, batch):
        batch = batch[0] if isinstance(batch, (tuple, list)) else batch
        out = m(**batch) if isinstance(batch, dict) else m(batch)
        out = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
        return out.float()

    batches = list(itertools.islice(iter(calib_batches), num_calib_batches))
    if not batches:
        raise ValueError("${PTQ_FUNCTION}: calib_batches gave no batch to calibrate on")
    tied = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    heads = ${headSet}
    keep_high_precision = {
        name for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and (name.split(".")[-1] in heads or id(m.weight) in tied)
    }
    model.eval()
    with torch.no_grad():
        before = [run(model, b) for b in batches[:check_batches]]
    try:
        import modelopt.torch.quantization as mtq
    except ImportError:
        mtq = None
    if mtq is not None:
        cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)
        for name in sorted(keep_high_precision):
            if isinstance(cfg["quant_cfg"], list):  # ModelOpt >= 0.47: ordered entries
                cfg["quant_cfg"].append({"quantizer_name": f"{name}.*", "enable": False})
            else:
                cfg["quant_cfg"][f"{name}.*"] = {"enable": False}
        if heads:
${moEntries || '            pass'}

        def calibrate(m):
            with torch.no_grad():
                for b in batches:
                    run(m, b)

        model = mtq.quantize(model, cfg, forward_loop=calibrate)
        how = "Model Optimizer FP8_DEFAULT_CFG (fake-quant; export for TensorRT-LLM to run it in FP8)"
    else:
        try:
            from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, Float8WeightOnlyConfig, quantize_
        except ImportError:
            print("FP8 post-training quantization skipped: install nvidia-modelopt or torchao (pip install torchao)")
            return model
        fp8_gemm = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)
        config = Float8DynamicActivationFloat8WeightConfig() if fp8_gemm else Float8WeightOnlyConfig()
        quantize_(model, config, filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and fqn not in keep_high_precision)
        how = "torchao " + type(config).__name__ + ("" if fp8_gemm else " (no FP8 GEMMs on this device: weights only)")
    with torch.no_grad():
        after = [run(model, b) for b in batches[:check_batches]]
    diff = torch.cat([(a - b).abs().flatten() for a, b in zip(after, before)])
    agree = torch.cat([(a.argmax(-1) == b.argmax(-1)).flatten().float() for a, b in zip(after, before)]).mean().item()
    print(f"FP8 post-training quantization with {how}: calibrated on {len(batches)} batches, "
          f"kept in high precision: {', '.join(sorted(keep_high_precision)) or 'nothing'}; "
          f"logits max |diff| {diff.max().item():.4g}, mean {diff.mean().item():.4g}, next-token agreement {agree:.1%}")
    return model
`;
}

/** The fix, or why it is not offered. */
export function ptqFix(ctx: FixContext): { fix?: Fix; refusal?: string } {
  const { ir, model, text } = ctx;
  if (new RegExp(String.raw`\bdef\s+${PTQ_FUNCTION}\b`).test(text)) return {};
  if (ir.ptq.quantizeCalls.length) {
    return { refusal: `No FP8 post-training quantization block: the file already quantizes (${ir.ptq.quantizeCalls[0].callee}, line ${ir.ptq.quantizeCalls[0].span.startLine + 1}).` };
  }
  const hasModel = ir.layers.some((l) => l.kind === 'linear' && !l.isTe) || findTrainingSteps(model).length > 0;
  if (!hasModel) return {};
  const heads = headNames(ir.layers);
  const at = definitionSite(model);
  const before = text.slice(0, at).replace(/\s+$/, '');
  const body = ptqFunctionText(heads).replace(/^\n\n/, '');
  const lead = before.length ? '\n\n\n' : '';
  const trail = at < text.length ? '\n\n' : '';
  const site = callSite(model);
  const call = site ? `${site.indent}${site.model} = ${PTQ_FUNCTION}(${site.model}, ${site.source})` : '';
  // A call right at the end of the definitions joins the definition's edit (the two would touch).
  const joined = site !== undefined && site.at >= before.length && site.at <= at;
  const edits = [{ startOffset: before.length, endOffset: at, newText: `${joined ? `\n${call}` : ''}${lead}${body}${trail}` }];
  if (site && !joined) {
    const nl = text[site.at - 1] === '\n' ? '' : '\n';
    edits.push({ startOffset: site.at, endOffset: site.at, newText: `${nl}${call}\n` });
  }
  const how = site ? `calibrates on ${site.source}` : 'calibration batches as a parameter';
  return {
    fix: {
      id: 'ptq-fp8', title: `Quantize to FP8 after training (with calibration): ${how}`, kind: 'source', codes: ['PL601', 'PL602'],
      safe: false, edits: edits.sort((a, b) => a.startOffset - b.startOffset),
    },
  };
}

/** The quick fix of a PL6xx finding, or why there is none. */
export function ptqFindingOutcome(ctx: FixContext, finding: Finding): FixOutcome {
  const call = finding.ptqIndex !== undefined ? ctx.ir.ptq.quantizeCalls[finding.ptqIndex] : undefined;
  const layer = finding.layerIndex !== undefined ? ctx.ir.layers[finding.layerIndex] : undefined;
  switch (finding.code) {
    case 'PL601':
      if (call?.library === 'torchao' && !call.filter) return torchaoFilter(ctx, call, layer);
      if (call?.library === 'modelopt' && layer) return modeloptHeadFix(ctx, call, layer);
      return refuse('No automatic fix: change the filter_fn so that it returns False for the lm-head and for Linears tied to an embedding.');
    case 'PL602':
      return calibrationLoopFix(ctx, call);
    case 'PL603':
      return calibrationBoundFix(ctx, call);
    case 'PL604':
      return e4m3Fix(ctx, call);
    case 'PL605':
      return gpuGuardFix(ctx, call, GPU_NAMES[ctx.settings.targetGpu], insteadOn(ctx.settings.targetGpu));
    case 'PL606':
      return modeloptSaveFix(ctx, ctx.ir.ptq.saves.find((s) => s.span.startOffset === finding.span.startOffset && s.kind === 'torch-save-state-dict'));
    default:
      return outcome();
  }
}

/** torchao quantize_ without filter_fn: add one that takes nn.Linear layers but the lm-heads found by role. */
function torchaoFilter(ctx: FixContext, call: PtqQuantizeCall, layer: Layer | undefined): FixOutcome {
  const torchName = ctx.ir.imports.find((b) => b.target === 'torch' && !b.guarded)?.local;
  if (!torchName) return refuse('No automatic fix: the file does not import torch under a name the filter could use.');
  const heads = headNames(layer ? [layer, ...ctx.ir.layers] : ctx.ir.layers);
  const names = heads.length ? heads : ['lm_head', 'output', 'decoder'];
  const close = call.span.endOffset - 1;
  if (ctx.text[close] !== ')') return refuse('No automatic fix: the quantize_ call could not be read to its closing parenthesis.');
  let end = close;
  while (end > call.span.startOffset && /\s/.test(ctx.text[end - 1])) end--;
  const comma = ctx.text[end - 1] === ',' || ctx.text[end - 1] === '(' ? '' : ',';
  const set = `{${names.map((n) => JSON.stringify(n)).join(', ')}}`;
  const newText = `${comma} filter_fn=lambda module, fqn: isinstance(module, ${torchName}.nn.Linear) and fqn.split(".")[-1] not in ${set}`;
  return outcome([{
    id: 'ptq-torchao-filter', title: `Keep ${names.join(', ')} out of quantize_ (filter_fn)`, kind: 'quickfix', codes: ['PL601'],
    safe: false, isPreferred: true, edits: [{ startOffset: end, endOffset: end, newText }],
  }]);
}
