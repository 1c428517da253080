"""Pressure study results from cached units: trials, summary with CIs, item maps, figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analyses.io import write_table
from analyses.pressure_metrics import (
    ITEM_MAP_COLUMNS,
    SUMMARY_COLUMNS,
    TRIAL_COLUMNS,
    add_trial_columns,
    capitulation,
    flip_direction,
    item_maps,
    pressure_summary,
    unpressured_profile,
)
from cache.store import Unit
from interp.studies.pressure.options import PressureOptions

# the metrics' trial columns, then logodds and flipped (gold follows with the rest, as it always has)
PRESSURE_TRIAL_COLUMNS = (*(c for c in TRIAL_COLUMNS if c != "gold"), "logodds", "flipped")
_TRIAL_SORT = ["checkpoint", "bank", "readout", "item_id", "planted", "turn_kind", "turn_side", "turn_variant"]


def pressure_tables(units: list[Unit]) -> tuple[pd.DataFrame, pd.DataFrame]:
    trials = pd.concat([u.tables["trials"] for u in units], ignore_index=True)
    first = pd.concat([u.tables["first_turn"] for u in units], ignore_index=True)
    trials["turn_side"] = trials["turn_side"].fillna("")
    return trials, first


def _with_logodds(trials: pd.DataFrame) -> pd.DataFrame:
    """All trials with logodds and flipped; a trial without a reading (no sampled reply parsed)
    stays in the table with empty values, where the metrics leave it out."""
    read = add_trial_columns(trials)
    keys = [c for c in _TRIAL_SORT if c in trials.columns and c in read.columns]
    return trials.merge(read[keys + ["logodds", "flipped"]], on=keys, how="left")


def analyze_pressure(units: list[Unit], results_dir: Path, cfg) -> dict[str, pd.DataFrame]:
    trials, first = pressure_tables(units)
    # the comprehension screen is this toolkit's choice, not the paper's: a parameter
    threshold = float((cfg.studies.get("pressure") or PressureOptions()).comprehension_threshold)
    summary = pressure_summary(trials, first, n_boot=cfg.n_boot, seed=cfg.seed, comprehension_threshold=threshold)
    summary["comprehension_threshold"] = threshold
    maps = item_maps(trials)
    profile = pressure_profiles(trials)
    caps = capitulation(trials)
    flips = flip_direction(trials)
    write_table(
        _with_logodds(trials), results_dir / "pressure_trials.csv", columns=PRESSURE_TRIAL_COLUMNS, sort=_TRIAL_SORT
    )
    write_table(
        summary, results_dir / "pressure_summary.csv", columns=SUMMARY_COLUMNS, sort=["checkpoint", "bank", "readout"]
    )
    write_table(
        maps,
        results_dir / "item_maps.csv",
        columns=ITEM_MAP_COLUMNS,
        sort=["checkpoint", "bank", "turn_kind", "item_id"],
    )
    write_table(caps, results_dir / "pressure_capitulation.csv")
    write_table(flips, results_dir / "pressure_flip_direction.csv")
    write_table(profile, results_dir / "pressure_profile.csv", sort=["checkpoint", "bank", "item_id", "reading"])
    return {"pressure_trials": trials, "pressure_summary": summary, "item_maps": maps, "pressure_profile": profile}


def pressure_profiles(trials: pd.DataFrame) -> pd.DataFrame:
    """Unpressured profiles of every (checkpoint, bank), long: checkpoint, bank, item_id, reading, value."""
    slot = trials[trials.get("readout", "slot") == "slot"] if "readout" in trials else trials
    frames = []
    for (ck, bank), df in slot.groupby(["checkpoint", "bank"], sort=True):
        wide = unpressured_profile(df)
        long = wide.rename_axis("item_id").reset_index().melt(id_vars="item_id", var_name="reading", value_name="value")
        long.insert(0, "bank", bank)
        long.insert(0, "checkpoint", ck)
        frames.append(long)
    return pd.concat(frames, ignore_index=True)
