/**
 * PL201 (FP8 lm-head) and PL202 (FP8 embedding). The last layer is the most precision-sensitive: PLaMo-100B saw an FP8
 * lm-head raise the z-loss and hurt downstream scores, Megatron keeps its output layer non-TE and TE's own Mixtral
 * example runs the head under autocast(enabled=False). TE has no FP8 embedding at all, so an embedding only ends up in
 * FP8 through a cast, a filterless converter, or a head tied to it.
 */
import type { Fp8ConversionCall, Layer, ModelIR } from '../analysis/ir';
import { forwardCallEvidence, SpanMaker, tieEvidence } from './evidence';
import { asSentence } from './explain';
import { layerLabel } from './format';
import type { Finding, RuleContext, RuleModule } from './types';

const HEAD_WHY = 'The lm-head is the most precision-sensitive layer: in PLaMo-100B an FP8 lm-head raised the z-loss and hurt downstream scores, and Megatron-LM keeps its output layer out of FP8.';
const NO_FP8_EMBEDDING = 'Transformer Engine has no FP8 embedding: a 3- or 2-bit mantissa blurs the distinctions between token vectors.';

/**
 * Whether FP8 autocast can reach this file's TE modules: a region here, or (in the workspace) anywhere, or the analysed
 * files do not train the model (a model file or library checked alone is trained, and autocast, elsewhere: its TE
 * lm-head runs in FP8 wherever that training step enables it, as PL302 reasons).
 */
function fp8IsOn(ir: ModelIR, anyAutocastElsewhere: boolean | undefined, anyTraining: boolean | undefined): boolean {
  return ir.autocastRegions.some((r) => !r.disabled) || anyAutocastElsewhere !== false || anyTraining !== true;
}

/** The head's call runs inside a disabled region (`autocast(enabled=False)`): it is protected. */
function headCallProtected(ir: ModelIR, head: Layer): boolean {
  const attr = head.name.replace(/^self\./, '');
  if (!attr) return false;
  return ir.autocastRegions.some((r) => r.disabled && r.calls.some((c) => c.callee === `self.${attr}` || c.callee.endsWith(`.${attr}`)));
}

function conversionCoversHead(conv: Fp8ConversionCall): boolean {
  return !conv.hasFilter || !conv.filterExcludesHead;
}

export const precisionRules: RuleModule = {
  codes: ['PL201', 'PL202'],
  check({ ir, text, workspace }: RuleContext): Finding[] {
    const findings: Finding[] = [];
    const heads = ir.layers.map((l, i) => [l, i] as const).filter(([l]) => l.role === 'lm_head');
    const embeddings = ir.layers.map((l, i) => [l, i] as const).filter(([l]) => l.role === 'embedding');
    const on = fp8IsOn(ir, workspace.anyAutocastRegion, workspace.anyTraining);
    const spans = new SpanMaker(text);

    for (const [head, layerIndex] of heads) {
      if (!head.isTe || !on || headCallProtected(ir, head)) continue;
      const evidence = [...tieEvidence(ir, head), ...forwardCallEvidence(ir, text, head, spans)];
      findings.push({
        code: 'PL201', span: head.span, severity: 'warning', layerIndex,
        message: `${layerLabel(head)}: the lm-head is a ${head.constructor}, so FP8 autocast runs it in FP8; keep it as nn.Linear`,
        related: evidence,
        explanation: {
          facts: [asSentence(`It is the lm-head: ${head.roleReasons.join('; ') || 'the final projection'}`)],
          consequence: HEAD_WHY,
          fix: 'The fix builds it as torch.nn.Linear again (TE autocast leaves a plain Linear in BF16), or, where that would drop TE-only arguments, calls it under te.autocast(enabled=False).',
        },
      });
      if (head.tied) {
        findings.push({
          code: 'PL202', span: head.span, severity: 'warning', layerIndex,
          message: `${layerLabel(head)} shares its weight with the token embedding; keep the tied head in BF16`,
          related: tieEvidence(ir, head),
          explanation: { facts: ['Running the head in FP8 quantizes the shared embedding table too.'], consequence: NO_FP8_EMBEDDING },
        });
      }
    }

    ir.fp8Conversions.forEach((conv, callIndex) => {
      if (!conversionCoversHead(conv)) return;
      const filter = conv.hasFilter ? `its filter (${conv.filterText ?? 'module_filter_fn'}) does not visibly exclude the lm-head` : 'it has no filter';
      const head = heads[0]?.[0];
      findings.push({
        code: 'PL201', span: conv.span, severity: 'warning', callIndex,
        message: `${conv.callee} would run ${head ? `the lm-head ${layerLabel(head)}` : 'the lm-head'} in FP8; exclude it from the conversion`,
        related: head ? [{ span: head.span, message: `the lm-head ${layerLabel(head)}` }] : [],
        explanation: {
          facts: [`${conv.callee} converts every eligible nn.Linear to FP8 and ${filter}${head ? '' : ': an lm-head or output layer of the converted model would be converted too'}.`],
          consequence: HEAD_WHY,
          fix: excludeAdvice(conv.callee),
        },
      });
      if (heads.some(([h]) => h.tied)) {
        findings.push({
          code: 'PL202', span: conv.span, severity: 'warning', callIndex,
          message: `${conv.callee} would convert the lm-head tied to the token embedding; exclude the tied head`,
          related: heads.filter(([h]) => h.tied).flatMap(([h]) => tieEvidence(ir, h)),
          explanation: { facts: ['The embedding table would then be quantized to FP8 as well, since the head shares its weight.'], consequence: NO_FP8_EMBEDDING },
        });
      }
    });

    for (const [emb, layerIndex] of embeddings) {
      if (emb.isTe) {
        findings.push({
          code: 'PL202', span: emb.span, severity: 'warning', layerIndex,
          message: `${layerLabel(emb)}: an embedding built as ${emb.constructor}; use torch.nn.Embedding`,
          explanation: { facts: ['A TE GEMM standing in for a lookup quantizes the table to FP8.'], consequence: NO_FP8_EMBEDDING },
        });
      }
    }
    ir.calls.forEach((call, callIndex) => {
      if (call.kind !== 'float8_cast') return;
      const hit = embeddings.find(([e]) => e.name && call.text.includes(e.name.replace(/^self\./, '')));
      if (!hit && !/embed|wte|tok_emb/i.test(call.text)) return;
      findings.push({
        code: 'PL202', span: call.span, severity: 'warning', callIndex,
        message: 'This casts embedding weights to a float8 dtype; keep the embedding in BF16 or FP32',
        ...(hit ? { related: [{ span: hit[0].span, message: `the embedding ${layerLabel(hit[0])}` }] } : {}),
        explanation: { facts: [`The cast: ${call.text.slice(0, 80)}.`], consequence: `${NO_FP8_EMBEDDING} Transformer Engine keeps embeddings in high precision.` },
      });
    });
    return findings;
  },
};

/** How to keep the head out of a whole-model conversion, for the library that converts. */
function excludeAdvice(callee: string): string {
  if (/convert_to_float8_training|quantize_|float8/.test(callee)) return 'Pass a module_filter_fn that skips it (torchao).';
  if (/filter_fqns|torchtitan/.test(callee)) return 'List it in filter_fqns (torchtitan).';
  if (/Accelerator/.test(callee)) return "With accelerate's Transformer Engine backend no filter exists for single modules: restore the head to torch.nn.Linear after accelerator.prepare, or call it under te.autocast(enabled=False); with its torchao backend (AORecipeKwargs) pass a module_filter_func that skips it.";
  return 'This conversion has no filter for single modules: restore the head to torch.nn.Linear after converting, or call it under te.autocast(enabled=False).';
}
