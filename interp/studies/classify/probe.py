"""Classify probe targets from one cached unit (no model): sycophantic (logistic: the bank's
binary label, from the unit's binary-task rows; the collapsed five-level label if absent), five_index (ridge: gold label 0..4 on the Invalidation..Escalation scale); rows =
five-class prompts in the given order."""

from __future__ import annotations

import numpy as np

from analyses.classify_metrics import FIVE_LABELS
from cache.store import Unit
from interp.core.errors import ConfigError

TARGET_KINDS = {"sycophantic": "logistic", "five_index": "ridge"}


def extract(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if "resid_five_given" not in unit.arrays:
        raise ConfigError(f"{unit.path}: no five-class residuals (array resid_five_given)")
    X = unit.arrays["resid_five_given"]
    preds = unit.tables["predictions"]
    rows = preds[(preds["task"] == "five") & (preds["order"] == "given")].reset_index(drop=True)
    gold = rows["gold"].astype(str)
    idx = gold.map({name: i for i, name in enumerate(FIVE_LABELS)}).to_numpy(float)
    y = (idx >= 2).astype(float) if target == "sycophantic" else idx
    binary = preds[(preds["task"] == "binary") & (preds["order"] == "given")]
    if target == "sycophantic" and len(binary):
        # the bank's binary label (annotated separately in BenSyc) when the unit holds it;
        # the collapsed five-level label only as a fallback
        by_item = binary.drop_duplicates("item_id").set_index("item_id")["gold"].astype(str)
        y = rows["item_id"].map(by_item).astype(float).to_numpy()
    return X, y, rows["item_id"].to_numpy()
