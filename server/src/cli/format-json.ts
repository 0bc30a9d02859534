/**
 * The JSON outputs of `check` and `inspect`, in the shapes the command line contract (DESIGN.md) fixes. Extra fields
 * may be added; the contract's fields are never renamed or removed.
 */
import { RULES } from '../../../common/codes';
import type { Dim, Layer, ModelIR } from '../analysis/ir';
import type { Finding, WorkspaceFacts } from '../rules/types';
import { explanationText } from '../rules/explain';
import { attentionLines, compiledLines, predictModel, predictModelFor, TORCHAO_BACKENDS } from '../analysis/gain-layer';
import type { PrecisionLensSettings } from '../../../common/settings';
import { isAnalysed, type AnalysedFile } from './analyze';
import { countBySeverity } from './format-text';
import { oneBased } from './positions';

export type FixTitles = (file: AnalysedFile, finding: Finding) => string[];

export function checkJson(files: readonly AnalysedFile[], fixTitles: FixTitles, fixable?: { safe: number; unsafe: number }): object {
  const diagnostics = [];
  for (const f of files) {
    for (const d of f.findings) {
      diagnostics.push({
        file: f.input.display,
        ...oneBased(d.span),
        code: d.code,
        rule: RULES[d.code].rule,
        severity: d.severity,
        message: d.message,
        fixes: fixTitles(f, d),
        // Beyond the contract: the explanation the editor's hover shows, and the evidence with its locations.
        explanation: explanationText(d),
        related: (d.related ?? []).map((r) => ({ ...oneBased(r.span), message: r.message })),
      });
    }
  }
  return {
    version: 1,
    diagnostics,
    // Beyond the contract: how many findings --fix (fixable) and --fix --unsafe-fixes (unsafeFixable) would fix.
    summary: { files: files.length, analysed: files.filter(isAnalysed).length, ...countBySeverity(files), ...(fixable ? { fixable: fixable.safe, unsafeFixable: fixable.unsafe } : {}) },
    notAnalysed: files.filter((f) => f.skipped || f.error).map((f) => ({ file: f.input.display, reason: (f.skipped ?? f.error)! })),
    ...(files.some((f) => f.incomplete) ? { incomplete: files.filter((f) => f.incomplete).map((f) => ({ file: f.input.display, reason: f.incomplete! })) } : {}),
  };
}

function dimValue(d: Dim | undefined): number | null {
  return d?.value ?? null;
}

/** A dimension with its provenance: the value (or the possible values) and where each came from. */
function dimJson(d: Dim | undefined): object | null {
  if (!d) return null;
  return {
    text: d.text,
    value: d.value ?? null,
    source: d.source ?? null,
    values: d.values ?? null,
    note: d.note ?? null,
  };
}

/** Where the constructor inside a factory is (1-based line and column), for a layer reported at the factory's call. */
function builtAt(layer: Layer): { line: number; column: number } | null {
  if (!layer.constructionSpan) return null;
  const { line, column } = oneBased(layer.constructionSpan);
  return { line, column };
}

function layerJson(layer: Layer): object {
  return {
    ...oneBased(layer.span),
    name: layer.name,
    constructor: layer.constructor,
    kind: layer.kind,
    role: layer.role,
    convertible: layer.convertible,
    teEquivalent: layer.teEquivalent ?? null,
    inFeatures: dimValue(layer.kind === 'layernorm' || layer.kind === 'rmsnorm' ? layer.inFeatures ?? layer.normalizedShape : layer.inFeatures),
    outFeatures: dimValue(layer.outFeatures),
    reasons: layer.reasons,
    // Beyond the contract: what the numbers were written as, and why the role.
    inFeaturesText: layer.inFeatures?.text ?? layer.normalizedShape?.text ?? null,
    outFeaturesText: layer.outFeatures?.text ?? null,
    resolved: layer.resolved,
    isTe: layer.isTe,
    roleReasons: layer.roleReasons,
    tied: layer.tied,
    shapeOk: layer.shapeOk ?? null,
    teArgs: layer.teArgs ?? null,
    ownerClass: layer.ownerClass ?? null,
    // A layer a factory function builds is reported where the factory is called (its sizes and path are the call's);
    // builtAt is the constructor call inside the factory, the line a conversion edits. null for a layer built in place.
    builtAt: builtAt(layer),
    // The verdict's facets (structure / role / shape, each ok | fails | guarded with its reason and check) and the
    // dimensions with their provenance.
    facets: layer.facets ?? null,
    dims: {
      in: dimJson(layer.kind === 'layernorm' || layer.kind === 'rmsnorm' ? layer.inFeatures ?? layer.normalizedShape : layer.inFeatures),
      out: dimJson(layer.outFeatures),
    },
  };
}

/**
 * The model-level FP8 estimate of a file (issue 22): the predicted step speedup on the table's GPU, as the editor's
 * CodeLens on the model class says it. undefined when the prediction cannot answer (no Linear of known sizes).
 */
function gainJson(ir: ModelIR, settings: PrecisionLensSettings, projectCompiles: boolean): object | undefined {
  const p = predictModel(ir, settings);
  if (!p) return undefined;
  return {
    gpu: p.gpu,
    speedup: p.step.speedup,
    bf16_step_ms: p.step.bf16StepMs,
    fp8_step_ms: p.step.fp8StepMs,
    tokens: p.tokens.tokens,
    tokens_assumed: p.tokens.assumed,
    blocks: p.blocks.count,
    blocks_from: p.blocks.from ?? null,
    launch_bound: p.step.hostBound.fp8,
    loses: p.loses,
    summary: p.short,
    details: p.details,
    // torchao's recipes (compiled, against compiled BF16) where the table measured them, else why not: no number.
    other_backends: Object.fromEntries(TORCHAO_BACKENDS.map((b) => {
      const o = predictModelFor(ir, settings, b);
      return [b, !o ? null : o.measured
        ? { measured: true, speedup: o.prediction.step.speedup, bf16_step_ms: o.prediction.step.bf16StepMs, fp8_step_ms: o.prediction.step.fp8StepMs, launch_bound: o.prediction.step.hostBound.fp8, summary: o.prediction.short }
        : { measured: false, reason: o.reason }];
    })),
    // Where a file analysed with it calls torch.compile: the estimate is eager, and what compiled measured (the lens says the same).
    compiled_note: compiledLines(projectCompiles)[0] ?? null,
    // Attention through TE's fused kernel (PL107) is not in the estimate: what it measured on real code (the lens says the same).
    attention_note: attentionLines(ir)[0] ?? null,
  };
}

/** `settings` gives each file its predicted FP8 gain (`gain`), read at the settings' tokens per step and recipe. */
export function inspectJson(files: readonly AnalysedFile[], settings?: PrecisionLensSettings, workspace?: WorkspaceFacts): object {
  // The files analysed together are the project: one that calls torch.compile makes it a compiling one.
  const projectCompiles = workspace?.anyCompile === true;
  return {
    version: 1,
    files: files.map((f) => {
      const ir = f.ir;
      const entry: Record<string, unknown> = {
        file: f.input.display,
        layers: ir ? ir.layers.map(layerJson) : [],
        autocastRegions: ir
          ? ir.autocastRegions.map((r) => ({
            line: r.span.startLine + 1,
            endLine: r.span.endLine + 1,
            api: r.api,
            backwardInside: r.backwardInside.map((c) => c.span.startLine + 1),
            disabled: r.disabled,
            args: r.args,
          }))
          : [],
        weightTying: ir ? ir.weightTies.map((t) => ({ line: t.span.startLine + 1, text: t.text, left: t.left, right: t.right })) : [],
      };
      if (ir) {
        entry.importsTorch = ir.importsTorch;
        entry.importsTe = ir.importsTe;
        entry.hasSyntaxErrors = ir.hasSyntaxErrors;
        if (ir.ptq.quantizeCalls.length || ir.ptq.saves.length) entry.ptq = ptqJson(ir);
        const gain = settings && !f.skipped && !f.error ? gainJson(ir, settings, projectCompiles) : undefined;
        if (gain) entry.gain = gain;
      }
      if (f.skipped || f.error) entry.notAnalysed = f.skipped ?? f.error;
      return entry;
    }),
  };
}

/** Post-training quantization calls and saves (1-based lines), for `inspect`. */
function ptqJson(ir: ModelIR): object {
  return {
    quantize: ir.ptq.quantizeCalls.map((c) => ({
      line: c.span.startLine + 1, library: c.library, callee: c.callee, model: c.model,
      config: c.config ? {
        text: c.config.text, base: c.config.base ?? null, format: c.config.format ?? null, fp8: c.config.fp8 ?? null,
        weights: c.config.weights ?? null, activations: c.config.activations ?? null, scales: c.config.scales ?? null,
        kvCache: c.config.kvCache, disabled: c.config.disabled, opaque: c.config.opaque ?? null,
      } : null,
      forwardLoop: c.forwardLoop ? { text: c.forwardLoop.text, runsModel: c.forwardLoop.runsModel ?? null, size: c.forwardLoop.size ?? null } : null,
      filter: c.filter ?? null,
      protectedLayers: c.protectedHits.map((h) => ({ name: ir.layers[h.layerIndex].name, role: ir.layers[h.layerIndex].role, why: h.why })),
    })),
    saves: ir.ptq.saves.map((s) => ({ line: s.span.startLine + 1, kind: s.kind, text: s.text })),
  };
}
