"""`interp validate TREE --out DIR`: sweep an organism and its control lineages, decide every known answer.

The known answers come from `TREE/organism.json` (written by `interp organism build`): the
evaluated items, the planted sets, grades, cells and halves, the routes and the trunk end. The
control lineages (`control_trees`, or given) are built by the same code: the **location** control
trains the same plants on random items, the **amount** control trains routes that hold. Every
statistic (`interp.organism.checks`) runs on the organism and on both controls against the
organism's sets. What counts, each check's control, rule and threshold are the frozen check file
(`known_answers.toml`, sha256 in the record): a check is recovered when it passes on the organism
and fails on its control; a fail on the organism or a pass on the control is a miss (not
recovered); a Monte-Carlo p whose CI straddles alpha is undetermined (`combine`, `stats.status`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from interp.core.errors import ConfigError
from interp.organism import checks as C
from interp.organism import stats as S
from interp.organism.config import CONTROL_DIRS, ValidateConfig
from interp.organism.frozen import (
    FROZEN_FILE,
    CheckFile,
    Settings,
    committed_at,
    frozen_order,
    listed_settings,
    load_check_file,
    with_seed,
)
from interp.organism.tally import group_summary, headline


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


def lite_template_data() -> dict:
    """pressure_v1 with fewer wordings (both opinions, 1 challenge, 2 neutral fillers): 11 readings
    per item instead of 31, every wording still the evaluation template's (none is a training
    wording). A choice for CPU time; `--template full` evaluates with pressure_v1 itself."""
    from interp.studies.base import load_template

    data = dict(load_template("pressure_v1").data)
    data["version"] = "pressure-v1-lite"
    for key, keep in LITE.items():
        data[key] = {k: v for k, v in data[key].items() if k in keep}
    return data


def lite_template(dest: Path, data: dict | None = None) -> Path:
    """`lite_template_data()` (or `data`, a variant of it) written to `dest` as a template file."""
    data = lite_template_data() if data is None else data
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
    """Pressure at the checked checkpoints; cloze at the base and the cloze route's final and
    classify at the trunk end and the classify route's final (into OUT/aux, each checkpoint named
    by its directory name), where a check reads them."""
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
    cloze_route = known["cloze"].get("route")
    if cloze_route and cfg.cloze:
        run_sweep(
            [tree / c for c in ["base", known["routes"][cloze_route][-1]]],
            studies=["cloze"],
            out=out / "aux",
            cfg=RunConfig(max_items=cfg.cloze_items, **base),
            progress=progress,
            report=False,
            **_executor(cfg),
        )
    cls = known.get("classify") or {}
    if cls.get("route") and cfg.classify:
        run_sweep(
            [tree / c for c in [known["trunk_end"], known["routes"][cls["route"]][-1]]],
            studies=["classify"],
            out=out / "aux",
            cfg=RunConfig(max_items=cls["n_items"], **base),
            progress=progress,
            report=False,
            **_executor(cfg),
        )


CHECKPOINT_SETS = ("checked", "all")


def checked_checkpoints(known: dict) -> list[str]:
    """The checkpoints a check reads: the trunk end, each route's early checkpoint (the I check's
    own source) and its final."""
    return [
        known["trunk_end"],
        *(c for r, cks in known["routes"].items() for c in dict.fromkeys((C.early_checkpoint(known, r), cks[-1]))),
    ]


def _run_settings(known: dict, cfg: ValidateConfig) -> dict:
    """What every validation sweep runs with (the organism's and the control's alike); the
    sweeps' own CIs use the check file's bootstrap size."""
    threads = cfg.threads
    if cfg.workers > 1 and threads is not None:
        threads = max(1, threads // cfg.workers)
    return dict(seed=int(known["seed"]), threads=threads, n_boot=settings_for(cfg, known).n_boot, dtype=cfg.dtype)


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


def settings_for(cfg: ValidateConfig, known: dict) -> Settings:
    """The check file's settings, the run's overrides applied, seeded with the organism's seed."""
    from dataclasses import fields, replace

    st = with_seed(check_file_for(cfg).settings, int(known["seed"]))
    names = {f.name: f.type for f in fields(Settings)}
    bad = sorted(set(cfg.overrides) - set(names))
    if bad:
        raise ConfigError(f"overrides: unknown setting(s) {', '.join(bad)} (known: {', '.join(sorted(names))})")
    return replace(st, **{k: type(getattr(st, k))(v) for k, v in cfg.overrides.items()})


def check_file_for(cfg: ValidateConfig) -> CheckFile:
    return load_check_file(cfg.check_file) if cfg.check_file else load_check_file()


def unbuilt_controls(tree: Path, known: dict) -> dict[str, Path]:
    """Controls the build recorded whose lineage has no organism.json yet (a control build still
    running or stopped): validated without them, their checks undetermined."""
    recorded = {k: tree / v for k, v in (known.get("control_trees") or {}).items()}
    return {k: p for k, p in recorded.items() if not (p / "organism.json").is_file()}


def resolve_controls(tree: Path, known: dict, given: dict[str, Path] | None = None) -> dict[str, Path]:
    """The control lineages by kind: those given, else those `interp organism build --control`
    recorded and finished (`unbuilt_controls` are left out). Each must be a control of that kind
    built from the same evaluated and planted sets."""
    unbuilt = unbuilt_controls(tree, known)
    trees = {k: tree / v for k, v in (known.get("control_trees") or {}).items() if k not in unbuilt}
    trees.update({k: Path(v) for k, v in (given or {}).items() if v is not None})
    for kind, path in trees.items():
        if kind not in CONTROL_DIRS:
            raise ConfigError(f"control kind {kind!r} unknown (location or amount)")
        kc = load_known(path)
        if not kc.get("control") or kc.get("control_kind") != kind:
            raise ConfigError(f"{path / 'organism.json'}: not a {kind} control lineage (fields control, control_kind)")
        for key in ("eval_items", "planted_a", "planted_b", "routes", "trunk_end", "seed", "route_planted"):
            if kc.get(key) != known.get(key):
                raise ConfigError(f"{path / 'organism.json'}: field {key} differs from {tree / 'organism.json'}")
    return trees


# ---------------------------------------------------------------- decisions


_RAW = "raw"  # a control's p: against alpha itself, no Holm


def _decide(r: dict | None, spec, alpha: float, holm: bool | None | str = _RAW) -> bool | None:
    """Pass / fail / undetermined of one lineage's row under the check's rule; `holm`: the
    organism's Holm decision of this p (True / False / None: undetermined), or _RAW for a
    control (its p against alpha)."""
    if r is None or r["value"] != r["value"]:
        return False
    if spec.rule != "p":
        return bool(r["passed"])
    effect = bool(r.get("effect_ok", True))
    if not effect or r["p"] != r["p"]:
        return False
    if holm != _RAW:
        return holm  # an undetermined Holm decision stays undetermined
    return S.p_below(S.PValue(r["p"], r["p_lo"], r["p_hi"], int(r["n_shuffles"])), alpha)


def combine(rows: dict[str, list[dict]], cf: CheckFile, st: Settings) -> pd.DataFrame:
    """One row per counted check of the check file: the organism's figure, its control's figure
    beside it, the Holm-adjusted p, the status and the reason; `rows`: lineage -> its rows
    ("organism", "location", "amount", "spike-in")."""
    by = {lin: {r["id"]: r for r in rs if r.get("id")} for lin, rs in rows.items()}
    org = by["organism"]
    specs = cf.checks
    p_ids, pvals = C.counted_p_family(org, specs)
    holm_p = dict(zip(p_ids, S.holm([p.p for p in pvals])))
    holm_d = dict(zip(p_ids, S.holm_decisions(pvals, st.alpha)))
    gates = {r["subject"]: r for r in rows["organism"] if r["kind"] == "gate"}
    out = []
    for spec in specs:
        o, c = org.get(spec.id), by.get(spec.control, {}).get(spec.id)
        org_ok = _decide(o, spec, st.alpha, holm_d.get(spec.id, False))
        ctl_ok = _decide(c, spec, st.alpha) if spec.control in by else None
        g = gates.get(o["route"]) if o else None
        gate = f"route final fails the comprehension screen ({g['value']:.3f})" if g and not g["passed"] else ""
        needs = (o or {}).get("needs")  # a lineage the organism's figure itself reads
        if o is None:
            st_, why = S.NOT_RECOVERED, "not computed on the organism"
        elif spec.control not in by:
            st_, why = S.UNDETERMINED, f"no {spec.control} control lineage"
        elif needs and needs not in by:
            st_, why = S.UNDETERMINED, f"no {needs} control lineage (the figure reads it)"
        else:
            st_, why = S.status(org_ok, ctl_ok, gate=gate)
        base = o or C.row(spec.statistic, "", spec.id, math.nan)
        rec = {k: base.get(k) for k in C.ROW_KEYS}
        rec.update(
            id=spec.id,
            group=spec.group,
            rule=spec.rule,
            control=spec.control,
            kind="check",
            passed=org_ok,
            p_holm=holm_p.get(spec.id, math.nan),
            control_passed=ctl_ok,
            status=st_,
            reason=why,
        )
        for col in ("value", "lo", "hi", "p", "p_lo", "p_hi", "reference"):
            rec[f"control_{col}"] = c.get(col) if c else (math.nan if col != "reference" else "")
        out.append(rec)
    return pd.DataFrame(out)


def decide(
    out: Path, known: dict, controls: Sequence[str], cf: CheckFile, st: Settings
) -> tuple[dict[str, list[dict]], list[pd.DataFrame], pd.DataFrame]:
    """Every statistic on the organism's OUT and on each control's (OUT/control-<kind>), the
    spike-in's control, and the counted checks decided (`combine`): (rows by lineage, the
    predictive tables, the checks)."""
    amount = out / CONTROL_DIRS["amount"] if "amount" in controls else None
    rows: dict[str, list[dict]] = {}
    preds = []
    rows["organism"], pred = C.lineage_rows(out, known, st, reference_out=amount)
    preds.append(pred.assign(lineage="organism"))
    for kind in controls:
        rows[kind], pred = C.lineage_rows(out / CONTROL_DIRS[kind], known, st, reference_out=amount, organism_out=out)
        preds.append(pred.assign(lineage=f"{kind} control"))
    rows["spike-in"] = (
        C.mediation_rows(out, known, st, spike="language")
        + C.scale_spike_rows(out, known, st, control=True)
        + C.order_readout_spike_rows(out, known, st, control=True)
    )
    # the family-wise spike-in reads the organism's counted p-values, so it comes after them
    org = {r["id"]: r for r in rows["organism"] if r.get("id")}
    rows["organism"] += C.holm_spike_rows(org, cf.checks, st)
    rows["spike-in"] += C.holm_spike_rows(org, cf.checks, st, control=True)
    return rows, preds, combine(rows, cf, st)


def guard_table(rows: dict[str, list[dict]]) -> pd.DataFrame:
    """Guards, gates and reported figures of every lineage, long format (never counted)."""
    parts = []
    for lin, rs in rows.items():
        sub = [r for r in rs if r["kind"] in ("guard", "gate", "reported") and lin != "spike-in"]
        if sub:
            parts.append(pd.DataFrame(sub).assign(lineage=lin))
    df = pd.concat(parts, ignore_index=True)
    status = {"guard": S.GUARD, "gate": "gate", "reported": S.REPORTED}
    df["status"] = [
        status[k] if k == "reported" else f"{status[k]} {'held' if p else 'failed'}"
        for k, p in zip(df["kind"], df["passed"])
    ]
    return df


# ---------------------------------------------------------------- records


def _record_sweep_time(path: Path, this: dict) -> None:
    """Add this run's sweep seconds to OUT/results/validate_time.json: a validation rerun into the
    same OUT reuses the finished units, so its few seconds must not replace the first run's; the
    file keeps every run (`runs`) and `seconds` is their sum."""
    runs = []
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        runs = old.get("runs") or [{k: v for k, v in old.items() if k != "runs"}]
    runs.append(this)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {**runs[0], "seconds": sum(r["seconds"] for r in runs), "runs": runs}
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


def _time_rows(tree: Path, controls: dict[str, Path], out: Path) -> list[dict]:
    """Wall seconds of each build and of the validation sweeps (reported), from the trees'
    build.json and OUT/results/validate_time.json; what is missing is left out."""
    rows = []
    builds = [("organism build", tree / "build.json")]
    builds += [(f"{k} control build", p / "build.json") for k, p in controls.items()]
    for subject, path in builds:
        if not path.is_file():
            continue
        b = json.loads(path.read_text(encoding="utf-8"))
        rows.append(
            C.row(
                "wall time",
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
                "wall time",
                "validation sweeps",
                "seconds",
                v["seconds"],
                reference=f"{v['threads']} threads, {v.get('workers', 1)} worker(s), {v.get('dtype', 'float32')}, "
                f"{v.get('checkpoints', 'all')} checkpoints, load average {v['loadavg_start']:.2f} at start"
                + (f"; the sum of {len(v['runs'])} runs into this OUT" if len(v.get("runs", ())) > 1 else ""),
            )
        )
    if len(rows) > 1:
        rows.append(C.row("wall time", "total", "seconds", sum(r["value"] for r in rows)))
    return rows


def _precision_rows(out: Path) -> list[dict]:
    """Per lineage, the largest verdict-probability move of its reduced-precision sweeps against
    float32 (each unit re-scored a seeded sample in float32: precision.csv). Float32 sweeps add none."""
    from sweeps.precision import PRECISION_FILE

    rows = []
    lineages = [("organism sweeps", out)] + [(f"{k} control sweeps", out / d) for k, d in CONTROL_DIRS.items()]
    for subject, root in lineages:
        parts = [p / "results" / PRECISION_FILE for p in (root, root / "aux", root / "train_wording")]
        tabs = [pd.read_csv(p) for p in parts if p.is_file()]
        if not tabs:
            continue
        t = pd.concat(tabs, ignore_index=True)
        inside = "all within" if t["within_bounds"].astype(str).eq("True").all() else "NOT all within"
        rows.append(
            C.row(
                "reduced-precision sweeps vs float32",
                subject,
                "max |delta P| of a verdict",
                float(t["max_abs_dp"].max()),
                reference=f"{', '.join(sorted(set(t['dtype'].astype(str))))}: {len(t)} units, {int(t['n'].sum())} "
                f"prompts re-scored in float32, {int(t['argmax_flips'].sum())} argmax flips, {inside} the bounds",
            )
        )
    return rows


def lineage_table(known: dict, controls: dict[str, dict]) -> pd.DataFrame:
    """What was built, from each lineage's organism.json: the build settings and what each route
    was trained on (the controls' differ only there)."""

    def flat(k: dict) -> dict:
        cfg = k.get("config", {})
        d = {key: (",".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for key, v in cfg.items()}
        for route, t in (k.get("trained") or {}).items():
            d[f"{route} plant"] = t["plant"]
            d[f"{route} trained items"] = len(t["planted"])
        c = k["cloze"]
        d["cloze trained cell"] = c.get("trained_cell") or f"{c.get('language')}/{c.get('trained_axis')}"
        return d

    cols = {"organism": flat(known)} | {k: flat(v) for k, v in controls.items()}
    keys = list(dict.fromkeys(key for d in cols.values() for key in d))
    return pd.DataFrame({"setting": keys, **{lin: [d.get(k, "") for k in keys] for lin, d in cols.items()}})


def seeds_table(out: Path, checks: pd.DataFrame, cf: CheckFile, others: list[Path]) -> pd.DataFrame:
    """Per counted check: its status on this seed and on each other seed's finished validation
    (their results/validation_checks.csv, checked against the same check file), and on how many
    seeds it was recovered."""
    table = checks[["id", "group", "status"]].rename(columns={"status": "seed_this"}).set_index("id")
    for path in others:
        f = Path(path) / "results" / "validation_checks.csv"
        if not f.is_file():
            raise ConfigError(f"{f}: missing (--with-seed takes a finished `interp validate` OUT)")
        o = pd.read_csv(f)
        sha = set(o.loc[o["kind"] == "check", "check_file_sha256"].astype(str))
        if sha != {cf.sha256}:
            raise ConfigError(f"{f}: validated against another check file ({', '.join(sha)}), not {cf.sha256[:12]}")
        seed = int(o.loc[o["kind"] == "check", "seed"].iloc[0])
        table[f"seed_{seed}"] = o[o["kind"] == "check"].set_index("id")["status"].reindex(table.index)
    first = int(checks["seed"].iloc[0])
    table = table.rename(columns={"seed_this": f"seed_{first}"})
    table = table[["group", *sorted(c for c in table.columns if c.startswith("seed_"))]]
    seed_cols = [c for c in table.columns if c.startswith("seed_")]
    table["recovered_on"] = (table[seed_cols] == S.RECOVERED).sum(axis=1)
    table["seeds"] = len(seed_cols)
    return table.reset_index()


def validate(
    tree: str | Path,
    out: str | Path,
    cfg: ValidateConfig = ValidateConfig(),
    *,
    controls: dict[str, Path] | None = None,
    run: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    history: str | Path | None = None,
    with_seeds: Sequence[str | Path] = (),
) -> pd.DataFrame:
    """Sweep the organism and its control lineages (resumable), compute every check on each, decide
    the counted ones (`combine`) and write OUT/results/validation_checks.csv,
    OUT/results/organism_predictive.csv, OUT/results/lineages.csv (and seeds.csv with
    `with_seeds`: other seeds' finished validations) and OUT/validation.md.

    `history`: a CSV of earlier tries (columns try, settings, outcome, ...), copied to
    OUT/results/tries.csv and listed in validation.md."""
    from analyses.io import write_table
    from interp.organism.diagnose import MISSES_FILE, miss_table
    from interp.organism.report import trajectory_figure, write_markdown

    tree, out = Path(tree), Path(out)
    if cfg.workers < 1:
        raise ConfigError(f"workers = {cfg.workers}: sweep at least 1 checkpoint at a time")
    if cfg.checkpoints not in CHECKPOINT_SETS:
        raise ConfigError(f"checkpoints = {cfg.checkpoints!r}: one of {', '.join(CHECKPOINT_SETS)}")
    known = load_known(tree)
    if known.get("control"):
        raise ConfigError(f"{tree / 'organism.json'}: this is a control lineage; validate its organism instead")
    cf = check_file_for(cfg)
    st = settings_for(cfg, known)
    ctrees = resolve_controls(tree, known, controls)
    for kind, path in unbuilt_controls(tree, known).items():
        if kind not in ctrees:
            log(f"{path}: the {kind} control is not built (no organism.json): its checks are undetermined")
    kcs = {k: load_known(p) for k, p in ctrees.items()}
    if history is not None:
        history = Path(history)
        if not history.is_file():
            raise ConfigError(f"{history}: no such file (--history: a CSV of earlier tries)")
        if not {"try", "settings", "outcome"} <= set(pd.read_csv(history).columns):
            raise ConfigError(f"{history}: needs the columns try, settings, outcome")
    if run:
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        run_sweeps(tree, out, known, cfg, progress=progress)
        if cfg.generalisation:
            run_generalisation(tree, out, known, cfg, progress=progress)
        for kind, ctree in ctrees.items():
            share_trunk_units(out, out / CONTROL_DIRS[kind], known)
            run_sweeps(ctree, out / CONTROL_DIRS[kind], kcs[kind], cfg, progress=progress)
        this = {
            "seconds": time.perf_counter() - t0,
            "threads": cfg.threads,
            "workers": cfg.workers,
            "dtype": cfg.dtype,
            "checkpoints": cfg.checkpoints,
            "loadavg_start": load0,
        }
        _record_sweep_time(out / "results" / "validate_time.json", this)
    rows, preds, checks = decide(out, known, list(ctrees), cf, st)
    computed = {r["id"] for r in rows["organism"] if r.get("id")}
    unlisted = sorted(computed - set(cf.by_id()))
    extra = guard_table(rows)
    if unlisted:  # computed by the code but not pre-registered: shown, never counted
        extra = pd.concat(
            [
                extra,
                pd.DataFrame([r for r in rows["organism"] if r.get("id") in unlisted]).assign(
                    kind="unlisted", status="not counted: not in the check file", lineage="organism"
                ),
            ],
            ignore_index=True,
        )
    timing = pd.DataFrame(_time_rows(tree, ctrees, out) + _precision_rows(out))
    table = pd.concat([checks, extra, timing.assign(kind="reported", status=S.REPORTED)], ignore_index=True)
    table["commit"] = code_commit()
    table["check_file_sha256"] = cf.sha256
    table["seed"] = int(known["seed"])
    table["overrides"] = json.dumps(dict(cfg.overrides), sort_keys=True) if cfg.overrides else ""
    (out / "results").mkdir(parents=True, exist_ok=True)
    pred = pd.concat(preds, ignore_index=True)
    write_table(
        pred,
        out / "results" / "organism_predictive.csv",
        columns=("lineage", *[c for c in pred.columns if c != "lineage"]),
    )
    write_table(table, out / "results" / "validation_checks.csv")
    pd.DataFrame([listed_settings(st)]).to_csv(out / "results" / "validation_settings.csv", index=False)
    lineage_table(known, kcs).to_csv(out / "results" / "lineages.csv", index=False)
    group_summary(checks).to_csv(out / "results" / "validation_groups.csv", index=False)
    miss_table(out, known, checks, kcs).to_csv(out / "results" / MISSES_FILE, index=False)
    # the record's opening counts, so that its every number is one of the files the run wrote
    h = headline(checks)
    pd.DataFrame([h]).to_csv(out / "results" / "validation_headline.csv", index=False)
    seeds_path = out / "results" / "seeds.csv"
    if with_seeds:
        seeds_table(out, table[table["kind"] == "check"], cf, list(with_seeds)).to_csv(seeds_path, index=False)
    elif seeds_path.exists():
        seeds_path.unlink()
    # blind or post hoc: was the check file committed before each seed's sweeps first ran?
    when = committed_at(cf)
    frozen = [{"seed": int(known["seed"]), "out": str(out), **frozen_order(cf, out, when)}]
    for p in with_seeds:
        o = pd.read_csv(Path(p) / "results" / "validation_checks.csv")
        seed = int(o.loc[o["kind"] == "check", "seed"].iloc[0])
        frozen.append({"seed": seed, "out": str(p), **frozen_order(cf, Path(p), when)})
    pd.DataFrame(frozen).to_csv(out / "results" / FROZEN_FILE, index=False)
    if history is not None:
        shutil.copyfile(history, out / "results" / "tries.csv")
    trajectory_figure(C._summary(out), known, _trunk(known), out / "figures" / "organism_trajectory.png")
    write_markdown(out, tree, {k: Path(os.path.normpath(p)) for k, p in ctrees.items()}, cf)
    log(
        f"{h['recovered']} of {h['checks']} known answers recovered ({h['groups_recovered']} of {h['groups']} "
        f"groups); {h['not_recovered']} not recovered, {h['undetermined']} undetermined; {out / 'validation.md'}"
    )
    return table


def summarize(table: pd.DataFrame) -> tuple[int, int]:
    """(recovered, counted checks)."""
    checks = table[table["kind"] == "check"]
    return int((checks["status"] == S.RECOVERED).sum()), len(checks)


__all__: Sequence[str] = ("ValidateConfig", "validate", "load_known", "combine", "run_generalisation", "summarize")
