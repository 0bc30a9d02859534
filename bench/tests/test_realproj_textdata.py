"""bench/realproj/textdata.py: the real-text batches of issue 21's A/B runs (the projects themselves are not in git)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "realproj"))
import textdata  # noqa: E402


_BYTES = {}


def _inside(row, src):
    """Whether the byte row occurs in src (bytes' own substring search; src converted once)."""
    key = (src.data_ptr(), len(src))
    if key not in _BYTES:
        _BYTES[key] = bytes(src.to(torch.uint8).tolist())
    return bytes(row.to(torch.uint8).tolist()) in _BYTES[key]


def test_batches_are_a_pure_function_of_the_step_and_shifted_by_one():
    tb = textdata.TextBatches(3, 64, "cpu", seed=5)
    x, y = tb(7)
    x2, y2 = textdata.TextBatches(3, 64, "cpu", seed=5)(7)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert x.shape == (3, 64) and x.dtype == torch.int64 and int(x.max()) < 256
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert not torch.equal(tb(8)[0], x)
    assert not torch.equal(textdata.TextBatches(3, 64, "cpu", seed=6)(7)[0], x)


def test_eval_batches_come_from_the_held_out_tail_only():
    tb = textdata.TextBatches(2, 32, "cpu")
    for step in (textdata.EVAL_BASE, textdata.EVAL_BASE + 3):
        x, y = tb(step)
        for r in range(2):
            assert _inside(torch.cat([x[r], y[r, -1:]]), tb.held)
    x, _ = tb(0)
    assert all(_inside(x[r], tb.train) for r in range(2))
    assert len(tb.train) > 4 * len(tb.held) > 0  # about a tenth, in whole files


def test_the_held_out_text_is_not_in_the_training_text():
    """Whole files are held out, and a short text repeats its training part only: until 2026-12-05 the prose alone was
    repeated before the split, and every "held-out" row was also a training row."""
    tb = textdata.TextBatches(4, 256, "cpu", seed=3)
    held = set(tb.facts["held_paths"])
    assert held and all(p not in held for p, _ in textdata.corpus_files()[:tb.facts["train_files"]])
    for step in range(textdata.EVAL_BASE, textdata.EVAL_BASE + 4):
        x, y = tb(step)
        for r in range(4):
            row = torch.cat([x[r], y[r, -1:]])
            assert _inside(row, tb.held) and not _inside(row, tb.train)
    # A short text: the training part is repeated, the held-out part is not copied into it.
    files = [("a%d" % i, bytes([65 + i]) * 1000) for i in range(10)]
    train, held_text, facts = textdata.split_corpus(files, min_train=50000)
    assert facts["repeats"] > 1 and held_text == b"J" * 1000 and b"J" not in train


def test_the_text_is_enough_for_a_loss_run_without_repeating():
    """A 200-step loss check of 8 x 2048 tokens reads 3.3 MB: the text should not be seen twice (one epoch or less)."""
    tb = textdata.TextBatches(1, 64, "cpu")
    assert tb.facts["repeats"] == 1 and tb.facts["train_bytes"] > 300 * 8 * 2048, tb.describe()
    assert "MB of text to train on" in tb.describe()
