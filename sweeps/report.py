"""OUT/report.md: the summary tables and figures of whatever studies OUT holds."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from interp.errors import ConfigError

# (results file, heading, columns to show or None for all). Whatever the selection, columns
# that tell rows apart are kept (see _keep_distinguishing), e.g. classify's `order`.
_SECTIONS = (
    ("pressure_summary.csv", "Pressure-turn sycophancy (slot and sampled readouts)",
     ["checkpoint", "bank", "readout", "delta", "delta_lo", "delta_hi", "s_op", "s_op_lo", "s_op_hi",
      "s_ch", "s_ch_lo", "s_ch_hi", "neutral_flip", "n_items", "comprehension", "comprehension_pass"]),
    ("classify_summary.csv", "Conversational sycophancy classification",
     ["checkpoint", "bank", "task", "order", "accuracy", "precision", "recall", "macro_f1", "macro_f1_lo",
      "macro_f1_hi", "mcc"]),
    ("classify_position_bias.csv", "Position bias (two option orders)", None),
    ("generation_summary.csv", "Generated replies, judged", None),
    ("cloze_abs.csv", "Cross-lingual bias: Average Bias Score", None),
    ("cloze_sanity.csv", "Cloze sanity: meaningless completion preferred", None),
    ("fertility.csv", "Tokenizer fertility", None),
    ("mediation.csv", "Mediation of the language effect through fertility", None),
    ("weat.csv", "WEAT", None),
    ("probes.csv", "Linear readouts from the cache", None),
    ("predictive.csv", "Predicting the target's item map (held-out partial R²)", None),
    ("steer_pressure.csv", "Steering: pressure metrics against steering strength", None),
)

# One sentence per section: what the numbers mean, and which choices are the toolkit's own
# (not fixed by the source papers); each is a parameter.
NOTES = {
    "pressure_summary.csv": (
        "δ = P(planted verdict | user states it) − P(planted verdict | user states the other one); S_op / S_ch = "
        "flip rate after an opposing opinion / a bare challenge minus the flip rate after a neutral filler; items "
        "weigh equally and the CIs are 95% item bootstraps. The toolkit's choices: the verdict read as next-token "
        "probabilities renormalized over the two verdict words with their surface forms pooled (`variants`), soft "
        "flips (1 − P(planted)), and the comprehension screen."),
    "classify_summary.csv": (
        "Scores of the gold labels against the label the model gives most probability, per task (binary / "
        "five-class) and per `order` of the options in the prompt: `given`, `reversed`, and `averaged` (the two "
        "orders' probabilities averaged before the argmax, the toolkit's correction for position bias); macro-F1 "
        "CIs are item bootstraps."),
    "classify_position_bias.csv": (
        "Share of items whose predicted label changes when the option order is reversed, and the mean absolute "
        "probability shift; 1.0 means every prediction is an order artefact."),
    "generation_summary.csv": (
        "Replies sampled from the checkpoint and labelled by a judge model on the five-level scale; the judge, its "
        "prompt and averaging its two option orders are the toolkit's choices."),
    "cloze_abs.csv": (
        "Average Bias Score: mean over prompts of max(0, δ) with δ = NLL(anti-stereotype) − NLL(stereotype), per "
        "language and axis (axis `all`: axes weigh equally), with the source paper's bands; mean per-token NLL "
        "(`loss`) and the scored span are the toolkit's defaults (template cloze_v1)."),
    "cloze_sanity.csv": (
        "Share of prompts where the meaningless completion has a lower loss than both real ones: high values mean "
        "the model reads the language poorly and its bias scores there are mostly noise."),
    "fertility.csv": (
        "Tokens per word of each tokenizer on parallel text (fertility), the share of words split into several "
        "tokens, and parity (tokens relative to the reference language); how words are delimited is the toolkit's "
        "choice."),
    "mediation.csv": (
        "Effect of language (vs English) on δ split into the part through tokenizer fertility (indirect) and the "
        "rest (direct), prompt-cluster bootstrap CIs; the linear mediator/outcome models are the toolkit's choice."),
    "weat.csv": (
        "WEAT effect size (Cohen's d of association differences) with permutation p-values; mean-pooled hidden "
        "states for checkpoints are the toolkit's choice."),
    "probes.csv": (
        "Out-of-fold score of a linear readout of the cached residual (ROC AUC or R²) against an item-level "
        "label-shuffle null; folds over items, standardization inside folds and the penalties are the toolkit's "
        "choices."),
    "predictive.csv": (
        "I: held-out partial R² of a source checkpoint's item map for the target's, beyond the target's unpressured "
        "profile, with a shuffle null; ridge instead of OLS when items are few is the toolkit's choice."),
    "steer_pressure.csv": (
        "The pressure metrics rerun while alpha × a direction is added at resid_pre of one layer; alpha in SDs of "
        "the cached projection (`units sd`) and steering only the read position are the toolkit's defaults."),
}


def _keep_distinguishing(full: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
    """Add back label columns (non-float) of `full` until no two shown rows look alike, so a
    table never prints identical-looking rows that differ only in a dropped column."""
    labels = [c for c in shown.columns if not pd.api.types.is_float_dtype(shown[c])]
    for col in full.columns:
        if not labels or not shown[labels].duplicated().any():
            break
        if col in shown.columns or pd.api.types.is_float_dtype(full[col]) or full[col].nunique(dropna=False) < 2:
            continue
        pos = list(full.columns).index(col)
        before = [c for c in full.columns[:pos] if c in shown.columns]
        shown.insert(shown.columns.get_loc(before[-1]) + 1 if before else 0, col, full[col])
        labels.append(col)
    return shown


def _blank_steps(df: pd.DataFrame) -> pd.DataFrame:
    """A checkpoint outside a lineage has no step: print it blank, not `nan`."""
    for col in [c for c in df.columns if c == "step" or c.endswith("_step")]:
        df[col] = df[col].map(lambda v: "" if pd.isna(v) else str(int(v)) if float(v).is_integer() else str(v))
    return df


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
        lines += ["## Checkpoints", "", "Step is the training step read from the directory name; blank for a "
                  "checkpoint outside a lineage.", "", "| checkpoint | step |", "|---|---|"]
        lines += [f"| {c['name']} | {'' if c.get('step') is None or pd.isna(c.get('step')) else c['step']} |"
                  for c in lin["checkpoints"]]
        lines.append("")
    for fname, heading, cols in _SECTIONS:
        path = results / fname
        if not path.is_file():
            continue
        full = pd.read_csv(path)
        df = full[[c for c in cols if c in full.columns]].copy() if cols else full.copy()
        df = _blank_steps(_keep_distinguishing(full, df))
        note = NOTES.get(fname)
        lines += [f"## {heading}", "", *([note, ""] if note else []), f"`results/{fname}`", "", _fmt(df), ""]
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
