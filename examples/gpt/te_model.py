"""The same MLP block written directly against Transformer Engine, with two classic FP8 mistakes:

- loss.backward() is called inside the te.fp8_autocast block (PL301: backward belongs after the block);
- the vocabulary-sized output head is a te.Linear run under FP8 autocast (PL201: keep the lm-head in BF16).
Needs an NVIDIA GPU with FP8 (Ada, Hopper, Blackwell) and transformer_engine installed to run.
"""
import torch
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

VOCAB_SIZE = 32768
HIDDEN = 1024


class TeMLPModel(torch.nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, hidden=HIDDEN):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, hidden)
        self.fc1 = te.Linear(hidden, 4 * hidden, bias=True)
        self.fc2 = te.Linear(4 * hidden, hidden, bias=True)
        self.lm_head = te.Linear(hidden, vocab_size, bias=False)

    def forward(self, idx):
        x = self.embed(idx)
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))
        return self.lm_head(x)


def train(steps=10):
    model = TeMLPModel().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fp8_recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    for _ in range(steps):
        idx = torch.randint(0, VOCAB_SIZE, (8, 128), device="cuda")
        with te.fp8_autocast(enabled=True, fp8_recipe=fp8_recipe):
            logits = model(idx)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, VOCAB_SIZE), idx.view(-1))
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    train()
