"""Sycophancy-eval results from cached units, with the pressure study's metrics: trials, summary
(delta, S_op, S_ch, neutral flip, comprehension, with CIs), item maps, capitulation per wording,
condition shifts; figures with the pressure study's plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analyses.figures import lineage_of, safe_name
from analyses.io import write_table
from analyses.pressure_metrics import (
    CAPITULATION_COLUMNS,
    CONDITION_COLUMNS,
    ITEM_MAP_COLUMNS,
    SUMMARY_COLUMNS,
    add_trial_columns,
    capitulation,
    condition_shifts,
    item_maps,
    pressure_summary,
)
from cache.store import Unit
from interp.studies.pressure.figures import plot_item_map_heatmap, plot_pressure_trajectories
from interp.studies.sycophancy_eval.options import SycophancyEvalOptions

TRIAL_COLUMNS = (
    "checkpoint",
    "bank",
    "domain",
    "dataset",
    "item_id",
    "planted",
    "gold",
    "turn_kind",
    "turn_side",
    "turn_variant",
    "readout",
    "p_planted",
    "top",
    "n_options",
    "logodds",
    "flipped",
    "n_prompt_tokens",
    "tie_guarded",
)
SUMMARY = ("checkpoint", "bank", "domain", *SUMMARY_COLUMNS[2:], "comprehension_threshold")
_KEYS = ["checkpoint", "bank"]
# the item map each domain has: the challenge for are_you_sure, the opposing stated opinion otherwise
MAP_KIND = {"are_you_sure": "challenge", "answer": "opinion", "feedback": "opinion"}


def _with_domain(df: pd.DataFrame, domains: pd.DataFrame) -> pd.DataFrame:
    out = df.merge(domains, on=_KEYS, how="left")
    return out[[*_KEYS, "domain", *[c for c in out.columns if c not in (*_KEYS, "domain")]]]


def analyze_sycophancy_eval(units: list[Unit], results_dir: Path, cfg) -> dict[str, pd.DataFrame]:
    trials = pd.concat([u.tables["trials"] for u in units], ignore_index=True)
    firsts = [u.tables["first_turn"] for u in units if "first_turn" in u.tables]  # feedback has no gold
    first = pd.concat(firsts, ignore_index=True) if firsts else pd.DataFrame()
    trials["turn_side"] = trials["turn_side"].fillna("")
    domains = trials[[*_KEYS, "domain"]].drop_duplicates()
    o = cfg.studies.get("sycophancy_eval") or SycophancyEvalOptions()
    threshold = float(o.comprehension_threshold)
    summary = pressure_summary(
        trials, first if len(first) else None, n_boot=cfg.n_boot, seed=cfg.seed, comprehension_threshold=threshold
    )
    summary["comprehension_threshold"] = threshold
    maps = item_maps(trials)
    kinds = maps.merge(domains, on=_KEYS)
    maps = kinds[kinds["turn_kind"] == kinds["domain"].map(MAP_KIND)][list(ITEM_MAP_COLUMNS)]
    caps = capitulation(trials)
    shifts = condition_shifts(trials, n_boot=cfg.n_boot, seed=cfg.seed)
    read = add_trial_columns(trials)
    read["flipped"] = read["top"].astype(str) != read["planted"].astype(str)  # argmax over all the options
    write_table(
        read,
        results_dir / "sycophancy_eval_trials.csv",
        columns=TRIAL_COLUMNS,
        sort=["checkpoint", "bank", "item_id", "planted", "turn_kind", "turn_side", "turn_variant"],
    )
    write_table(
        _with_domain(summary, domains), results_dir / "sycophancy_eval_summary.csv", columns=SUMMARY, sort=_KEYS
    )
    write_table(
        maps,
        results_dir / "sycophancy_eval_item_maps.csv",
        columns=ITEM_MAP_COLUMNS,
        sort=["checkpoint", "bank", "turn_kind", "item_id"],
    )
    write_table(caps, results_dir / "sycophancy_eval_capitulation.csv", columns=CAPITULATION_COLUMNS)
    write_table(
        _with_domain(shifts, domains),
        results_dir / "sycophancy_eval_conditions.csv",
        columns=(*_KEYS, "domain", *CONDITION_COLUMNS[2:]),
        sort=[*_KEYS, "turn_kind", "turn_variant"],
    )
    return {"sycophancy_eval_summary": summary, "sycophancy_eval_item_maps": maps, "sycophancy_eval_conditions": shifts}


def sycophancy_eval_figures(out: Path, results: Path, figures: Path) -> None:
    """delta / S_op / S_ch along checkpoints and the item-map heatmap of every bank (each domain's
    own map: the challenge for are_you_sure, the opposing opinion otherwise)."""
    if not (results / "sycophancy_eval_summary.csv").is_file():
        return
    summary = pd.read_csv(results / "sycophancy_eval_summary.csv")
    if summary.empty:
        return
    lineage, order = lineage_of(out)
    if order:
        summary = summary.sort_values("checkpoint", key=lambda s: s.map(order), kind="mergesort")
    plot_pressure_trajectories(summary, lineage, figures / "sycophancy_eval_trajectories.png")
    if (results / "sycophancy_eval_item_maps.csv").is_file():
        maps = pd.read_csv(results / "sycophancy_eval_item_maps.csv")
        cks = list(dict.fromkeys(summary["checkpoint"]))
        domain = summary.drop_duplicates("bank").set_index("bank")["domain"].astype(str)
        for bank in sorted(maps["bank"].astype(str).unique()):
            plot_item_map_heatmap(
                maps,
                cks,
                bank,
                figures / f"sycophancy_eval_item_map_{safe_name(bank)}.png",
                turn_kind=MAP_KIND.get(domain.get(bank, ""), "opinion"),
            )
