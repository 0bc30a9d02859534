/**
 * Role checks of the verdict: does the layer's role (or a tie) keep it in high precision? Each check is one function
 * returning a fact (`fails` = protected) with its reasons, or undefined when it does not apply. The first that fails
 * decides the role facet.
 */
import type { Dim } from './ir';
import type { Check } from './checks';
import { isVocabText, OUTPUT_PROJECTION } from './roles';

function dimWhy(d: Dim | undefined, label: string): string {
  if (!d) return `${label} is not given`;
  if (d.value !== undefined) return `${label} ${d.value}`;
  return d.text;
}

function isVocabDim(d: Dim | undefined): boolean {
  return !!d && isVocabText(d.text.replace(/\s+/g, ''));
}

const lmHead: Check = {
  name: 'lm-head', facet: 'role',
  run({ L }) {
    if (L.role !== 'lm_head') return undefined;
    const reasons = [
      `This layer is the lm-head (${L.roleReasons.join('; ')}). Keep it in BF16: the last layer is precision-sensitive, PLaMo-100B found that an FP8 lm-head raised the z-loss and hurt downstream scores, and Transformer Engine's examples and Megatron keep the output layer out of FP8.`,
    ];
    if (L.tied) {
      reasons.push(L.tiedByConfig
        ? 'Its weight is declared tied to the token embedding (used when the config sets tie_word_embeddings); when tied, converting it would also quantize the embedding table.'
        : 'Its weight is shared with the token embedding, so converting it would also quantize the embedding table.');
    }
    return { state: 'fails', reasons };
  },
};

const embedding: Check = {
  name: 'embedding', facet: 'role',
  run({ L }) {
    if (L.role !== 'embedding' && L.kind !== 'embedding') return undefined;
    const reasons = [
      L.roleReasons.some((r) => /tied/.test(r)) || isVocabDim(L.inFeatures)
        ? `${L.constructor} is an embedding table. Transformer Engine has no FP8 embedding module and the token table is precision-sensitive, so keep it in BF16.`
        : `${L.constructor} is an embedding table (a lookup, not a GEMM). Transformer Engine has no FP8 embedding module, so keep it in BF16.`,
    ];
    if (L.tied) reasons.push('Its weight is tied to the lm-head; keep both in BF16.');
    return { state: 'fails', reasons };
  },
};

const tiedWeight: Check = {
  name: 'tied-weight', facet: 'role',
  run({ L }) {
    if (!L.tied) return undefined;
    return { state: 'fails', reasons: ['Its weight is tied to another layer (weight sharing with an embedding): converting it would put the shared weight in FP8 too, so keep it in BF16.'] };
  },
};

const loraAdapter: Check = {
  name: 'lora-adapter', facet: 'role',
  run({ L }) {
    if (L.roleReasons[0] !== 'low-rank adapter (LoRA)') return undefined;
    return { state: 'fails', reasons: ['A low-rank adapter (LoRA): its rank-r GEMMs are too narrow to gain from FP8, and adapter libraries (PEFT) expect torch.nn.Linear here (merging, reading .weight). Keep it; convert the base layer it adapts instead.'] };
  },
};

const smallOutput: Check = {
  name: 'classifier-or-router', facet: 'role',
  run({ L }) {
    if (L.role !== 'classifier' && L.role !== 'router') return undefined;
    const pick = L.role === 'router' ? /^its output picks discretely \((\w+)\)/.exec(L.roleReasons[0] ?? '')?.[1] : undefined;
    const gate = L.role === 'router' && L.outFeatures?.value === 1;
    const what = pick ? `Its output makes a discrete choice (${pick})` : gate ? 'This is an MoE gate (one output: how much of an expert to use)'
      : L.role === 'router' ? 'This is an MoE router (one output per expert)' : 'This is a small output layer (classifier)';
    const head = L.role === 'classifier' ? /^part of the classification head (\S+)/.exec(L.roleReasons[0] ?? '')?.[1] : undefined;
    if (head) return { state: 'fails', reasons: [`Part of the classification head ${head}: it runs on the pooled rows and feeds the class scores, so FP8 gains nothing there; keep it in BF16 with the head.`] };
    const logits = L.role === 'classifier' ? /^its output is (\w+) in (\S+) \(through (.*)\)$/.exec(L.roleReasons[0] ?? '') : null;
    if (logits) return { state: 'fails', reasons: [`It writes the model's prediction (${logits[1]} in ${logits[2]}, through ${logits[3]}): keep it in BF16.`] };
    const sizes = L.inFeatures || L.outFeatures
      ? `${dimWhy(L.inFeatures, 'in')} -> ${dimWhy(L.outFeatures, 'out')} is too small to gain from FP8, and its output`
      : 'a GEMM this narrow gains little from FP8, and its output';
    return { state: 'fails', reasons: [`${what}: ${sizes} decides the result directly, so keep it in BF16.`] };
  },
};

const outputProjection: Check = {
  name: 'output-projection', facet: 'role',
  run({ L }) {
    const why = L.roleReasons[0];
    if (!why?.startsWith(`${OUTPUT_PROJECTION}: `)) return undefined;
    return { state: 'fails', reasons: [`The model's last projection, to its output space (${why.slice(OUTPUT_PROJECTION.length + 2)}): like an lm-head it writes the output directly and is precision-sensitive, and its narrow output gains little from FP8. Keep it in BF16.`] };
  },
};

const bottleneckAdapter: Check = {
  name: 'bottleneck-adapter', facet: 'role',
  run({ L }) {
    const why = L.roleReasons[0];
    if (!why?.startsWith('bottleneck adapter: ')) return undefined;
    return { state: 'fails', reasons: [`A ${why}: GEMMs this narrow gain nothing from FP8, and adapters are trained or swapped apart from the model (loaded by name, merged). Keep it; convert the layers it adapts.`] };
  },
};

const perSampleConditioning: Check = {
  name: 'per-sample-conditioning', facet: 'role',
  run({ L }) {
    const why = L.roleReasons[0];
    if (!why?.startsWith('per-sample conditioning: ')) return undefined;
    return { state: 'fails', reasons: [`Per-sample conditioning (${why.slice('per-sample conditioning: '.length)}): it runs on batch-many rows, where FP8 gains nothing, and its output steers every token of the sample (timestep, class, adaLN shift/scale/gate), so keep it in BF16.`] };
  },
};

/** In order: the first that fails decides the role facet. */
export const ROLE_CHECKS: readonly Check[] = [lmHead, embedding, tiedWeight, loraAdapter, outputProjection, bottleneckAdapter, perSampleConditioning, smallOutput];
