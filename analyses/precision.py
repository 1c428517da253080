"""What a reduced-precision run cost: its sampled trials re-scored in float32, summarized.

Input: one row per (sampled prompt, choice) with the run's log-prob and float32's
(`SAMPLE_COLUMNS`, written by `interp.runner.precision`). P is the probability of a choice
renormalized over the choices scored together (a verdict's options, an item's continuations);
an argmax flip is a sampled prompt whose most probable choice differs between the two.
Output: one row per unit (`PRECISION_COLUMNS`) and whether it stays within `BOUNDS`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SAMPLE_COLUMNS = ("call", "kind", "index", "choice", "logp", "logp_fp32")
TIMING_COLUMNS = ("speedup", "scoring_s", "float32_s", "tie_guard_s", "audit_s", "sample_speedup")
PRECISION_COLUMNS = (
    "checkpoint",
    "study",
    "bank",
    "dtype",
    "device",
    "n",
    "n_choices",
    "mean_abs_dlogp",
    "max_abs_dlogp",
    "mean_abs_dp",
    "max_abs_dp",
    "argmax_flips",
    "within_bounds",
    "tie_guard",  # the unit's ScoringConfig.tie_guard (0: none; plain bfloat16 / float16 are never guarded)
    "tie_guarded",  # prompts the guard re-scored in float32 (all of the unit's, not only the sample's)
    # float32-medium / mixed-bf16-medium: the "medium" probe on the machine that scored the unit
    # (interp.runner.mixed.medium_operand_error; above 1e-4 its operands were rounded to bf16); else empty
    "medium_operand_error",
    # what the precision bought (interp.runner.precision, PrecisionAudit.timing): float32's time over
    # this precision's for the unit's scoring (tie guard and audit included; float32's estimated from
    # the sample, scored both ways on the same prompts), the seconds behind it, and the sample's ratio
    *TIMING_COLUMNS,
)
# The issue-25 targets for a precision a researcher may use without comment: verdict
# probabilities within 0.005 on average and 0.02 at worst of float32's, no verdict flipped.
BOUNDS = {"mean_abs_dp": 0.005, "max_abs_dp": 0.02, "argmax_flips": 0}
# A sweep whose reduced precision bought less than this over float32 says so and suggests float32
# (issue 50): below it, the exact numbers cost about as much as the approximate ones.
SPEEDUP_FLOOR = 1.2


def _softmax_groups(logp: np.ndarray, groups: np.ndarray) -> np.ndarray:
    s = pd.Series(logp)
    m = s.groupby(groups).transform("max").to_numpy()
    e = np.exp(logp - m)
    return e / pd.Series(e).groupby(groups).transform("sum").to_numpy()


def summarize_sample(sample: pd.DataFrame) -> dict:
    """n (sampled prompts), n_choices, mean/max |d log-prob|, mean/max |d P|, argmax flips."""
    missing = [c for c in SAMPLE_COLUMNS if c not in sample.columns]
    if missing:
        raise ValueError(f"precision sample lacks column(s) {', '.join(missing)}")
    if sample.empty:
        return {"n": 0, "n_choices": 0, **{k: np.nan for k in PRECISION_COLUMNS[7:11]}, "argmax_flips": 0}
    groups = sample["call"].astype(str) + "/" + sample["kind"].astype(str) + "/" + sample["index"].astype(str)
    g = groups.to_numpy()
    a, b = sample["logp"].to_numpy(float), sample["logp_fp32"].to_numpy(float)
    dlogp = np.abs(a - b)
    dp = np.abs(_softmax_groups(a, g) - _softmax_groups(b, g))
    frame = pd.DataFrame({"g": g, "a": a, "b": b, "choice": sample["choice"].to_numpy()})
    top_a = frame.loc[frame.groupby("g", sort=False)["a"].idxmax()].set_index("g")["choice"]
    top_b = frame.loc[frame.groupby("g", sort=False)["b"].idxmax()].set_index("g")["choice"]
    multi = frame.groupby("g", sort=False).size() > 1  # a lone choice cannot flip
    flips = int(((top_a != top_b.reindex(top_a.index)) & multi.reindex(top_a.index)).sum())
    return {
        "n": int(len(top_a)),
        "n_choices": int(len(sample)),
        "mean_abs_dlogp": float(dlogp.mean()),
        "max_abs_dlogp": float(dlogp.max()),
        "mean_abs_dp": float(dp.mean()),
        "max_abs_dp": float(dp.max()),
        "argmax_flips": flips,
    }


def within_bounds(row: dict, bounds: dict = BOUNDS) -> bool:
    if not row.get("n"):
        return True  # nothing measured: nothing exceeded (the report says n = 0)
    return bool(
        row["mean_abs_dp"] <= bounds["mean_abs_dp"]
        and row["max_abs_dp"] <= bounds["max_abs_dp"]
        and row["argmax_flips"] <= bounds["argmax_flips"]
    )


def describe_bounds(bounds: dict = BOUNDS) -> str:
    return (
        f"mean |dP| <= {bounds['mean_abs_dp']}, max |dP| <= {bounds['max_abs_dp']}, "
        f"argmax flips <= {bounds['argmax_flips']}"
    )


def sweep_summary(table: pd.DataFrame) -> dict:
    """Over a sweep's units (precision.csv rows): speedup (summed float32 estimate over summed
    scoring seconds, units without timing left out: NaN if none), mean |dP| (weighted by each
    unit's sampled prompts), max |dP|, argmax flips, sampled prompts."""
    timed = table.dropna(subset=["float32_s", "scoring_s"]) if "float32_s" in table else table.iloc[:0]
    scoring = float(timed["scoring_s"].sum()) if len(timed) else 0.0
    measured = table[table["n"] > 0]
    n = int(measured["n"].sum())
    return {
        "speedup": float(timed["float32_s"].sum()) / scoring if scoring > 0 else float("nan"),
        "mean_abs_dp": float((measured["mean_abs_dp"] * measured["n"]).sum() / n) if n else float("nan"),
        "max_abs_dp": float(measured["max_abs_dp"].max()) if n else float("nan"),
        "argmax_flips": int(measured["argmax_flips"].sum()),
        "n": n,
    }


def describe_sweep(summary: dict, floor: float = SPEEDUP_FLOOR) -> str:
    """'this sweep: 1.13x float32, |dP| mean 0.0048, max 0.036, 0 flips', and below `floor` why
    float32 is the better choice."""
    speed = "speed-up not measured" if np.isnan(summary["speedup"]) else f"{summary['speedup']:.2f}x float32"
    line = (
        f"this sweep: {speed}, |dP| mean {summary['mean_abs_dp']:.2g}, max {summary['max_abs_dp']:.2g}, "
        f"{summary['argmax_flips']} flip{'s' if summary['argmax_flips'] != 1 else ''} in {summary['n']} sampled prompts"
    )
    if below_floor(summary, floor):
        line += (
            f"; below the {floor:g}x floor: the reduced precision bought little on this workload, "
            "float32 (--dtype float32, the default) gives exact numbers at about the same cost"
        )
    return line


def below_floor(summary: dict, floor: float = SPEEDUP_FLOOR) -> bool:
    return bool(summary["speedup"] < floor)  # NaN (not measured) compares False
