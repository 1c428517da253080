"""Cloze probe targets from one cached unit (no model): delta (ridge), stereotype_preferred
(logistic, delta > 0); rows = items, residual at the context position before the completion."""
from __future__ import annotations

import numpy as np

from analyses.cloze_metrics import add_delta
from cache.store import Unit

TARGET_KINDS = {"delta": "ridge", "stereotype_preferred": "logistic"}


def extract(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores = add_delta(unit.tables["scores"])
    X = unit.arrays["resid"][:, 0, :]  # all completions share the context position
    delta = scores["delta"].to_numpy(float)
    y = delta if target == "delta" else (delta > 0).astype(float)
    return X, y, scores["prompt_id"].astype(str).to_numpy()
