"""The `torchao-*` backends: torchao's float8 training (`convert_to_float8_training`) with its tensorwise and rowwise
recipes. The layers converted are the ones `te_convert.plan_conversion(rule="torch")` marks `convert` (the lm-head,
embeddings and linears that break the `% 16` rule stay in BF16); the plan becomes torchao's `module_filter_fn`.
torchao is imported lazily and passed in, so the logic is testable with a fake package where torchao is absent.
"""
import importlib

RECIPES = ("tensorwise", "rowwise")
MIN_VERSION = (0, 10)  # Float8LinearConfig.from_recipe_name with "tensorwise" / "rowwise"

_CACHE = {}


def _version_tuple(text):
    out = []
    for part in str(text or "").split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out) or None


def load_torchao(force=False):
    """Import torchao's float8 training API once. Returns dict: installed, version, error, convert, config_cls."""
    if _CACHE and not force:
        return _CACHE
    info = {"installed": False, "version": None, "error": None, "convert": None, "config_cls": None}
    try:
        root = importlib.import_module("torchao")
    except ImportError as exc:
        info["error"] = "torchao not installed (%s)" % exc
    except Exception as exc:  # a broken install, or one built for another torch
        info.update(installed=True, error="torchao is installed but failed to import: %s: %s" % (type(exc).__name__, exc))
    else:
        info["installed"] = True
        info["version"] = getattr(root, "__version__", None)
        try:
            f8 = importlib.import_module("torchao.float8")
            info["convert"] = f8.convert_to_float8_training
            info["config_cls"] = f8.Float8LinearConfig
            if not hasattr(info["config_cls"], "from_recipe_name"):
                raise AttributeError("Float8LinearConfig.from_recipe_name is missing")
        except Exception as exc:
            info.update(convert=None, config_cls=None,
                        error="torchao %s has no usable float8 training API (needs torchao >= %d.%d): %s" % (
                            info["version"], MIN_VERSION[0], MIN_VERSION[1], exc))
    _CACHE.clear()
    _CACHE.update(info)
    return _CACHE


def env_info(info):
    """The part of load_torchao()'s answer that the env event carries."""
    return {"installed": info["installed"], "version": info["version"], "error": info["error"],
            "float8_training": info["convert"] is not None}


def unavailable_reason(info):
    """None when the torchao backends can run, else the sentence that says why not."""
    if info.get("convert") is not None:
        return None
    return info.get("error") or "torchao not installed"


def module_filter(plan):
    """torchao's module_filter_fn(module, fqn) from a conversion plan: True exactly for the planned linears."""
    allowed = frozenset(i["name"] for i in plan if i["kind"] == "linear" and i["action"] == "convert")

    def module_filter_fn(module, fqn):
        return fqn in allowed

    module_filter_fn.allowed = allowed
    return module_filter_fn


def recipe_text(recipe):
    if recipe not in RECIPES:
        raise ValueError("unknown torchao float8 recipe %r (known: %s)" % (recipe, ", ".join(RECIPES)))
    return "torchao Float8LinearConfig.from_recipe_name(%r)" % recipe


def convert(model, info, recipe, plan):
    """Swap the planned nn.Linear layers for torchao Float8Linear with the named recipe. Returns the names swapped."""
    text = recipe_text(recipe)
    config = info["config_cls"].from_recipe_name(recipe)
    filt = module_filter(plan)
    info["convert"](model, module_filter_fn=filt, config=config)
    return sorted(filt.allowed), text
