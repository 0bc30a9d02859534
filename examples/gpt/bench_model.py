"""The example GPT as a "my model" workload for the Precision Lens benchmark sidebar.

    python3 bench/benchmark.py --workspace examples/gpt --workload bench_model:gpt

The sidebar's "My model (module:function)" field takes `bench_model:gpt`. The benchmark calls `gpt(...)` once per
backend with the batch size, sequence length and device it runs with.
"""
import torch

from model import GPT, GPTConfig


def gpt(batch=8, seq=1024, device="cuda", seed=0):
    config = GPTConfig(block_size=seq, n_layer=12, n_head=12, n_embd=768)
    model = GPT(config).to(device)
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def batch_factory(step):
        # A learnable synthetic task: predict the next token of a repeating random pattern.
        pattern = torch.randint(0, config.vocab_size, (batch, 64), generator=generator)
        tokens = pattern.repeat(1, seq // 64 + 2)[:, : seq + 1].to(device)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def loss_fn(model, batch_):
        inputs, targets = batch_
        _, loss = model(inputs, targets)
        return loss

    return {
        "model": model,
        "batch_factory": batch_factory,
        "loss_fn": loss_fn,
        "high_precision": ["lm_head", "transformer.wte", "transformer.wpe"],
        "description": "examples/gpt: GPT-2 small shape (12 x 768), vocabulary 50304, tied lm-head",
    }
