/**
 * PL201 / PL202: keep the lm-head (and an embedding, or a head tied to it) out of FP8. Either build it as
 * torch.nn.Linear again (TE autocast leaves plain modules alone), or, when it must stay a TE module, run its call
 * under autocast(enabled=False) as TE's Mixtral example does. For a filterless torchao conversion, add a filter.
 */
import type { Fp8ConversionCall, Layer } from '../analysis/ir';
import { appendArgs, removeArgs, renameArg, replace, type TextEdit } from './edits';
import { addImport, teAccess, torchNnAccess } from './imports';
import { splitCallArgs, statementAt, statementText } from './source';
import { autocastCall } from './te-api';
import { wrapStatements } from './autocast';
import { hasFallback } from './fallback';
import { bringInFallback, CONTEXT_FACTORY } from './wrapper';
import { constructorSite, layerKey } from './convert';
import { outcome, type Fix, type FixContext, type FixOutcome } from './types';

/** torch.nn.Linear's keywords; te.Linear's others (parallel_mode, init_method...) have no torch twin. */
const TORCH_LINEAR_KWARGS = new Set(['in_features', 'out_features', 'bias', 'device', 'dtype']);

/** te.Linear -> torch.nn.Linear, params_dtype -> dtype, TE-only options dropped. */
function revertToTorch(ctx: FixContext, layer: Layer, code: 'PL201' | 'PL202'): Fix | string {
  if (layer.kind !== 'linear' && layer.kind !== 'parallel-linear') return `${layer.constructor} is not a linear layer Precision Lens can rebuild as torch.nn.`;
  if (layer.isTe && !/(^|\.)Linear$/.test(layer.resolved)) {
    return `${layer.constructor} fuses more than a Linear (a LayerNorm in te.LayerNormLinear): a plain torch.nn.Linear would drop it (other math, other checkpoint keys). Run its call outside FP8 instead.`;
  }
  const site = constructorSite(ctx.text, layer);
  const call = splitCallArgs(ctx.text, site.open);
  if (!call) return 'its argument list could not be read.';
  const nn = torchNnAccess(ctx.ir);
  const edits: TextEdit[] = [replace(site.calleeStart, site.calleeEnd, `${nn.prefix}Linear`)];
  const drop = [];
  for (const arg of call.args) {
    if (!arg.name) continue;
    if (arg.name === 'params_dtype') edits.push(renameArg(arg, 'dtype'));
    // A custom init or a tensor-parallel layout has no torch.nn.Linear twin: dropping it would silently change the
    // model (its init, its sharding), so the rebuild is refused and the head kept out of FP8 at its call instead.
    else if (/^(init_method|parallel_mode|tp_group|tp_size|sequence_parallel|parameters_split|return_bias)$/.test(arg.name)) {
      return `its ${arg.name}=${arg.value.trim()} has no torch.nn.Linear equivalent (it would be dropped). Run its call outside FP8 instead.`;
    } else if (!TORCH_LINEAR_KWARGS.has(arg.name)) drop.push(arg);
  }
  // A positional third argument of te.Linear is sequence_parallel, not bias.
  if (call.args.filter((a) => !a.name).length > 2) return 'it passes more than two positional arguments (te.Linear\'s third is sequence_parallel). Run its call outside FP8 instead.';
  edits.push(...removeArgs(ctx.text, call, drop));
  if (nn.importLine) edits.push(addImport(ctx.model, nn.importLine));
  const what = code === 'PL201' ? 'lm-head' : 'embedding-tied layer';
  return {
    id: `keep-bf16:${layerKey(ctx, layer)}`, title: `Keep the ${what} in BF16 (build it as ${nn.prefix}Linear)`, kind: 'quickfix', codes: [code],
    safe: false, isPreferred: true, edits,
  };
}

/** Wraps the statement in forward that calls the head in autocast(enabled=False). */
function runOutsideFp8(ctx: FixContext, layer: Layer, code: 'PL201' | 'PL202'): Fix | string {
  const attr = layer.name.replace(/^self\./, '');
  if (!attr || /[[*]/.test(attr)) return 'the head\'s attribute name is unknown, so its call cannot be found.';
  const owner = ctx.ir.classes.find((c) => c.name === layer.ownerClass);
  const from = owner?.forwardSpan?.startOffset ?? 0;
  const to = owner?.forwardSpan?.endOffset ?? ctx.text.length;
  const re = new RegExp(`\\bself\\.${attr.replace(/\./g, '\\.')}\\s*\\(`, 'g');
  re.lastIndex = from;
  const m = re.exec(ctx.text);
  if (!m || m.index >= to) return `no call of self.${attr}(...) was found in forward.`;
  const stmt = statementAt(ctx.model, m.index);
  if (!stmt || stmt.isHeader || /^(with|if|for|while|elif)\b/.test(statementText(ctx.model, stmt))) {
    return `the call of self.${attr} is part of a compound statement; wrap it by hand.`;
  }
  // Other layers called in the same statement (`return self.lm_head(self.proj(h))`) would leave FP8 with the head.
  const others = (statementText(ctx.model, stmt).match(/\bself\s*\.\s*[A-Za-z_][\w.]*\s*\(/g) ?? []).filter((c) => !/\b(float|to|type|view|reshape|contiguous)\s*\($/.test(c));
  if (others.length > 1) {
    return `the statement that calls self.${attr} also calls ${others.filter((c) => !c.replace(/\s+/g, '').startsWith(`self.${attr}(`)).map((c) => c.replace(/\s+/g, '').replace(/\($/, '()')).join(', ')}, which would leave FP8 too: compute its input in a statement of its own first.`;
  }
  // Through the fallback's context where the file has the fallback or no TE import of its own: never a bare TE import.
  const viaFallback = hasFallback(ctx) || !ctx.ir.teImportUnguarded;
  const bring = viaFallback ? bringInFallback(ctx, [CONTEXT_FACTORY]) : undefined;
  if (bring?.refusal) return bring.refusal;
  const header = viaFallback ? `${CONTEXT_FACTORY}(enabled=False)` : autocastCall(ctx.api, teAccess(ctx.ir).prefix, { enabled: 'False' });
  const edits = [wrapStatements(ctx.model, stmt, stmt, header), ...(bring?.edits ?? [])];
  return {
    id: `head-outside-fp8:${layerKey(ctx, layer)}`, title: `Run self.${attr} outside FP8 (autocast(enabled=False) around its call)`, kind: 'quickfix',
    codes: [code], safe: false, edits, ...(bring?.createFiles.length ? { createFiles: bring.createFiles } : {}),
  };
}

/** PL201/PL202 on a layer: both ways of keeping it in BF16, the rebuild preferred. */
export function keepLayerInBf16(ctx: FixContext, layer: Layer, code: 'PL201' | 'PL202'): FixOutcome {
  const fixes: Fix[] = [];
  const refusals: string[] = [];
  const revert = revertToTorch(ctx, layer, code);
  if (typeof revert === 'string') refusals.push(`Not rebuilt as torch.nn: ${revert}`); else fixes.push(revert);
  if (layer.role === 'lm_head') {
    const outside = runOutsideFp8(ctx, layer, code);
    if (typeof outside === 'string') refusals.push(`Not wrapped in autocast(enabled=False): ${outside}`); else fixes.push(outside);
  }
  return outcome(fixes, refusals);
}

/** PL201 on a torchao conversion without a filter: skip the head through module_filter_fn. */
export function filterHeadFromConversion(ctx: FixContext, conv: Fp8ConversionCall): FixOutcome {
  if (!/convert_to_float8_training$/.test(conv.callee)) {
    return outcome([], [`No automatic fix: ${conv.callee}'s filter argument differs between libraries; exclude the lm-head in its filter by hand.`]);
  }
  if (conv.hasFilter) return outcome([], ['No automatic fix: the call already has a filter; extend it so it also skips the lm-head.']);
  const head = ctx.ir.layers.find((l) => l.role === 'lm_head');
  const name = head?.name.replace(/^self\./, '') || 'lm_head';
  const open = ctx.text.indexOf('(', conv.span.startOffset + conv.callee.length);
  const call = splitCallArgs(ctx.text, open);
  const add = call && appendArgs(ctx.text, call, [`module_filter_fn=lambda module, fqn: fqn != "${name}"`]);
  if (!add) return outcome([], ['No automatic fix: the conversion call could not be read.']);
  return outcome([{
    id: `filter-head:${conv.callee}`, title: `Exclude ${name} from the FP8 conversion (module_filter_fn)`, kind: 'quickfix', codes: ['PL201'],
    safe: false, isPreferred: true, edits: [add],
  }]);
}
