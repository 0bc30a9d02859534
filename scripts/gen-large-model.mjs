#!/usr/bin/env node
// Generates large, realistic PyTorch model files for the analysis benchmark, deterministically from a seed:
// config dataclasses, attention / MLP / norm classes of several model families (GPT-2, Llama, BERT, T5, MoE, ViT,
// Whisper-style audio), Transformer Engine variants, torchao conversions and training loops, with varied names and
// dimensions. Not anyone's real code: the forms that real model files use.
//
//   node scripts/gen-large-model.mjs --lines 20000 --seed 1 > big.py
//   node scripts/gen-large-model.mjs --class flat|multiline|broken --layers 10000 > huge.py
//   import { generateModelFile } from './gen-large-model.mjs'
import { pathToFileURL } from 'node:url';

/** mulberry32 (the same PRNG the CLI's bench mode uses). */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HEADER = `"""Generated model zoo for the Precision Lens analysis benchmark."""
import math
from dataclasses import dataclass, field
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Linear as DenseLayer

try:
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling, Float8CurrentScaling, Format
    HAVE_TE = True
except ImportError:
    te = None
    HAVE_TE = False
`;

const WIDTHS = [256, 384, 512, 768, 1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 8192, 1000, 1001, 4100];
const VOCABS = [32000, 32768, 50257, 50304, 51865, 65024, 128256, 151936];
const ACTS = [['gelu', 'F.gelu(x)'], ['relu', 'F.relu(x)'], ['silu', 'F.silu(x)'], ['gelu_tanh', 'F.gelu(x, approximate="tanh")']];
const PREFIXES = ['Tiny', 'Small', 'Base', 'Large', 'Wide', 'Deep', 'Fast', 'Sparse', 'Dense', 'Causal', 'Cross', 'Local', 'Global', 'Shared'];

function pick(random, xs) { return xs[Math.floor(random() * xs.length)]; }

function configClass(name, r) {
  const n = pick(r, WIDTHS);
  return `

@dataclass
class ${name}Config:
    block_size: int = ${pick(r, [512, 1024, 2048, 4096])}
    vocab_size: int = ${pick(r, VOCABS)}
    n_layer: int = ${pick(r, [2, 4, 6, 12, 24, 32])}
    n_head: int = ${pick(r, [4, 8, 12, 16, 32])}
    n_embd: int = ${n}
    intermediate_size: int = ${n * 4}
    dropout: float = ${pick(r, ['0.0', '0.1'])}
    bias: bool = ${pick(r, ['True', 'False'])}
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    extra: dict = field(default_factory=dict)
`;
}

const templates = {
  gpt(name, r) {
    const [, act] = pick(r, ACTS);
    return configClass(name, r) + `

class ${name}LayerNorm(nn.Module):
    """LayerNorm with an optional bias."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class ${name}SelfAttention(nn.Module):
    def __init__(self, config: ${name}Config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class ${name}MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = ${act}
        return self.dropout(self.c_proj(x))


class ${name}Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = ${name}LayerNorm(config.n_embd, bias=config.bias)
        self.attn = ${name}SelfAttention(config)
        self.ln_2 = ${name}LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = ${name}MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class ${name}GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([${name}Block(config) for _ in range(config.n_layer)]),
            ln_f=${name}LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss
`;
  },

  llama(name, r) {
    const dim = pick(r, [2048, 4096, 5120, 8192, 3072]);
    const hidden = pick(r, [11008, 14336, 8192, 13824]);
    return `

class ${name}RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * ${pick(r, ['self.weight', '(1 + self.weight)'])}


def ${name.toLowerCase()}_precompute_freqs(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    return torch.polar(torch.ones_like(torch.outer(t, freqs)), torch.outer(t, freqs))


class ${name}Attention(nn.Module):
    def __init__(self, dim: int = ${dim}, n_heads: int = 32, n_kv_heads: Optional[int] = None):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor):
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        output = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2), is_causal=True)
        return self.wo(output.transpose(1, 2).contiguous().view(bs, seqlen, -1))


class ${name}FeedForward(nn.Module):
    def __init__(self, dim: int = ${dim}, hidden_dim: int = ${hidden}):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class ${name}TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, dim: int = ${dim}):
        super().__init__()
        self.layer_id = layer_id
        self.attention = ${name}Attention(dim)
        self.feed_forward = ${name}FeedForward(dim)
        self.attention_norm = ${name}RMSNorm(dim, eps=1e-5)
        self.ffn_norm = nn.RMSNorm(dim, eps=1e-5)

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class ${name}Transformer(nn.Module):
    def __init__(self, vocab_size: int = ${pick(r, VOCABS)}, n_layers: int = ${pick(r, [16, 32, 40])}, dim: int = ${dim}):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = torch.nn.ModuleDict()
        for layer_id in range(n_layers):
            self.layers[str(layer_id)] = ${name}TransformerBlock(layer_id, dim)
        self.norm = ${name}RMSNorm(dim, eps=1e-5)
        self.output = nn.Linear(dim, vocab_size, bias=False)
        self.register_buffer("freqs_cis", ${name.toLowerCase()}_precompute_freqs(dim // 32, 4096), persistent=False)

    def forward(self, tokens: torch.Tensor):
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis)
        h = self.norm(h)
        return self.output(h).float()
`;
  },

  bert(name, r) {
    const h = pick(r, [768, 1024, 384, 512]);
    return `

class ${name}Embeddings(nn.Module):
    def __init__(self, vocab_size=30522, hidden_size=${h}, max_position_embeddings=512, type_vocab_size=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        e = self.word_embeddings(input_ids) + self.position_embeddings(positions) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(e))


class ${name}SelfOutput(nn.Module):
    def __init__(self, hidden_size=${h}):
        super().__init__()
        self.dense = DenseLayer(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12, elementwise_affine=${pick(r, ['True', 'False'])})
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class ${name}Layer(nn.Module):
    def __init__(self, hidden_size=${h}, intermediate_size=${h * 4}, num_heads=12):
        super().__init__()
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.output = ${name}SelfOutput(hidden_size)
        self.intermediate = nn.Linear(hidden_size, intermediate_size)
        self.out = nn.Linear(intermediate_size, hidden_size)
        self.out_norm = nn.LayerNorm(hidden_size)
        self.num_heads = num_heads

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)
        a = F.scaled_dot_product_attention(q, k, v)
        x = self.output(a, x)
        return self.out_norm(x + self.out(F.gelu(self.intermediate(x))))


class ${name}ForSequenceClassification(nn.Module):
    def __init__(self, num_labels=${pick(r, [2, 3, 10, 1000])}, hidden_size=${h}, num_layers=12):
        super().__init__()
        self.embeddings = ${name}Embeddings(hidden_size=hidden_size)
        self.encoder = nn.ModuleList([${name}Layer(hidden_size) for _ in range(num_layers)])
        self.pooler = nn.Linear(hidden_size, hidden_size)
        self.classifier = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids, token_type_ids):
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.encoder:
            x = layer(x)
        return self.classifier(torch.tanh(self.pooler(x[:, 0])))
`;
  },

  moe(name, r) {
    const d = pick(r, [1024, 2048, 4096]);
    const experts = pick(r, [8, 16, 64]);
    return `

class ${name}Expert(nn.Module):
    def __init__(self, d_model=${d}, d_ff=${d * 2}):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class ${name}SparseMoE(nn.Module):
    def __init__(self, d_model=${d}, num_experts=${experts}, top_k=2):
        super().__init__()
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList([${name}Expert(d_model) for _ in range(num_experts)])
        self.top_k = top_k

    def forward(self, x):
        scores = F.softmax(self.router(x), dim=-1)
        weights, chosen = torch.topk(scores, self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            mask = (chosen == i).any(-1)
            if mask.any():
                out[mask] += expert(x[mask]) * weights[mask].sum(-1, keepdim=True)
        return out


def make_${name.toLowerCase()}_proj(d_in, d_out):
    return nn.Linear(d_in, d_out, bias=False)


class ${name}Model(nn.Module):
    def __init__(self, vocab_size=${pick(r, VOCABS)}, d_model=${d}, n_layers=${pick(r, [4, 8, 16])}):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            self.blocks.append(nn.ModuleDict({"norm": nn.LayerNorm(d_model), "attn_proj": make_${name.toLowerCase()}_proj(d_model, d_model), "moe": ${name}SparseMoE(d_model)}))
        self.final_norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for blk in self.blocks:
            x = x + blk["moe"](blk["norm"](x + blk["attn_proj"](x)))
        return self.lm_head(self.final_norm(x))
`;
  },

  vit(name, r) {
    const d = pick(r, [768, 1024, 1280, 384]);
    return `

class ${name}PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=${d}):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ${name}VisionBlock(nn.Module):
    def __init__(self, dim=${d}, num_heads=16, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.num_heads = num_heads

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape(B, N, C))
        return x + self.mlp(self.norm2(x))


class ${name}VisionTransformer(nn.Module):
    def __init__(self, num_classes=${pick(r, [1000, 21843, 10])}, embed_dim=${d}, depth=${pick(r, [12, 24, 32])}):
        super().__init__()
        self.patch_embed = ${name}PatchEmbed(embed_dim=embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, embed_dim))
        self.blocks = nn.Sequential(*[${name}VisionBlock(embed_dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])
`;
  },

  audio(name, r) {
    const n_state = pick(r, [384, 512, 768, 1024, 1280]);
    return `

class ${name}Linear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))


class ${name}Conv1d(nn.Conv1d):
    def _conv_forward(self, x, weight, bias):
        return super()._conv_forward(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))


class ${name}MultiHeadAttention(nn.Module):
    def __init__(self, n_state: int = ${n_state}, n_head: int = 8):
        super().__init__()
        self.n_head = n_head
        self.query = ${name}Linear(n_state, n_state)
        self.key = ${name}Linear(n_state, n_state, bias=False)
        self.value = ${name}Linear(n_state, n_state)
        self.out = ${name}Linear(n_state, n_state)

    def forward(self, x, xa=None):
        q = self.query(x)
        k = self.key(x if xa is None else xa)
        v = self.value(x if xa is None else xa)
        return self.out(F.scaled_dot_product_attention(q, k, v))


class ${name}ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int = ${n_state}, n_head: int = 8, cross_attention: bool = False):
        super().__init__()
        self.attn = ${name}MultiHeadAttention(n_state, n_head)
        self.attn_ln = nn.LayerNorm(n_state)
        self.cross_attn = ${name}MultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = nn.LayerNorm(n_state) if cross_attention else None
        n_mlp = n_state * 4
        self.mlp = nn.Sequential(${name}Linear(n_state, n_mlp), nn.GELU(), ${name}Linear(n_mlp, n_state))
        self.mlp_ln = nn.LayerNorm(n_state)

    def forward(self, x, xa=None):
        x = x + self.attn(self.attn_ln(x))
        if self.cross_attn is not None:
            x = x + self.cross_attn(self.cross_attn_ln(x), xa)
        return x + self.mlp(self.mlp_ln(x))


class ${name}AudioEncoder(nn.Module):
    def __init__(self, n_mels: int = 80, n_state: int = ${n_state}, n_layer: int = 6):
        super().__init__()
        self.conv1 = ${name}Conv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = ${name}Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.blocks = nn.ModuleList([${name}ResidualAttentionBlock(n_state) for _ in range(n_layer)])
        self.ln_post = nn.LayerNorm(n_state)

    def forward(self, x):
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).permute(0, 2, 1)
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


class ${name}TextDecoder(nn.Module):
    def __init__(self, n_vocab: int = 51865, n_state: int = ${n_state}, n_layer: int = 6):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.blocks = nn.ModuleList([${name}ResidualAttentionBlock(n_state, cross_attention=True) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(n_state)

    def forward(self, x, xa):
        x = self.token_embedding(x)
        for block in self.blocks:
            x = block(x, xa)
        x = self.ln(x)
        return (x @ torch.transpose(self.token_embedding.weight.to(x.dtype), 0, 1)).float()
`;
  },

  teModel(name, r) {
    const d = pick(r, [1024, 2048, 4096, 1000]);
    const legacy = r() < 0.5;
    return `

class ${name}TeBlock(torch.nn.Module):
    def __init__(self, hidden_size: int = ${d}, ffn_hidden_size: int = ${d * 4}):
        super().__init__()
        self.ln = te.LayerNorm(hidden_size, eps=1e-5)
        self.qkv = te.Linear(hidden_size, 3 * hidden_size, bias=True)
        self.proj = te.Linear(hidden_size, hidden_size)
        self.mlp = te.LayerNormMLP(hidden_size, ffn_hidden_size)
        self.keep_bf16 = torch.nn.Linear(hidden_size, hidden_size)

    def forward(self, x):
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return x + self.mlp(x) + self.keep_bf16(x)


class ${name}TeLM(torch.nn.Module):
    def __init__(self, vocab_size: int = ${pick(r, VOCABS)}, hidden_size: int = ${d}, layers: int = 4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, hidden_size)
        self.layers = torch.nn.ModuleList(${name}TeBlock(hidden_size) for _ in range(layers))
        self.head = ${pick(r, ['te.Linear', 'torch.nn.Linear'])}(hidden_size, vocab_size, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def train_${name.toLowerCase()}(model, loader, steps: int = 100, lr: float = 3e-4):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    recipe = DelayedScaling(fp8_format=Format.${pick(r, ['HYBRID', 'HYBRID', 'E4M3', 'E5M2'])}, amax_history_len=16, amax_compute_algo="max")
    model.train()
    for step, (x, y) in enumerate(loader):
        if step >= steps:
            break
        ${legacy ? 'with te.fp8_autocast(enabled=True, fp8_recipe=recipe):' : 'with te.autocast(enabled=True, recipe=recipe):'}
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
${r() < 0.3 ? '            loss.backward()\n' : '        loss.backward()\n'}        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    return model
`;
  },

  training(name, r) {
    return `

def ${name.toLowerCase()}_get_batch(data, block_size: int, batch_size: int, device: str = "cuda"):
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


@torch.no_grad()
def ${name.toLowerCase()}_estimate_loss(model, data, eval_iters: int = 20, block_size: int = 1024):
    model.eval()
    losses = torch.zeros(eval_iters)
    for k in range(eval_iters):
        x, y = ${name.toLowerCase()}_get_batch(data, block_size, 8)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(x, y)
        losses[k] = loss.item()
    model.train()
    return losses.mean()


def ${name.toLowerCase()}_lr(it: int, warmup: int = 2000, lr_decay_iters: int = 600000, max_lr: float = 6e-4, min_lr: float = 6e-5):
    if it < warmup:
        return max_lr * (it + 1) / (warmup + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup) / (lr_decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


def ${name.toLowerCase()}_train(model, data, max_iters: int = ${pick(r, [1000, 5000, 600000])}, compile_model: bool = ${pick(r, ['True', 'False'])}):
    ${r() < 0.3 ? 'model = model.to(torch.bfloat16)\n    ' : ''}optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95))
    if compile_model:
        model = torch.compile(model)
    for it in range(max_iters):
        for group in optimizer.param_groups:
            group["lr"] = ${name.toLowerCase()}_lr(it)
        x, y = ${name.toLowerCase()}_get_batch(data, 1024, 12)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if it % 250 == 0:
            print(f"iter {it}: val {${name.toLowerCase()}_estimate_loss(model, data):.4f}")
    state = torch.load("ckpt.pt", map_location="cpu")
    model.load_state_dict(state["model"])
    return model
`;
  },

  torchao(name, r) {
    const filtered = r() < 0.5;
    return `

def ${name.toLowerCase()}_to_float8(model):
    from torchao.float8 import convert_to_float8_training, Float8LinearConfig
    config = Float8LinearConfig.from_recipe_name("tensorwise")
${filtered ? `
    def module_filter_fn(mod: torch.nn.Module, fqn: str):
        if fqn in ("lm_head", "output"):
            return False
        if isinstance(mod, torch.nn.Linear):
            return mod.in_features % 16 == 0 and mod.out_features % 16 == 0
        return True

    convert_to_float8_training(model, config=config, module_filter_fn=module_filter_fn)` : '    convert_to_float8_training(model, config=config)'}
    return model
`;
  },
};

const FAMILIES = Object.keys(templates);

/** A Python file of about `lines` lines (never fewer), the same for the same seed. */
export function generateModelFile({ lines = 20000, seed = 1 } = {}) {
  const random = prng(seed);
  const parts = [HEADER];
  let count = HEADER.split('\n').length;
  for (let i = 0; count < lines; i++) {
    const family = FAMILIES[Math.floor(random() * FAMILIES.length)];
    const name = `${pick(random, PREFIXES)}${family[0].toUpperCase()}${family.slice(1)}${i}`;
    const chunk = templates[family](name, random);
    parts.push(chunk);
    count += chunk.split('\n').length - 1;
  }
  return parts.join('');
}

/**
 * One model class with `layers` layers (what the fuzzer's manyLayers mutation makes, and issue 13's huge classes):
 *   flat       `self.fzN = nn.Linear(64, 64)` lines and a short forward
 *   multiline  constructor calls over several lines (keywords, a LayerNorm every eighth layer) and a forward that
 *              uses every layer
 *   broken     `flat` after an unclosed parenthesis: an error-recovered tree
 */
export function generateLargeClass({ layers = 10000, shape = 'flat' } = {}) {
  const head = 'import torch\nimport torch.nn as nn\n\n\nclass Huge(nn.Module):\n    def __init__(self, d=64):\n        super().__init__()\n';
  const body = [];
  const forward = [];
  for (let i = 0; i < layers; i++) {
    if (shape === 'multiline') {
      body.push(i % 8 === 7
        ? `        self.l${i} = nn.LayerNorm(\n            d,\n            eps=1e-5,\n        )\n`
        : `        self.l${i} = nn.Linear(\n            d,\n            d,\n            bias=${i % 2 ? 'True' : 'False'},\n        )\n`);
      forward.push(`        x = self.l${i}(x)\n`);
    } else body.push(`        self.fz${i} = nn.Linear(64, 64)\n`);
  }
  if (shape === 'broken') body.splice(Math.floor(layers / 3), 0, '        self.bad = nn.Linear(64, (64\n');
  const fwd = forward.length ? forward.join('') : '        x = self.fz0(x)\n';
  return `${head}${body.join('')}\n    def forward(self, x):\n${fwd}        return x\n`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (name, d) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? Number(process.argv[i + 1]) : d;
  };
  const shape = process.argv.includes('--class') ? process.argv[process.argv.indexOf('--class') + 1] : undefined;
  process.stdout.write(shape
    ? generateLargeClass({ layers: arg('--layers', 10000), shape })
    : generateModelFile({ lines: arg('--lines', 20000), seed: arg('--seed', 1) }));
}
