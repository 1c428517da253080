"""A/B sycophancy results from cached units: scores, summary with CIs, position bias, item maps,
and the figures drawn from them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analyses.ab_metrics import (
    AB_ITEM_MAP_COLUMNS,
    AB_POSITION_COLUMNS,
    AB_SCORE_COLUMNS,
    AB_SUMMARY_COLUMNS,
    ab_item_maps,
    ab_position_bias,
    ab_summary,
    with_averaged,
)
from analyses.figures import lineage_of, new_figure, redraw_on_change, safe_name, save_figure, trajectory_groups
from analyses.io import write_table
from cache.store import Unit

SCORES_COLUMNS = (*AB_SCORE_COLUMNS, "n_prompt_tokens", "tie_guarded")
REPORT_NOTE = (
    "matching_rate = mean over items of P(the answer that agrees with the user's stated view), normalised over the "
    "item's answers (0.5: no preference between two answers); argmax_rate = share of items whose agreeing answer "
    "has the largest log-likelihood, which is lm-eval's `acc` on the sycophancy tasks; CIs are 95% item "
    "bootstraps. Prompt and scoring are lm-eval's (the answer strings as written, summed log-probabilities); "
    "order `reversed` (--swap-letters) lists the choices in reverse under the same letters and `averaged` "
    "averages the two orders' probabilities, the toolkit's position-debiased reading."
)
_SORT = ["checkpoint", "bank", "set", "order", "item_id"]


def ab_tables(units: list[Unit]) -> pd.DataFrame:
    return pd.concat([u.tables["scores"] for u in units], ignore_index=True)


def analyze_ab(units: list[Unit], results_dir: Path, cfg) -> dict[str, pd.DataFrame]:
    scores = ab_tables(units)
    both = with_averaged(scores)
    summary = ab_summary(both, n_boot=cfg.n_boot, seed=cfg.seed)
    position = ab_position_bias(scores, n_boot=cfg.n_boot, seed=cfg.seed)
    maps = ab_item_maps(both)
    write_table(scores, results_dir / "ab_scores.csv", columns=SCORES_COLUMNS, sort=_SORT)
    write_table(summary, results_dir / "ab_summary.csv", columns=AB_SUMMARY_COLUMNS, sort=_SORT[:4])
    write_table(position, results_dir / "ab_position_bias.csv", columns=AB_POSITION_COLUMNS, sort=_SORT[:3])
    write_table(
        maps,
        results_dir / "ab_item_maps.csv",
        columns=AB_ITEM_MAP_COLUMNS,
        sort=["checkpoint", "bank", "order", "item_id"],
    )
    return {"ab_scores": scores, "ab_summary": summary, "ab_position_bias": position, "ab_item_maps": maps}


# ---------------------------------------------------------------- figures


@redraw_on_change
def plot_ab_rates(summary: pd.DataFrame, lineage: dict | None, path: Path) -> Path:
    """matching_rate and argmax_rate with CIs per checkpoint, one row of panels per bank (order
    "given"); a line joins only the checkpoints of one lineage."""
    given = summary[summary["order"] == "given"]
    banks = sorted(given["bank"].astype(str).unique())
    fig = new_figure(9, 3.0 * len(banks))
    axes = fig.subplots(len(banks), 2, squeeze=False)
    for r, bank in enumerate(banks):
        df = given[given["bank"].astype(str) == bank].groupby("checkpoint", sort=False).first()
        groups = trajectory_groups(list(df.index), lineage)
        xs = list(dict.fromkeys(k for _, cks, _ in groups for k in cks))
        for c, col in enumerate(("matching_rate", "argmax_rate")):
            ax = axes[r, c]
            for route, cks, joined in groups:
                y = df.loc[cks, col].to_numpy(float)
                err = np.abs(np.vstack([y - df.loc[cks, f"{col}_lo"], df.loc[cks, f"{col}_hi"] - y]))
                ax.errorbar(
                    [xs.index(k) for k in cks],
                    y,
                    yerr=err,
                    marker="o",
                    capsize=3,
                    linestyle="-" if joined else "none",
                    label=route,
                )
            ax.axhline(0.5, color="grey", lw=0.6)
            ax.set_ylim(0, 1)
            ax.set_xticks(range(len(xs)), xs, rotation=45, ha="right", fontsize=7)
            ax.set_title(f"{bank}: {col}", fontsize=9)
        axes[r, 0].legend(fontsize=7)
    return save_figure(fig, path)


@redraw_on_change
def plot_ab_item_map(maps: pd.DataFrame, checkpoints: list[str], bank: str, path: Path) -> Path | None:
    """One bank's item maps (order "given"): an item per row, most drawn to the user's side at the
    top, a checkpoint per column; colour = log-odds of the matching answer (red: sides with the user)."""
    df = maps[(maps["bank"].astype(str) == str(bank)) & (maps["order"] == "given")]
    wide = df.pivot_table(index="item_id", columns="checkpoint", values="map_value", aggfunc="mean")
    wide = wide.reindex(columns=[c for c in checkpoints if c in wide.columns])
    if wide.empty:
        return None
    key = pd.DataFrame({"mean": -wide.mean(axis=1), "item": wide.index.astype(str)}, index=wide.index)
    wide = wide.loc[key.sort_values(["mean", "item"], kind="mergesort").index]
    vals = wide.to_numpy(float)
    lim = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
    fig = new_figure(min(14.0, 3.2 + 0.55 * vals.shape[1]), min(16.0, 1.6 + 0.12 * vals.shape[0]))
    ax = fig.subplots()
    im = ax.imshow(vals, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(vals.shape[1]), labels=list(wide.columns), rotation=40, ha="right", fontsize=8)
    ax.set_yticks([])
    ax.set_ylabel(f"item ({vals.shape[0]}; most sycophantic at the top)", fontsize=8)
    ax.set_title(f"{bank}\nitem map: log-odds of the answer matching the user's view", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.6).set_label("log-odds (> 0: sides with the user)", fontsize=8)
    return save_figure(fig, path)


def ab_figures(out: Path, results: Path, figures: Path) -> None:
    """The report's A/B figures from results/ab_summary.csv and ab_item_maps.csv."""
    if not (results / "ab_summary.csv").is_file():
        return
    summary = pd.read_csv(results / "ab_summary.csv")
    lineage, order = lineage_of(out)
    if order:
        summary = summary.sort_values("checkpoint", key=lambda s: s.map(order), kind="mergesort")
    if summary.empty:
        return
    plot_ab_rates(summary, lineage, figures / "ab_rates.png")
    if (results / "ab_item_maps.csv").is_file():
        maps = pd.read_csv(results / "ab_item_maps.csv")
        cks = list(dict.fromkeys(summary["checkpoint"]))
        for bank in sorted(maps["bank"].astype(str).unique()):
            plot_ab_item_map(maps, cks, bank, figures / f"ab_item_map_{safe_name(bank)}.png")
