"""interp: sycophancy and cross-lingual bias, from logits to the residual stream, on local checkpoints."""
from interp import errors
from interp.loading import LoadedModel, load
from interp.runner.scoring import (
    ContinuationScores,
    OptionScores,
    ScoringConfig,
    score_continuations,
    score_options,
)

__version__ = "0.1.0"

__all__ = [
    "ContinuationScores",
    "LoadedModel",
    "OptionScores",
    "ScoringConfig",
    "errors",
    "load",
    "score_continuations",
    "score_options",
]
