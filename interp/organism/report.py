"""validation.md, written by `interp validate` from its own tables only.

Every number in the file is read back from `validation_checks.csv` / `organism_predictive.csv`
after they are written (tested: each number in the file appears in those CSVs); the prose says
only what the status column says.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from interp.organism.frozen import FROZEN_FILE
from interp.organism.stats import RECOVERED
from interp.organism.tally import headline


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


def _table(df: pd.DataFrame, cols: list[str]) -> list[str]:
    return [
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
        *[
            "| " + " | ".join(_f(v) if isinstance(v, (float, np.floating)) else _cell(v) for v in r) + " |"
            for r in df[cols].itertuples(index=False)
        ],
    ]


def _frozen_clause(fz: pd.DataFrame | None) -> str:
    """The header's word on when the checks were frozen, for this seed (the first row)."""
    if fz is None:
        return " frozen before the run"
    r = fz.iloc[0]
    if r["order"] == "unknown":
        return ", not found committed before this seed's first sweep (so not shown to be frozen before it)"
    when = f"committed in `{r['check_file_commit'][:10]}` at {r['check_file_committed']}"
    if r["order"] == "blind":
        return f", {when}, before this seed's first sweep at {r['first_sweep']}"
    return f"; **{when}, after this seed's first sweep at {r['first_sweep']}: post hoc for this seed**"


def write_markdown(out: Path, tree: Path, controls: dict[str, Path], check_file) -> Path:
    """OUT/validation.md from OUT/results/*.csv only."""

    res = out / "results"
    table = pd.read_csv(res / "validation_checks.csv", keep_default_na=False, na_values=[""])
    pred = pd.read_csv(res / "organism_predictive.csv")
    checks = table[table["kind"] == "check"]
    h = headline(checks)
    first = table.iloc[0]
    overrides = str(first["overrides"]) if isinstance(first["overrides"], str) else ""
    ctl = ", ".join(f"{k} `{p}`" for k, p in controls.items()) or "none"
    fz = pd.read_csv(res / FROZEN_FILE, keep_default_na=False) if (res / FROZEN_FILE).is_file() else None
    text = [
        f"# Validation of `{tree}` (seed {int(first['seed'])})",
        "",
        f"**{h['recovered']} of {h['checks']} counted known answers recovered, in {h['groups_recovered']} of "
        f"{h['groups']} independent groups** (every check of the group recovered; {h['groups_partly']} more "
        f"partly); {h['not_recovered']} not recovered, {h['undetermined']} undetermined. A check is recovered "
        "when it passes on the organism and fails on its control lineage; failing on the organism or passing "
        "on the control is a miss.",
        "",
        f"Controls: {ctl}. Check file `{check_file.path.name}`, sha256 `{first['check_file_sha256']}` (checks, "
        f"controls, rules and thresholds{_frozen_clause(fz)}); code commit `{first['commit']}`."
        + (f" **Settings overridden for this run: {overrides}: not the pre-registered run.**" if overrides else ""),
        "Written by `interp validate` from `results/*.csv`; every number below is read from them.",
    ]
    seeds = res / "seeds.csv"
    if seeds.is_file():
        sd = pd.read_csv(seeds)
        seed_cols = [c for c in sd.columns if c.startswith("seed_")]
        n = int(sd["seeds"].iloc[0])
        all_ok = int((sd["recovered_on"] == n).sum())
        grp = sd.groupby("group", sort=False)["recovered_on"].min()
        text += [
            "",
            f"## Seeds: {all_ok} of {len(sd)} checks recovered on all {n} seeds; "
            f"{int((grp == n).sum())} of {len(grp)} groups on all {n}",
            "",
            *_table(sd, ["id", "group", *seed_cols, "recovered_on"]),
        ]
        if fz is not None:
            by = {o: ", ".join(str(x) for x in sorted(fz.loc[fz["order"] == o, "seed"])) for o in fz["order"].unique()}
            text += [
                "",
                "Judged blind (the check file was committed before the seed's first sweep): "
                f"seeds {by.get('blind', 'none')}. Post hoc (committed after it): seeds {by.get('post hoc', 'none')}."
                + (f" Unknown: seeds {by['unknown']}." if "unknown" in by else "")
                + f" (`results/{FROZEN_FILE}`)",
            ]
    settings = pd.read_csv(res / "validation_settings.csv").iloc[0]
    text += [
        "",
        "## Settings",
        "",
        "| setting | value |",
        "|---|---|",
        *[f"| {k} | {v:g} |" for k, v in settings.items()],
        "",
        "## Counted checks: organism vs its control",
        "",
    ]
    cols = [
        "id",
        "group",
        "figure",
        "value",
        "lo",
        "hi",
        "control",
        "control_value",
        "threshold",
        "p",
        "p_holm",
        "control_p",
        "status",
        "reason",
    ]
    text += _table(checks, cols)
    groups = pd.read_csv(res / "validation_groups.csv")
    text += ["", "## Groups (checks that read one quantity)", "", *_table(groups, list(groups.columns))]
    text += miss_lines(res)
    text += mutation_lines(res, checks)
    guards = table[table["kind"].isin(["guard", "gate"])]
    text += [
        "",
        "## Guards and gates (hold on every lineage by construction or screen the routes; never counted)",
        "",
        *_table(guards, ["lineage", "check", "subject", "figure", "value", "lo", "hi", "status"]),
    ]
    other = table[table["kind"].isin(["reported", "unlisted"])]
    text += [
        "",
        "## Reported figures",
        "",
        *_table(other, ["lineage", "check", "subject", "figure", "value", "reference", "status"]),
    ]
    lin = res / "lineages.csv"
    if lin.is_file():
        t = pd.read_csv(lin, keep_default_na=False, dtype=str)
        text += [
            "",
            "## The lineages (from their organism.json, `results/lineages.csv`)",
            "",
            *_table(t, list(t.columns)),
        ]
    cols = [
        c
        for c in ("lineage", "source", "target", "route_relation", "I", "I_readout_only", "p_value", "I_readout_only_p")
        if c in pred.columns
    ]
    text += ["", "## I of each source for route A's final map", "", *_table(pred, cols)]
    tries = res / "tries.csv"
    if tries.is_file():
        t = pd.read_csv(tries, keep_default_na=False)
        text += [
            "",
            "## Every try of the organism's settings",
            "",
            "From `results/tries.csv` (`interp validate --history`).",
            "",
            *_table(t, list(t.columns)),
        ]
    text += ["", "![trajectory](figures/organism_trajectory.png)", ""]
    path = out / "validation.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def miss_lines(res: Path) -> list[str]:
    """The misses' diagnoses (results/validation_misses.csv, `interp.organism.diagnose`)."""
    path = res / "validation_misses.csv"
    if not path.is_file():
        return []
    m = pd.read_csv(path, keep_default_na=False, na_values=[""])
    if m.empty:
        return ["", "## Misses: none (no counted check fails on the organism)"]
    return [
        "",
        f"## Misses: what the results show ({m['id'].nunique()} checks not recovered)",
        "",
        "Figures computed by the run from the organism's results to tell a plant that was not learned from a "
        "metric that did not see it (`interp.organism.diagnose`); a diagnosis, not a check: it changes no "
        "status.",
        "",
        *_table(m, ["id", "subject", "figure", "value", "note"]),
    ]


def mutation_lines(res: Path, checks: pd.DataFrame) -> list[str]:
    """The mutation-testing section from results/mutations.csv (`interp validate --mutations`),
    flagged when that run's baseline statuses are not this record's."""
    path = res / "mutations.csv"
    if not path.is_file():
        # said, not left out: a record without a score must not read as one whose checks survived every bug
        none = not (checks["status"] == RECOVERED).any()
        return [
            "",
            "## Mutation testing: not run on this record",
            "",
            "`interp validate OUT --no-run --mutations` applies each known metric bug to this OUT's cached "
            "results and counts the bugs that turn a recovered check into a miss."
            + (
                " With no check recovered here, no bug could be caught: the score needs a record that recovers."
                if none
                else ""
            ),
        ]
    m = pd.read_csv(path, keep_default_na=False)
    mine = ";".join(f"{i}={s}" for i, s in zip(checks["id"], checks["status"]))
    stale = set(m["baseline_statuses"].astype(str)) != {mine}
    return [
        "",
        f"## Mutation testing: {m['score_caught'].iloc[0]} of {m['score_applied'].iloc[0]} metric bugs caught",
        "",
        "Each bug is applied at run time to one function of the analysis or the checks; this OUT's results are "
        "rebuilt from its cache with the bug active (no model) and every check is decided again. Caught: a "
        "check recovered without the bug is not recovered with it (`results/mutations.csv`, "
        "`interp validate --mutations`)."
        + (
            " **The mutation run's baseline statuses differ from this record's: it ran on other results; "
            "run it again.**"
            if stale
            else ""
        ),
        "",
        *_table(m, ["mutation", "breaks", "patched", "caught", "turned_not_recovered", "turned_recovered"]),
    ]


def trajectory_figure(summary: pd.DataFrame, known: dict, trunk: list[str], path: Path) -> Path:
    """S_op, S_ch, δ and the neutral flip along the trunk and each route (95% CIs of the sweep's summary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summary
    trunk = [c for c in ["base", *trunk] if c in s.index]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.4))
    labels: list[str] = []
    panels = zip(axes, ("s_op", "s_ch", "delta", "neutral_flip"), ("S_op", "S_ch", "δ", "neutral flip"))
    for ax, metric, label in panels:
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
