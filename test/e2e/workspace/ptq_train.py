"""A small language model trained on random tokens: the end-to-end test applies the FP8 post-training quantization fix here."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 256
torch.manual_seed(0)


class TinyLM(nn.Module):
    def __init__(self, vocab_size: int = VOCAB, d: int = 64):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.decoder = nn.Linear(d, vocab_size, bias=False)

    def forward(self, idx):
        h = self.tok_emb(idx)
        h = h + self.fc2(torch.relu(self.fc1(h)))
        return self.decoder(h)


def batches(n):
    x = torch.randint(0, VOCAB, (n, 16))
    return TensorDataset(x, torch.roll(x, -1, dims=1))


def train(steps=3):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train_loader = DataLoader(batches(64), batch_size=8)
    val_loader = DataLoader(batches(32), batch_size=8)
    for step, (x, y) in enumerate(train_loader):
        if step >= steps:
            break
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
    return model


if __name__ == "__main__":
    train()
