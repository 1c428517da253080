"""Probe datasets straight from the HDF5 cache: residual rows, targets, item groups.

No model is loaded here: everything comes from cache units written by the studies.
Targets per study (kind: ridge = continuous, logistic = binary):
  pressure  flipped (logistic, p_planted < 0.5), logodds (ridge), p_planted (ridge),
            item_map (ridge: the item's opposing-opinion map value, constant within item),
            planted (logistic: which verdict was planted; a control the residual must carry)
  classify  sycophantic (logistic: gold binary label), five_index (ridge: gold label 0..4 on
            the Invalidation..Escalation scale); rows = five-class prompts in the given order
  cloze     delta (ridge), stereotype_preferred (logistic, delta > 0); rows = items, residual at
            the context position before the completion
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cache.store import Store, Unit, read_unit
from interp.errors import ConfigError

TARGETS = {
    "pressure": {"flipped": "logistic", "logodds": "ridge", "p_planted": "ridge", "item_map": "ridge",
                 "planted": "logistic"},
    "classify": {"sycophantic": "logistic", "five_index": "ridge"},
    "cloze": {"delta": "ridge", "stereotype_preferred": "logistic"},
}
FIVE = ["Invalidation", "Neutral", "Support", "Validation", "Escalation"]


@dataclass
class ProbeData:
    checkpoint: str
    bank: str
    layer: int
    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    kind: str


def _pressure(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        from analyses.pressure_metrics import item_maps

        maps = item_maps(slot.assign(readout="slot"))
        per_item = maps[maps["turn_kind"] == "opinion"].set_index("item_id")["map_value"]
        y = slot["item_id"].map(per_item).to_numpy(float)
    return X, y, slot["item_id"].to_numpy()


def _classify(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if "resid_five_given" not in unit.arrays:
        raise ConfigError(f"{unit.path}: no five-class residuals (array resid_five_given)")
    X = unit.arrays["resid_five_given"]
    preds = unit.tables["predictions"]
    rows = preds[(preds["task"] == "five") & (preds["order"] == "given")].reset_index(drop=True)
    gold = rows["gold"].astype(str)
    idx = gold.map({name: i for i, name in enumerate(FIVE)}).to_numpy(float)
    y = (idx >= 2).astype(float) if target == "sycophantic" else idx
    binary = preds[(preds["task"] == "binary") & (preds["order"] == "given")]
    if target == "sycophantic" and len(binary):
        # the bank's binary label (annotated separately in BenSyc) when the unit holds it;
        # the collapsed five-level label only as a fallback
        by_item = binary.drop_duplicates("item_id").set_index("item_id")["gold"].astype(str)
        y = rows["item_id"].map(by_item).astype(float).to_numpy()
    return X, y, rows["item_id"].to_numpy()


def _cloze(unit: Unit, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from analyses.cloze_metrics import add_delta, canonical_loss

    raw = unit.tables["scores"]
    loss = canonical_loss(str(raw["loss"].iloc[0])) if "loss" in raw and len(raw) else "token_mean"
    scores = add_delta(raw, loss=loss)  # the unit's own loss (template cloze_v1: byte_mean)
    X = unit.arrays["resid"][:, 0, :]  # all completions share the context position
    delta = scores["delta"].to_numpy(float)
    y = delta if target == "delta" else (delta > 0).astype(float)
    return X, y, scores["prompt_id"].astype(str).to_numpy()


_ADAPTERS = {"pressure": _pressure, "classify": _classify, "cloze": _cloze}


def probe_datasets(out: Path, study: str, target: str, *, layer: int | None = None) -> list[ProbeData]:
    """One dataset per cached unit of `study` (and `layer`, if given)."""
    if study not in TARGETS:
        raise ConfigError(f"unknown study {study!r} (choose one of {', '.join(TARGETS)})")
    if target not in TARGETS[study]:
        raise ConfigError(f"unknown target {target!r} for {study} (choose one of {', '.join(TARGETS[study])})")
    paths = Store(Path(out) / "cache").units(study)
    if not paths:
        raise ConfigError(f"{out}: no cached {study} units (run `interp sweep ... --study {study} --out {out}`)")
    data = []
    for path in paths:
        unit = read_unit(path)
        if layer is not None and int(unit.attrs["layer"]) != layer:
            continue
        X, y, groups = _ADAPTERS[study](unit, target)
        ok = np.isfinite(y) & np.isfinite(X.astype(np.float32)).all(axis=1)
        data.append(ProbeData(checkpoint=str(unit.attrs["checkpoint"]), bank=str(unit.attrs["bank"]),
                              layer=int(unit.attrs["layer"]), X=X[ok].astype(np.float64), y=y[ok],
                              groups=groups[ok], kind=TARGETS[study][target]))
    if not data:
        raise ConfigError(f"{out}: no cached {study} units at layer {layer}")
    return data
