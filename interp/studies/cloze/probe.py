"""Cloze probe targets from one cached unit (no model): delta (ridge), stereotype_preferred
(logistic, delta > 0); rows = items, residual at the context position before the completion."""

from __future__ import annotations

import numpy as np

from analyses.cloze_metrics import add_delta, canonical_loss
from cache.store import Unit

TARGET_KINDS = {"delta": "ridge", "stereotype_preferred": "logistic"}


def extract(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from interp.studies.cloze.unit_loss import unit_scores

    raw = unit_scores(unit)
    loss = canonical_loss(str(raw["loss"].iloc[0])) if "loss" in raw and len(raw) else "token_mean"
    scores = add_delta(raw, loss=loss)  # the unit's own loss (template cloze_v1: sum)
    X = unit.arrays["resid"][:, 0, :]  # all completions share the context position
    delta = scores["delta"].to_numpy(float)
    y = delta if target == "delta" else (delta > 0).astype(float)
    return X, y, scores["prompt_id"].astype(str).to_numpy()
