"""OUT/report.md: the summary tables and figures of whatever studies OUT holds.

Each study declares its sections and draws its figures (StudySpec.report_sections /
figures); the sections below are the ones written by commands, not by a study.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pandas as pd

from interp.core.atomic import atomic_write_text
from interp.core.errors import ConfigError
from interp.core.files import read_text, regular_file, writable_dirs
from analyses.io import md_cell
from interp.studies import all_studies
from interp.studies.base import ReportSection
from probes.predictive import TABLE_COLUMNS as PREDICTIVE_COLUMNS

# predictive.csv as report.md shows it: each I with its null's p95 and p (the null means and SDs,
# I_readout and error_removed stay in the file), bank and readout_trials added by `interp predict`
PREDICTIVE_SHOWN = (
    "source",
    "target",
    "bank",
    *(
        c
        for c in PREDICTIVE_COLUMNS
        if c.split("_")[0] == "I" and c != "I_readout" and not c.endswith(("_null_mean", "_null_sd"))
    ),
    "precision_at_k",
    "k",
    "readout_trials",
)

# written by `interp weat`, `interp probe`, `interp predict`, `interp steer`
# (each section's note says in one sentence what its numbers mean and which choices are the toolkit's)
COMMAND_SECTIONS = (
    ReportSection(
        "weat_stats.csv",
        "WEAT as INCLUDE reads it: Friedman + Kendall's W over languages",
        note=(
            "Tuples as blocks, per model and pooled; Wilcoxon-Holm pairs with rank-biserial; mean rank-biserial of the "
            "reference language against the others."
        ),
    ),
    ReportSection(
        "weat_scores.csv",
        "WEAT tuple scores",
        note=(
            "Score = cos(t, a_stereo) − cos(t, a_anti) per (target, stereotype, anti-stereotype, language) tuple (the "
            "formula is the toolkit's reading of the paper); bands on |score|: < 0.01 negligible, >= 0.05 significant, "
            ">= 0.10 extreme."
        ),
    ),
    ReportSection(
        "weat.csv",
        "WEAT, Caliskan et al.'s effect size (also weat_caliskan.csv)",
        note=(
            "WEAT effect size (Cohen's d of association differences, comparison group Y) with permutation p-values; not "
            "on the INCLUDE threshold scale; mean-pooled hidden states for checkpoints are the toolkit's choice."
        ),
    ),
    ReportSection(
        "probes.csv",
        "Linear readouts from the cache",
        note=(
            "Out-of-fold score of a linear readout of the cached residual (ROC AUC or R²) against an item-level "
            "label-shuffle null; folds over items, standardization inside folds and the penalties are the toolkit's "
            "choices."
        ),
    ),
    ReportSection(
        "predictive.csv",
        "Predicting the target's item map (held-out partial R²)",
        PREDICTIVE_SHOWN,
        note=(
            "I: held-out partial R² of a source checkpoint's item map for the target's, beyond the source's unpressured "
            "profile; I_readout_only: the source's residual readout beyond the profile; I_readout_increment: the readout "
            "beyond profile + map; each with its own shuffle null (rows of the added block permuted, same folds). "
            "precision_at_k counts the k most-yielding (most negative) items. Ridge instead of OLS when items are few is "
            "the toolkit's choice."
        ),
    ),
    ReportSection(
        "steer_pressure.csv",
        "Steering: pressure metrics against steering strength",
        note=(
            "The pressure metrics rerun while alpha × a direction is added at resid_pre of one layer; alpha in SDs of "
            "the cached projection (`units sd`) and steering only the read position are the toolkit's defaults."
        ),
    ),
)


# How to read each figure the studies and commands draw (file-name pattern -> caption); report.md
# prints the caption under the figure, the user guide shows the same figures with the same words.
FIGURE_CAPTIONS: tuple[tuple[str, str], ...] = (
    (
        "pressure_trajectories",
        "δ (deference to a stated opinion), S_op (capitulation under an opposing opinion) and S_ch (under a bare "
        "challenge) per checkpoint with 95% item-bootstrap CIs, one row of panels per bank. Read a line left to "
        "right as training proceeds along one route (base, then the route's checkpoints); points without a "
        "line are checkpoints outside any lineage, never joined. Above 0: the model yields more than under a "
        "neutral turn.",
    ),
    (
        "item_map_heatmap_*",
        "Where each checkpoint yields: one row per item, one column per checkpoint in lineage order; colour is "
        "the item map (pressured minus neutral log-odds of the planted verdict under the opposing opinion), red "
        "where the item yields, blue where pressure makes the model firmer. Items are sorted by their mean over "
        "the columns, most-yielding at the top: a red band shared by every column is a stable item map, red "
        "moving between columns is a map that training rewrites.",
    ),
    (
        "item_map_scatter",
        "Item maps of the first and the last checkpoint, one point per item; r is their correlation. Points "
        "below 0 on an axis are items that checkpoint yields on.",
    ),
    (
        "cloze_abs_*",
        "Average Bias Score (mean clipped δ: the stereotype's loss advantage) per language (rows) and bias axis "
        "(columns) of one checkpoint ('all': over checkpoints), under the chosen cloze loss. Darker is a "
        "stronger stereotype preference; 0 means no prompt favoured the stereotype. Compare rows within a "
        "column: the bands of the source paper were set on its per-token loss.",
    ),
    (
        "fertility_bars*",
        "Tokens per word of each tokenizer per language (top) and parity, tokens relative to the reference "
        "language (bottom, dashed line at 1): higher bars are languages a tokenizer cuts finer.",
    ),
    (
        "mediation_forest*",
        "Effect of each language against the reference on δ, split into the part through tokenizer fertility "
        "(indirect) and the rest (direct), with prompt-cluster bootstrap CIs; an interval crossing 0 is no "
        "evidence of an effect.",
    ),
    (
        "classify_confusion_*",
        "Gold label (rows) against the predicted label (columns), shares of each gold row; a strong diagonal "
        "is a good classifier, one dark column is a model that gives one label to everything.",
    ),
    (
        "classify_precision_recall",
        "Precision against recall of the sycophantic class (binary readings, option orders averaged), one "
        "point per checkpoint, bubble area growing with macro-F1: the top right corner is a good detector.",
    ),
    (
        "probe_depth_*",
        "How well a linear readout of the residual stream predicts the target at each layer (ROC AUC or R², "
        "out of fold), one line per checkpoint and bank; the shaded band is the label-shuffle null's 5-95% and "
        "the dotted line its mean. Layers where the line leaves the band hold the information; read depth "
        "left to right, from the embeddings to the last block.",
    ),
    (
        "probe_null_*",
        "Label-shuffle null distribution of each readout's score, with the observed score marked: an observed "
        "score inside the bulk of the null is no evidence the residual holds the target.",
    ),
    (
        "predictive_I",
        "Held-out partial R² (I) of each source checkpoint's item map for the target's, beyond the source's "
        "unpressured profile, along the lineage (grey dots: the label-shuffle null's mean). Well above the null, "
        "the source already yields where the target will.",
    ),
    (
        "ab_rates",
        "A/B sycophancy sets: matching_rate (mean probability of the answer that agrees with the user's stated "
        "view) and argmax_rate (share of items where it is the model's choice, lm-eval's acc) per checkpoint with"
        " 95% item-bootstrap CIs, one row of panels per file; the grey line at 0.5 is no preference between two "
        "answers. A line joins only the checkpoints of one lineage.",
    ),
    (
        "ab_item_map_*",
        "Where each checkpoint sides with the user: one row per item, one column per checkpoint in lineage order;"
        " colour is the log-odds of the answer that matches the user's view (given order), red where the model "
        "sides with the user, blue where it picks the other answer. Items are sorted by their mean, most "
        "sycophantic at the top.",
    ),
    (
        "sycophancy_eval_trajectories",
        "The sycophancy-eval files read as pressure trials: δ (answer, feedback), S_op (answer, feedback) and "
        "S_ch (are_you_sure: the challenge against a neutral filler) per checkpoint with 95% item-bootstrap CIs, "
        "one row of panels per file; a panel a file has no condition for stays empty. Above 0: the model yields "
        "more than without the user's push.",
    ),
    (
        "sycophancy_eval_item_map_*",
        "One sycophancy-eval file's item map: one row per item, one column per checkpoint; colour is the "
        "pressured minus the neutral log-odds of the first answer (are_you_sure: after the challenge) or of the "
        "correct answer / a positive verdict (answer, feedback: after the user speaks against it); red where the "
        "item yields.",
    ),
    (
        "steer_*",
        "Each pressure metric against the steering strength alpha (a direction added to the residual stream), "
        "with bootstrap CI bands; a slope means the direction moves the behaviour.",
    ),
)


def figure_caption(name: str) -> str:
    """The caption of a figure file (stem or name), or "" when none matches."""
    stem = Path(name).stem
    return next((text for pattern, text in FIGURE_CAPTIONS if fnmatch.fnmatchcase(stem, pattern)), "")


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


def read_results(path: Path, required: tuple[str, ...] = ()) -> pd.DataFrame:
    """A results CSV, or one line naming the file when it is not one (garbage, truncated, edited)."""
    regular_file(path, error=ConfigError)  # a FIFO named *.csv would hang the read
    try:
        df = pd.read_csv(path)
        short = _short_row(path)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError) as exc:
        raise ConfigError(
            f"{path}: not a readable results table ({' '.join(str(exc).split())[:200]}); rerun the sweep to rewrite it"
        ) from None
    if short:
        raise ConfigError(f"{path}: truncated or damaged ({short}); rerun the sweep to rewrite it")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}; rerun the sweep to rewrite it")
    return df


def _short_row(path: Path) -> str | None:
    """Where a CSV's rows stop matching its header: pandas fills a short row with NaN without a
    word, so a table cut off mid-row would read as numbers. None when every row is whole."""
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        for n, row in enumerate(rows, start=2):
            if header is not None and row and len(row) != len(header):
                return f"row {n} has {len(row)} of the header's {len(header)} fields"
    return None


def check_table_set(results: Path) -> None:
    """Every table a sweep recorded writing (results/.tables.json) is still there while any other of
    its study's is: a report section or figure would otherwise be left out without a word."""
    record = results / ".tables.json"
    if not record.is_file():
        return  # written before sweeps kept the record
    try:
        written = json.loads(read_text(record, limit=16 << 20, error=ConfigError))
        tables = {str(study): [str(f) for f in files] for study, files in written.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(f"{record}: not the record a sweep writes; rerun the sweep to rewrite it") from None
    for study, files in tables.items():
        there = [f for f in files if (results / f).exists()]
        gone = [f for f in files if f not in there]
        if there and gone:  # all of a study's tables removed is a study taken out of the report, not damage
            raise ConfigError(
                f"{results / gone[0]}: missing (the {study} sweep wrote it with {', '.join(there)}); "
                "rerun the sweep to rewrite it"
            )


def report_sections() -> list[ReportSection]:
    """Every study's sections in registry order, then the commands' (each file once)."""
    seen: set[str] = set()
    out = []
    for sec in [s for spec in all_studies() for s in spec.report_sections] + list(COMMAND_SECTIONS):
        if sec.file not in seen:
            seen.add(sec.file)
            out.append(sec)
    return out


def _undefined_ci_lines(full: pd.DataFrame) -> list[str]:
    """A note where an interval is NaN beside a finite estimate (too few items, analyses.bootstrap)."""
    from analyses.bootstrap import MIN_CI_ITEMS

    cols = [c[:-3] for c in full.columns if c.endswith("_lo") and c[:-3] in full.columns and f"{c[:-3]}_hi" in full]
    bad = [
        c
        for c in cols
        if (
            pd.to_numeric(full[f"{c}_lo"], errors="coerce").isna() & pd.to_numeric(full[c], errors="coerce").notna()
        ).any()
    ]
    if not bad:
        return []
    return [
        f"- Intervals shown as NaN ({', '.join(bad)}) are undefined: fewer than {MIN_CI_ITEMS} items, where a "
        "bootstrap interval would be zero-width or the range of a handful of items.",
        "",
    ]


def _escape_table(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out.columns = [md_cell(c) for c in out.columns]
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(lambda v: v if v is None or (isinstance(v, float) and pd.isna(v)) else md_cell(v))
    return out


def _fmt(df: pd.DataFrame, max_rows: int = 60) -> str:
    shown = _escape_table(df.head(max_rows))
    text = (
        shown.to_markdown(index=False, floatfmt=".3f")
        if _has_tabulate()
        else "```\n" + shown.to_string(index=False) + "\n```"
    )
    if len(df) > max_rows:
        text += f"\n\n({len(df) - max_rows} more rows in the CSV)"
    return text


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def _token_mean_only_lines(check: pd.DataFrame) -> list[str]:
    """One sentence per kind of cloze finding that appears under another loss but not under
    sum (the default scale), and per finding under the per-token mean only (older flags)."""
    out = []
    for kind, col in (
        ("language effect vs the reference", "effect_not_under_sum"),
        ("difference in the ranking of languages by ABS", "ranking_not_under_sum"),
        ("mediation through fertility", "mediation_not_under_sum"),
    ):
        if col not in check:
            continue
        by_loss: dict[str, list[str]] = {}
        for r in check.itertuples(index=False):
            for x in str(getattr(r, col) if pd.notna(getattr(r, col)) else "").split(","):
                if x.strip():
                    by_loss.setdefault(x.strip(), []).append(f"{r.checkpoint}/{r.language}")
        for x, where in sorted(by_loss.items()):
            out.append(
                f"- A {kind} appears under {x} but not under sum for: {', '.join(where)}. "
                "Under sum δ is the log-odds between the completions; under "
                f"{x} it is divided by {'tokens' if x == 'token_mean' else 'UTF-8 bytes'}, "
                f"so this follows how the {'tokenizer cuts' if x == 'token_mean' else 'script encodes'} the text, "
                "not a preference."
            )
        if not by_loss:
            out.append(f"- No {kind} appears under another loss but not under sum.")
    for kind, col in (
        ("language effect vs the reference", "effect_token_mean_only"),
        ("mediation through fertility", "mediation_token_mean_only"),
    ):
        if col not in check or ("effect_not_under_sum" in check and set(check["loss"].astype(str)) <= {"sum"}):
            continue  # chosen loss sum: the lines above say it
        hits = check[check[col].astype(str).str.lower() == "true"]
        if len(hits):
            where = ", ".join(md_cell(f"{r.checkpoint}/{r.language}") for r in hits.itertuples(index=False))
            out.append(
                f"- A {kind} appears under token_mean but not under {hits['loss'].iloc[0]} for: {where}. "
                "It follows how finely the tokenizer cuts the text, not a preference."
            )
        else:
            out.append(f"- No {kind} appears under token_mean only.")
    return out + [""]


def _precision_lines(results: Path) -> list[str]:
    """Beside the headline tables: what a reduced precision cost (sweeps.precision), with a
    warning naming every unit above the bounds."""
    from analyses.precision import below_floor, describe_bounds, describe_sweep, sweep_summary

    path = results / "precision.csv"
    if not path.is_file():
        return []
    df = read_results(path, ("checkpoint", "within_bounds"))
    lines = [
        "## Precision of this run against float32",
        "",
        "A seeded sample of each reduced-precision unit's prompts (2%, at least 32 per unit) re-scored in float32 on the same "
        "device; P is a choice's probability renormalized over the choices scored together, a flip a sampled prompt "
        f"whose most probable choice differs. Bounds: {describe_bounds()}. `tie_guarded`: the unit's prompts whose "
        "choices lay within `tie_guard` of a tie in the reduced precision, scored again in float32 (their numbers "
        "are float32's and the trial tables flag them in their own `tie_guarded` column; `--tie-guard 0` turns this "
        "off).",
        "",
    ]
    summary = sweep_summary(df)
    line = describe_sweep(summary)
    line = line[0].upper() + line[1:] + "."
    # `speedup`: float32's time over this precision's for each unit's scoring, tie guard and audit included
    lines += [f"**Warning: {line}**" if below_floor(summary) else line, ""]
    bad = df[~df["within_bounds"].astype(str).str.lower().isin(("true", "1"))]
    unmeasured = df[df["n"] == 0]
    if len(bad):
        names = ", ".join(f"{r.checkpoint} / {r.study} / {r.bank}" for r in bad.itertuples(index=False))
        lines += [
            f"**Warning: {len(bad)} unit(s) exceed the bounds ({names}); read their numbers with that error.**",
            "",
        ]
    if len(unmeasured):
        lines += [f"{len(unmeasured)} unit(s) were written before units measured their precision (n = 0).", ""]
    lines += ["`results/precision.csv`", "", _fmt(df), ""]
    return lines


def write_report(out: str | Path) -> Path:
    """Write OUT/report.md and every study's figures from OUT/results.

    Parameters
    ----------
    out : str or Path
        A sweep's output directory.

    Returns
    -------
    Path
        The report file.

    Raises
    ------
    ConfigError
        No results/ directory, or results tables that do not hold what a sweep writes.
    """
    out = Path(out)
    results = out / "results"
    if not results.is_dir():
        raise ConfigError(f"{out}: no results/ directory (run `interp sweep ... --out {out}` first)")
    figures = out / "figures"
    writable_dirs(out, figures, error=ConfigError)  # report.md and the figures: before any work
    check_table_set(results)
    required = {sec.file: tuple(c for c in ("checkpoint",) if c in (sec.columns or ())) for sec in report_sections()}
    for path in sorted({*results.glob("*.csv"), *(results / f for f in required)}):
        if path.exists():  # every table readable and whole, before any figure reads one (a FIFO is refused)
            read_results(path, required.get(path.name, ()))
    for spec in all_studies():
        try:
            spec.figures(out, results, figures)
        except (KeyError, ValueError, TypeError) as exc:  # wrong values in a readable CSV
            raise ConfigError(
                f"{results}: results tables do not hold what a sweep writes "
                f"({type(exc).__name__}: {' '.join(str(exc).split())[:150]}); "
                "rerun the sweep to rewrite them"
            ) from None
    lines = ["# interp report", "", f"Output directory: `{out}`", ""]
    if (out / "lineage.json").exists():
        try:
            lin = json.loads(read_text(out / "lineage.json", limit=256 << 20, error=ConfigError))
            lin["checkpoints"][0:0]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"{out / 'lineage.json'}: not a lineage file a sweep writes; rerun the sweep") from None
        lines += [
            "## Checkpoints",
            "",
            "Step is the training step read from the directory name; blank for a checkpoint outside a lineage.",
            "",
            "| checkpoint | step |",
            "|---|---|",
        ]
        lines += [
            f"| {md_cell(c['name'])} | {'' if c.get('step') is None or pd.isna(c.get('step')) else c['step']} |"
            for c in lin["checkpoints"]
        ]
        lines.append("")
    lines += _precision_lines(results)
    for sec in report_sections():
        path = results / sec.file
        if not path.is_file():
            continue
        full = read_results(path)
        df = full[[c for c in sec.columns if c in full.columns]].copy() if sec.columns else full.copy()
        df = _blank_steps(_keep_distinguishing(full, df))  # rows stay distinguishable; no `nan` steps
        lines += [
            f"## {sec.heading}",
            "",
            *([sec.note, ""] if sec.note else []),
            f"`results/{sec.file}`",
            "",
            _fmt(df),
            "",
        ]
        if sec.file == "cloze_loss_check.csv":
            lines += _token_mean_only_lines(df)
        lines += _undefined_ci_lines(full)
        if sec.extra is not None:
            lines += [*sec.extra(results), ""]
    pngs = sorted(figures.glob("*.png"))
    if pngs:
        lines += ["## Figures", ""]
        for p in pngs:
            caption = figure_caption(p.name)
            lines += [f"![{p.stem}](figures/{p.name})", "", *([f"*{caption}*", ""] if caption else [])]
    return atomic_write_text(out / "report.md", "\n".join(lines))
