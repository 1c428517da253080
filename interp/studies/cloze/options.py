"""Options of the cloze study: every field is an `interp sweep` flag and a config key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from interp.core.options import opt


@dataclass(frozen=True, kw_only=True)
class ClozeOptions:
    reference_language: str = opt("en", "cloze: language the others are compared with (statistics, parity, mediation)")
    mediation_outcome: Literal["delta", "delta_clipped"] = opt("delta", "cloze: outcome of the fertility mediation")
    cloze_loss: Literal["sum", "token_mean", "byte_mean", "mean"] | None = opt(
        None,
        "cloze: loss of delta, ABS, statistics and mediation (default: the template's, sum in cloze_v1: "
        "log-odds between the completions in nats; token_mean is the INCLUDE per-token reading, mean its "
        "earlier spelling; byte_mean divides by UTF-8 bytes and so depends on the script: 3 bytes per "
        "Indic character, 1 per Latin one)",
    )
