"""Fake transformer_engine.pytorch.distributed.checkpoint: as TE's, the recompute in the backward runs inside the FP8
autocast state the forward ran in (TE re-enters autocast(enabled=fp8, recipe=...) around it); TE's own keywords are
taken off, the rest go to torch's checkpoint. Each call is recorded in CALLS with the FP8 state it saw."""
import torch.utils.checkpoint


def checkpoint(function, *args, **kwargs):
    from . import CALLS, _FP8, _region
    use_reentrant = kwargs.pop("use_reentrant", True)
    for name in ("distribute_saved_activations", "tp_group", "get_rng_state_tracker"):
        kwargs.pop(name, None)
    # TE hands every other keyword but context_fn / determinism_check / debug to the function: torch's
    # preserve_rng_state would reach it and fail there.
    assert "preserve_rng_state" not in kwargs, "te.distributed.checkpoint passes preserve_rng_state to the function"
    fp8 = bool(_FP8 and _FP8[-1])
    CALLS.append(("checkpoint", fp8))

    def run(*a, **kw):
        with _region("checkpoint-recompute", fp8, None):
            return function(*a, **kw)

    return torch.utils.checkpoint.checkpoint(run, *args, use_reentrant=use_reentrant, **kwargs)
