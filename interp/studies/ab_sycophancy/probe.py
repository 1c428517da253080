"""A/B probe targets from one cached unit (no model), on the rows read in the given order:
matching (logistic: the matching answer has the largest log-likelihood), logodds (ridge:
logp_match - logp_not, the item map's value)."""

from __future__ import annotations

import numpy as np

from cache.store import Unit
from interp.core.errors import ConfigError

TARGET_KINDS = {"matching": "logistic", "logodds": "ridge"}


def extract(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores = unit.tables["scores"]
    X = unit.arrays["resid"]
    if len(scores) != len(X):
        raise ConfigError(f"{unit.path}: {len(scores)} score rows but {len(X)} residual rows")
    given = (scores["order"] == "given").to_numpy()
    rows = scores[given]
    if target == "matching":
        y = rows["matching_top"].astype(bool).to_numpy(float)
    else:
        y = (rows["logp_match"] - rows["logp_not"]).to_numpy(float)
    return X[given], y, rows["item_id"].to_numpy()
