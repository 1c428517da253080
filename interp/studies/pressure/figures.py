"""Pressure figures: delta / Sop / Sch with CIs per checkpoint (along lineages), item-map heatmap
(items x checkpoints, most-yielding first) and scatter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.figures import UNRELATED, new_figure, redraw_on_change, safe_name, save_figure, trajectory_groups

_METRICS = (("delta", "deference δ"), ("s_op", "S_op"), ("s_ch", "S_ch"))


@redraw_on_change
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


@redraw_on_change
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


def item_map_matrix(maps: pd.DataFrame, checkpoints: list[str], *, turn_kind: str = "opinion") -> pd.DataFrame:
    """Items x checkpoints of one bank's map values (`item_maps.csv` rows of one bank): columns in
    the given (lineage) order, rows sorted by the mean over those checkpoints, most-yielding (most
    negative) first; ties by item id, so the order is stable."""
    df = maps[maps["turn_kind"] == turn_kind]
    wide = df.pivot_table(index="item_id", columns="checkpoint", values="map_value", aggfunc="mean")
    wide = wide.reindex(columns=[c for c in checkpoints if c in wide.columns])
    key = pd.DataFrame({"mean": wide.mean(axis=1), "item": wide.index.astype(str)}, index=wide.index)
    return wide.loc[key.sort_values(["mean", "item"], kind="mergesort").index]


@redraw_on_change
def plot_item_map_heatmap(
    maps: pd.DataFrame, checkpoints: list[str], bank: str, path: Path, *, turn_kind: str = "opinion"
) -> Path | None:
    """One bank's item maps as a heatmap: an item per row (most-yielding at the top), a checkpoint
    per column in lineage order, the map value (pressured minus neutral log-odds of the planted
    verdict) as colour, red where the item yields, blue where pressure makes the model firmer."""
    wide = item_map_matrix(maps[maps["bank"].astype(str) == str(bank)], checkpoints, turn_kind=turn_kind)
    if wide.empty:
        return None
    vals = wide.to_numpy(dtype=float)
    lim = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
    n_items, n_cks = vals.shape
    label_items = n_items <= 64
    fig = new_figure(
        min(14.0, max(5.2, 3.2 + 0.55 * n_cks)), min(16.0, 1.6 + (0.17 if label_items else 0.06) * n_items)
    )
    ax = fig.subplots()
    im = ax.imshow(vals, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(n_cks), labels=list(wide.columns), rotation=40, ha="right", fontsize=8)
    if label_items:
        ax.set_yticks(range(n_items), labels=[str(i) for i in wide.index], fontsize=6)
    else:
        ax.set_yticks([])
    ax.set_ylabel(f"item ({n_items}; most-yielding at the top)", fontsize=8)
    ax.set_title(f"{bank}\nitem map ({turn_kind} turn): log-odds vs neutral", fontsize=9)
    bar = fig.colorbar(im, ax=ax, shrink=0.6)
    bar.set_label("map value (< 0: yields)", fontsize=8)
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
        for bank in sorted(maps["bank"].astype(str).unique()):
            plot_item_map_heatmap(maps, cks, bank, figures / f"item_map_heatmap_{safe_name(bank)}.png")
