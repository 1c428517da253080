"""OUT/report.md: the summary tables and figures of whatever studies OUT holds.

Each study declares its sections and draws its figures (StudySpec.report_sections /
figures); the sections below are the ones written by commands, not by a study.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from interp.core.atomic import atomic_write_text
from interp.core.errors import ConfigError
from interp.studies import all_studies
from interp.studies.base import ReportSection

# written by `interp weat`, `interp probe`, `interp predict`, `interp steer`
# (each section's note says in one sentence what its numbers mean and which choices are the toolkit's)
COMMAND_SECTIONS = (
    ReportSection("weat.csv", "WEAT", note=(
        "WEAT effect size (Cohen's d of association differences) with permutation p-values; mean-pooled hidden "
        "states for checkpoints are the toolkit's choice.")),
    ReportSection("probes.csv", "Linear readouts from the cache", note=(
        "Out-of-fold score of a linear readout of the cached residual (ROC AUC or R²) against an item-level "
        "label-shuffle null; folds over items, standardization inside folds and the penalties are the toolkit's "
        "choices.")),
    ReportSection("predictive.csv", "Predicting the target's item map (held-out partial R²)", note=(
        "I: held-out partial R² of a source checkpoint's item map for the target's, beyond the target's unpressured "
        "profile, with a shuffle null; ridge instead of OLS when items are few is the toolkit's choice.")),
    ReportSection("steer_pressure.csv", "Steering: pressure metrics against steering strength", note=(
        "The pressure metrics rerun while alpha × a direction is added at resid_pre of one layer; alpha in SDs of "
        "the cached projection (`units sd`) and steering only the read position are the toolkit's defaults.")),
)


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
    try:
        df = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError) as exc:
        raise ConfigError(f"{path}: not a readable results table ({' '.join(str(exc).split())[:200]}); "
                          "rerun the sweep to rewrite it") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}; rerun the sweep to rewrite it")
    return df


def report_sections() -> list[ReportSection]:
    """Every study's sections in registry order, then the commands' (each file once)."""
    seen: set[str] = set()
    out = []
    for sec in [s for spec in all_studies() for s in spec.report_sections] + list(COMMAND_SECTIONS):
        if sec.file not in seen:
            seen.add(sec.file)
            out.append(sec)
    return out


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


def write_report(out: str | Path) -> Path:
    out = Path(out)
    results = out / "results"
    if not results.is_dir():
        raise ConfigError(f"{out}: no results/ directory (run `interp sweep ... --out {out}` first)")
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    for sec in report_sections():  # every results table readable, before any figure reads one
        if (results / sec.file).is_file():
            read_results(results / sec.file, tuple(c for c in ("checkpoint",) if c in (sec.columns or ())))
    for spec in all_studies():
        try:
            spec.figures(out, results, figures)
        except (KeyError, ValueError, TypeError) as exc:  # wrong values in a readable CSV
            raise ConfigError(f"{results}: results tables do not hold what a sweep writes "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())[:150]}); "
                              "rerun the sweep to rewrite them") from None
    lines = ["# interp report", "", f"Output directory: `{out}`", ""]
    if (out / "lineage.json").is_file():
        try:
            lin = json.loads((out / "lineage.json").read_text())
            lin["checkpoints"][0:0]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"{out / 'lineage.json'}: not a lineage file a sweep writes; rerun the sweep") from None
        lines += ["## Checkpoints", "", "Step is the training step read from the directory name; blank for a "
                  "checkpoint outside a lineage.", "", "| checkpoint | step |", "|---|---|"]
        lines += [f"| {c['name']} | {'' if c.get('step') is None or pd.isna(c.get('step')) else c['step']} |"
                  for c in lin["checkpoints"]]
        lines.append("")
    for sec in report_sections():
        path = results / sec.file
        if not path.is_file():
            continue
        full = read_results(path)
        df = full[[c for c in sec.columns if c in full.columns]].copy() if sec.columns else full.copy()
        df = _blank_steps(_keep_distinguishing(full, df))  # rows stay distinguishable; no `nan` steps
        lines += [f"## {sec.heading}", "", *([sec.note, ""] if sec.note else []), f"`results/{sec.file}`", "",
                  _fmt(df), ""]
    pngs = sorted(figures.glob("*.png"))
    if pngs:
        lines += ["## Figures", ""]
        lines += [f"![{p.stem}](figures/{p.name})" for p in pngs]
        lines.append("")
    return atomic_write_text(out / "report.md", "\n".join(lines))
