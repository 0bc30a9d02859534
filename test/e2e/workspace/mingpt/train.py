"""Trains the GPT of model.py for a few steps on random tokens, on the CPU."""
import torch

from model import GPT, GPTConfig


def main(steps=3):
    torch.manual_seed(0)
    config = GPTConfig()
    model = GPT(config)
    optimizer, decay, no_decay = model.configure_optimizers()
    print("param groups: %d decay, %d no_decay" % (len(decay), len(no_decay)), flush=True)
    for step in range(steps):
        idx = torch.randint(0, config.vocab_size, (4, config.block_size))
        targets = torch.roll(idx, -1, dims=1)
        logits, loss = model(idx, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
