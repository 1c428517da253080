"""Pressure figures: delta / Sop / Sch with CIs per checkpoint (along lineages), item-map scatter."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

_METRICS = (("delta", "deference δ"), ("s_op", "S_op"), ("s_ch", "S_ch"))


def lineage_order(checkpoints: list[str], lineage: dict | None) -> list[tuple[str, list[str]]]:
    """[(route label, ordered checkpoints)]: base then each route continuing from it."""
    if not lineage or not (lineage.get("base") or lineage.get("routes")):
        return [("checkpoints", checkpoints)]
    base = [c for c in lineage.get("base", []) if c in checkpoints]
    seqs = [(f"base→{route}", base + [c for c in cks if c in checkpoints])
            for route, cks in lineage.get("routes", {}).items()]
    listed = set(base) | {c for _, s in seqs for c in s}
    rest = [c for c in checkpoints if c not in listed]
    out = seqs or [("base", base)]
    return out + ([("other", rest)] if rest else [])


# groups lineage_order returns that are not a lineage: their checkpoints are unrelated models
UNRELATED = ("checkpoints", "other")


def trajectory_groups(checkpoints: list[str], lineage: dict | None) -> list[tuple[str, list[str], bool]]:
    """[(label, checkpoints in order, joined by a line?)]: only a lineage's checkpoints are joined."""
    out = []
    for route, cks in lineage_order(checkpoints, lineage):
        cks = [k for k in cks if k in checkpoints]
        if cks:
            out.append((route, cks, route not in UNRELATED and len(cks) > 1))
    return out


def plot_pressure_trajectories(summary: pd.DataFrame, lineage: dict | None, path: Path) -> Path:
    """delta / S_op / S_ch with CIs per checkpoint. A line joins only checkpoints of one lineage
    (base -> route, in training order); checkpoints with no lineage are points, never joined,
    so two unrelated models are not drawn as if one grew into the other."""
    slot = summary[summary["readout"] == "slot"]
    banks = sorted(slot["bank"].unique())
    fig, axes = plt.subplots(len(banks), 3, figsize=(13, 3.2 * len(banks)), squeeze=False)
    for r, bank in enumerate(banks):
        df = slot[slot["bank"] == bank].set_index("checkpoint")
        groups = trajectory_groups(list(df.index), lineage)
        xs = list(dict.fromkeys(k for _, cks, _ in groups for k in cks))  # one x position per checkpoint
        for c, (col, label) in enumerate(_METRICS):
            ax = axes[r, c]
            for route, cks, joined in groups:
                y = df.loc[cks, col].to_numpy(float)
                err = np.vstack([y - df.loc[cks, f"{col}_lo"], df.loc[cks, f"{col}_hi"] - y])
                ax.errorbar([xs.index(k) for k in cks], y, yerr=err, marker="o", capsize=3,
                            linestyle="-" if joined else "none",
                            label=route if joined or route not in UNRELATED else "no lineage (not joined)")
            ax.set_xticks(range(len(xs)), xs, rotation=45, ha="right", fontsize=7)
            ax.axhline(0, color="grey", lw=0.6)
            ax.set_title(f"{bank}: {label}", fontsize=9)
        axes[r, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_item_map_scatter(maps: pd.DataFrame, a: str, b: str, path: Path, *, turn_kind: str = "opinion") -> Path:
    df = maps[maps["turn_kind"] == turn_kind].pivot_table(index=["bank", "item_id"], columns="checkpoint",
                                                          values="map_value")
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(df[a], df[b], s=12, alpha=0.7)
    r = np.corrcoef(df[a], df[b])[0, 1] if len(df) > 2 else float("nan")
    ax.set_xlabel(f"{a} item map ({turn_kind})")
    ax.set_ylabel(f"{b} item map ({turn_kind})")
    ax.set_title(f"item maps, r = {r:.2f}", fontsize=9)
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
