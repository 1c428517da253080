"""interp: sycophancy and cross-lingual bias, from logits to the residual stream, on local checkpoints.

The public names below are loaded on first use, so `import interp.core` (and the cache,
analyses, probes and report paths built on it) never imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from interp.core import moved as _moved
from interp.core.version import __version__

_moved.install()  # old module paths (interp.loading, ...) keep working with a DeprecationWarning

_LAZY = {
    "LoadedModel": ("interp.model.loading", "LoadedModel"),
    "load": ("interp.model.loading", "load"),
    "wrap": ("interp.integrations.wrapping", "wrap"),
    "steering": ("interp.runner.steering", "steering"),
    "Steering": ("interp.runner.steering", "Steering"),
    "ContinuationScores": ("interp.runner.scoring", "ContinuationScores"),
    "OptionScores": ("interp.runner.scoring", "OptionScores"),
    "ScoringConfig": ("interp.runner.scoring", "ScoringConfig"),
    "score_continuations": ("interp.runner.scoring", "score_continuations"),
    "score_options": ("interp.runner.scoring", "score_options"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'interp' has no attribute {name!r}")
    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)
