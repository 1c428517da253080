"""OUT/results/precision.csv: per unit, what its reduced precision cost against float32.

A unit scored in a reduced precision carries the table `precision_sample` (its sampled
prompts re-scored in float32, interp.runner.precision); this summarizes it per unit
(analyses.precision) and warns, in the log and the report, where a unit exceeds the bounds.
Float32 sweeps write no precision.csv (and remove a stale one).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import pandas as pd

from analyses.io import write_table
from analyses.precision import (
    PRECISION_COLUMNS,
    SPEEDUP_FLOOR,
    TIMING_COLUMNS,
    below_floor,
    describe_bounds,
    describe_sweep,
    summarize_sample,
    sweep_summary,
    within_bounds,
)

PRECISION_FILE = "precision.csv"
PRECISION_TABLE = "precision_sample"
log = logging.getLogger("interp.sweep")


def precision_rows(units: Sequence) -> pd.DataFrame:
    rows = []
    for unit in units:
        dtype = str(unit.attrs.get("dtype", "float32"))
        if dtype == "float32":
            continue
        row = {
            "checkpoint": unit.attrs.get("checkpoint"),
            "study": unit.attrs.get("study"),
            "bank": unit.attrs.get("bank"),
            "dtype": dtype,
            "device": unit.attrs.get("device"),
            "tie_guard": float(unit.attrs.get("tie_guard", 0.0)),
            "tie_guarded": int(unit.attrs.get("tie_guarded", 0)),
            "medium_operand_error": float(unit.attrs.get("medium_operand_error", float("nan"))),
            # written by units since issue 50 (PrecisionAudit.timing); older units: NaN
            **{k: float(unit.attrs.get(f"precision_{k}", float("nan"))) for k in TIMING_COLUMNS},
        }
        sample = unit.tables.get(PRECISION_TABLE)
        if sample is None:  # written before units measured their precision
            row.update(n=0, n_choices=0, argmax_flips=0)
        else:
            row.update(summarize_sample(sample))
        row["within_bounds"] = within_bounds(row)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(PRECISION_COLUMNS))


def write_precision(units: Sequence, results_dir: Path, floor: float = SPEEDUP_FLOOR) -> pd.DataFrame | None:
    """Write precision.csv into `results_dir` when any unit ran in a reduced precision; log a
    warning per unit above the bounds, and what the sweep bought ('this sweep: 1.13x float32, ...'):
    a warning that suggests float32 when its speed-up is below `floor`. Returns the table (None:
    nothing reduced)."""
    table = precision_rows(units)
    path = Path(results_dir) / PRECISION_FILE
    if table.empty:
        path.unlink(missing_ok=True)
        return None
    write_table(table, path, columns=PRECISION_COLUMNS, sort=("study", "checkpoint", "bank"))
    summary = sweep_summary(table)
    (log.warning if below_floor(summary, floor) else log.info)("precision: %s", describe_sweep(summary, floor))
    for row in table.itertuples(index=False):
        if not row.within_bounds:
            log.warning(
                "precision: %s / %s / %s in %s moved verdict probabilities by mean %.3g, max %.3g with %d argmax "
                "flip(s) in %d sampled prompts against float32 (bounds: %s)",
                row.checkpoint,
                row.study,
                row.bank,
                row.dtype,
                row.mean_abs_dp,
                row.max_abs_dp,
                row.argmax_flips,
                row.n,
                describe_bounds(),
            )
        elif row.n == 0:
            log.warning(
                "precision: %s / %s / %s in %s was not measured (unit from an older version)",
                row.checkpoint,
                row.study,
                row.bank,
                row.dtype,
            )
    return table
