"""llama2.c's feed-forward at width 2048 (FP8 pays there): the block builds its norm after the MLP it feeds."""
import torch.nn as nn
import torch.nn.functional as F


class FeedForward(nn.Module):
    def __init__(self, dim=2048, hidden_dim=5632, dropout=0.0):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))


class TransformerBlock(nn.Module):
    def __init__(self, dim=2048):
        super().__init__()
        self.feed_forward = FeedForward(dim)
        self.ffn_norm = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x):
        return x + self.feed_forward.forward(self.ffn_norm(x))
