/**
 * PL101 / PL102 / PL103 / PL106: a torch.nn layer that can become its te.* twin; PL110: known dims break the FP8
 * GEMM shape rule. Layers whose role forbids FP8 (lm-head, embedding, tied) are PL201/PL202's business and get no
 * conversion diagnostic here.
 */
import type { RuleCode } from '../../../common/codes';
import type { Layer } from '../analysis/ir';
import { joinReasons, layerLabel, shapeText } from './format';
import type { Finding, RuleContext, RuleModule } from './types';

const CODE_BY_KIND: Partial<Record<Layer['kind'], RuleCode>> = {
  linear: 'PL101',
  layernorm: 'PL102',
  rmsnorm: 'PL103',
  'parallel-linear': 'PL106',
};

/** Roles whose layers must stay in high precision: no conversion is ever suggested for them. */
const PROTECTED_ROLES = new Set<Layer['role']>(['lm_head', 'embedding']);
const NEVER_CANDIDATES = new Set<Layer['role']>(['lm_head', 'embedding', 'classifier', 'router']);

function conversionMessage(layer: Layer): string {
  const te = layer.teEquivalent ?? 'te.*';
  const label = layerLabel(layer);
  const why = joinReasons(layer.reasons);
  if (layer.convertible === true) {
    const extra = layer.kind === 'parallel-linear' && layer.teArgs?.parallel_mode
      ? ` with parallel_mode=${layer.teArgs.parallel_mode}` : layer.zeroCenteredGamma ? ' with zero_centered_gamma=True' : '';
    // TE keeps norms in high precision; what converting them buys is an FP8-ready output and later fusion.
    const gain = layer.kind === 'layernorm' || layer.kind === 'rmsnorm'
      ? 'TE computes the norm in high precision; on its own that gains nothing, the gain is fusing it with the Linear it feeds (te.LayerNormLinear / te.LayerNormMLP, PL104/PL105).'
      : 'its GEMMs then run in FP8 inside TE autocast on Hopper/Blackwell. te.Linear initialises its weight from normal(0, 0.023) (nn.Linear: Kaiming uniform): copy trained weights, or keep your own init when training from scratch.';
    return `${label} (${layer.constructor}, ${shapeText(layer)}) can become ${te}${extra}: ${gain} ${why}`.trim();
  }
  if (layer.convertible === 'uncertain') {
    const sizes = (layer.kind === 'linear' || layer.kind === 'parallel-linear') && layer.shapeOk === undefined
      ? ' Check that the runtime sizes meet the FP8 rule (in % 16 == 0, out % 8 == 0) before converting.' : '';
    return `${label} (${layer.constructor}) may become ${te}, uncertain: ${why}${sizes}`;
  }
  return `${label} (${layer.constructor}) cannot become ${te} exactly: ${why}`;
}

export const conversionRules: RuleModule = {
  codes: ['PL101', 'PL102', 'PL103', 'PL106', 'PL110'],
  check({ ir, workspace }: RuleContext): Finding[] {
    const findings: Finding[] = [];
    // A file that converts its model with a whole-model FP8 conversion (torchao convert_to_float8_training, accelerate)
    // has chosen its FP8 stack: a te.* layer would leave that conversion (it swaps nn.Linear only) and need TE autocast.
    // Also when another analysed file converts or quantizes the model (a training script's torchao conversion, QLoRA).
    const converted = ir.fp8Conversions.length > 0 || ir.quantization.length > 0 || workspace.otherStack !== undefined;
    ir.layers.forEach((layer, layerIndex) => {
      // A tiny classifier or router was never a candidate: its odd shape is only news when it already is a te.* layer.
      const candidate = layer.isTe || !NEVER_CANDIDATES.has(layer.role);
      // The fallback's factory keeps torch.nn for a layer that fails the rule: nothing raises there.
      if (layer.shapeOk === false && candidate && !layer.viaFallback && (layer.kind === 'linear' || layer.kind === 'parallel-linear')) {
        findings.push({
          code: 'PL110',
          span: layer.span,
          severity: layer.isTe ? 'warning' : 'information',
          layerIndex,
          message: layer.isTe
            ? `${layerLabel(layer)} is a te.* layer with ${shapeText(layer)}: FP8 GEMMs need in_features % 16 == 0 and out_features % 8 == 0, so TE raises "FP8 execution requires ..." under FP8 autocast. Pad the dimension or keep this layer as torch.nn.Linear.`
            : `${layerLabel(layer)} (${shapeText(layer)}) breaks the FP8 shape rule (in_features % 16 == 0, out_features % 8 == 0): as te.Linear it would fail under FP8 autocast. ${joinReasons(layer.reasons)} Keep it in BF16 or pad the dimension.`,
        });
        return;
      }
      if (layer.isTe || PROTECTED_ROLES.has(layer.role) || layer.tied || converted || layer.fallbackFor) return;
      const code = CODE_BY_KIND[layer.kind];
      if (!code) return;
      // A tiny classifier or router gains nothing from FP8 and the reason says so; only explain the non-obvious
      // refusals (norms TE cannot represent exactly) as diagnostics, so the editor is not covered in "no" notes.
      if (layer.convertible === false && layer.kind !== 'layernorm' && layer.kind !== 'rmsnorm') return;
      // Class tests (isinstance(m, nn.Linear) in weight init, optimizer groups) are extended by the conversion itself.
      const message = conversionMessage(layer);
      findings.push({ code, span: layer.span, severity: 'information', layerIndex, message });
    });
    return findings;
  },
};
