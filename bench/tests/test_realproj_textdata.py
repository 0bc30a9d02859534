"""bench/realproj/textdata.py: the real-text batches of issue 21's A/B runs (the projects themselves are not in git)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "realproj"))
import textdata  # noqa: E402


def _inside(row, src):
    n = len(row)
    starts = (src[:len(src) - n + 1] == row[0]).nonzero().flatten().tolist()
    return any(torch.equal(src[s:s + n], row) for s in starts)


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
    assert len(tb.train) > 8 * len(tb.held) > 0
