"""A/B workload for karpathy/llama2.c's model.py as published (bench/realproj/README.md): not part of llama2.c.

Transformer(ModelArgs(...)) at PL_WIDTH x PL_LAYERS (head size 128, no GQA, vocab 32000, multiple_of 256 as
llama2.c's defaults, dropout 0), FP32 parameters as train.py builds them; forward(tokens, targets) keeps the loss in
last_loss, which is the step's loss.
"""
from model import ModelArgs, Transformer
from textdata import TextBatches, width_depth


def _loss(model, batch):
    model(batch[0], batch[1])
    inner = getattr(model, "_orig_mod", model)  # under torch.compile the loss is on the wrapped module
    return inner.last_loss


def build(batch=8, seq=1024, device="cuda", seed=1234):
    width, layers = width_depth(288, 6)
    heads = max(1, width // 128)
    args = ModelArgs(dim=width, n_layers=layers, n_heads=heads, n_kv_heads=heads, vocab_size=32000, multiple_of=256,
                     max_seq_len=seq, dropout=0.0)
    model = Transformer(args)
    text = TextBatches(batch, seq, device, seed)
    return {"model": model, "batch_factory": text, "loss_fn": _loss,
            "tokens_per_step": batch * seq,
            "description": "llama2.c Transformer %d x %d, %d x %d byte tokens of real text (%s)" % (layers, width, batch, seq, text.describe())}
