"""Pressure probe targets and `interp predict` inputs, read from one cached unit (no model).

Targets (kind: ridge = continuous, logistic = binary): flipped (logistic, p_planted < 0.5),
logodds (ridge), p_planted (ridge), item_map (ridge: the item's opposing-opinion map value,
constant within item), planted (logistic: which verdict was planted; a control the residual
must carry).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyses.pressure_metrics import item_maps, unpressured_profile
from cache.store import Unit
from interp.core.errors import ConfigError
from interp.studies.base import PredictInputs

TARGET_KINDS = {
    "flipped": "logistic",
    "logodds": "ridge",
    "p_planted": "ridge",
    "item_map": "ridge",
    "planted": "logistic",
}


def extract(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    trials = unit.tables["trials"]
    slot = trials[trials["readout"] == "slot"].reset_index(drop=True)
    X = unit.arrays["resid"]
    if len(slot) != len(X):
        raise ConfigError(f"{unit.path}: {len(slot)} slot trials but {len(X)} residual rows")
    p = slot["p_planted"].to_numpy(float)
    if target == "flipped":
        y = (p < 0.5).astype(float)
    elif target in ("logodds", "p_planted"):
        q = np.clip(p, 1e-6, 1 - 1e-6)
        y = np.log(q / (1 - q)) if target == "logodds" else p
    elif target == "planted":
        y = (slot["planted"] == slot["planted"].iloc[0]).to_numpy(float)
    else:  # item_map
        maps = item_maps(slot.assign(readout="slot"))
        per_item = maps[maps["turn_kind"] == "opinion"].set_index("item_id")["map_value"]
        y = slot["item_id"].map(per_item).to_numpy(float)
    return X, y, slot["item_id"].to_numpy()


READOUT_TRIALS = ("pressured", "all")


def readout_trial_mask(trials: pd.DataFrame, readout_trials: str = "pressured") -> np.ndarray:
    """Which slot trials feed a source's per-item readout features (mean residual per item).

    "pressured" (default): the turns the item map measures, i.e. the opposing stated opinion
    (turn_kind opinion, side oppose) and the bare challenges; the readout then describes the
    model's state under the pressure whose effect the map records. "all": every trial of the
    item, agreeing opinions and neutral fillers included (the behaviour before this option).
    """
    if readout_trials not in READOUT_TRIALS:
        raise ConfigError(f"readout_trials must be one of {', '.join(READOUT_TRIALS)}, got {readout_trials!r}")
    if readout_trials == "all":
        return np.ones(len(trials), dtype=bool)
    kind = trials["turn_kind"].astype(str)
    side = trials["turn_side"].fillna("").astype(str)
    return ((kind == "opinion") & (side == "oppose") | (kind == "challenge")).to_numpy()


def predict_inputs(
    unit: Unit, *, turn_kind: str, with_readout: bool, readout_trials: str = "pressured"
) -> PredictInputs:
    trials = unit.tables["trials"]
    slot = trials[trials["readout"] == "slot"].reset_index(drop=True)
    m = item_maps(slot)
    readout = None
    if with_readout:
        # per-item mean residual over the chosen trials (readout_trial_mask): the source's state
        resid = unit.arrays["resid"]
        if len(resid) != len(slot):
            raise ConfigError(f"{unit.path}: {len(slot)} slot trials but {len(resid)} residual rows")
        keep = readout_trial_mask(slot, readout_trials)
        readout = pd.DataFrame(resid[keep].astype(np.float64)).groupby(slot["item_id"].to_numpy()[keep]).mean()
    return PredictInputs(
        item_map=m[m["turn_kind"] == turn_kind].set_index("item_id")["map_value"],
        profile=unpressured_profile(slot),
        readout=readout,
    )
