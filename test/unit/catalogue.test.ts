/**
 * The library catalogue's integrity: every row is reachable by its name, says where it was read, and maps to te.* in
 * a way its kind allows. A new row that breaks one of these fails here, not in a model file.
 */
import { strict as assert } from 'node:assert';
import { CATALOGUE, CLASS_ATTRIBUTES, isRead, LIBRARY_ROOTS, lookupClass, teRenames, type Library, type RowSource } from '../../server/src/analysis/catalogue';
import { knownCtor } from '../../server/src/analysis/known';

const LIBRARIES: Library[] = [
  'torch', 'transformer_engine', 'megatron', 'fairscale', 'fairseq', 'apex', 'transformers', 'timm', 'torchtune', 'litgpt',
  'xformers', 'flash_attn', 'diffusers', 'mamba_ssm',
];
const TE_FOR_KIND: Record<string, string> = { linear: 'te.Linear', 'parallel-linear': 'te.Linear', layernorm: 'te.LayerNorm', rmsnorm: 'te.RMSNorm' };
/** te.Linear / te.*Norm keyword names a rename may target (TE 1.x-2.x). */
const TE_ARGS = new Set(['in_features', 'out_features', 'bias', 'params_dtype', 'return_bias', 'normalized_shape', 'eps', 'zero_centered_gamma']);
const IDENT = /^[A-Za-z_]\w*$/;

/** A row says the repository, file and commit its signature was read from, or in words why it was not read. */
function checkSource(what: string, source: RowSource): void {
  if (isRead(source)) {
    assert.match(source.repo, /^[\w.-]+\/[\w.-]+$/, `${what}: repo "${source.repo}" is not owner/name`);
    assert.match(source.path, /^[\w./-]+\.py$/, `${what}: path "${source.path}" is not a Python file`);
    assert.match(source.commit, /^[0-9a-f]{40}$/, `${what}: commit "${source.commit}" is not a 40-hex commit`);
    if (source.note !== undefined) assert.ok(source.note.length > 10, `${what}: an empty note`);
  } else {
    assert.equal(typeof source.unverified, 'string', `${what}: neither a read source nor an unverified reason`);
    assert.ok(source.unverified.trim().length >= 20, `${what}: the unverified reason "${source.unverified}" says nothing`);
    assert.deepEqual(Object.keys(source), ['unverified'], `${what}: an unverified row cannot also claim a source`);
  }
}

describe('library catalogue: integrity', () => {
  it('covers every library the analysis promises, each from its own import root', () => {
    for (const lib of LIBRARIES) assert.ok(CATALOGUE.some((e) => e.library === lib), `no row for ${lib}`);
    for (const e of CATALOGUE) {
      const root = e.name.split('.')[0];
      assert.equal(LIBRARY_ROOTS[root], e.library, `${e.name}: root ${root} is not ${e.library}`);
    }
  });

  it('has one row per name and alias, each a dotted name ending in a class name (a builder row: a function name)', () => {
    const seen = new Set<string>();
    for (const e of CATALOGUE) {
      for (const n of [e.name, ...(e.aliases ?? [])]) {
        assert.ok(!seen.has(n), `${n} listed twice`);
        seen.add(n);
        assert.match(n, /^[a-z_][\w]*(\.[A-Za-z_]\w*)+$/, n);
        assert.match(n.slice(n.lastIndexOf('.') + 1), e.builder ? /^[a-z_]/ : /^[A-Z]/, `${n}: not a ${e.builder ? 'function' : 'class'} name`);
      }
    }
  });

  it('lists constructor parameters as distinct identifiers and names the file each row was read from', () => {
    for (const e of CATALOGUE) {
      assert.equal(new Set(e.params).size, e.params.length, `${e.name}: duplicate parameter`);
      for (const p of e.params) assert.match(p, IDENT, `${e.name}: ${p}`);
      checkSource(e.name, e.source);
      if (!e.notLayer && e.kind !== 'other' && !e.isTe) assert.ok(e.params.length > 0, `${e.name}: a layer row needs its parameters`);
    }
  });

  it('reads every row of the libraries checked against source from a recorded version, in the library\'s own repository', () => {
    const REPOS: Partial<Record<Library, string>> = {
      apex: 'NVIDIA/apex', timm: 'huggingface/pytorch-image-models', diffusers: 'huggingface/diffusers', flash_attn: 'Dao-AILab/flash-attention',
      mamba_ssm: 'state-spaces/mamba', xformers: 'facebookresearch/xformers', fairscale: 'facebookresearch/fairscale', transformers: 'huggingface/transformers',
    };
    for (const e of CATALOGUE) {
      const repo = REPOS[e.library];
      if (!repo) continue;
      assert.ok(isRead(e.source), `${e.name}: no source read`);
      if (isRead(e.source)) assert.equal(e.source.repo, repo, e.name);
    }
  });

  it('maps to te.* only as the kind allows, with renames onto te.* argument names', () => {
    for (const e of CATALOGUE) {
      if (e.isTe) assert.equal(e.te, undefined, `${e.name} is already TE: no mapping`);
      if (!e.te) continue;
      assert.equal(e.te.cls, TE_FOR_KIND[e.kind], `${e.name} (${e.kind}) maps to ${e.te.cls}`);
      if (e.kind === 'parallel-linear') assert.ok(e.te.parallelMode, `${e.name}: a parallel linear needs its parallel_mode`);
      for (const [from, to] of Object.entries(e.te.renames ?? {})) {
        assert.ok(TE_ARGS.has(to), `${e.name}: rename ${from} -> ${to} targets no te.* argument`);
        assert.notEqual(from, to);
      }
      assert.equal(e.noTe, undefined, `${e.name}: a te mapping and a reason for none`);
    }
    for (const e of CATALOGUE.filter((x) => !x.isTe && !x.te && !x.notLayer && (x.kind === 'linear' || x.kind === 'layernorm' || x.kind === 'rmsnorm'))) {
      assert.ok(e.noTe, `${e.name}: a ${e.kind} row without te.* mapping must say why (noTe)`);
    }
  });

  it('gives role hints that the role pass can use', () => {
    for (const e of CATALOGUE) {
      if (!e.role) continue;
      assert.ok(['lm_head', 'embedding', 'attention', 'mlp'].includes(e.role.role), `${e.name}: role ${e.role.role}`);
      if (e.role.role === 'lm_head') assert.equal(e.kind, 'other', `${e.name}: an lm-head hint is for a library module, not a Linear the vocabulary test sees`);
      if (e.role.role === 'embedding') assert.ok(e.kind === 'other' || e.kind === 'embedding', e.name);
      if (e.role.weightsOnlyWhen) assert.ok(e.params.includes(e.role.weightsOnlyWhen), `${e.name}: ${e.role.weightsOnlyWhen} is no parameter`);
    }
  });

  it('finds every row by its name and aliases, and by the class name within its library', () => {
    for (const e of CATALOGUE) {
      for (const n of [e.name, ...(e.aliases ?? [])]) {
        const hit = lookupClass(n);
        if (e.notLayer) { assert.equal(hit, undefined, `${n} is not a layer`); continue; }
        assert.equal(hit?.entry, e, n);
      }
    }
    // Re-exports: the class name within the same library.
    assert.equal(lookupClass('megatron.core.tensor_parallel.ColumnParallelLinear')?.entry.name, 'megatron.core.tensor_parallel.layers.ColumnParallelLinear');
    assert.equal(lookupClass('fairseq.modules.AdaptiveSoftmax')?.entry.role?.role, 'lm_head');
    // Two classes of one name in one library with different conversions: only the exact module decides.
    assert.equal(lookupClass('mamba_ssm.ops.RMSNorm')?.entry.kind, 'other');
    assert.equal(lookupClass('mamba_ssm.ops.RMSNorm')?.entry.te, undefined);
    assert.equal(lookupClass('mamba_ssm.ops.triton.layernorm_gated.RMSNorm')?.entry.kind, 'other');
  });

  it('lists config attributes holding a layer class with candidates it knows', () => {
    for (const a of CLASS_ATTRIBUTES) {
      assert.ok(a.owner.split('.')[0] in LIBRARY_ROOTS, a.owner);
      assert.ok(a.candidates.length > 1, `${a.owner}.${a.attr}: a choice needs candidates`);
      for (const c of a.candidates) assert.ok(lookupClass(c), `${a.owner}.${a.attr}: ${c} is not in the catalogue`);
      checkSource(`${a.owner}.${a.attr}`, a.source);
    }
  });

  it('answers for classes it does not list through module rules and name families, and not for non-layers', () => {
    assert.equal(knownCtor('torch.nn.modules.linear.Linear')?.te, 'te.Linear');
    assert.equal(knownCtor('torch.nn.GELU')?.kind, 'other');
    assert.equal(knownCtor('torch.nn.CrossEntropyLoss'), undefined);
    assert.equal(knownCtor('torch.nn.ModuleList'), undefined);
    assert.equal(knownCtor('torch.ao.nn.quantized.Linear'), undefined);
    assert.equal(knownCtor('transformer_engine.pytorch.Linear')?.isTe, true);
    assert.equal(knownCtor('transformer_engine.common.recipe.DelayedScaling'), undefined);
    assert.equal(knownCtor('transformer_engine.pytorch.optimizers.FusedAdam'), undefined);
    const llama = knownCtor('transformers.models.llama.modeling_llama.LlamaRMSNorm');
    assert.equal(llama?.kind, 'rmsnorm');
    assert.ok(llama?.imported, 'a model library norm is imported: its forward is not in the file');
    assert.equal(knownCtor('apex.normalization.FusedRMSNorm')?.imported, undefined);
    assert.equal(knownCtor('mylib.layers.RowParallelLinear')?.parallelMode, 'row');
    assert.equal(knownCtor('self.LayerNorm'), undefined);
    assert.deepEqual(teRenames('megatron.core.tensor_parallel.ColumnParallelLinear').input_size, 'in_features');
    assert.deepEqual(teRenames('fairscale.nn.model_parallel.layers.ColumnParallelLinear').input_size, undefined);
  });
});
