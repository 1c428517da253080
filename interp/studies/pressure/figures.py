"""Pressure figures: delta / Sop / Sch with CIs per checkpoint (along lineages), item-map scatter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.figures import UNRELATED, new_figure, save_figure, trajectory_groups

_METRICS = (("delta", "deference δ"), ("s_op", "S_op"), ("s_ch", "S_ch"))


def plot_pressure_trajectories(summary: pd.DataFrame, lineage: dict | None, path: Path) -> Path:
    """delta / S_op / S_ch with CIs per checkpoint. A line joins only checkpoints of one lineage
    (base -> route, in training order); checkpoints with no lineage are points, never joined,
    so two unrelated models are not drawn as if one grew into the other."""
    slot = summary[summary["readout"] == "slot"]
    banks = sorted(slot["bank"].unique())
    fig = new_figure(13, 3.2 * len(banks))
    axes = fig.subplots(len(banks), 3, squeeze=False)
    for r, bank in enumerate(banks):
        df = slot[slot["bank"] == bank].set_index("checkpoint")
        groups = trajectory_groups(list(df.index), lineage)
        xs = list(dict.fromkeys(k for _, cks, _ in groups for k in cks))  # one x position per checkpoint
        for c, (col, label) in enumerate(_METRICS):
            ax = axes[r, c]
            for route, cks, joined in groups:
                y = df.loc[cks, col].to_numpy(float)
                err = np.vstack([y - df.loc[cks, f"{col}_lo"], df.loc[cks, f"{col}_hi"] - y])
                ax.errorbar(
                    [xs.index(k) for k in cks],
                    y,
                    yerr=err,
                    marker="o",
                    capsize=3,
                    linestyle="-" if joined else "none",
                    label=route if joined or route not in UNRELATED else "no lineage (not joined)",
                )
            ax.set_xticks(range(len(xs)), xs, rotation=45, ha="right", fontsize=7)
            ax.axhline(0, color="grey", lw=0.6)
            ax.set_title(f"{bank}: {label}", fontsize=9)
        axes[r, 0].legend(fontsize=7)
    return save_figure(fig, path)


def plot_item_map_scatter(maps: pd.DataFrame, a: str, b: str, path: Path, *, turn_kind: str = "opinion") -> Path:
    df = maps[maps["turn_kind"] == turn_kind].pivot_table(
        index=["bank", "item_id"], columns="checkpoint", values="map_value"
    )
    fig = new_figure(4.5, 4.5)
    ax = fig.subplots()
    ax.scatter(df[a], df[b], s=12, alpha=0.7)
    r = np.corrcoef(df[a], df[b])[0, 1] if len(df) > 2 else float("nan")
    ax.set_xlabel(f"{a} item map ({turn_kind})")
    ax.set_ylabel(f"{b} item map ({turn_kind})")
    ax.set_title(f"item maps, r = {r:.2f}", fontsize=9)
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    return save_figure(fig, path)


def pressure_figures(out: Path, results: Path, figures: Path) -> None:
    """The report's pressure figures from results/pressure_summary.csv and item_maps.csv."""
    if not (results / "pressure_summary.csv").is_file():
        return
    summary = pd.read_csv(results / "pressure_summary.csv")
    lineage = None
    if (out / "lineage.json").is_file():
        data = json.loads((out / "lineage.json").read_text())
        lineage = data.get("lineage")
        order = {c["name"]: i for i, c in enumerate(data.get("checkpoints", []))}
        summary = summary.sort_values("checkpoint", key=lambda s: s.map(order), kind="mergesort")
    plot_pressure_trajectories(summary, lineage, figures / "pressure_trajectories.png")
    maps_file = results / "item_maps.csv"
    if maps_file.is_file():
        maps = pd.read_csv(maps_file)
        cks = list(dict.fromkeys(summary["checkpoint"]))
        if len(cks) >= 2:
            plot_item_map_scatter(maps, cks[0], cks[-1], figures / "item_map_scatter.png")
