"""Trains the small GPT from model.py on random tokens: runs anywhere (CPU included) in a few seconds.

Try the Precision Lens actions: "Convert N layers in this file to FP8 (with fallback)" in model.py, then "Wrap the
training step in FP8 autocast" here; both import the project's one FP8 fallback module (fp8_fallback.py).
"""
import time

import torch

from model import GPT, GPTConfig


def main(steps=20, batch_size=4):
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    for step in range(steps):
        t0 = time.perf_counter()
        idx = torch.randint(0, config.vocab_size, (batch_size, config.block_size), device=device)
        targets = torch.roll(idx, shifts=-1, dims=1)
        logits, loss = model(idx, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.4f} ({(time.perf_counter() - t0) * 1000:.0f} ms)")
    return loss.item()


if __name__ == "__main__":
    main()
