"""convert_to_float8_training / Float8LinearConfig.from_recipe_name as torchao 0.18 names them."""
import torch
import torch.nn as nn
import torch.nn.functional as F

RECIPE_NAMES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
CONVERT_LOG = []


class Float8LinearConfig(object):
    def __init__(self, recipe="tensorwise"):
        self.recipe = recipe

    @staticmethod
    def from_recipe_name(recipe_name):
        assert recipe_name in RECIPE_NAMES, "recipe_name %s not in valid names %s" % (recipe_name, list(RECIPE_NAMES))
        return Float8LinearConfig(recipe_name)


class Float8Linear(nn.Linear):
    """Keeps the original parameters (as torchao's from_float does) and its config. The forward reads the recipe as
    torchao's does (a per-tensor or a per-row scale of the input, here only divided out again: fp32 math), so that
    torch.compile traces and guards a tensorwise and a rowwise layer apart."""

    @classmethod
    def from_float(cls, mod, config):
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = mod.in_features, mod.out_features
        new.weight, new.bias = mod.weight, mod.bias
        new.config = config
        return new

    def forward(self, x):
        if self.config.recipe == "tensorwise":
            scale = x.detach().abs().amax().clamp(min=1e-12)
        else:
            scale = x.detach().abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
        return F.linear(x / scale, self.weight, self.bias) * scale


def convert_to_float8_training(module, *, module_filter_fn=None, config=None):
    config = config or Float8LinearConfig()
    swapped = []
    for fqn, mod in list(module.named_modules()):
        if fqn and isinstance(mod, nn.Linear) and not isinstance(mod, Float8Linear) and \
                (module_filter_fn is None or module_filter_fn(mod, fqn)):
            parent = module.get_submodule(fqn.rsplit(".", 1)[0]) if "." in fqn else module
            setattr(parent, fqn.rsplit(".", 1)[-1], Float8Linear.from_float(mod, config))
            swapped.append(fqn)
    CONVERT_LOG.append((config.recipe, swapped))
    return module


def _register_test_backend():
    """A torch.compile backend for the tests of bench/tools/gemm_table.py's static fallback: it refuses any graph with
    a dynamic (symbolic) size, as torchao's tensor subclasses have done, and runs the others as aot_eager would."""
    try:
        from torch._dynamo import lookup_backend, register_backend
    except Exception:
        return

    def symbolic(v):
        if isinstance(v, torch.SymInt):
            return True
        return isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in v.shape)

    def no_dynamic(gm, example_inputs):
        if any(symbolic(n.meta.get("example_value")) for n in gm.graph.nodes if n.op == "placeholder"):
            raise RuntimeError("pl_test_no_dynamic: a dynamic shape (fake torchao's refusal, for the tests)")
        return lookup_backend("aot_eager")(gm, example_inputs)

    try:
        register_backend(no_dynamic, name="pl_test_no_dynamic")
    except Exception:  # registered already (this module imported twice in one process)
        pass


if hasattr(torch, "compile"):
    _register_test_backend()
