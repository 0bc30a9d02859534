"""Byte-level batches of real text for the A/B runs on the real projects (bench/realproj/README.md).

The text is this repository's own prose (README.md and the Markdown under docs/ and bench/, results excluded), read as
bytes: real English with code in it, never random tokens, and the same on every machine that holds this checkout. The last
tenth is held out: batch indices at or above runner.EVAL_BATCH_BASE (1 000 000) read only from it, so the eval loss is
over text the steps never saw. batch(step) is a pure function of (step, seed): both arms of an A/B get the same batch
at the same step.

On CUDA the rows go through pinned memory with non_blocking=True, as both training scripts do (nanoGPT's get_batch:
`x.pin_memory().to(device, non_blocking=True)`; llama2.c: a pinned DataLoader): a copy from pageable memory makes the
host wait for the GPU at every step (CUDA syncs the stream before a pageable host-to-device copy), and the forward
that follows is then paced by the host, which is not how these scripts train (measured: 14-20 % of each eager step was
GPU idle time with the pageable copy, bench/results/h200/2026-12-04-pinned).
"""
import os

import torch

EVAL_BASE = 1000000


def _root():
    here = os.path.dirname(os.path.realpath(__file__))
    d = here
    for _ in range(8):
        if os.path.isfile(os.path.join(d, "bench", "benchmark.py")):
            return d
        d = os.path.dirname(d)
    raise RuntimeError("pl_workload: no Precision Lens checkout above %s (bench/benchmark.py not found)" % here)


def corpus_bytes(min_bytes=1 << 20):
    root = _root()
    files = []
    for top in ("README.md", "docs", "bench"):
        p = os.path.join(root, top)
        if os.path.isfile(p):
            files.append(p)
        elif os.path.isdir(p):
            for dirpath, dirnames, names in os.walk(p):
                dirnames[:] = sorted(d for d in dirnames if d not in ("results", "__pycache__", "node_modules"))
                files.extend(os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".md"))
    data = b"".join(open(f, "rb").read() for f in files)
    if len(data) < 4096:
        raise RuntimeError("pl_workload: only %d bytes of text under %s" % (len(data), root))
    while len(data) < min_bytes:  # a short checkout: repeat it (the held-out tail stays disjoint below)
        data = data + b"\n" + data
    return data


class TextBatches:
    """batch(step) -> (x, y), int64 [batch, seq] on device; y is x shifted by one byte."""

    def __init__(self, batch, seq, device, seed=1234):
        data = corpus_bytes()
        t = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int64)
        cut = int(len(t) * 0.9)
        self.train, self.held = t[:cut], t[cut:]
        if len(self.held) <= seq + 1:
            raise RuntimeError("pl_workload: %d held-out bytes, fewer than one sequence of %d" % (len(self.held), seq))
        self.batch, self.seq, self.device, self.seed = batch, seq, device, seed

    def __call__(self, step):
        src = self.held if step >= EVAL_BASE else self.train
        g = torch.Generator().manual_seed(self.seed * 1000003 + step)
        starts = torch.randint(0, len(src) - self.seq - 1, (self.batch,), generator=g)
        rows = torch.stack([src[s:s + self.seq + 1] for s in starts.tolist()])
        x, y = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
        if str(self.device).startswith("cuda"):
            x, y = x.pin_memory(), y.pin_memory()
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)


def width_depth(default_width=768, default_layers=12):
    return int(os.environ.get("PL_WIDTH", default_width)), int(os.environ.get("PL_LAYERS", default_layers))
