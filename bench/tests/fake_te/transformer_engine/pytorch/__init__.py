"""Fake transformer_engine.pytorch: te.Linear/LayerNorm/RMSNorm are torch modules with TE's constructor
signatures; autocast records the recipes it was entered with."""
import contextlib
import os
import warnings

import torch
import torch.nn as nn

AUTOCAST_LOG = []


class Linear(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, params_dtype=None, device="cuda", init_method=None,
                 **kwargs):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=params_dtype)

    def forward(self, x):
        if AUTOCAST_LOG and os.environ.get("FAKE_TE_MARK"):
            AUTOCAST_LOG.append("linear")
        return super().forward(x)


class LayerNorm(nn.LayerNorm):
    def __init__(self, normalized_shape, eps=1e-5, sequence_parallel=None, params_dtype=None,
                 zero_centered_gamma=False, device="cuda", dtype=None):
        super().__init__(normalized_shape, eps=eps, device=device, dtype=dtype or params_dtype)


class RMSNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, sequence_parallel=None, params_dtype=None,
                 zero_centered_gamma=False, device="cuda", dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape, device=device, dtype=dtype or params_dtype))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


@contextlib.contextmanager
def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None):
    AUTOCAST_LOG.append(("autocast", type(recipe).__name__))
    yield


@contextlib.contextmanager
def fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None):
    warnings.warn("fp8_autocast is deprecated and will be removed in a future release. Use autocast(...)",
                  DeprecationWarning)
    AUTOCAST_LOG.append(("fp8_autocast", type(fp8_recipe).__name__))
    yield


def is_fp8_available(return_reason=False):
    ok = os.environ.get("FAKE_TE_FP8", "1") == "1"
    reason = "" if ok else "Device compute capability 8.9 or higher required for FP8 execution."
    return (ok, reason) if return_reason else ok
