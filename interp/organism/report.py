"""validation.md, written by `interp validate` from its own tables only.

Every number in the file is read back from `validation_checks.csv` / `organism_predictive.csv`
after they are written (tested: each number in the file appears in those CSVs); the prose says
only what the status column says.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from interp.organism.difference import CONTROL_NOTE


def _f(v) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    if v != v:
        return ""
    return f"{v:.3f}"


def _ci(v, lo, hi) -> str:
    lo_ok = isinstance(lo, (float, int)) and lo == lo
    return _f(v) + (f" [{_f(lo)}, {_f(hi)}]" if lo_ok else "")


def _p(r) -> str:
    if r.p != r.p:
        return ""
    s = f"{r.p:.4g}"
    if r.n_shuffles and r.n_shuffles == r.n_shuffles and r.p_lo == r.p_lo:
        s += f" (MC [{r.p_lo:.4g}, {r.p_hi:.4g}], {int(r.n_shuffles)} shuffles)"
    elif r.p == r.p:
        s += " (exact)"
    return s


def _cell(v) -> str:
    s = "" if v is None or (isinstance(v, float) and v != v) else str(v)
    return s.replace("|", "/").replace("\n", " ")


def write_markdown(out: Path, tree: Path, control: Path | None) -> Path:
    checks = pd.read_csv(out / "results" / "validation_checks.csv", keep_default_na=False, na_values=[""])
    pred = pd.read_csv(out / "results" / "organism_predictive.csv")
    summary = checks[checks["kind"] == "summary"].set_index("subject")["value"]
    settings = checks[checks["kind"] == "setting"]
    head = checks[checks["headline"].astype(str) == "True"]
    commit = str(checks["commit"].iloc[0])
    n = lambda key: int(summary.get(key, 0))  # noqa: E731
    text = [
        f"# Validation of `{tree}`",
        "",
        f"**{n('recovered')} of {n('headline checks')} known answers recovered** (a check that passes on the "
        "organism, Holm-adjusted where it has a p-value, and fails on the negative-control lineage "
        f"`{control}`); {n('uninformative')} uninformative, {n('undetermined')} undetermined, "
        f"{n('not recovered')} not recovered.",
        "",
        f"Code: commit `{commit}`. Written by `interp validate` from `results/validation_checks.csv` and "
        "`results/organism_predictive.csv`; every number below is read from them.",
        "",
        "## Settings (fixed before the run)",
        "",
        "| setting | value |",
        "|---|---|",
        *[f"| {r.subject} | {r.value:g} |" for r in settings.itertuples(index=False)],
        "",
        "## Headline checks: organism vs control",
        "",
        "| check | subject | figure | organism [CI] | control [CI] | threshold | p organism | p Holm | "
        "p control | status | reason |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in head.itertuples(index=False):
        ctl = _ci(r.control_value, r.control_lo, r.control_hi)
        pc = f"{r.control_p:.4g}" if r.control_p == r.control_p else ""
        if pc and r.n_shuffles and r.control_p_lo == r.control_p_lo:
            pc += f" (MC [{r.control_p_lo:.4g}, {r.control_p_hi:.4g}])"
        text.append(
            f"| {r.check} | {r.subject} | {r.figure} | {_ci(r.value, r.lo, r.hi)} | {ctl} | {_f(r.threshold)} | "
            f"{_p(r)} | {_f(r.p_holm)} | {pc} | **{r.status}** | {_cell(r.reason)} |"
        )
    if head["figure"].str.contains("organism - control").any():
        text += ["", f"For the organism − control checks, the {CONTROL_NOTE}."]
    rest = checks[(checks["headline"].astype(str) != "True") & ~checks["kind"].isin(["summary", "setting"])]
    text += [
        "",
        "## Gates, targets and reported figures (organism; not counted)",
        "",
        "| check | subject | figure | value [CI] | p | reference | control value | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rest.itertuples(index=False):
        text.append(
            f"| {r.check} | {_cell(r.subject)} | {r.figure} | {_ci(r.value, r.lo, r.hi)} | {_p(r)} | "
            f"{_cell(r.reference)} | {_f(r.control_value)} | {r.status} |"
        )
    lin = out / "results" / "lineages.csv"
    if lin.is_file():
        t = pd.read_csv(lin, keep_default_na=False, dtype=str)
        text += [
            "",
            "## The two lineages (from their organism.json, `results/lineages.csv`)",
            "",
            "| setting | organism | control |",
            "|---|---|---|",
            *[f"| {r.setting} | {_cell(r.organism)} | {_cell(r.control)} |" for r in t.itertuples(index=False)],
        ]
    cols = ["lineage", "source", "target", "route_relation", "I", "null_mean", "p_value", "p_lo", "p_hi"]
    text += [
        "",
        "## I of each source for each route's final map",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for r in pred[cols].itertuples(index=False):
        text.append("| " + " | ".join(_f(v) if isinstance(v, (float, np.floating)) else _cell(v) for v in r) + " |")
    tries = out / "results" / "tries.csv"
    if tries.is_file():
        t = pd.read_csv(tries, keep_default_na=False)
        text += [
            "",
            "## Every try of the organism's settings",
            "",
            'From `results/tries.csv` (`interp validate --history`); this run is the row marked "this run".',
            "",
            "| " + " | ".join(t.columns) + " |",
            "|" + "---|" * len(t.columns),
            *["| " + " | ".join(_cell(v) for v in r) + " |" for r in t.itertuples(index=False)],
        ]
    text += ["", "![trajectory](figures/organism_trajectory.png)", ""]
    path = out / "validation.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def trajectory_figure(summary: pd.DataFrame, known: dict, trunk: list[str], path: Path) -> Path:
    """S_op and δ along the trunk and each route (95% CIs of the sweep's summary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summary
    trunk = [c for c in ["base", *trunk] if c in s.index]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    labels: list[str] = []
    for ax, metric, label in ((axes[0], "s_op", "S_op"), (axes[1], "delta", "δ")):
        for k, ((route, cks), color) in enumerate(zip(known["routes"].items(), ("tab:blue", "tab:orange"))):
            cks = [c for c in cks if c in s.index]  # the checkpoints swept (ValidateConfig.checkpoints)
            path_ = trunk + cks
            labels = [c.split("/")[-1] for c in trunk] + [c.split("/")[-1].split("-", 1)[1] for c in cks]
            x = np.arange(len(path_)) + (0.05 if k else -0.05)
            y = s.loc[path_, metric].to_numpy()
            err = np.vstack([y - s.loc[path_, f"{metric}_lo"].to_numpy(), s.loc[path_, f"{metric}_hi"].to_numpy() - y])
            ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=2, color=color, label=route)
        ax.axvline(len(trunk) - 1, color="grey", lw=0.6, ls=":")
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{label} along the lineage (95% CI)", fontsize=9)
        ax.axhline(0, color="grey", lw=0.5)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
