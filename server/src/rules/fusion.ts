/**
 * PL104 (norm -> Linear: te.LayerNormLinear) and PL105 (norm -> fc1 -> activation -> fc2: te.LayerNormMLP).
 * TE's fused modules normalise and cast to FP8 in one pass, so the BF16 activation between the norm and the GEMM is
 * never written out; unfused FP8 loses part of its gain to separate amax/scale/cast kernels (FP8-FACTS, "Measured").
 *
 * The pairs come from the analysis (analysis/fusion.ts: the data flow of `forward`, within one class or from a block
 * into the submodule it feeds). PL104's fix fuses the pair through the fallback's fp8_fuse_norm, exactly. PL105: where
 * the norm feeds a child whose whole forward is an MLP TE computes exactly (SwiGLU / ReGLU / SiLU / ReLU), its fix
 * builds te.LayerNormMLP through fp8_fuse_mlp, every parameter kept where it was; within one class te.LayerNormMLP
 * stays by hand (its parameters and, for GELU, its activation differ), and the fix fuses norm -> fc1.
 */
import { predictedLoss } from '../analysis/gain-layer';
import { findFusions, fusedLinears, mlpExpression, type Fusion } from '../analysis/fusion';
import type { ModelIR } from '../analysis/ir';
import { forwardCallEvidence, SpanMaker } from './evidence';
import { dimText, layerLabel } from './format';
import type { Finding, RuleContext, RuleModule } from './types';

/** The rule that reports a fusion: PL105 for an MLP (fused whole, or norm -> fc1 -> activation -> fc2 in one class). */
export function fusionCode(f: Fusion): 'PL104' | 'PL105' {
  return f.fusedMlp || f.mlp ? 'PL105' : 'PL104';
}

/** `attn.c_attn` across classes, `fc1` within one. */
export function fusedLinearLabel(ir: ModelIR, f: Fusion): string {
  return f.owner ? `${f.owner.attr}.${f.linearAttr}` : layerLabel(ir.layers[f.fc1]);
}

function findingOf(ir: ModelIR, text: string, f: Fusion, spans: SpanMaker): Finding {
  const norm = ir.layers[f.norm];
  const fc1 = ir.layers[f.fc1];
  const normalization = norm.kind === 'rmsnorm' ? 'RMSNorm' : 'LayerNorm';
  const target = fusedLinearLabel(ir, f);
  const where = `${f.normClass}.forward`;
  const related = [...forwardCallEvidence(ir, text, norm, spans), { span: fc1.span, message: `${layerLabel(fc1)} is built here${f.owner ? ` (class ${f.owner.className}, built as self.${f.owner.attr})` : ''}` }];
  const flow = f.owner
    ? `In ${where} the norm's output goes only to self.${f.owner.attr}, and ${f.owner.className}.forward reads its input only in ${layerLabel(fc1)} (apart from its shape).`
    : `In ${where} the norm's output goes only to ${layerLabel(fc1)}.`;
  const fixWords = `The fix builds te.LayerNormLinear where FP8 runs (fp8_fuse_norm): ${layerLabel(norm)} keeps its weights and checkpoint keys and passes its input on; elsewhere both stay as built.`;
  if (f.fusedMlp && f.owner) return fusedMlpFinding(ir, f, norm, normalization, related);
  if (f.mlp) {
    const fc2 = ir.layers[f.mlp.fc2];
    const act = f.mlp.activation;
    const actLayer = f.mlp.activationLayer !== undefined ? ir.layers[f.mlp.activationLayer] : undefined;
    // TE's "gelu" kernel is the tanh approximation; nn.GELU() and F.gelu default to the exact (erf) form.
    const tanh = /tanh/.test(actLayer?.options.approximate ?? '');
    const geluNote = act === 'gelu' && !tanh
      ? `TE's activation="gelu" is the tanh approximation of GELU, while ${actLayer ? `${actLayer.constructor}()` : f.mlp.activationCall} is the exact (erf) form: outputs differ slightly (about 1e-3), harmless when training from scratch; re-check the accuracy of an already trained model.`
      : undefined;
    return {
      code: 'PL105', span: norm.span, severity: 'hint', layerIndex: f.norm,
      message: `${layerLabel(norm)} -> ${layerLabel(fc1)} -> ${act} -> ${layerLabel(fc2)} is one MLP block; fuse it as te.LayerNormMLP by hand`,
      related: [...related, { span: fc2.span, message: `${layerLabel(fc2)} is built here` }],
      explanation: {
        facts: [
          `${flow.replace(/\.$/, '')}, then through ${act} to ${layerLabel(fc2)}.`,
          `te.LayerNormMLP(hidden_size=${dimText(norm.normalizedShape ?? norm.inFeatures)}, ffn_hidden_size=${dimText(fc1.outFeatures)}, normalization="${normalization}", activation="${act}") computes the same block.`,
          ...(geluNote ? [geluNote] : []),
        ],
        consequence: 'The fused module runs the norm, the FP8 casts and the activation in one pass, so no BF16 activation is written out between them; unfused FP8 loses much of its gain to separate cast kernels.',
        fix: `te.LayerNormMLP changes the module structure and the parameter names (layer_norm_weight, fc1_weight, fc2_weight): restructure by hand and map checkpoint keys when loading. The quick fix fuses the norm into ${layerLabel(fc1)} alone (te.LayerNormLinear), which is exact. ${fixWords}`,
      },
    };
  }
  return {
    code: 'PL104', span: norm.span, severity: 'hint', layerIndex: f.norm,
    message: `${layerLabel(norm)} feeds only ${target}: fuse them as te.LayerNormLinear(${dimText(fc1.inFeatures)}, ${dimText(fc1.outFeatures)}) where FP8 runs`,
    related,
    explanation: {
      facts: [flow, `te.LayerNormLinear(${dimText(fc1.inFeatures)}, ${dimText(fc1.outFeatures)}, normalization="${normalization}") computes both.`],
      consequence: 'It normalises and casts to FP8 in one pass before the GEMM, instead of writing the BF16 activation out and reading it back (nanoGPT at width 2048 converted by one command, on an H200: 1.18-1.22x of BF16 per step with the norms separate, 1.235x fused).',
      fix: fixWords,
    },
  };
}

/** PL105 where the fix builds te.LayerNormMLP exactly: the norm feeds a child whose whole forward is the MLP. */
function fusedMlpFinding(ir: ModelIR, f: Fusion, norm: ModelIR['layers'][number], normalization: string, related: Finding['related']): Finding {
  const m = f.fusedMlp!;
  const fc1 = ir.layers[f.fc1];
  const fc2 = ir.layers[m.fc2];
  const owner = f.owner!;
  const linears = m.upAttr ? `${f.linearAttr}, ${m.upAttr}` : f.linearAttr;
  const stacked = m.upAttr ? `, ${f.linearAttr}'s weight stacked over ${m.upAttr}'s (TE's gated activations apply the activation to the first half and multiply by the second; with per-tensor FP8 scaling the stacked weight shares one scale)` : '';
  const activation = m.activation ?? `self.${m.activationFrom}`;
  const teActivation = m.activation
    ? `activation="${m.activation}"`
    : `activation=TE's name for self.${m.activationFrom}, read when the model is built (${m.upAttr ? 'swiglu for SiLU, reglu for ReLU, geglu for tanh GELU' : 'silu, relu, gelu for tanh GELU'}; any other leaves the MLP as built)`;
  return {
    code: 'PL105', span: norm.span, severity: 'hint', layerIndex: f.norm,
    message: `${layerLabel(norm)} feeds only ${owner.attr}, ${m.upAttr ? 'a gated MLP' : 'an MLP'}: fuse both as te.LayerNormMLP where FP8 runs`,
    related: [
      ...(related ?? []),
      ...fusedLinears(f).slice(1).map((i) => ({ span: ir.layers[i].span, message: `${layerLabel(ir.layers[i])} is built here (class ${owner.className})` })),
    ],
    explanation: {
      facts: [
        `In ${f.normClass}.forward the norm's output goes only to self.${owner.attr}, and ${owner.className}.forward is ${mlpExpression(f)}: ${linears} -> ${activation} -> ${m.fc2Attr}.`,
        `te.LayerNormMLP(hidden_size=${dimText(fc1.inFeatures)}, ffn_hidden_size=${dimText(fc1.outFeatures)}, normalization="${normalization}", ${teActivation}) computes the same block${stacked}.`,
      ],
      consequence: `One module normalises and casts to FP8 in one pass, runs ${f.linearAttr}${m.upAttr ? ` and ${m.upAttr}` : ''} as one GEMM, applies the activation and casts in one pass, then runs ${layerLabel(fc2)}: the BF16 activations between them are not written out and read back.`,
      fix: `The fix builds te.LayerNormMLP where FP8 runs (fp8_fuse_mlp): ${layerLabel(norm)} and the Linears keep their weights, checkpoint keys and optimizer groups (the fused module reads them at every call${m.upAttr ? `, stacking ${f.linearAttr} and ${m.upAttr}` : ''}), the norm passes its input on and ${owner.className}'s forward runs the fused module${m.dropoutAttr ? ` then self.${m.dropoutAttr}` : ''}; elsewhere everything stays as built.`,
    },
  };
}

export const fusionRules: RuleModule = {
  codes: ['PL104', 'PL105'],
  check({ ir, text, settings, workspace }: RuleContext): Finding[] {
    // Another FP8 or quantization stack owns the Linears (this file's, or a training script's that imports it: torchao
    // through fp8_for_compile, QLoRA): no te.* layer, fused or not (conversion.ts says the same for PL101).
    if (ir.fp8Conversions.length || ir.quantization.length || workspace.otherStack !== undefined) return [];
    const spans = new SpanMaker(text);
    // Where the Linear is predicted to lose in FP8 it stays torch.nn (PL101 says so): there is nothing to fuse into.
    return findFusions(ir, text)
      .filter((f) => settings.convertLosingLayers || fusedLinears(f).every((i) => !predictedLoss(ir, ir.layers[i], settings)))
      .map((f) => findingOf(ir, text, f, spans));
  },
};
