/**
 * PL101 / PL102 / PL103 / PL106: a torch.nn layer that can become its te.* twin; PL110: known dims break the FP8
 * GEMM shape rule. Layers whose role forbids FP8 (lm-head, embedding, tied) are PL201/PL202's business and get no
 * conversion diagnostic here.
 */
import type { RuleCode } from '../../../common/codes';
import type { PrecisionLensSettings } from '../../../common/settings';
import { predictedLoss, predictLayer, predictModel } from '../analysis/gain-layer';
import type { Layer, ModelIR } from '../analysis/ir';
import { FP8_OUT_MULTIPLE } from '../analysis/checks-shape';
import { configDefaultEvidence, forwardCallEvidence, SpanMaker, tieEvidence } from './evidence';
import { actionOf } from './explain';
import { layerLabel, shapeText } from './format';
import type { Explanation, Finding, RuleContext, RuleModule } from './types';

const SHAPE_RULE = `Training in FP8 needs in_features % 16 == 0 and out_features % ${FP8_OUT_MULTIPLE} == 0 (every GEMM's reduced dimension, backward included; the input's rows are padded at run time by the fallback).`;

/** Which dimension to pad, and to what: in_features and out_features to multiples of 16. */
function padAdvice(layer: Layer): string {
  const pads: string[] = [];
  if (layer.inFeatures?.value !== undefined && layer.inFeatures.value % 16 !== 0) pads.push(`in_features to ${Math.ceil(layer.inFeatures.value / 16) * 16}`);
  if (layer.outFeatures?.value !== undefined && layer.outFeatures.value % FP8_OUT_MULTIPLE !== 0) pads.push(`out_features to ${Math.ceil(layer.outFeatures.value / FP8_OUT_MULTIPLE) * FP8_OUT_MULTIPLE}`);
  return pads.length ? `pad ${pads.join(' and ')}` : 'pad it';
}

const CODE_BY_KIND: Partial<Record<Layer['kind'], RuleCode>> = {
  linear: 'PL101',
  layernorm: 'PL102',
  rmsnorm: 'PL103',
  'parallel-linear': 'PL106',
};

/** Roles whose layers must stay in high precision: no conversion is ever suggested for them. */
const PROTECTED_ROLES = new Set<Layer['role']>(['lm_head', 'embedding']);
const NEVER_CANDIDATES = new Set<Layer['role']>(['lm_head', 'embedding', 'classifier', 'router']);

/** `768->2304` for a linear layer, `768` for a norm, '' unless every size is known. */
function compactShape(layer: Layer): string {
  const dims = layer.kind === 'layernorm' || layer.kind === 'rmsnorm' ? [layer.normalizedShape ?? layer.inFeatures] : [layer.inFeatures, layer.outFeatures];
  return dims.every((d) => d?.value !== undefined) ? ` ${shapeText(layer).replace(/ -> /, '->')}` : '';
}

/** For a Linear whose sizes are unknown statically: the condition on them (`if cfg.width % 16 == 0 and ...`). */
function sizeCondition(layer: Layer, room: number): string | undefined {
  if (layer.kind !== 'linear' && layer.kind !== 'parallel-linear') return undefined;
  const conds: string[] = [];
  if (layer.inFeatures?.value === undefined) conds.push(`${layer.inFeatures?.text ?? 'in_features'} % 16 == 0`);
  if (layer.outFeatures?.value === undefined) conds.push(`${layer.outFeatures?.text ?? 'out_features'} % ${FP8_OUT_MULTIPLE} == 0`);
  if (!conds.length) return undefined;
  const full = `if ${conds.join(' and ')}`;
  return full.length <= room ? full : 'if its sizes meet the FP8 rule';
}

const TE_INIT = 'te.Linear initialises its weight from normal(0, 0.023) where nn.Linear uses Kaiming uniform: copy trained weights, or keep your own init when training from scratch.';

/** The one-sentence message: verdict and action (with the predicted gain where the sizes are known). */
function conversionMessage(ir: ModelIR, layer: Layer, settings: PrecisionLensSettings): string {
  const te = layer.teEquivalent ?? 'te.*';
  const head = `${layerLabel(layer)}: ${layer.constructor}${compactShape(layer)}`;
  if (layer.convertible === true) {
    const extra = layer.kind === 'parallel-linear' && layer.teArgs?.parallel_mode
      ? ` with parallel_mode="${layer.teArgs.parallel_mode.replace(/^["']|["']$/g, '')}"` : layer.zeroCenteredGamma ? ' with zero_centered_gamma=True' : '';
    if (layer.kind === 'layernorm' || layer.kind === 'rmsnorm') {
      // A flag decided at run time: the conversion checks it where the layer is built (the fallback's when=).
      return layer.convertsWhen ? `${head} can become ${te}${extra} while ${layer.convertsWhen} (checked at run time)` : `${head} can become ${te}${extra}`;
    }
    const loss = predictedLoss(ir, layer, settings);
    if (loss) return `${head}: FP8 as ${te} loses (${loss.at}); keep it in BF16`;
    const p = predictLayer(layer, settings);
    return `${head} can run in FP8 as ${te}${extra}${p ? ` (${p.at})` : ''}`;
  }
  if (layer.convertible === 'uncertain') {
    // Unknown sizes alone: say the condition; any other doubt: the action its reason ends with.
    const onlySizes = layer.reasons.length === 1 && layer.shapeOk === undefined;
    const condition = onlySizes ? sizeCondition(layer, 118 - head.length - te.length - 13) : undefined;
    if (condition) return `${head} can run in FP8 as ${te} ${condition}`;
    return `${head} may become ${te}; ${actionOf(layer.reasons) ?? 'check the reasons in the hover first'}`;
  }
  const action = actionOf(layer.reasons);
  return `${head} cannot become ${te} exactly; ${action ?? 'keep it'}`;
}

/** The layer's state_dict prefix as far as the file shows it (`c_attn.` for self.c_attn), '' when unnamed. */
function keyAt(layer: Layer): string {
  return layer.name ? `${layer.name.replace(/^self\./, '').replace(/\[\*\]/g, '.N')}.` : '';
}

/** What converting buys and what the fix does, for the hover. */
function conversionExplanation(ir: ModelIR, layer: Layer, settings: PrecisionLensSettings): Explanation {
  const norm = layer.kind === 'layernorm' || layer.kind === 'rmsnorm';
  if (layer.convertible === false) {
    return { facts: layer.reasons, consequence: `${layer.teEquivalent ?? 'The te.* layer'} would compute something else than this layer, so no conversion is offered.` };
  }
  if (layer.convertible === 'uncertain') return { facts: layer.reasons };
  const p = norm ? undefined : predictLayer(layer, settings);
  const loss = norm ? undefined : predictedLoss(ir, layer, settings);
  const model = p ? predictModel(ir, settings) : undefined;
  return {
    facts: p ? [...new Set([...layer.reasons, ...p.details, ...(model ? model.details : [])])] : layer.reasons,
    consequence: p
      ? (loss
        ? `${loss.why} "Convert all" and \`check --fix\` leave it in BF16 unless precisionLens.convertLosingLayers is set; its own quick fix still converts it.`
        // predictedLoss covers a losing layer (p.loses) too: no third case.
        : 'Inside TE autocast on a GPU with FP8 (compute capability 8.9 or higher) its GEMMs run in FP8 at about the predicted speed; the step gains less, since attention, norms and the lm-head stay in BF16.')
      : norm
      ? 'TE computes norms in high precision: converting a norm alone gains nothing, fusing it with the Linear it feeds does (PL104, PL105).'
      : 'Inside TE autocast on a GPU with FP8 (compute capability 8.9 or higher) its GEMMs run in FP8; large GEMMs gain most, small ones (about 1024 wide) gain nothing.',
    fix: norm
      ? (layer.weightName
        ? `The fix builds it through the project's FP8 fallback (${layer.teEquivalent} where FP8 runs, ${layer.fallbackKeepsClass ?? 'the class as written'} elsewhere) with the same size and eps, and weight_name="${layer.weightName}": ${layer.teEquivalent}'s parameter is weight, and state-dict hooks map the checkpoint key (state_dict() saves ${keyAt(layer)}weight as ${keyAt(layer)}${layer.weightName}, load_state_dict() reads ${keyAt(layer)}${layer.weightName} into weight), so checkpoints of the original load and save unchanged; .${layer.weightName} reads the weight. A loader that sets parameters by name without load_state_dict finds no ${layer.weightName} parameter and reports it.`
        : `The fix builds it through the project's FP8 fallback (${layer.teEquivalent} where FP8 runs, the torch.nn norm elsewhere) with the same size, eps and affine parameters.`)
      : layer.transposedWeight
      ? `The fix builds it through the project's FP8 fallback: fp8_conv1d_or(lambda: ${layer.constructor}(...), nf, nx) holds te.Linear(nx, nf) as its child linear where FP8 runs, and ${layer.constructor} as written elsewhere. Checkpoint keys stay Conv1D's: state_dict() saves ${keyAt(layer)}linear.weight transposed back as ${keyAt(layer)}weight ([in, out]), ${keyAt(layer)}linear.bias as ${keyAt(layer)}bias (and te.Linear's ${keyAt(layer)}_extra_state), and load_state_dict() maps them back, transposing the weight; a loader that sets parameters by name without load_state_dict finds no ${keyAt(layer)}weight parameter and reports it, so a square weight never loads untransposed silently. te.Linear initialises its weight from normal(0, 0.023), Conv1D from normal(0, 0.02): load the trained weights as before.`
      : `The fix builds it through the project's FP8 fallback (${layer.teEquivalent ?? 'te.Linear'} where FP8 runs, torch.nn.Linear elsewhere) with the same sizes and bias. ${TE_INIT}`,
  };
}

/**
 * A conversion finding whose fix is refused for the arguments as written (`bias=config.bias`): the message must not
 * promise a conversion the fix will not make ("can become ... and then refused"). The refusal goes to the hover.
 */
export function withRefusedConversion(finding: Finding, layer: Layer, refusal: string): Finding {
  const te = layer.teEquivalent ?? 'te.*';
  const head = `${layerLabel(layer)}: ${layer.constructor}${compactShape(layer)}`;
  const why = refusal.replace(/^Not converted:\s*/, '').split(/[:;] |, which /)[0].replace(/[.]$/, '');
  const message = `${head} can become ${te}, but not automatically: ${why}`;
  return {
    ...finding,
    message: message.length <= 130 ? message : `${head} can become ${te}, but not automatically; convert it by hand`,
    explanation: { facts: [...(finding.explanation?.facts ?? layer.reasons), `Not converted automatically: ${refusal.replace(/^Not converted:\s*/, '')}`], consequence: finding.explanation?.consequence },
  };
}

export const conversionRules: RuleModule = {
  codes: ['PL101', 'PL102', 'PL103', 'PL106', 'PL110'],
  check({ ir, text, workspace, settings }: RuleContext): Finding[] {
    const findings: Finding[] = [];
    let spanMaker: SpanMaker | undefined;
    const spans = (): SpanMaker => (spanMaker ??= new SpanMaker(text));
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
            ? `${layerLabel(layer)}: ${layer.constructor}${compactShape(layer)} breaks the FP8 shape rule; ${padAdvice(layer)} or keep it as nn.Linear`
            : `${layerLabel(layer)}: ${layer.constructor}${compactShape(layer)} breaks the FP8 shape rule; keep it in BF16 or ${padAdvice(layer)}`,
          explanation: layer.isTe
            ? { facts: [SHAPE_RULE], consequence: 'Under FP8 autocast TE raises "FP8 execution requires the product of all dimensions except the last to be divisible by 8 and the last dimension to be divisible by 16".' }
            : { facts: layer.reasons },
          related: forwardCallEvidence(ir, text, layer, spans()),
        });
        return;
      }
      if (layer.isTe || PROTECTED_ROLES.has(layer.role) || layer.tied || converted || layer.fallbackFor) return;
      const code = CODE_BY_KIND[layer.kind];
      if (!code) return;
      // A tiny classifier or router gains nothing from FP8 and the reason says so; only explain the non-obvious
      // refusals (norms TE cannot represent exactly, a tensor-parallel Linear sharded its own way, a Linear a library
      // builds from its config, where the catalogue says what to change instead) as diagnostics, so the editor is not
      // covered in "no" notes.
      const libraryRefusal = layer.facets?.structure.check === 'catalogue-no-te';
      if (layer.convertible === false && layer.kind !== 'layernorm' && layer.kind !== 'rmsnorm' && layer.kind !== 'parallel-linear' && !libraryRefusal) return;
      const related = [...tieEvidence(ir, layer), ...configDefaultEvidence(ir, text, [...layer.reasons, layer.inFeatures, layer.outFeatures, layer.normalizedShape], spans())];
      // Class tests (isinstance(m, nn.Linear) in weight init, optimizer groups) are extended by the conversion itself.
      const explanation = conversionExplanation(ir, layer, settings);
      const losing = !settings.convertLosingLayers && layer.convertible === true && !!predictedLoss(ir, layer, settings);
      findings.push({
        code, span: layer.span, severity: 'information', layerIndex, message: conversionMessage(ir, layer, settings), explanation,
        ...(related.length ? { related } : {}), ...(losing ? { predictedLoss: true } : {}),
      });
    });
    return findings;
  },
};
