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

# written by `interp weat`, `interp probe`, `interp predict`
COMMAND_SECTIONS = (
    ReportSection("weat.csv", "WEAT"),
    ReportSection("probes.csv", "Linear readouts from the cache"),
    ReportSection("predictive.csv", "Predicting the target's item map (held-out partial R²)"),
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
    for spec in all_studies():
        spec.figures(out, results, figures)
    lines = ["# interp report", "", f"Output directory: `{out}`", ""]
    if (out / "lineage.json").is_file():
        lin = json.loads((out / "lineage.json").read_text())
        lines += ["## Checkpoints", "", "| checkpoint | step |", "|---|---|"]
        lines += [f"| {c['name']} | {c['step']} |" for c in lin["checkpoints"]]
        lines.append("")
    for sec in report_sections():
        path = results / sec.file
        if not path.is_file():
            continue
        df = pd.read_csv(path)
        if sec.columns:
            df = df[[c for c in sec.columns if c in df.columns]]
        lines += [f"## {sec.heading}", "", f"`results/{sec.file}`", "", _fmt(df), ""]
    pngs = sorted(figures.glob("*.png"))
    if pngs:
        lines += ["## Figures", ""]
        lines += [f"![{p.stem}](figures/{p.name})" for p in pngs]
        lines.append("")
    return atomic_write_text(out / "report.md", "\n".join(lines))
