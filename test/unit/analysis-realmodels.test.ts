/**
 * Regressions found by running the analysis on real model files (Hugging Face BERT, GPT-NeoX, T5, Mixtral).
 * The fixtures are small files written in the same spirit, not copies.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, py } from './analysis-helpers';

describe('analysis: patterns from real model files', () => {
  before(initParser);

  it('does not take a call of a submodule attribute named like a class (self.LayerNorm(x)) for a constructor', () => {
    const ir = analyze(fixture('capitalised_submodules.py'));
    const names = ir.layers.map((l) => `${l.name}@${l.span.startLine}`);
    // one entry per construction in __init__, none for the calls in forward
    assert.deepEqual(ir.layers.filter((l) => l.name === 'self.LayerNorm').map((l) => l.constructor), ['nn.LayerNorm', 'nn.LayerNorm'], names.join(', '));
    assert.deepEqual(ir.layers.filter((l) => l.name === 'self.RMSNorm').map((l) => l.constructor), ['nn.RMSNorm']);
    assert.deepEqual(ir.layers.filter((l) => l.name === 'self.Linear').map((l) => l.constructor), ['nn.Linear']);
    for (const l of ir.layers) assert.ok(!l.constructor.startsWith('self.'), `call site listed as a layer: ${l.name} (${l.constructor})`);
  });
});

describe('analysis: _tied_weights_keys paths', () => {
  before(initParser);

  it('follows a dotted _tied_weights_keys path through the submodule classes to the tied projection', () => {
    const ir = analyze(fixture('nested_mlm_head.py'));
    const proj = ir.layers.find((l) => l.ownerClass === 'TokenPredictor' && l.name === 'self.proj');
    assert.ok(proj);
    assert.equal(proj.role, 'lm_head');
    assert.equal(proj.tied, true);
    assert.ok(proj.roleReasons.some((r) => /ForMaskedModelling\._tied_weights_keys/.test(r)), proj.roleReasons.join('; '));
    assert.equal(proj.convertible, false);
    // the transform's hidden->hidden dense is not tied and not a head
    const dense = ir.layers.find((l) => l.ownerClass === 'HeadTransform' && l.name === 'self.dense');
    assert.ok(dense);
    assert.equal(dense.tied, false);
    assert.notEqual(dense.role, 'lm_head');
  });

  it('says a tie declared only in _tied_weights_keys depends on the config', () => {
    const ir = analyze(fixture('nested_mlm_head.py'));
    const un = ir.layers.find((l) => l.ownerClass === 'ForNextTokens' && l.name === 'self.unembed');
    assert.ok(un);
    assert.equal(un.role, 'lm_head');
    assert.equal(un.tied, true);
    assert.equal(un.tiedByConfig, true);
    assert.match(un.reasons.join(' '), /tie_word_embeddings/);
    assert.doesNotMatch(un.reasons.join(' '), /Its weight is shared with the token embedding, so/);
  });
});

describe('analysis: _keep_in_fp32_modules', () => {
  before(initParser);

  it('keeps the Linear layers a model lists in _keep_in_fp32_modules out of FP8', () => {
    const ir = analyze(fixture('keep_fp32_modules.py'));
    const get = (owner: string, name: string) => {
      const l = ir.layers.find((x) => x.ownerClass === owner && x.name === name);
      assert.ok(l, `${owner}.${name}`);
      return l;
    };
    for (const [owner, name] of [['GatedFF', 'self.out'], ['Mixer', 'self.proj']]) {
      const l = get(owner, name);
      assert.equal(l.convertible, false, `${owner}.${name}`);
      assert.match(l.reasons.join(' '), /BasePretrained\._keep_in_fp32_modules/);
    }
    // the others keep their ordinary verdict (sizes are literal multiples of 16 here)
    assert.equal(get('GatedFF', 'self.up').convertible, true);
    assert.equal(get('GatedFF', 'self.gate').convertible, true);
  });
});

describe('analysis: gate projections', () => {
  before(initParser);

  it('calls `gate` a router in a MoE gate/sparse block but not in a gated feed-forward', () => {
    const ir = analyze(fixture('gate_router_vs_gated_mlp.py'));
    const get = (owner: string, name: string) => {
      const l = ir.layers.find((x) => x.ownerClass === owner && x.name === name);
      assert.ok(l, `${owner}.${name}`);
      return l;
    };
    assert.equal(get('GatedFeedForward', 'self.gate').role, 'mlp');
    assert.notEqual(get('GatedUnit', 'self.gate').role, 'router');
    assert.notEqual(get('GatedUnit', 'self.gate').convertible, false);
    assert.equal(get('TopKGate', 'self.gate').role, 'router');
    assert.equal(get('SparseBlock', 'self.router').role, 'router');
  });
});

describe('analysis: embedding verdict wording', () => {
  before(initParser);

  it('calls only the vocabulary table a token table', () => {
    const ir = analyze(fixture('embedding_tables.py'));
    const why = (name: string) => ir.layers.find((l) => l.name === name)?.reasons.join(' ') ?? '';
    assert.match(why('self.word'), /token table/);
    for (const n of ['self.pos', 'self.segment', 'self.rel_bias']) {
      assert.doesNotMatch(why(n), /token table/, n);
      assert.match(why(n), /keep it in BF16/, n);
      assert.equal(ir.layers.find((l) => l.name === n)?.convertible, false);
    }
  });
});

describe('analysis: losses are not layers', () => {
  before(initParser);

  it('does not list loss modules (built in __init__ or forward) as layers', () => {
    const ir = analyze(fixture('loss_in_forward.py'));
    assert.deepEqual(ir.layers.map((l) => l.name).sort(), ['self.proj', 'self.score']);
  });
});

describe('analysis: roles of helper submodules', () => {
  before(initParser);

  it('gives a helper class without evidence of its own the role of the module that holds it', () => {
    const ir = analyze(fixture('helper_submodules.py'));
    const role = (owner: string) => ir.layers.find((l) => l.ownerClass === owner && l.name === 'self.dense')?.role;
    assert.equal(role('ProjectBack'), 'attention');
    assert.equal(role('Expand'), 'mlp');
    // held as `output` by a whole layer: nothing says which sublayer it belongs to
    assert.equal(role('Shrink'), 'other');
    assert.equal(role('Pooler'), 'other');
  });

  it('puts a projection from or to the feed-forward width in the MLP, whatever holds it', () => {
    const ir = analyze(fixture('helper_submodules.py'));
    const find = (owner: string, name: string) => ir.layers.find((l) => l.ownerClass === owner && l.name === name);
    assert.equal(find('BertStyleOutput', 'self.dense')?.role, 'mlp');
    assert.match(find('BertStyleOutput', 'self.dense')?.roleReasons.join(' ') ?? '', /feed-forward width \(config\.intermediate_size\)/);
    assert.equal(find('BertStyleLayer', 'self.gate')?.role, 'mlp');
    // `inner` alone names attention widths too: no evidence
    assert.equal(find('BertStyleLayer', 'self.attn_inner')?.role, 'other');
  });
});

describe('analysis: shape-guarded wording', () => {
  before(initParser);

  it('names each unknown size once, with its own FP8 condition checked by the factory', () => {
    const ir = analyze(fixture('unknown_sizes.py'));
    const get = (name: string) => ir.layers.find((l) => l.name === name)!;
    const why = (name: string) => get(name).reasons[0] ?? '';
    assert.match(why('self.square'), /^Its size config\.hidden_size is not known where it is built/);
    assert.match(why('self.square'), /fp8_linear, which builds te\.Linear when in_features \(config\.hidden_size\) % 16 == 0 and out_features \(config\.hidden_size\) % 16 == 0 and keeps nn\.Linear otherwise/);
    assert.match(why('self.wide'), /when out_features \(config\.intermediate_size\) % 16 == 0 and keeps/);
    assert.match(why('self.narrow'), /when in_features \(config\.intermediate_size\) % 16 == 0 and keeps/);
    assert.doesNotMatch(why('self.wide'), /in_features \(/);
    for (const n of ['self.square', 'self.wide', 'self.narrow']) {
      assert.equal(get(n).convertible, true, n);
      assert.equal(get(n).facets?.shape.state, 'guarded', n);
      assert.equal(get(n).facets?.shape.check, 'fp8-gemm-shape', n);
      assert.equal(get(n).facets?.structure.state, 'ok', n);
    }
  });
});

describe('analysis: conversions that would change the numerics or gain nothing', () => {
  before(initParser);
  const ir = () => analyze(fixture('conversion_traps.py'));

  it('a (1 + weight) norm switched by a constructor flag follows the flag at each call; an unconditional one needs zero_centered_gamma', () => {
    const layers = ir().layers;
    const get = (name: string) => layers.find((l) => l.name === name);
    // add_unit_offset defaults to False: no offset.
    assert.equal(get('self.norm_a')?.convertible, true);
    assert.equal(get('self.norm_a')?.zeroCenteredGamma, undefined);
    assert.match(get('self.norm_a')?.reasons.join(' ') ?? '', /add_unit_offset=False/);
    assert.equal(get('self.norm_b')?.convertible, true);
    assert.equal(get('self.norm_b')?.zeroCenteredGamma, true);
    assert.equal(get('self.norm_c')?.convertible, true);
    assert.equal(get('self.norm_c')?.zeroCenteredGamma, true);
  });

  it('nn.RMSNorm without eps (float32\'s epsilon, not te\'s 1e-5) converts with that eps passed; with an explicit eps it converts', () => {
    const layers = ir().layers;
    const d = layers.find((l) => l.name === 'self.norm_d');
    assert.equal(d?.convertible, true);
    assert.equal(d?.teArgs?.eps, '1.1920928955078125e-07');
    assert.match(d?.reasons.join(' ') ?? '', /defaults to eps=1e-5: the conversion passes eps=1\.1920928955078125e-07 explicitly/);
    assert.equal(layers.find((l) => l.name === 'self.norm_e')?.convertible, true);
  });

  it('a Linear only read through .weight/.bias (a functional op) is not offered', () => {
    const layers = ir().layers.filter((l) => l.ownerClass === 'AttentionPool');
    assert.equal(layers.length, 4);
    for (const l of layers) {
      assert.equal(l.convertible, false, l.name);
      assert.match(l.reasons.join(' '), /never calls self\.\w+; it only reads its weight\/bias/, l.name);
    }
    // called layers elsewhere keep their verdict
    assert.equal(ir().layers.find((l) => l.name === 'self.c_q')?.convertible, true);
  });

  it('a small projection inside an attention class is no classifier, and says each known size once', () => {
    const layers = ir().layers;
    const gate = layers.find((l) => l.name === 'self.ve_gate');
    assert.equal(gate?.role, 'attention');
    assert.equal(gate?.convertible, false); // 6 outputs: not a multiple of 8
    const cq = layers.find((l) => l.name === 'self.c_q');
    const known = (cq?.reasons ?? []).filter((r) => r.startsWith('Known statically'));
    assert.equal(known.length, new Set(known).size);
    assert.equal(known.length, 1);
  });
});

describe('analysis: Linear and Embedding classes implemented from scratch', () => {
  before(initParser);

  it('recognises them by structure, finds the lm-head and the router among them, and never auto-converts them', () => {
    const ir = analyze(fixture('own_linear_classes.py'));
    const get = (name: string) => {
      const l = ir.layers.find((x) => x.name === name);
      assert.ok(l, `${name} missing; have ${ir.layers.map((x) => x.name).join(', ')}`);
      return l;
    };
    assert.equal(get('self.head').kind, 'linear');
    assert.equal(get('self.head').role, 'lm_head');
    assert.equal(get('self.head').convertible, false);
    assert.equal(get('self.embed').role, 'embedding');
    assert.equal(get('self.gate').role, 'router');
    assert.equal(get('self.gate').inFeatures, undefined); // Gate(args): no size arguments
    const wq = get('self.wq');
    assert.equal(wq.kind, 'linear');
    assert.equal(wq.convertible, 'uncertain');
    assert.match(wq.reasons.join(' '), /implements its own Linear.*Convert its definition by hand/);
    assert.match(ir.classes.find((c) => c.name === 'ColumnParallelLinear')?.ownImplementation ?? '', /custom Linear/);
  });
});

describe('analysis: layer classes passed as parameters with a default', () => {
  before(initParser);

  it('lists norm_layer(dim) / proj_layer(...) with the default class: both convert through a run-time check that the class passed is the default', () => {
    const ir = analyze(fixture('layer_class_parameters.py'));
    const get = (name: string) => ir.layers.find((l) => l.name === name);
    assert.equal(get('self.ln_1')?.kind, 'layernorm');
    assert.equal(get('self.ln_1')?.convertible, true);
    assert.match(get('self.ln_1')?.reasons.join(' ') ?? '', /class comes from the parameter norm_layer \(partial\(nn\.LayerNorm, eps=1e-6\) by default\): the conversion checks at run time that the class is nn\.LayerNorm/);
    assert.equal(get('self.proj')?.kind, 'linear');
    assert.equal(get('self.proj')?.inFeatures?.value, 768);
    // A caller may pass another class: fp8_linear_from builds te.Linear only for nn.Linear, any other class as written.
    assert.equal(get('self.proj')?.convertible, true, get('self.proj')?.reasons.join(' | '));
    assert.deepEqual(get('self.proj')?.classParam, { name: 'proj_layer', defaultClass: 'nn.Linear' });
    assert.equal(get('self.act'), undefined); // an activation class parameter builds no layer
    assert.match(get('self.self_attention')?.reasons.join(' ') ?? '', /te\.MultiheadAttention is a different module/);
  });
});

describe('analysis: layer classes returned by a local function', () => {
  before(initParser);

  it('MaybeLora = maybe_lora(lora); MaybeLora(dim, out): a Linear whose class is chosen at run time converts through a run-time check', () => {
    const ir = analyze(py`
      from functools import partial
      from torch import nn
      from .lora import LoRALinear

      def maybe_lora(lora_args):
          if lora_args is None:
              return nn.Linear
          else:
              return partial(LoRALinear, rank=lora_args.rank)

      def no_layer(x):
          return nn.GELU

      class FeedForward(nn.Module):
          def __init__(self, dim: int = 4096, hidden_dim: int = 14336, lora=None):
              super().__init__()
              MaybeLora = maybe_lora(lora)
              Act = no_layer(lora)
              self.w1 = MaybeLora(dim, hidden_dim, bias=False)
              self.w2 = MaybeLora(hidden_dim, dim, bias=False)
              self.act = Act()
    `);
    const w1 = ir.layers.find((l) => l.name === 'self.w1');
    assert.equal(w1?.kind, 'linear');
    assert.equal(w1?.inFeatures?.value, 4096);
    assert.equal(w1?.outFeatures?.value, 14336);
    assert.equal(w1?.role, 'mlp');
    // Committed with a run-time check (held-out set 11, mistral-inference): fp8_linear_from builds te.Linear only when
    // maybe_lora returned nn.Linear, and the class as written otherwise.
    assert.equal(w1?.convertible, true);
    assert.deepEqual(w1?.classParam, { name: 'MaybeLora', defaultClass: 'nn.Linear' });
    assert.match(w1?.reasons.join(' ') ?? '', /maybe_lora\(\), which returns nn\.Linear or partial\(LoRALinear, rank=lora_args\.rank\).*the conversion checks at run time that the class is nn\.Linear/);
    assert.ok(ir.layers.some((l) => l.name === 'self.w2'));
    assert.equal(ir.layers.find((l) => l.name === 'self.act'), undefined);
  });
});

describe('analysis: lm-head look-alikes', () => {
  before(initParser);

  it('shared parameters between two non-embedding layers are no tie; a residual after the last projection is no head; an experts-sized output is a router', () => {
    const ir = analyze(fixture('lm_head_lookalikes.py'));
    const get = (owner: string, name: string) => ir.layers.find((l) => l.ownerClass === owner && l.name === name);
    for (const n of ['self.linear1', 'self.linear2']) {
      assert.notEqual(get('BasicMLP', n)?.role, 'lm_head', n);
      assert.equal(get('BasicMLP', n)?.tied, false, n);
      assert.equal(get('BasicMLP', n)?.convertible, true, n);
    }
    assert.notEqual(get('EncoderLayer', 'self.fc2')?.role, 'lm_head');
    assert.equal(get('EncoderLayer', 'self.fc2')?.role, 'mlp');
    assert.equal(get('LearnedRouter', 'self.layer')?.role, 'router');
  });
});

describe("analysis: Hugging Face GPT-2's Conv1D", () => {
  before(initParser);

  it('is a Linear with swapped arguments and a transposed weight: roles and dims right, convertible through fp8_conv1d_or with the reason', () => {
    const ir = analyze(fixture('gpt2_conv1d.py'));
    const get = (owner: string, name: string) => ir.layers.find((l) => l.ownerClass === owner && l.name === name);
    const fc = get('GPT2MLP', 'self.c_fc');
    assert.equal(fc?.kind, 'linear');
    assert.equal(fc?.role, 'mlp');
    assert.equal(fc?.inFeatures?.value, 768);
    assert.equal(fc?.outFeatures?.value, 3072);
    assert.equal(fc?.convertible, true);
    assert.equal(fc?.transposedWeight, true);
    assert.match(fc?.reasons.join(' ') ?? '', /stores its weight transposed.*inside the fallback's fp8_conv1d_or wrapper, whose state_dict keeps Conv1D's keys and layout \(c_fc\.weight as \[in, out\]/);
    assert.equal(get('GPT2Attention', 'self.c_attn')?.role, 'attention');
    assert.equal(get('GPT2Attention', 'self.c_attn')?.outFeatures?.text, '3 * self.embed_dim');
  });
});

describe('analysis: wrapped layers, submodules passed by keyword, same-named factory methods', () => {
  before(initParser);

  it('names them where they live, lists each once, and does not auto-convert a quant_noise-wrapped Linear', () => {
    const ir = analyze(fixture('wrapped_and_passed.py'));
    const names = ir.layers.map((l) => `${l.ownerClass}.${l.name}`);
    assert.ok(names.includes('Block.feed_forward.gate'), names.join(', '));
    assert.equal(ir.layers.find((l) => l.name === 'feed_forward.gate')?.role, 'router');
    assert.ok(names.includes('Block.feed_forward.experts[*]'), names.join(', '));
    for (const owner of ['EncoderLayer', 'DecoderLayer']) {
      for (const n of ['self.fc1', 'self.fc2']) assert.equal(names.filter((x) => x === `${owner}.${n}`).length, 1, `${owner}.${n} in ${names.join(', ')}`);
    }
    assert.equal(names.filter((x) => x.endsWith('.')).length, 0, `unnamed: ${names.join(', ')}`);
    const enc = ir.layers.find((l) => l.ownerClass === 'EncoderLayer' && l.name === 'self.fc1');
    assert.equal(enc?.wrappedBy, 'quant_noise');
    // p=0.1 written there: quant_noise always reparametrises (and asserts nn.Linear), so no conversion is committed.
    assert.equal(enc?.convertible, 'uncertain');
    assert.equal(enc?.wrapperOff, undefined);
    assert.match(enc?.reasons.join(' ') ?? '', /passed to quant_noise\(\)/);
    assert.equal(ir.layers.find((l) => l.ownerClass === 'DecoderLayer' && l.name === 'self.fc1')?.convertible, true);
  });
});

describe('analysis: notes on sizes known from construction sites', () => {
  before(initParser);

  it('says a size was left at its default where the class is built, and passed where it was passed', () => {
    const ir = analyze(py`
      import torch.nn as nn

      class TimestepEmbedder(nn.Module):
          def __init__(self, hidden_size, frequency_embedding_size=256):
              super().__init__()
              self.mlp = nn.Linear(frequency_embedding_size, hidden_size)

      class DiT(nn.Module):
          def __init__(self):
              super().__init__()
              self.t_embedder = TimestepEmbedder(1152)
    `);
    const l = ir.layers.find((x) => x.name === 'self.mlp');
    assert.equal(l?.inFeatures?.value, 256);
    assert.match(l?.inFeatures?.note ?? '', /frequency_embedding_size left at its default where TimestepEmbedder is built/);
    assert.doesNotMatch(l?.inFeatures?.note ?? '', /as passed/);
    assert.match(l?.outFeatures?.note ?? '', /hidden_size as passed where TimestepEmbedder is built/);
  });
});

describe('analysis: layers built by helper functions named for what they build', () => {
  before(initParser);

  it('a FeedForward() helper returning a Sequential gives its Linears the mlp role', () => {
    const ir = analyze(py`
      import torch.nn as nn

      def FeedForward(dim, mult=4):
          inner_dim = int(dim * mult)
          return nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, inner_dim * 2, bias=False), nn.GELU(), nn.Linear(inner_dim, dim, bias=False))

      class Block(nn.Module):
          def __init__(self, dim: int = 512):
              super().__init__()
              self.ff = FeedForward(dim)
    `);
    const linears = ir.layers.filter((l) => l.kind === 'linear');
    assert.equal(linears.length, 2);
    for (const l of linears) assert.equal(l.role, 'mlp', `${l.name}: ${l.roleReasons.join('; ')}`);
  });
});

describe('analysis: ties by position in an nn.Sequential', () => {
  before(initParser);

  it('net[-1].weight = net[0].weight ties the last Linear to the first Embedding, around a comprehension', () => {
    const ir = analyze(py`
      import torch.nn as nn

      class Block(nn.Module):
          def __init__(self, dim):
              super().__init__()
              self.fc = nn.Linear(dim, dim)

      def PaLM(*, dim, num_tokens, depth):
          net = nn.Sequential(
              nn.Embedding(num_tokens, dim),
              *[Block(dim) for _ in range(depth)],
              nn.LayerNorm(dim),
              nn.Linear(dim, num_tokens, bias=False),
          )
          net[-1].weight = net[0].weight
          return net
    `);
    const head = ir.layers.find((l) => l.kind === 'linear' && l.name !== 'self.fc');
    const emb = ir.layers.find((l) => l.kind === 'embedding');
    assert.equal(head?.role, 'lm_head');
    assert.equal(head?.tied, true);
    assert.equal(emb?.tied, true);
    assert.match(head?.roleReasons.join(' ') ?? '', /weights tied to the embedding/);
  });
});

describe('analysis: third survey (OPT norms, gemma_pytorch layers)', () => {
  before(initParser);

  it('elementwise_affine from the config converts with the flag checked at run time; a from-scratch Linear through a local weight alias is found', () => {
    const ir = analyze(py`
      import torch
      import torch.nn as nn
      import torch.nn.functional as F

      class Linear(nn.Module):
          def __init__(self, in_features: int, out_features: int, quant: bool):
              super().__init__()
              self.weight = nn.Parameter(torch.empty((out_features, in_features)))
              self.quant = quant

          def forward(self, x):
              weight = self.weight
              return F.linear(x, weight)

      class Layer(nn.Module):
          def __init__(self, config):
              super().__init__()
              self.norm = nn.LayerNorm(config.hidden_size, elementwise_affine=config.layer_norm_elementwise_affine)
              self.qkv_proj = Linear(config.hidden_size, 3 * config.hidden_size, quant=False)
    `);
    const norm = ir.layers.find((l) => l.name === 'self.norm');
    assert.equal(norm?.convertible, true);
    assert.equal(norm?.convertsWhen, 'config.layer_norm_elementwise_affine');
    assert.match(norm?.reasons.join(' ') ?? '', /elementwise_affine=config\.layer_norm_elementwise_affine is decided at run time: .*The conversion checks that where it builds the layer/);
    const qkv = ir.layers.find((l) => l.name === 'self.qkv_proj');
    assert.equal(qkv?.kind, 'linear');
    assert.equal(qkv?.role, 'attention');
  });
});

describe('analysis: layer classes bound to names', () => {
  before(initParser);

  it('an alias converts as its class; a run-time choice converts through a run-time class check; a bound partial is uncertain and says where the class comes from', () => {
    const ir = analyze(py`
      from functools import partial
      import torch.nn as nn

      Lin = partial(nn.Linear, bias=False)

      class Mlp(nn.Module):
          def __init__(self, in_features: int = 768, hidden_features: int = 3072, use_conv: bool = False):
              super().__init__()
              linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear
              self.fc1 = linear_layer(in_features, hidden_features)
              self.fc2 = linear_layer(hidden_features, in_features)

      class Head(nn.Module):
          def __init__(self, dim: int = 768):
              super().__init__()
              lin = nn.Linear
              self.proj = lin(dim, dim)
              self.out = Lin(dim, 4 * dim)
    `);
    const get = (name: string) => ir.layers.find((l) => l.name === name);
    for (const n of ['self.fc1', 'self.fc2']) {
      assert.equal(get(n)?.kind, 'linear', n);
      assert.equal(get(n)?.role, 'mlp', n);
      assert.equal(get(n)?.convertible, true, n);
      assert.deepEqual(get(n)?.classParam, { name: 'linear_layer', defaultClass: 'nn.Linear' }, n);
      assert.match(get(n)?.reasons.join(' ') ?? '', /linear_layer = partial\(nn\.Conv2d, kernel_size=1\) if use_conv else nn\.Linear, chosen at run time .*: the conversion checks at run time that the class is nn\.Linear/, n);
    }
    assert.equal(get('self.proj')?.convertible, true);
    assert.equal(get('self.proj')?.classFrom, undefined);
    assert.equal(get('self.out')?.convertible, 'uncertain');
    assert.match(get('self.out')?.reasons.join(' ') ?? '', /Lin = partial\(nn\.Linear, bias=False\)/);
  });

  it('a class chosen inline: (RMSNorm if rms else nn.LayerNorm)(d) and partial(A if c else B, eps=...)', () => {
    const ir = analyze(py`
      import torch
      import torch.nn as nn
      from functools import partial

      class RMSNorm(nn.Module):
          def __init__(self, d, eps=1e-6):
              super().__init__()
              self.eps = eps
              self.weight = nn.Parameter(torch.ones(d))
          def forward(self, x):
              return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

      class Block(nn.Module):
          def __init__(self, d: int = 1024, rms_norm: bool = True):
              super().__init__()
              self.norm1 = (RMSNorm if rms_norm else nn.LayerNorm)(d)
              norm_cls = partial(nn.LayerNorm if not rms_norm else RMSNorm, eps=1e-5)
              self.norm2 = norm_cls(d)
              self.fc = (nn.Linear)(d, 4 * d)
              self.other = (torch.sigmoid if rms_norm else torch.tanh)(torch.zeros(d))
    `);
    const get = (name: string) => ir.layers.find((l) => l.name === name);
    assert.equal(get('self.norm1')?.kind, 'rmsnorm');
    assert.equal(get('self.norm1')?.convertible, 'uncertain');
    assert.match(get('self.norm1')?.reasons.join(' ') ?? '', /\(RMSNorm if rms_norm else nn\.LayerNorm\), chosen at run time among classes that convert differently \(RMSNorm -> te\.RMSNorm; nn\.LayerNorm -> te\.LayerNorm\), so convert where the class is chosen/);
    // Called by a name: the conversion checks at run time which class was chosen (nn.LayerNorm: te.LayerNorm; RMSNorm as written).
    assert.equal(get('self.norm2')?.kind, 'layernorm');
    assert.equal(get('self.norm2')?.convertible, true);
    assert.deepEqual(get('self.norm2')?.classParam, { name: 'norm_cls', defaultClass: 'nn.LayerNorm' });
    assert.match(get('self.norm2')?.classFrom ?? '', /partial\(nn\.LayerNorm if not rms_norm else RMSNorm, eps=1e-5\), chosen at run time/);
    // A parenthesised plain class is that class, stated; a conditional of functions is no layer.
    assert.equal(get('self.fc')?.kind, 'linear');
    assert.equal(get('self.fc')?.inFeatures?.value, 1024);
    assert.equal(get('self.fc')?.convertible, true);
    assert.equal(get('self.other'), undefined);
    assert.equal(ir.layers.length, 3);
  });
});

describe('analysis: torch.nn layers built to replace TE modules', () => {
  before(initParser);

  it('a function converting TE modules back to torch.nn builds deliberate torch.nn layers', () => {
    const ir = analyze(py`
      import torch.nn as nn
      import transformer_engine.pytorch as te

      def convert_model(model, to_transformer_engine=True):
          for name, module in model.named_children():
              if to_transformer_engine and isinstance(module, nn.Linear):
                  setattr(model, name, te.Linear(module.in_features, module.out_features))
              elif not to_transformer_engine and isinstance(module, te.LayerNorm):
                  setattr(model, name, nn.LayerNorm(module.normalized_shape[0], eps=module.eps))
              elif not to_transformer_engine and isinstance(module, te.Linear):
                  setattr(model, name, nn.Linear(module.in_features, module.out_features))

      class MLP(nn.Module):
          def __init__(self):
              super().__init__()
              self.fc = nn.Linear(1024, 4096)
    `);
    const plain = ir.layers.filter((x) => !x.isTe && x.ownerFunction === 'convert_model');
    assert.equal(plain.length, 2, ir.layers.map((x) => `${x.constructor}@${x.ownerFunction}`).join(', '));
    for (const l of plain) {
      assert.equal(l.convertible, false, l.constructor);
      assert.match(l.reasons.join(' '), /deliberate torch\.nn layer/);
    }
    assert.equal(ir.layers.find((l) => l.name === 'self.fc')?.convertible, true);
  });
});

describe('analysis: defaults do not stand in for values a caller passes', () => {
  before(initParser);

  it('a size passed at a construction site but unknown there is unknown, not the default', () => {
    const ir = analyze(py`
      import torch.nn as nn

      class FeedForwardNetwork(nn.Module):
          def __init__(self, embedding_dim: int = 768, ffn_embedding_dim: int = 3072):
              super().__init__()
              self.fc1 = nn.Linear(embedding_dim, ffn_embedding_dim)

      class AxialTransformerLayer(nn.Module):
          def __init__(self, embedding_dim, ffn_embedding_dim):
              super().__init__()
              self.ffn = FeedForwardNetwork(embedding_dim, ffn_embedding_dim)
    `);
    const fc1 = ir.layers.find((l) => l.name === 'self.fc1');
    assert.equal(fc1?.inFeatures?.value, undefined);
    // The sizes are the caller's: the conversion is shape-guarded (through the factory), not refused.
    assert.equal(fc1?.convertible, true);
    assert.equal(fc1?.facets?.shape.state, 'guarded');
  });
});

describe('analysis: a Linear called and also read through .weight', () => {
  before(initParser);

  it('is uncertain (a fused path uses its weight directly)', () => {
    const ir = analyze(py`
      import torch.nn as nn
      from mamba_ssm.ops.selective_scan_interface import mamba_inner_fn

      class Mixer(nn.Module):
          def __init__(self, d_model: int = 1024):
              super().__init__()
              self.in_proj = nn.Linear(d_model, 4096)
              self.out_proj = nn.Linear(2048, d_model)

          def forward(self, x, fast=True):
              if fast:
                  return mamba_inner_fn(x, self.in_proj.weight, self.out_proj.weight)
              return self.out_proj(self.in_proj(x))
    `);
    for (const n of ['self.in_proj', 'self.out_proj']) {
      const l = ir.layers.find((x) => x.name === n);
      assert.equal(l?.convertible, 'uncertain', n);
      assert.match(l?.reasons.join(' ') ?? '', /also reads self\.\w+\.weight directly/, n);
    }
  });

  it('initialising or inspecting the weight is no functional use; replacing it after construction is', () => {
    const ir = analyze(py`
      import torch
      import torch.nn as nn

      class M(nn.Module):
          def __init__(self, d: int = 1024, latent: int = 256):
              super().__init__()
              self.fc = nn.Linear(d, d * 4)
              self.fc2 = nn.Linear(d * 4, d)
              nn.init.normal_(self.fc.weight, std=0.02)
              torch.nn.init.zeros_(self.fc.bias)
              self.fc2.weight.data.normal_(0, 0.02)
              self.fc2.bias.requires_grad = False
              self.enc = nn.Linear(d, latent, bias=False)
              self.dec = nn.Linear(latent, d, bias=False)
              self.dec.weight = nn.Parameter(self.enc.weight.t())

          def forward(self, x):
              assert self.fc.weight.shape[0] == x.shape[-1] * 4
              return self.fc2(self.fc(x)) + self.dec(self.enc(x))
    `);
    const get = (n: string) => ir.layers.find((l) => l.name === n);
    assert.equal(get('self.fc')?.convertible, true, get('self.fc')?.reasons.join(' '));
    assert.equal(get('self.fc2')?.convertible, true, get('self.fc2')?.reasons.join(' '));
    assert.equal(get('self.dec')?.convertible, 'uncertain');
    assert.match(get('self.dec')?.reasons.join(' ') ?? '', /replaces self\.dec\.weight after building it \(`self\.dec\.weight = nn\.Parameter\(self\.enc\.weight\.t\(\)\)`\)/);
    assert.equal(get('self.enc')?.convertible, 'uncertain'); // its weight is read to build the tie
  });
});

describe('analysis: TorchScript modules', () => {
  before(initParser);

  it('layers of a torch.jit.ScriptModule are not converted automatically', () => {
    const ir = analyze(py`
      import torch
      import torch.nn as nn

      class M(torch.jit.ScriptModule):
          def __init__(self):
              super().__init__()
              self.fc = nn.Linear(1024, 1024)

          @torch.jit.script_method
          def forward(self, x):
              return self.fc(x)
    `);
    const fc = ir.layers.find((l) => l.name === 'self.fc');
    assert.equal(fc?.convertible, 'uncertain');
    assert.match(fc?.reasons.join(' ') ?? '', /TorchScript module/);
  });
});

describe('analysis: norms TE cannot replace exactly', () => {
  before(initParser);

  it('a centred norm is a LayerNorm, channel-axis norms stay, RMSNorm without weight or with a bias stays, a base class bias counts', () => {
    const ir = analyze(py`
      import torch, torch.nn as nn, torch.nn.functional as F

      class MyLayerNorm(nn.Module):
          def __init__(self, hidden_size=1024, eps=1e-5):
              super().__init__()
              self.weight = nn.Parameter(torch.ones(hidden_size))
              self.eps = eps
          def forward(self, x):
              mean = x.mean(-1, keepdim=True)
              variance = (x - mean).pow(2).mean(-1, keepdim=True)
              return self.weight * ((x - mean) * torch.rsqrt(variance + self.eps))

      class LayerNorm2d(nn.LayerNorm):
          def forward(self, x):
              x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias, self.eps)
              return x.permute(0, 3, 1, 2)

      class RmsNorm2d(nn.Module):
          def __init__(self, c: int, eps: float = 1e-6):
              super().__init__(); self.eps = eps; self.weight = nn.Parameter(torch.ones(c))
          def forward(self, x):
              return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + self.eps) * self.weight[:, None, None]

      class CNLayerNorm(nn.Module):
          def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
              super().__init__()
              self.weight = nn.Parameter(torch.ones(normalized_shape))
              self.bias = nn.Parameter(torch.zeros(normalized_shape))
              self.eps = eps
              self.data_format = data_format
              self.normalized_shape = (normalized_shape, )
          def forward(self, x):
              if self.data_format == "channels_last":
                  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
              u = x.mean(1, keepdim=True)
              s = (x - u).pow(2).mean(1, keepdim=True)
              x = (x - u) / torch.sqrt(s + self.eps)
              return self.weight[:, None, None] * x + self.bias[:, None, None]

      class RMSNorm(nn.Module):
          def __init__(self, dim, eps: float = 1e-6, elementwise_affine: bool = True, bias: bool = False):
              super().__init__(); self.eps = eps
              self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None
              self.bias = nn.Parameter(torch.zeros(dim)) if (elementwise_affine and bias) else None
          def forward(self, x):
              x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
              return x if self.weight is None else (x * self.weight + (0 if self.bias is None else self.bias))

      class LayerNormBase(nn.Module):
          def __init__(self, size: int, use_bias: bool = True):
              super().__init__()
              self.weight = nn.Parameter(torch.ones(size))
              if use_bias:
                  self.bias = nn.Parameter(torch.zeros(size))
              else:
                  self.register_parameter("bias", None)

      class OLayerNorm(LayerNormBase):
          def forward(self, x):
              return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

      class Block(nn.Module):
          def __init__(self, d: int = 1024):
              super().__init__()
              self.norm = MyLayerNorm(1024)
              self.n1 = LayerNorm2d(96)
              self.n2 = RmsNorm2d(96)
              self.c1 = CNLayerNorm(96, eps=1e-6, data_format="channels_first")
              self.c2 = CNLayerNorm(96, eps=1e-6)
              self.c3 = CNLayerNorm(96, data_format=fmt)
              self.a = RMSNorm(d, eps=1e-6, bias=True)
              self.b = RMSNorm(d, 1e-6, False)
              self.q_norm = nn.RMSNorm(d, eps=1e-6, elementwise_affine=False)
              self.ok = RMSNorm(d, eps=1e-6)
              self.o = OLayerNorm(1024)
              self.fc = nn.Linear(1024, 1024)
          def forward(self, x):
              return self.fc(self.norm(x))

    `);
    const get = (n: string) => ir.layers.find((l) => l.name === n)!;
    const why = (n: string) => get(n).reasons.join(' ');
    // Cohere-style: subtracts the mean, so it is a LayerNorm without bias, not an RMSNorm.
    assert.equal(get('self.norm').kind, 'layernorm');
    assert.equal(get('self.norm').convertible, false);
    assert.match(why('self.norm'), /MyLayerNorm has no bias/);
    // timm LayerNorm2d / RmsNorm2d: over dim 1 of NCHW.
    for (const n of ['self.n1', 'self.n2']) {
      assert.equal(get(n).convertible, false, n);
      assert.match(why(n), /normalises over the channel axis of NCHW tensors/, n);
      assert.doesNotMatch(why(n), / can become te\./, n);
    }
    assert.match(why('self.n1'), /permute\(0,2,3,1/);
    assert.match(why('self.n2'), /reduces over dim 1/);
    // ConvNeXt: decided by data_format.
    assert.equal(get('self.c1').convertible, false);
    assert.equal(get('self.c2').convertible, true, why('self.c2'));
    assert.equal(get('self.c3').convertible, 'uncertain');
    assert.match(why('self.c3'), /decided by data_format=fmt at run time/);
    // RMSNorm with a bias or without a weight (diffusers, QK-norm).
    assert.equal(get('self.a').convertible, false);
    assert.match(why('self.a'), /bias=True gives an RMSNorm with a bias, but te\.RMSNorm has none/);
    assert.equal(get('self.b').convertible, false);
    assert.match(why('self.b'), /elementwise_affine=False means no weight/);
    assert.equal(get('self.q_norm').convertible, false);
    assert.equal(get('self.ok').convertible, true, why('self.ok'));
    // OLMo: the bias is created in the local base class.
    assert.equal(get('self.o').convertible, true, why('self.o'));
  });
});

describe('analysis: config defaults that __post_init__ overwrites', () => {
  before(initParser);

  it('a dataclass field assigned in __post_init__ is evaluated when plain, unknown (with the reason) when conditional (gpt-fast ModelArgs)', () => {
    const ir = analyze(py`
      from dataclasses import dataclass
      import torch.nn as nn

      @dataclass
      class Args:
          dim: int = 1024
          hidden: int = 1024
          n_head: int = 32
          n_local_heads: int = -1
          head_dim: int = 64
          def __post_init__(self):
              self.hidden = int(self.hidden * 8 / 3)
              if self.n_local_heads == -1:
                  self.n_local_heads = self.n_head
              self.head_dim = self.dim // self.n_head

      class MLP(nn.Module):
          def __init__(self, args: Args = Args()):
              super().__init__()
              self.up = nn.Linear(args.dim, args.hidden)
              self.down = nn.Linear(args.hidden, args.dim)
              total = (args.n_head + 2 * args.n_local_heads) * args.head_dim
              self.wqkv = nn.Linear(args.dim, total)

    `);
    // Plain arithmetic in __post_init__ is evaluated (hidden = int(1024 * 8 / 3) = 2730, which breaks the FP8 rule);
    // an assignment under another condition (n_local_heads == -1) is run-time logic: unknown, and said so.
    for (const n of ['self.up', 'self.down']) {
      const l = ir.layers.find((x) => x.name === n)!;
      assert.equal(n === 'self.up' ? l.outFeatures?.value : l.inFeatures?.value, 2730, n);
      assert.equal(l.facets?.shape.state, 'fails', n);
      assert.equal(l.convertible, false, n);
    }
    const wqkv = ir.layers.find((x) => x.name === 'self.wqkv')!;
    assert.equal(wqkv.convertible, true);
    assert.equal(wqkv.facets?.shape.state, 'guarded');
    assert.match(wqkv.reasons.join(' '), /is computed in __post_init__ at run time/);
    // A field __post_init__ leaves alone keeps its default.
    assert.equal(ir.layers.find((x) => x.name === 'self.up')!.inFeatures?.value, 1024);
  });
});

describe('analysis: a ModuleDict entry added with update()', () => {
  before(initParser);

  it('is named under the dict and its head reason keeps the expression as written (OLMo)', () => {
    const ir = analyze(py`
      import torch.nn as nn

      class LM(nn.Module):
          def __init__(self, config):
              super().__init__()
              self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(config.vocab_size, config.d_model)))
              if not config.weight_tying:
                  self.transformer.update(
                      {"ff_out": nn.Linear(config.d_model, config.embedding_size or config.vocab_size, bias=False)})
          def forward(self, idx):
              x = self.transformer.wte(idx)
              if self.config.weight_tying:
                  return nn.functional.linear(x, self.transformer.wte.weight)
              return self.transformer.ff_out(x)

    `);
    const head = ir.layers.find((l) => l.kind === 'linear')!;
    assert.equal(head.name, 'transformer.ff_out');
    assert.equal(head.role, 'lm_head');
    assert.ok(head.roleReasons.includes('vocabulary-sized output (config.embedding_size or config.vocab_size)'), head.roleReasons.join('; '));
  });
});

describe('analysis: norm flags from parameters', () => {
  before(initParser);

  it('says where elementwise_affine=False comes from (a default, a construction site) and that True would map', () => {
    const ir = analyze(py`
      import torch.nn as nn

      class AdaLNContinuous(nn.Module):
          def __init__(self, dim: int = 3072, elementwise_affine=True, eps=1e-6):
              super().__init__()
              self.norm = nn.LayerNorm(dim, eps, elementwise_affine)

      class Other(nn.Module):
          def __init__(self, dim: int = 3072, norm_elementwise_affine=False, eps=1e-6):
              super().__init__()
              self.norm = nn.LayerNorm(dim, eps, norm_elementwise_affine)

      model_norm = AdaLNContinuous(3072, elementwise_affine=False)

    `);
    const [a, b] = ir.layers.filter((l) => l.kind === 'layernorm');
    assert.equal(a.convertible, false);
    assert.match(a.reasons.join(' '), /\(elementwise_affine as passed where AdaLNContinuous is built\).*layers built with elementwise_affine=True map onto te\.LayerNorm/);
    assert.match(b.reasons.join(' '), /\(default of parameter norm_elementwise_affine \(False\)\)/);
  });
});

describe('analysis: a helper that returns a layer or something else', () => {
  before(initParser);

  it('its instance is uncertain and names the other return (DINOv2 _build_mlp); a plain factory converts', () => {
    const ir = analyze(py`
      import torch.nn as nn

      def _build_mlp(nlayers, in_dim, bottleneck_dim, hidden_dim=None, use_bn=False, bias=True):
          if nlayers == 1:
              return nn.Linear(in_dim, bottleneck_dim, bias=bias)
          else:
              layers = [nn.Linear(in_dim, hidden_dim, bias=bias)]
              layers.append(nn.GELU())
              for _ in range(nlayers - 2):
                  layers.append(nn.Linear(hidden_dim, hidden_dim, bias=bias))
                  layers.append(nn.GELU())
              layers.append(nn.Linear(hidden_dim, bottleneck_dim, bias=bias))
              return nn.Sequential(*layers)

      def make_fc(i, o):
          return nn.Linear(i, o)

      class DINOHead(nn.Module):
          def __init__(self, in_dim=768, out_dim=65536, nlayers=3, hidden_dim=2048, bottleneck_dim=256):
              super().__init__()
              self.mlp = _build_mlp(nlayers, in_dim, bottleneck_dim, hidden_dim=hidden_dim)
              self.fc = make_fc(in_dim, in_dim)

    `);
    const mlp = ir.layers.find((l) => l.name === 'self.mlp')!;
    assert.equal(mlp.convertible, 'uncertain');
    assert.match(mlp.reasons.join(' '), /_build_mlp\(\), which can also return nn\.Sequential\(\*layers\)/);
    assert.equal(ir.layers.find((l) => l.name === 'self.fc')!.convertible, true);
  });
});

describe('analysis: calls of submodules named *_linear', () => {
  before(initParser);

  it('self.dense_linear(x) in forward builds nothing; imported *linear factories still do', () => {
    const ir = analyze(py`
      import torch.nn as nn
      from mylib import lora_or_linear
      import mylib

      class Block(nn.Module):
          def __init__(self, d: int = 1024):
              super().__init__()
              self.dense_linear = nn.Linear(d, d)
              self.a = lora_or_linear(d, d)
              self.b = mylib.make_linear(d, d)
          def forward(self, x):
              c = self.dense_linear(x)
              return c

    `);
    assert.deepEqual(ir.layers.map((l) => l.name), ['self.dense_linear', 'self.a', 'self.b']);
  });
});

describe('analysis: what local Linear and norm classes add', () => {
  before(initParser);

  it('LoRA, quantized, grouped (3-D) Linears stay; (1 + w) LayerNorms map with zero_centered_gamma; gated or attribute-read norms do not convert', () => {
    const ir = analyze(py`
      import torch, torch.nn as nn, torch.nn.functional as F
      import bitsandbytes as bnb

      class LayerNorm1P(nn.LayerNorm):
          def forward(self, x):
              return F.layer_norm(x, self.normalized_shape, self.weight + 1, self.bias, self.eps)

      class RMSNorm1P(nn.RMSNorm):
          def forward(self, x):
              return F.rms_norm(x, self.normalized_shape, self.weight + 1, self.eps)

      class FP32LayerNorm(nn.LayerNorm):
          def forward(self, x):
              return super().forward(x.float()).type(x.dtype)

      class RMSNormGated(nn.Module):
          def __init__(self, hidden_size, eps=1e-6):
              super().__init__()
              self.weight = nn.Parameter(torch.ones(hidden_size))
              self.variance_epsilon = eps
          def forward(self, x, gate=None):
              x = x.float()
              if gate is not None:
                  x = x * F.silu(gate.float())
              return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)

      class RMSNorm(nn.Module):
          def __init__(self, hidden_size, eps=1e-6):
              super().__init__()
              self.weight = nn.Parameter(torch.ones(hidden_size)); self.variance_epsilon = eps
          def forward(self, x):
              return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)

      class GroupedLinear(nn.Linear):
          def __init__(self, num_experts: int, in_features: int, out_features: int):
              super().__init__(in_features, out_features, bias=False)
              self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features))
          def forward(self, x, expert_id: int):
              return F.linear(x, self.weight[expert_id])

      class ParallelExperts(nn.Module):
          def __init__(self, num_experts, input_size, output_size):
              super().__init__()
              self.weight = nn.Parameter(torch.empty(num_experts, output_size, input_size))
          def forward(self, inputs, expert_size):
              return torch.cat([F.linear(inputs[i], self.weight[i]) for i in range(len(expert_size))], dim=0)

      class LoRALinear(nn.Linear):
          def __init__(self, in_features, out_features, r=8):
              nn.Linear.__init__(self, in_features, out_features)
              self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
              self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
              self.weight.requires_grad = False
          def forward(self, x):
              return F.linear(x, self.weight, self.bias) + x @ self.lora_A.T @ self.lora_B.T

      class Linear4bit(nn.Linear):
          def __init__(self, input_features, output_features, bias=True):
              super().__init__(input_features, output_features, bias)
              self.weight = bnb.nn.Params4bit(self.weight.data, requires_grad=False)
          def forward(self, x):
              return bnb.matmul_4bit(x, self.weight.t(), quant_state=self.weight.quant_state)

      class CastLinear(nn.Linear):
          def forward(self, x):
              return F.linear(x, self.weight.to(x.dtype))

      class Block(nn.Module):
          def __init__(self, d: int = 1024, n: int = 8):
              super().__init__()
              self.ln = LayerNorm1P(d, eps=1e-5)
              self.rn = RMSNorm1P(d, eps=1e-6)
              self.f32 = FP32LayerNorm(d)
              self.gn = RMSNormGated(d, eps=1e-5)
              self.norm = RMSNorm(d, eps=1e-5)
              self.w1 = GroupedLinear(n, d, 4 * d)
              self.px = ParallelExperts(n, d, 4 * d)
              self.q = LoRALinear(d, d)
              self.k = Linear4bit(d, d)
              self.c = CastLinear(d, d)
              self.fc = nn.Linear(d, d)
          def forward(self, x, z):
              y = fused_norm(x, weight=self.norm.weight, eps=self.norm.variance_epsilon)
              return self.fc(self.ln(x)) + self.gn(x, z) + y

    `);
    const get = (n: string) => ir.layers.find((l) => l.name === n)!;
    const why = (n: string) => get(n).reasons.join(' ');
    // Nemotron LayerNorm1P / an RMSNorm subclass passing self.weight + 1.
    for (const n of ['self.ln', 'self.rn']) {
      assert.equal(get(n).convertible, true, n);
      assert.equal(get(n).teArgs?.zero_centered_gamma, 'True', n);
      assert.match(why(n), /zero_centered_gamma=True/, n);
    }
    // An fp32 upcast subclass is still a LayerNorm: te.LayerNorm computes in float32 inside its kernel, and the
    // conversion keeps the class for the fallback, where torch.nn.LayerNorm would not upcast.
    assert.equal(get('self.f32').kind, 'layernorm');
    assert.equal(get('self.f32').convertible, true, why('self.f32'));
    assert.equal(get('self.f32').fallbackKeepsClass, 'FP32LayerNorm');
    assert.match(why('self.f32'), /FP32LayerNorm\.forward computes in float32 and casts the result back .* keeps FP32LayerNorm for the fallback/);
    // Mamba2's gated RMSNorm; a norm a fused kernel reads through its attributes.
    assert.equal(get('self.gn').convertible, false);
    assert.match(why('self.gn'), /takes gate besides the input/);
    assert.equal(get('self.norm').convertible, 'uncertain');
    assert.match(why('self.norm'), /reads self\.norm\.variance_epsilon directly .* which te\.RMSNorm does not have/);
    // Granite MoE experts, LoRA, bitsandbytes.
    assert.equal(get('self.w1').convertible, false);
    assert.match(why('self.w1'), /3-D weight \(num_experts, out, in\), one matrix per expert.*te\.GroupedLinear/);
    assert.equal(get('self.px').convertible, false);
    assert.equal(get('self.q').convertible, false);
    assert.match(why('self.q'), /adds parameters of its own \(lora_A, lora_B/);
    assert.equal(get('self.k').convertible, false);
    assert.match(why('self.k'), /replaces its weight with bnb\.nn\.Params4bit/);
    // Casts its weight to the input's dtype, as te.Linear does: converted, the fallback keeps CastLinear.
    assert.equal(get('self.c').convertible, true);
    assert.equal(get('self.c').fallbackKeepsClass, 'CastLinear');
    assert.equal(get('self.fc').convertible, true);
  });
});

describe('analysis: reparametrised weights', () => {
  before(initParser);

  it('an aliased weight_norm wrapper and register_parametrization(self.e, "weight", ...) make the layer uncertain', () => {
    const ir = analyze(py`
      import torch, torch.nn as nn
      from torch.nn.utils.parametrizations import weight_norm as wn2
      class H(nn.Module):
          def __init__(self, d: int = 1024):
              super().__init__()
              self.c = wn2(nn.Linear(d, 4 * d))
              self.e = nn.Linear(d, d)
              torch.nn.utils.parametrize.register_parametrization(self.e, "weight", nn.Identity())
          def forward(self, x): return self.e(self.c(x)[..., :1024])

    `);
    const c = ir.layers.find((l) => l.name === 'self.c')!;
    assert.equal(c.convertible, 'uncertain');
    assert.equal(c.wrappedBy, 'wn2');
    const e = ir.layers.find((l) => l.name === 'self.e')!;
    assert.equal(e.convertible, 'uncertain');
    assert.match(e.reasons.join(' '), /register_parametrization\(self\.e, "weight"/);
  });
});

describe('analysis: norm classes imported from model libraries', () => {
  before(initParser);

  it('T5LayerNorm / LlamaRMSNorm are RMSNorms whose forward is elsewhere (uncertain); apex and torch.nn norms convert', () => {
    const ir = analyze(py`
      import torch.nn as nn
      from transformers.models.t5.modeling_t5 import T5LayerNorm
      from transformers.models.llama.modeling_llama import LlamaRMSNorm
      from apex.normalization import FusedRMSNorm
      class B(nn.Module):
          def __init__(self, d: int = 1024):
              super().__init__()
              self.a = T5LayerNorm(d, eps=1e-6)
              self.b = LlamaRMSNorm(d, eps=1e-6)
              self.c = FusedRMSNorm(d, eps=1e-6)
              self.d = nn.RMSNorm(d, eps=1e-6)

    `);
    const get = (n: string) => ir.layers.find((l) => l.name === n)!;
    for (const n of ['self.a', 'self.b']) {
      assert.equal(get(n).kind, 'rmsnorm', n);
      assert.equal(get(n).convertible, 'uncertain', n);
      assert.match(get(n).reasons.join(' '), /its forward is not in this file/, n);
    }
    assert.equal(get('self.c').convertible, true);
    assert.equal(get('self.d').convertible, true);
  });
});

describe('analysis: PyTorch API edge cases', () => {
  before(initParser);

  it('a weightless RMSNorm stays, an MLP width equal to the vocabulary is no head, weight_norm(self.fc) later is uncertain, bare @torch.compile counts', () => {
    const ir = analyze(py`
      import torch, torch.nn as nn, torch.nn.functional as F

      class RMSNorm(nn.Module):
          def forward(self, x):
              return F.rms_norm(x, (x.size(-1),))

      class Block(nn.Module):
          def __init__(self, dim=512, hidden=2048):
              super().__init__()
              self.up = nn.Linear(dim, hidden)
              self.down = nn.Linear(hidden, dim)
              self.n = RMSNorm()
              self.fc = nn.Linear(dim, dim)
              nn.utils.weight_norm(self.fc)
          def forward(self, x):
              return x + self.down(F.gelu(self.up(self.n(x)))) + self.fc(x)

      class LM(nn.Module):
          def __init__(self, vocab_size=2048, dim=512):
              super().__init__()
              self.emb = nn.Embedding(vocab_size, dim)
              self.blocks = nn.ModuleList([Block(dim) for _ in range(4)])
          def forward(self, idx):
              x = self.emb(idx)
              for b in self.blocks: x = b(x)
              return F.linear(x, self.emb.weight)

      @torch.compile
      def train_step(model, x):
          return model(x)

    `);
    const get = (n: string) => ir.layers.find((l) => l.name === n)!;
    assert.equal(get('self.up').role, 'mlp');
    assert.equal(get('self.up').convertible, true);
    assert.equal(get('self.n').convertible, false);
    assert.match(get('self.n').reasons.join(' '), /no learnable weight/);
    assert.equal(get('self.fc').convertible, 'uncertain');
    assert.ok(ir.calls.some((c) => c.kind === 'compile' && c.text === '@torch.compile'));
  });

  it('nn.LazyLinear and the built-in transformer blocks say what TE offers instead', () => {
    const ir = analyze(py`
      import torch.nn as nn
      class M(nn.Module):
          def __init__(self):
              super().__init__()
              self.l = nn.LazyLinear(1024)
              self.enc = nn.TransformerEncoderLayer(512, 8)
    `);
    const l = ir.layers.find((x) => x.name === 'self.l')!;
    assert.equal(l.convertible, false);
    assert.match(l.reasons.join(' '), /infers in_features at its first forward/);
    assert.match(ir.layers.find((x) => x.name === 'self.enc')!.reasons.join(' '), /te\.TransformerLayer .* not a drop-in/);
  });
});

describe('analysis: norm scale parameters with other names', () => {
  before(initParser);

  it('an RMSNorm whose scale is called gain converts, keeping the checkpoint key', () => {
    const ir = analyze(py`
      import math
      import torch
      import torch.nn as nn

      class RMSNorm(nn.Module):
          def __init__(self, ndim):
              super().__init__()
              self.gain = nn.Parameter(torch.ones(ndim))

          def forward(self, x):
              rms = x.norm(2, dim=-1, keepdim=True) / math.sqrt(x.size(-1))
              return x / rms * self.gain

      class Block(nn.Module):
          def __init__(self):
              super().__init__()
              self.ln_1 = RMSNorm(64)
              self.fc = nn.Linear(64, 64)

          def forward(self, x):
              return self.fc(self.ln_1(x))

    `);
    const n = ir.layers.find((l) => l.name === 'self.ln_1')!;
    assert.equal(n.convertible, true, n.reasons.join(' '));
    assert.equal(n.weightName, 'gain');
    assert.match(n.reasons.join(' '), /keeps the checkpoint key ln_1\.gain/);
  });
});
