"""interp: sycophancy and cross-lingual bias, from logits to the residual stream, on local checkpoints.

The public names are imported lazily (PEP 562) so that `import interp.errors` (which the
torch-free layers `cache`, `analyses`, `probes` use) does not import torch.
"""
from importlib import import_module

__version__ = "0.1.0"

_LAZY = {
    "errors": ("interp.errors", None),
    "LoadedModel": ("interp.loading", "LoadedModel"),
    "load": ("interp.loading", "load"),
    "wrap": ("interp.wrapping", "wrap"),
    "steering": ("interp.runner.steering", "steering"),
    "Steering": ("interp.runner.steering", "Steering"),
    "ContinuationScores": ("interp.runner.scoring", "ContinuationScores"),
    "OptionScores": ("interp.runner.scoring", "OptionScores"),
    "ScoringConfig": ("interp.runner.scoring", "ScoringConfig"),
    "score_continuations": ("interp.runner.scoring", "score_continuations"),
    "score_options": ("interp.runner.scoring", "score_options"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'interp' has no attribute {name!r}") from None
    mod = import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
