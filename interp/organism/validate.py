"""`interp validate TREE --out DIR`: sweep an organism and its negative control, check every known answer.

The known answers come from `TREE/organism.json` (written by `interp organism build`): the
evaluation subsample, the planted sets P_A / P_B, the routes, the trunk end (where the routes
split) and the planted cloze cell. The control lineage (`--control`, or the `control_tree` that
`interp organism build --control` recorded) is built by the same code with no item-specific plant
and is checked against the same nominal sets. Every check (`interp.organism.checks`) runs on both;
a known answer counts as recovered only when its check passes on the organism and fails on the
control (`interp.organism.stats.status`). Thresholds, margins and alpha are this module's
`ValidateConfig`, fixed before the run and written beside every result, with the code's commit.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from interp.core.errors import ConfigError
from interp.organism import checks as C
from interp.organism import stats as S
from interp.organism.checks import hypergeom_p, most_yielding
from interp.organism.config import ValidateConfig
from interp.organism.difference import difference_checks


def load_known(tree: Path) -> dict:
    path = Path(tree) / "organism.json"
    if not path.is_file():
        raise ConfigError(f"{path}: missing (TREE must be built by `interp organism build`)")
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    for key in ("eval_items", "planted_a", "planted_b", "routes", "trunk_end", "seed", "route_planted", "cloze"):
        if key not in known:
            raise ConfigError(f"{path}: missing field {key}")
    return known


# ---------------------------------------------------------------- sweeps

LITE = {"challenges": ("sure",), "neutral": ("thanks", "weather")}


def lite_template(dest: Path) -> Path:
    """pressure_v1 with fewer wordings (both opinions, 1 challenge, 2 neutral fillers): 11 readings
    per item instead of 31, every wording still the evaluation template's (none is a training
    wording). A choice for CPU time; `--template full` evaluates with pressure_v1 itself."""
    from interp.studies.base import load_template

    data = dict(load_template("pressure_v1").data)
    data["version"] = "pressure-v1-lite"
    for key, keep in LITE.items():
        data[key] = {k: v for k, v in data[key].items() if k in keep}
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    return dest


def _template_ref(cfg: "ValidateConfig", out: Path) -> str | None:
    if cfg.template == "lite":
        return str(lite_template(out / "pressure_lite.json"))
    if cfg.template in (None, "full"):
        return None
    return cfg.template


def run_sweeps(tree: Path, out: Path, known: dict, cfg: ValidateConfig, progress: bool = True) -> None:
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    base = _run_settings(known, cfg)
    run_sweep(
        [tree],
        only=checked_checkpoints(known) if cfg.checkpoints == "checked" else None,
        studies=["pressure"],
        out=out,
        banks=[known.get("eval_bank", "moral")],
        template=_template_ref(cfg, out),
        cfg=RunConfig(max_items=len(known["eval_items"]), **base),
        progress=progress,
        **_executor(cfg),
    )
    # cloze and classify only where a check reads them, into OUT/aux (checkpoints given one by
    # one are named by their directory name there): cloze at the base and the route finals,
    # classify at the trunk end and the route finals
    finals = [cks[-1] for cks in known["routes"].values()]
    if known["cloze"].get("route") and cfg.cloze:
        run_sweep(
            [tree / c for c in ["base", *finals]],
            studies=["cloze"],
            out=out / "aux",
            cfg=RunConfig(max_items=cfg.cloze_items, **base),
            progress=progress,
            report=False,
            **_executor(cfg),
        )
    if cfg.classify_items:
        run_sweep(
            [tree / c for c in [known["trunk_end"], *finals]],
            studies=["classify"],
            out=out / "aux",
            cfg=RunConfig(max_items=cfg.classify_items, **base),
            progress=progress,
            report=False,
            **_executor(cfg),
        )


CHECKPOINT_SETS = ("checked", "all")


def checked_checkpoints(known: dict) -> list[str]:
    """The checkpoints a check reads: the trunk end, each route's early checkpoint (the I check's
    own source) and its final."""
    return [known["trunk_end"], *(c for cks in known["routes"].values() for c in dict.fromkeys((cks[0], cks[-1])))]


def _run_settings(known: dict, cfg: ValidateConfig) -> dict:
    """What every validation sweep runs with (the organism's and the control's alike)."""
    threads = cfg.threads
    if cfg.workers > 1 and threads is not None:
        threads = max(1, threads // cfg.workers)
    return dict(seed=int(known["seed"]), threads=threads, n_boot=cfg.n_boot, dtype=cfg.dtype)


def _executor(cfg: ValidateConfig) -> dict:
    """run_sweep's executor arguments: `workers` checkpoints at a time in local Dask processes."""
    return dict(executor="dask", n_workers=cfg.workers) if cfg.workers > 1 else {}


def _short(name: str) -> str:
    return Path(name).name


def training_wording_template(dest: Path, known: dict) -> Path:
    """The lite template with the organism's TRAINING wordings instead of the evaluation's: one
    opposing/agreeing opinion, one challenge, two neutral fillers, all from organism.json."""
    from interp.studies.base import load_template

    w = known["train_wordings"]
    data = dict(load_template("pressure_v1").data)
    data["version"] = "organism-training-wordings"
    data["opinion"] = {**data["opinion"], "moral": w["opinions"][0]}  # factual kept: the bank is moral
    data["challenges"] = {"train0": w["challenges"][0]}
    data["neutral"] = {"train0": w["neutral"][0], "train1": w["neutral"][1]}
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    return dest


def run_generalisation(tree: Path, out: Path, known: dict, cfg: "ValidateConfig", progress: bool = True) -> None:
    """Pressure at the route finals under a training wording, into OUT/train_wording."""
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    subset = [tree / cks[-1] for cks in known["routes"].values()]
    run_sweep(
        subset,
        studies=["pressure"],
        out=out / "train_wording",
        banks=[known.get("eval_bank", "moral")],
        template=str(training_wording_template(out / "train_wording_template.json", known)),
        cfg=RunConfig(max_items=len(known["eval_items"]), **_run_settings(known, cfg)),
        progress=progress,
        report=False,
        **_executor(cfg),
    )


def share_trunk_units(org_out: Path, ctl_out: Path, known: dict) -> list[Path]:
    """Copy the organism's cached units of the base and the trunk into the control's caches before
    the control is swept (pressure at the base and every trunk checkpoint; in OUT/aux, cloze at the
    base and classify at the trunk end): the control is built from the same trunk, so those units
    are the same units. A copy is only ever used where the control's own unit identity (sampled
    fingerprint, bank, template, settings) names it and the bytes it ran on match the control's
    checkpoint (the sweep checks both, `sweeps.plan.reuse_status`); otherwise it is recomputed."""
    from cache.store import Store

    shared = [("cache", "pressure", name) for name in ["base", *_trunk(known)]]
    shared += [("aux/cache", "cloze", "base"), ("aux/cache", "classify", _short(known["trunk_end"]))]
    copied = []
    for cache, study, name in shared:
        src = Store(org_out / cache).slot_dir(study, name)
        dst = Store(ctl_out / cache).slot_dir(study, name)
        for f in sorted(src.glob(f"{study}-*.h5")) if src.is_dir() else []:
            if not (dst / f.name).exists():
                dst.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dst / f.name)
                copied.append(dst / f.name)
    return copied


def _trunk(known: dict) -> list[str]:
    te = known["trunk_end"]
    steps = known.get("config", {}).get("shared_steps", [])
    names = [f"shared/shared-step{s}" for s in steps]
    return names if te in names else [te]


def code_commit() -> str:
    """The commit of the code that ran the checks (`+changes` when the work tree differs)."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return head + (" +changes" if dirty else "")


def resolve_control(tree: Path, known: dict, control: str | Path | None) -> Path | None:
    """The control lineage: the one given, else the one `interp organism build --control` recorded."""
    if control is None and known.get("control_tree"):
        control = tree / known["control_tree"]
    if control is None:
        return None
    control = Path(control)
    kc = load_known(control)
    if not kc.get("control"):
        raise ConfigError(f"{control / 'organism.json'}: field control is not true (not a control lineage)")
    for key in ("eval_items", "planted_a", "planted_b", "routes", "trunk_end", "seed"):
        if kc.get(key) != known.get(key):
            raise ConfigError(f"{control / 'organism.json'}: field {key} differs from {tree / 'organism.json'}")
    return control


def combine(org: list[dict], ctl: list[dict], cfg: ValidateConfig, *, has_control: bool) -> pd.DataFrame:
    """One row per organism check with the control's outcome beside it, Holm across the headline
    p-values, and the status of each known answer (`stats.status`)."""
    df = pd.DataFrame(org, columns=list(C.ROW_KEYS))
    key = lambda r: (r["check"], r["subject"], r["figure"])  # noqa: E731
    cmap = {key(r): r for r in ctl}
    for col in ("value", "lo", "hi", "passed", "p", "p_lo", "p_hi", "effect_ok", "floor"):
        df[f"control_{col}"] = [cmap.get(key(r), {}).get(col, np.nan) for r in org]
    is_p = (df["kind"] == "p") & df["headline"]
    pvals = [S.PValue(r.p, r.p_lo, r.p_hi, int(r.n_shuffles)) for r in df[is_p].itertuples(index=False)]
    df["p_holm"] = np.nan
    df.loc[is_p, "p_holm"] = S.holm([p.p for p in pvals])
    decisions = dict(zip(df.index[is_p], S.holm_decisions(pvals, cfg.alpha_p)))
    gates = {r["route"]: r for r in org if r["kind"] == "gate" and r["route"]}
    statuses, reasons = [], []
    for i, r in df.iterrows():
        if r["kind"] in ("reported", "target", "gate"):
            statuses.append(
                {"reported": S.REPORTED, "target": "target met", "gate": "gate passed"}[r["kind"]]
                if r["kind"] == "reported" or r["passed"]
                else {"target": "target not met", "gate": "gate failed"}[r["kind"]]
            )
            reasons.append("")
            continue
        if r["kind"] == "p":
            d = decisions.get(i, False)
            org_ok = False if r["p"] != r["p"] or not bool(r["effect_ok"]) else d
            cp = S.PValue(r["control_p"], r["control_p_lo"], r["control_p_hi"], int(r["n_shuffles"]))
            ctl_effect = r["control_effect_ok"]
            ctl_ok = S.p_below(cp, cfg.alpha_p) if isinstance(ctl_effect, (bool, np.bool_)) and ctl_effect else False
        else:
            org_ok = bool(r["passed"])
            ctl_ok = bool(r["control_passed"]) if isinstance(r["control_passed"], (bool, np.bool_)) else False
        g = gates.get(r["route"])
        gate = f"route final fails the comprehension screen ({g['note']})" if g and not g["passed"] else ""
        floor = r["floor"] or (
            f"control {r['control_floor']}" if isinstance(r["control_floor"], str) and r["control_floor"] else ""
        )
        st, why = S.status(org_ok, ctl_ok, floor=floor, gate=gate, has_control=has_control)
        statuses.append(st)
        reasons.append(why)
    df["status"] = statuses
    df["reason"] = reasons
    df["recovered"] = df["status"] == S.RECOVERED
    return df


def _summary_rows(df: pd.DataFrame, cfg: ValidateConfig) -> pd.DataFrame:
    head = df[df["headline"]]
    rows = [
        C.row("summary", key, "count", n, kind="summary")
        for key, n in (
            ("headline checks", len(head)),
            ("recovered", int((head["status"] == S.RECOVERED).sum())),
            ("uninformative", int((head["status"] == S.UNINFORMATIVE).sum())),
            ("undetermined", int((head["status"] == S.UNDETERMINED).sum())),
            ("not recovered", int((head["status"] == S.NOT_RECOVERED).sum())),
        )
    ]
    rows += [C.row("setting", k, "value", float(v), kind="setting") for k, v in cfg.thresholds().items()]
    return pd.DataFrame(rows)


def _time_rows(tree: Path, ctree: Path | None, out: Path) -> pd.DataFrame:
    """Wall seconds of the organism build, the control build and the validation sweeps (reported),
    from the trees' build.json and OUT/results/validate_time.json; what is missing is left out."""
    rows = []
    builds = [("organism build", tree / "build.json")] + ([("control build", ctree / "build.json")] if ctree else [])
    for subject, path in builds:
        if not path.is_file():
            continue
        b = json.loads(path.read_text(encoding="utf-8"))
        rows.append(
            C.row(
                "wall time (reported)",
                subject,
                "seconds",
                b["seconds"]["total"],
                reference=f"{b.get('threads')} threads, training {b.get('train_precision', 'float32')}, "
                f"load average {b['loadavg_start'][0]:.2f} at start",
            )
        )
    path = out / "results" / "validate_time.json"
    if path.is_file():
        v = json.loads(path.read_text(encoding="utf-8"))
        rows.append(
            C.row(
                "wall time (reported)",
                "validation sweeps",
                "seconds",
                v["seconds"],
                reference=f"{v['threads']} threads, {v.get('workers', 1)} worker(s), {v.get('dtype', 'float32')}, "
                f"{v.get('checkpoints', 'all')} checkpoints, load average {v['loadavg_start']:.2f} at start",
            )
        )
    if len(rows) > 1:
        rows.append(C.row("wall time (reported)", "total", "seconds", sum(r["value"] for r in rows)))
    return _reported(rows)


def _reported(rows: list[dict]) -> pd.DataFrame:
    """Rows that are reported, never counted (wall times, precision)."""
    return pd.DataFrame(rows).assign(status=S.REPORTED, recovered=False) if rows else pd.DataFrame()


def _precision_rows(out: Path) -> pd.DataFrame:
    """What the reduced-precision sweeps cost against float32 (reported): per lineage, the largest
    verdict-probability move over its units' precision.csv (each unit re-scored a seeded sample in
    float32), with the units, prompts and argmax flips behind it. Float32 sweeps add no row."""
    from sweeps.precision import PRECISION_FILE

    rows = []
    for subject, root in (("organism sweeps", out), ("control sweeps", out / "control")):
        parts = [p / "results" / PRECISION_FILE for p in (root, root / "aux", root / "train_wording")]
        tabs = [pd.read_csv(p) for p in parts if p.is_file()]
        if not tabs:
            continue
        t = pd.concat(tabs, ignore_index=True)
        inside = "all within" if t["within_bounds"].astype(str).eq("True").all() else "NOT all within"
        rows.append(
            C.row(
                "reduced-precision sweeps vs float32 (reported)",
                subject,
                "max |delta P| of a verdict",
                float(t["max_abs_dp"].max()),
                reference=f"{', '.join(sorted(set(t['dtype'].astype(str))))}: {len(t)} units, {int(t['n'].sum())} "
                f"prompts re-scored in float32, {int(t['argmax_flips'].sum())} argmax flips, {inside} the bounds",
            )
        )
    return _reported(rows)


def lineage_table(known: dict, kc: dict | None) -> pd.DataFrame:
    """What was built, from organism.json: the build settings, the plant and its set sizes, beside
    the control's (the same by construction, except `control`)."""

    def flat(k: dict) -> dict:
        cfg = k.get("config", {})
        d = {key: (",".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for key, v in cfg.items()}
        d["plant"] = k.get("plant", cfg.get("plant", "items"))
        d["evaluated items"] = len(k["eval_items"])
        for route, items in k["route_planted"].items():
            d[f"planted items {route}"] = len(items)
        d["cloze plant"] = k["cloze"].get("route") or "none"
        d["control"] = bool(k.get("control"))
        return d

    org = flat(known)
    ctl = flat(kc) if kc is not None else {}
    return pd.DataFrame(
        {"setting": list(org), "organism": [org[k] for k in org], "control": [ctl.get(k, "") for k in org]}
    )


def validate(
    tree: str | Path,
    out: str | Path,
    cfg: ValidateConfig = ValidateConfig(),
    *,
    control: str | Path | None = None,
    run: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    history: str | Path | None = None,
) -> pd.DataFrame:
    """Sweep the organism and its control (resumable), check every known answer on both, and write
    OUT/results/validation_checks.csv, OUT/results/organism_predictive.csv and OUT/validation.md.

    `history`: a CSV of earlier tries of the organism's settings (columns try, settings, outcome,
    ...), copied to OUT/results/tries.csv and listed in validation.md."""
    from analyses.io import write_table
    from interp.organism.report import trajectory_figure, write_markdown

    tree, out = Path(tree), Path(out)
    if cfg.workers < 1:
        raise ConfigError(f"workers = {cfg.workers}: sweep at least 1 checkpoint at a time")
    if cfg.checkpoints not in CHECKPOINT_SETS:
        raise ConfigError(f"checkpoints = {cfg.checkpoints!r}: one of {', '.join(CHECKPOINT_SETS)}")
    known = load_known(tree)
    if known.get("control"):
        raise ConfigError(f"{tree / 'organism.json'}: this is a control lineage; validate its organism instead")
    ctree = resolve_control(tree, known, control)
    kc = load_known(ctree) if ctree is not None else None
    if history is not None:
        history = Path(history)
        if not history.is_file():
            raise ConfigError(f"{history}: no such file (--history: a CSV of earlier tries)")
        tries = pd.read_csv(history)
        if not {"try", "settings", "outcome"} <= set(tries.columns):
            raise ConfigError(f"{history}: needs the columns try, settings, outcome")
    if run:
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        run_sweeps(tree, out, known, cfg, progress=progress)
        if cfg.generalisation:
            run_generalisation(tree, out, known, cfg, progress=progress)
        if ctree is not None:
            share_trunk_units(out, out / "control", known)
            run_sweeps(ctree, out / "control", kc, cfg, progress=progress)
        (out / "results").mkdir(parents=True, exist_ok=True)
        (out / "results" / "validate_time.json").write_text(
            json.dumps(
                {
                    "seconds": time.perf_counter() - t0,
                    "threads": cfg.threads,
                    "workers": cfg.workers,
                    "dtype": cfg.dtype,
                    "checkpoints": cfg.checkpoints,
                    "loadavg_start": load0,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    org_rows, predictive = C.tree_checks(out, known, cfg)
    ctl_rows, ctl_pred = C.tree_checks(out / "control", kc, cfg) if ctree is not None else ([], None)
    if ctree is not None:  # organism - control checks; their "control" is the other route's set
        diff_rows, diff_ctl = difference_checks(out, out / "control", known, kc, cfg)
        org_rows, ctl_rows = org_rows + diff_rows, ctl_rows + diff_ctl
    checks = combine(org_rows, ctl_rows, cfg, has_control=ctree is not None)
    extra = [_time_rows(tree, ctree, out), _precision_rows(out), _summary_rows(checks, cfg)]
    checks = pd.concat([checks, *extra], ignore_index=True)
    checks["commit"] = code_commit()
    preds = [predictive.assign(lineage="organism")]
    if ctl_pred is not None:
        preds.append(ctl_pred.assign(lineage="control"))
    pred = pd.concat(preds, ignore_index=True)
    (out / "results").mkdir(parents=True, exist_ok=True)
    write_table(pred, out / "results" / "organism_predictive.csv", columns=("lineage", *predictive.columns))
    write_table(checks, out / "results" / "validation_checks.csv")
    lineage_table(known, kc).to_csv(out / "results" / "lineages.csv", index=False)
    if history is not None:
        shutil.copyfile(history, out / "results" / "tries.csv")
    trajectory_figure(C._summary(out), known, _trunk(known), out / "figures" / "organism_trajectory.png")
    write_markdown(out, tree, Path(os.path.normpath(ctree)) if ctree is not None else None)
    n_rec, n = summarize(checks)
    log(f"{n_rec} of {n} known answers recovered; {out / 'validation.md'}")
    return checks


def summarize(checks: pd.DataFrame) -> tuple[int, int]:
    """(recovered, headline checks)."""
    head = checks[checks["headline"].astype(str) == "True"]
    return int((head["status"] == S.RECOVERED).sum()), len(head)


__all__: Sequence[str] = (
    "ValidateConfig",
    "validate",
    "load_known",
    "most_yielding",
    "hypergeom_p",
    "combine",
    "run_generalisation",
    "summarize",
)
