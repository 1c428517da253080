"""OUT/report.md: the summary tables and figures of whatever studies OUT holds."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from interp.errors import ConfigError

# (results file, heading, columns to show or None for all)
_SECTIONS = (
    ("pressure_summary.csv", "Pressure-turn sycophancy (slot and sampled readouts; comprehension_pass: first-turn "
     "accuracy >= the screen threshold, 0.6 by default, this toolkit's choice, not the paper's)",
     ["checkpoint", "bank", "readout", "delta", "delta_lo", "delta_hi", "s_op", "s_op_lo", "s_op_hi",
      "s_ch", "s_ch_lo", "s_ch_hi", "neutral_flip", "n_items", "comprehension", "comprehension_pass"]),
    ("classify_summary.csv", "Conversational sycophancy classification (order: given = the paper's "
     "protocol, labels in the listed order; averaged = mean of given and reversed order, this toolkit's "
     "position-debiased reading)",
     ["checkpoint", "bank", "task", "order", "accuracy", "precision", "recall", "macro_f1", "macro_f1_lo",
      "macro_f1_hi", "mcc"]),
    ("classify_position_bias.csv", "Position bias (two option orders)", None),
    ("generation_summary.csv", "Generated replies, judged (rates over all N replies as in BenSyc Table 6: "
     "sycophancy_rate, support_rate, validation_rate, escalation_rate; share_* = shares within the sycophantic "
     "replies, Fig. 5b; judge_accuracy / judge_kappa: the judge against gold on the bank's own comments)", None),
    ("judge_agreement.csv", "Judge agreement with gold labels on the bank's own comments", None),
    ("cloze_abs.csv", "Cross-lingual bias: Average Bias Score (under the loss in column loss)", None),
    ("cloze_abs_by_loss.csv", "ABS by loss: token_mean (the INCLUDE reading) beside sum and byte_mean "
     "(the default; tokenizer-independent)", None),
    ("cloze_loss_check.csv", "Findings under token_mean only (effect_token_mean_only, "
     "mediation_token_mean_only: seen under the per-token mean, not under the chosen loss)", None),
    ("cloze_sanity.csv", "Cloze sanity: meaningless completion preferred", None),
    ("fertility.csv", "Tokenizer fertility", None),
    ("mediation.csv", "Mediation of the language effect through fertility (this toolkit's addition: INCLUDE "
     "has neither fertility nor mediation; prompt content can confound fertility and delta)",
     ["checkpoint", "language", "loss", "mediator", "total", "total_lo", "total_hi", "indirect", "indirect_lo",
      "indirect_hi", "bank"]),
    ("weat_stats.csv", "WEAT as INCLUDE reads it: Friedman + Kendall's W over languages (tuples as blocks), "
     "Wilcoxon-Holm pairs, rank-biserial, mean rank-biserial of the reference language", None),
    ("weat_scores.csv", "WEAT tuple scores cos(t, a_stereo) - cos(t, a_anti), bands < 0.01 negligible, "
     ">= 0.05 significant, >= 0.10 extreme", None),
    ("weat.csv", "WEAT, Caliskan et al.'s effect size (comparison group Y, permutation p; not on the INCLUDE "
     "threshold scale; also weat_caliskan.csv)", None),
    ("probes.csv", "Linear readouts from the cache", None),
    ("predictive.csv", "Predicting the target's item map (held-out partial R²; I: map beyond the profile; "
     "I_readout_only: residual readout beyond the profile; I_readout_increment: readout beyond profile + map; "
     "each with its own shuffle null; precision_at_k over the k most-yielding, i.e. most negative, items)",
     ["source", "target", "bank", "I", "I_null_p95", "I_p", "I_readout_only", "I_readout_only_null_p95",
      "I_readout_only_p", "I_readout_increment", "I_readout_increment_null_p95", "I_readout_increment_p",
      "precision_at_k", "k", "readout_trials"]),
)


def _fmt(df: pd.DataFrame, max_rows: int = 60) -> str:
    shown = df.head(max_rows)
    text = shown.to_markdown(index=False, floatfmt=".3f") if _has_tabulate() else "```\n" + shown.to_string(index=False) + "\n```"
    if len(df) > max_rows:
        text += f"\n\n({len(df) - max_rows} more rows in the CSV)"
    return text


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def _pressure_figures(out: Path, results: Path, figures: Path) -> None:
    from analyses.pressure_figures import plot_item_map_scatter, plot_pressure_trajectories

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


def _token_mean_only_lines(check: pd.DataFrame) -> list[str]:
    """One sentence per finding that appears under the per-token mean loss only."""
    out = []
    for kind, col in (("language effect vs the reference", "effect_token_mean_only"),
                      ("mediation through fertility", "mediation_token_mean_only")):
        if col not in check:
            continue
        hits = check[check[col].astype(str).str.lower() == "true"]
        if len(hits):
            where = ", ".join(f"{r.checkpoint}/{r.language}" for r in hits.itertuples(index=False))
            out.append(f"- A {kind} appears under token_mean but not under {hits['loss'].iloc[0]} for: {where}. "
                       "It follows how finely the tokenizer cuts the text, not a preference.")
        else:
            out.append(f"- No {kind} appears under token_mean only.")
    return out + [""]


def write_report(out: str | Path) -> Path:
    out = Path(out)
    results = out / "results"
    if not results.is_dir():
        raise ConfigError(f"{out}: no results/ directory (run `interp sweep ... --out {out}` first)")
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    if (results / "pressure_summary.csv").is_file():
        _pressure_figures(out, results, figures)
    lines = ["# interp report", "", f"Output directory: `{out}`", ""]
    if (out / "lineage.json").is_file():
        lin = json.loads((out / "lineage.json").read_text())
        lines += ["## Checkpoints", "", "| checkpoint | step |", "|---|---|"]
        lines += [f"| {c['name']} | {c['step']} |" for c in lin["checkpoints"]]
        lines.append("")
    for fname, heading, cols in _SECTIONS:
        path = results / fname
        if not path.is_file():
            continue
        df = pd.read_csv(path)
        if cols:
            df = df[[c for c in cols if c in df.columns]]
        lines += [f"## {heading}", "", f"`results/{fname}`", "", _fmt(df), ""]
        if fname == "cloze_loss_check.csv":
            lines += _token_mean_only_lines(df)
    pngs = sorted(figures.glob("*.png"))
    if pngs:
        lines += ["## Figures", ""]
        lines += [f"![{p.stem}](figures/{p.name})" for p in pngs]
        lines.append("")
    path = out / "report.md"
    tmp = out / f".report.md.tmp-{os.getpid()}"
    tmp.write_text("\n".join(lines), encoding="utf-8")
    tmp.replace(path)
    return path
