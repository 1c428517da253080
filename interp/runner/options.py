"""Scoring options: importable without torch, so configs, plans and reports need no model stack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from interp.core.options import opt

if TYPE_CHECKING:
    from interp.runner.engine import EngineConfig

VariantMode = Literal["exact", "space", "space_case"]

# part of a sampled unit's identity: replies depend on how seeds are derived and drawn
# (interp.runner.generate)
SAMPLER = "tree-batched-v2"

# ScoringConfig.tie_guard's default; why 0.05 and what it guarantees: interp.runner.precision
TIE_GUARD = 0.05


@dataclass(frozen=True, kw_only=True)
class ScoringConfig:
    """How to score. Batch size, memory share and threads never change the numbers, only the speed."""

    batch_size: int = 64  # tree nodes (rows) per forward at most
    max_batch_tokens: int = 4096  # rows x padded new tokens per forward at most
    prefix_reuse: bool = True
    # shared segments shorter than this are recomputed per child instead of cached (1: never)
    min_shared_prefix: int = 1
    min_saved_tokens: int = 0  # deprecated and ignored (the prefix tree runs level by level)
    memory_fraction: float = 0.5  # share of the device's free memory a forward may plan for
    # surface forms an option word may take as the next token: "space_case" sums the
    # probability of {word, Word, word-lowercase} x {no space, leading space}
    variants: VariantMode = "space_case"
    capture_all_positions: bool = False
    progress: bool = False
    # numbers-changing in a switchable reduced precision only (then part of the unit identity,
    # sweeps.plan.settings_hash); float32 ignores it. Why 0.05: interp.runner.precision.TIE_GUARD
    tie_guard: float = opt(
        TIE_GUARD,
        "mixed-bf16, float32-medium, mixed-bf16-medium: re-score in float32 every prompt whose top two choices "
        "lie closer than this in probability, so that no verdict flips (0: off)",
    )
    # speed only, like batch_size: not in the unit identity
    packed: bool = opt(
        True,
        "packed forwards where the model supports them (no Linear computes padding); --no-packed: always padded",
        flag="--packed/--no-packed",
    )

    def __post_init__(self) -> None:
        if not 0 <= self.tie_guard < 1:
            from interp.core.errors import ConfigError

            raise ConfigError(f"--tie-guard must be in [0, 1) (a probability margin; got {self.tie_guard!r})")

    def engine(self) -> "EngineConfig":
        from interp.runner.engine import EngineConfig  # torch: only when scoring actually runs

        return EngineConfig(
            batch_size=self.batch_size,
            max_batch_tokens=self.max_batch_tokens,
            prefix_reuse=self.prefix_reuse,
            min_shared_prefix=self.min_shared_prefix,
            min_saved_tokens=self.min_saved_tokens,
            memory_fraction=self.memory_fraction,
            capture_all_positions=self.capture_all_positions,
            progress=self.progress,
            packed=None if self.packed else False,
        )
