"""Preset shapes (standard library only: --list-workloads works without torch)."""

VOCAB = 32000


class Preset(object):
    def __init__(self, name, arch, hidden, layers, heads, kv_heads, ffn, batch, seq, description, real_layers=None,
                 vocab=VOCAB, hidden_test=False):
        self.name = name
        self.arch = arch            # "gpt": LayerNorm, biases, GELU MLP, learned positions, tied lm-head
        self.hidden = hidden        # "llama": RMSNorm, no biases, SwiGLU MLP, grouped-query attention, untied lm-head
        self.layers = layers
        self.heads = heads
        self.kv_heads = kv_heads
        self.ffn = ffn
        self.batch = batch
        self.seq = seq
        self.vocab = vocab
        self.description = description
        self.real_layers = real_layers
        self.hidden_test = hidden_test

    @property
    def head_dim(self):
        return self.hidden // self.heads

    def param_count(self, layers=None, seq=None):
        """Analytic parameter count (tied weights counted once)."""
        L = self.layers if layers is None else layers
        d, f, V = self.hidden, self.ffn, self.vocab
        hd = self.head_dim
        qkv_out = (self.heads + 2 * self.kv_heads) * hd
        if self.arch == "gpt":
            attn = d * qkv_out + qkv_out + d * d + d
            mlp = d * f + f + f * d + d
            norms = 2 * 2 * d
            per_layer = attn + mlp + norms
            emb = V * d + (self.seq if seq is None else seq) * d
            return L * per_layer + emb + 2 * d  # final LayerNorm; lm-head tied to the embedding
        attn = d * qkv_out + d * d
        mlp = d * 2 * f + f * d
        per_layer = attn + mlp + 2 * d
        return L * per_layer + V * d + d + d * V  # embedding, final RMSNorm, untied lm-head

    def describe(self):
        return {
            "name": self.name, "arch": self.arch, "hidden": self.hidden, "layers": self.layers,
            "real_layers": self.real_layers, "heads": self.heads, "kv_heads": self.kv_heads, "ffn": self.ffn,
            "vocab": self.vocab, "batch": self.batch, "seq": self.seq, "params": self.param_count(),
            "description": self.description,
        }


PRESETS = {
    "gpt-125m": Preset("gpt-125m", "gpt", 768, 12, 12, 12, 3072, 32, 1024,
                       "GPT-2 small shape: width 768, 12 layers, GELU MLP 3072, tied lm-head", real_layers=12),
    "gpt-1.3b": Preset("gpt-1.3b", "gpt", 2048, 24, 16, 16, 8192, 8, 2048,
                       "GPT-3 XL shape: width 2048, 24 layers (all of them), GELU MLP 8192, tied lm-head",
                       real_layers=24),
    "llama-7b-slice": Preset("llama-7b-slice", "llama", 4096, 12, 32, 8, 14336, 4, 4096,
                             "Llama-3-8B / Mistral-7B block shape: width 4096, SwiGLU MLP 14336, GQA 32/8 heads; "
                             "12 of the real 32 layers (enough to keep the BF16 lm-head share small, fits one GPU)",
                             real_layers=32),
    "llama-70b-slice": Preset("llama-70b-slice", "llama", 8192, 5, 64, 8, 28672, 2, 4096,
                              "Llama-2/3-70B block shape: width 8192, SwiGLU MLP 28672, GQA 64/8 heads; "
                              "5 of the real 80 layers (enough to keep the BF16 lm-head share near 6 %, fits one 141 GB GPU)",
                              real_layers=80),
    "tiny": Preset("tiny", "gpt", 64, 2, 4, 4, 256, 2, 32,
                   "test preset (CPU tests, smoke runs): width 64, 2 layers, vocabulary 512", vocab=512,
                   hidden_test=True),
}


def list_presets():
    return [p.describe() for p in PRESETS.values()]
