"""A/B workload for karpathy/nanoGPT's model.py as published (bench/realproj/README.md): not part of nanoGPT.

GPT(GPTConfig(...)) at PL_WIDTH x PL_LAYERS (head size 128, vocab 50304 and bias=True as nanoGPT's defaults,
dropout 0), FP32 parameters as train.py builds them; forward(idx, targets) -> (logits, loss), the loss is the step's.
"""
from model import GPT, GPTConfig
from textdata import TextBatches, width_depth


def build(batch=8, seq=1024, device="cuda", seed=1234):
    width, layers = width_depth()
    cfg = GPTConfig(block_size=seq, vocab_size=50304, n_layer=layers, n_head=max(1, width // 128), n_embd=width,
                    dropout=0.0, bias=True)
    model = GPT(cfg)
    text = TextBatches(batch, seq, device, seed)
    return {"model": model, "batch_factory": text,
            "loss_fn": lambda m, b: m(b[0], b[1])[1], "tokens_per_step": batch * seq,
            "description": "nanoGPT GPT %d x %d, %d x %d byte tokens of real text (%s)" % (layers, width, batch, seq, text.describe())}
