"""Byte-level batches of real text for the A/B runs on the real projects (bench/realproj/README.md).

The text, read as bytes, whole files in a fixed order: this repository's own prose (README.md and the Markdown under
docs/ and bench/, results excluded), then the Python standard library's source of the interpreter that runs (code,
comments and docstrings people wrote), up to MAX_BYTES: real text with code in it, never random tokens. The files of
the last tenth are held out: batch indices at or above EVAL_BASE (1 000 000) read only from them, so the eval loss is
over text the steps never saw. Only the training part is ever repeated, and only where the text is short.
(Until 2026-12-05 the 256 KB of prose alone was repeated to 1 MB before the split, so the "held-out" tail was a copy
of trained text and the eval loss fell to 0.13-0.16 nats by 300 steps: memorisation, not a held-out loss.)
batch(step) is a pure function of (step, seed) on one interpreter: both arms of an A/B get the same batch at the same
step (another Python version reads another standard library).

On CUDA the rows go through pinned memory with non_blocking=True, as both training scripts do (nanoGPT's get_batch:
`x.pin_memory().to(device, non_blocking=True)`; llama2.c: a pinned DataLoader): a copy from pageable memory makes the
host wait for the GPU at every step (CUDA syncs the stream before a pageable host-to-device copy), and the forward
that follows is then paced by the host, which is not how these scripts train (measured: 14-20 % of each eager step was
GPU idle time with the pageable copy, bench/results/h200/2026-12-04-pinned).
"""
import os
import sysconfig

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


MAX_BYTES = 16 << 20
HELD_OUT = 0.1
_SKIP_DIRS = {"results", "__pycache__", "node_modules", "site-packages", "dist-packages", "test", "tests", "idlelib"}


def _walk(top, suffix):
    if os.path.isfile(top):
        yield top
        return
    for dirpath, dirnames, names in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for n in sorted(names):
            if n.endswith(suffix):
                yield os.path.join(dirpath, n)


def corpus_files(max_bytes=MAX_BYTES):
    """[(path, bytes)] in reading order: the repository's prose, then the standard library's .py files, to max_bytes."""
    root = _root()
    tops = [(os.path.join(root, t), ".md") for t in ("README.md", "docs", "bench")]
    tops.append((sysconfig.get_paths()["stdlib"], ".py"))
    out, total = [], 0
    for top, suffix in tops:
        if not os.path.exists(top):
            continue
        for path in _walk(top, suffix):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if not data:
                continue
            out.append((path, data))
            total += len(data)
            if total >= max_bytes:
                return out
    return out


def split_corpus(files, held_out=HELD_OUT, min_train=1 << 20):
    """(train bytes, held-out bytes, facts): whole files, the last tenth held out; the training part alone repeated
    to min_train bytes where the text is short."""
    total = sum(len(d) for _, d in files)
    if total < 4096:
        raise RuntimeError("pl_workload: only %d bytes of text found" % total)
    cut, size = len(files), 0
    while cut > 1 and size < total * held_out:  # whole files from the end, at least one left to train on
        cut -= 1
        size += len(files[cut][1])
    kept, held = files[:cut], files[cut:]
    train = b"\n".join(d for _, d in kept)
    repeats = max(1, -(-min_train // len(train)))
    facts = {"train_bytes": len(train), "held_bytes": size, "train_files": len(kept), "held_files": len(held),
             "repeats": repeats, "held_paths": [p for p, _ in held]}
    return (b"\n".join([train] * repeats), b"\n".join(d for _, d in held), facts)


class TextBatches:
    """batch(step) -> (x, y), int64 [batch, seq] on device; y is x shifted by one byte."""

    def __init__(self, batch, seq, device, seed=1234):
        train, held, self.facts = split_corpus(corpus_files())
        self.train = torch.frombuffer(bytearray(train), dtype=torch.uint8).to(torch.int64)
        self.held = torch.frombuffer(bytearray(held), dtype=torch.uint8).to(torch.int64)
        if len(self.held) <= seq + 1:
            raise RuntimeError("pl_workload: %d held-out bytes, fewer than one sequence of %d" % (len(self.held), seq))
        self.batch, self.seq, self.device, self.seed = batch, seq, device, seed

    def describe(self):
        f = self.facts
        return "%.1f MB of text to train on (%d files%s), %.1f MB held out (%d files)" % (
            f["train_bytes"] / 1e6, f["train_files"], ", repeated %d times" % f["repeats"] if f["repeats"] > 1 else "",
            f["held_bytes"] / 1e6, f["held_files"])

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
