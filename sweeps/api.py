"""`run_sweep`: the Python entry point behind `interp sweep` (plan -> execute -> merge -> report)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Sequence

import pandas as pd

from cache.store import CONTENT_ATTR, MODE_ATTR, Store, read_unit
from analyses.io import write_table
from interp.core.errors import CacheError, ConfigError, InterpError, UnitsFailedError
from interp.core.extras import require_extra
from interp.model.loading import LoadedModel
from interp.studies import get_study
from interp.studies.base import RunConfig
from sweeps.discover import discover
from sweeps.execute import Failure, execute
from sweeps.lock import sweep_lock
from sweeps.precision import write_precision
from sweeps.plan import PlannedUnit, describe_plan, plan_units


FAILURE_COLUMNS = ("checkpoint", "unit", "study", "bank", "error")


def make_output_dirs(out: Path) -> None:
    """Create OUT and its folders up front, so an unwritable OUT fails before any work."""
    _recover_results(out)
    for d in (out, out / "cache", out / "results", out / "figures"):
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{d}: cannot create output directory ({exc.strerror or exc})") from None
        if not os.access(d, os.W_OK | os.X_OK):
            raise ConfigError(f"{d}: output directory is not writable")


def _recover_results(out: Path) -> None:
    """A sweep killed between the two renames of `_swap_results` left results/ aside: restore it."""
    if out.is_dir() and not (out / "results").exists():
        old = sorted(out.glob(".results.old-*"), key=lambda p: p.stat().st_mtime_ns)
        if old:
            os.rename(old[-1], out / "results")


def _attach_log(out: Path) -> logging.Handler:
    handler = logging.FileHandler(out / "sweep.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("interp.sweep")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return handler


def _check_names(studies: Sequence[str], cfg: RunConfig, executor: str) -> None:
    """Unknown study, backend or executor names fail here, before any checkpoint is read."""
    from interp.runner.backends import BACKEND_REGISTRY  # a sweep runs models: torch is needed anyway
    from sweeps.execute import EXECUTORS

    for name in studies:
        get_study(name)
    BACKEND_REGISTRY.get(cfg.backend)
    EXECUTORS.get(executor)


def run_sweep(
    checkpoints: Sequence[str | Path | LoadedModel],
    *,
    studies: Sequence[str],
    out: str | Path,
    banks: Sequence[str] | None = None,
    template: str | None = None,
    cfg: RunConfig = RunConfig(),
    executor: str = "local",
    scheduler: str | None = None,
    n_workers: int = 2,
    dry_run: bool = False,
    lock_wait: float = 0.0,
    progress: bool = True,
    report: bool = True,
    prune: bool = False,
    break_lock: bool = False,
    cluster_config: str | Path | None = None,
    allow_unfingerprinted: bool = False,
    only: Sequence[str] | None = None,
) -> dict[str, pd.DataFrame]:
    """Discover checkpoints, plan units, run what is missing, write OUT/results/*.csv and the report.

    Parameters
    ----------
    checkpoints : sequence of str, Path or LoadedModel
        Checkpoint directories, trees of them, ``lineage.toml`` files, or models in memory
        (`interp.wrap`); units of a model in memory carry a ``wrapped:`` content fingerprint.
    studies : sequence of str
        Registered study names (pressure, classify, cloze, or one from an installed package).
    out : str or Path
        Output directory: cache/, results/, figures/, report.md.
    banks : sequence of str, optional
        Bank names or files (default: each study's shipped banks).
    template : str, optional
        Template name or file (default: each study's).
    cfg : RunConfig
        Run, scoring and study options.
    executor : {"local", "dask", "slurm"}
        Where units run.
    scheduler : str, optional
        Address of an existing Dask scheduler.
    n_workers : int
        Dask LocalCluster workers.
    dry_run : bool
        Return the plan and what is done; run nothing.
    lock_wait : float
        Seconds to wait for another sweep holding OUT.
    progress : bool
        Progress bars.
    report : bool
        Write report.md and the figures after the tables.
    prune : bool
        Delete stale units (superseded by a changed input) after the sweep.
    break_lock : bool
        Take over OUT's lock left by a dead sweep on another host.
    cluster_config : str or Path, optional
        Slurm: the TOML cluster config (examples/slurm.toml).
    allow_unfingerprinted : bool
        Allow merging ``wrapped:`` units with directory-fingerprinted ones of the same study.
    only : sequence of str, optional
        Sweep just these checkpoints of the tree (names as discovered, e.g.
        "route-a/a-sft-step42"); the lineage is cut to them.

    Returns
    -------
    dict of str to pandas.DataFrame
        The results tables by name; with ``dry_run``, ``{"plan": table}``.

    Raises
    ------
    UnitsFailedError
        With Dask, after units failed their retries: they are listed in OUT/failures.csv and the
        tables are written from the units that finished (exit code 3).
    """
    out = Path(out)
    _check_names(studies, cfg, executor)
    if executor == "slurm":
        require_extra("cluster", "--executor slurm")
    cluster = None
    if cluster_config:
        from dataclasses import replace

        from sweeps.slurm import read_cluster_config

        cluster = read_cluster_config(cluster_config)
        defaults = RunConfig()  # the file's [run] values apply where the command line kept the default
        cfg = replace(cfg, **{k: v for k, v in cluster["run"].items() if getattr(cfg, k) == getattr(defaults, k)})
    in_memory = [c for c in checkpoints if isinstance(c, LoadedModel)]
    found = (
        discover([Path(c) for c in checkpoints if not isinstance(c, LoadedModel)])
        if len(in_memory) < len(checkpoints)
        else None
    )
    if only is not None and found is not None:
        found = found.restricted(only)
    if not dry_run:
        make_output_dirs(out)
    units = plan_units(
        [*(found.checkpoints if found else []), *in_memory],
        studies,
        banks=banks,
        template=template,
        cfg=cfg,
        names=found.names if found else None,
    )
    check_fingerprint_kinds(units, allow=allow_unfingerprinted)
    store = Store(out / "cache")
    if dry_run:
        try:
            _, stale = store.current_units(warn=False) if store.root.is_dir() else ([], [])
        except CacheError as exc:  # a damaged current.json: the sweep itself rebuilds it
            warnings.warn(str(exc), stacklevel=2)
            stale = []
        return {
            "plan": pd.DataFrame(describe_plan(units, store)),
            "stale": pd.DataFrame({"unit": [str(p.relative_to(store.root)) for p in stale]}, dtype=object),
        }
    failures: list[Failure] = []
    with sweep_lock(out, wait=lock_wait, break_lock=break_lock):
        _clean_results_leftovers(out)
        earlier = earlier_units(out, store, units, cfg)  # refuses a clash before any compute
        handler = _attach_log(out)
        try:
            execute(
                units,
                store,
                cfg,
                executor=executor,
                scheduler=scheduler,
                n_workers=n_workers,
                progress=progress,
                failures=failures,
                cluster_config=cluster,
            )
            for line in store.record_current(u.identity for u in units):
                logging.getLogger("interp.sweep").info(line)
            _write_failures(out, failures)
            if not failures and found:
                # only after success: a failed sweep keeps the previous lineage; the checkpoints of
                # earlier sweeps whose rows stay in results/ stay listed
                found.write(out, keep={str(store.unit_attrs(p)["checkpoint"]) for p in earlier})
            finished = [u for u in units if store.is_complete(u.identity)]
            tables = analyze(out, finished, cfg, earlier=earlier) if finished else {}
            if report and finished:
                from sweeps.report import write_report

                write_report(out)
            if prune:
                for p in store.prune():
                    logging.getLogger("interp.sweep").info("pruned stale unit %s", p)
        finally:
            logging.getLogger("interp.sweep").removeHandler(handler)
            handler.close()
    if failures:
        raise UnitsFailedError(
            f"{len(failures)} of {len(units)} units failed after retries (first: "
            f"{failures[0].checkpoint}: {failures[0].error}); see {out / 'failures.csv'}"
        )
    return tables


def check_fingerprint_kinds(units: Sequence[PlannedUnit], *, allow: bool) -> None:
    """Refuse to merge in-memory (`wrapped:`) and directory-fingerprinted units of one study."""
    from interp.integrations.wrapping import is_wrapped_fingerprint

    for study in dict.fromkeys(u.study for u in units):
        kinds = {is_wrapped_fingerprint(u.identity.checkpoint_fingerprint) for u in units if u.study == study}
        if len(kinds) > 1 and not allow:
            wrapped = sorted(
                {
                    u.identity.checkpoint
                    for u in units
                    if u.study == study and is_wrapped_fingerprint(u.identity.checkpoint_fingerprint)
                }
            )
            raise ConfigError(
                f"study {study}: in-memory model(s) {', '.join(wrapped)} have no directory fingerprint; "
                "refusing to merge them with checkpoint directories (pass allow_unfingerprinted=True)"
            )


def _write_failures(out: Path, failures: list[Failure]) -> None:
    path = out / "failures.csv"
    if failures:
        write_table(pd.DataFrame([f.__dict__ for f in failures]), path, columns=FAILURE_COLUMNS)
    else:
        path.unlink(missing_ok=True)  # from an earlier sweep whose failures are now resolved


def check_unit_keys(units: Sequence[PlannedUnit]) -> None:
    """Tables are merged on (checkpoint, bank): two units of one study with the same pair would
    mix rows silently. The planner never makes such a pair; this refuses one if it appears."""
    seen: dict[tuple[str, str, str], str] = {}
    for u in units:
        key = (u.study, str(u.identity.checkpoint), u.identity.bank)
        if key in seen and seen[key] != u.identity.hash:
            raise ConfigError(
                f"two {u.study} units share checkpoint {key[1]!r} and bank {key[2]!r}; give the banks different names"
            )
        seen[key] = u.identity.hash


def analyze(
    out: Path, units: Sequence[PlannedUnit], cfg: RunConfig, *, earlier: Sequence[Path] = ()
) -> dict[str, pd.DataFrame]:
    """Merge the plan's units per study (with `earlier`: current units of earlier sweeps into OUT
    that the plan does not cover, see `earlier_units`) and write the study's results tables.

    The tables are written as a set: into a staging directory (holding links to everything else
    already in results/: other studies' tables, what probe / predict / steer wrote, folders
    included) that replaces results/ at the end, so a failure while writing (disk full) leaves the
    previous tables, all of them, and never a mix. `results/.tables.json` records which tables
    each study wrote (`interp report` says which one is missing).
    """
    check_unit_keys(units)
    store = Store(out / "cache")
    results = out / "results"
    results.mkdir(parents=True, exist_ok=True)
    staging = out / f".results.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    tables: dict[str, pd.DataFrame] = {}
    try:
        staging.mkdir()
        for f in results.iterdir():
            if f.is_dir() and not f.is_symlink():  # e.g. probe_weights/ (interp probe)
                shutil.copytree(f, staging / f.name, copy_function=_link_or_copy, symlinks=True)
            else:
                _link_or_copy(f, staging / f.name)
        every = []
        written: dict[str, list[str]] = {}
        for study_name in dict.fromkeys(u.study for u in units):
            mine = [u for u in units if u.study == study_name]
            loaded = [read_unit(store.path_for(u.identity), expect=u.identity.key()) for u in mine]
            loaded += [read_unit(p) for p in earlier if store.unit_attrs(p)["study"] == study_name]
            before = _inodes(staging)
            tables.update(get_study(study_name).analyze(loaded, staging, cfg))
            after = _inodes(staging)
            written[study_name] = sorted(n for n, ino in after.items() if before.get(n) != ino)
            every += loaded
        record_tables(staging, written)
        precision = write_precision(every, staging)  # reduced-precision units only (sweeps.precision)
        if precision is not None:
            tables["precision"] = precision
        _swap_results(results, staging)
    except OSError as exc:
        raise ConfigError(
            f"{exc.filename or results}: cannot write the results tables ({exc.strerror or exc}); "
            "the previous tables are unchanged"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tables


TABLES_RECORD = ".tables.json"


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _inodes(folder: Path) -> dict[str, int]:
    return {f.name: f.stat().st_ino for f in folder.glob("*.csv")}


def record_tables(results: Path, written: dict[str, list[str]]) -> None:
    """results/.tables.json: the tables each study's latest sweep wrote (the other studies' kept)."""
    from interp.core.atomic import atomic_write_text

    path = results / TABLES_RECORD
    try:
        old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        old = {}
    old = old if isinstance(old, dict) else {}
    atomic_write_text(path, json.dumps({**old, **written}, indent=1, sort_keys=True))


def _clean_results_leftovers(out: Path) -> None:
    """What a sweep killed while writing results/ left: its staging folder (`.results.tmp-PID`) and,
    once results/ is back, the previous tables set aside (`.results.old-PID`). Run under the sweep
    lock: no other sweep is writing results/ here."""
    for p in [*out.glob(".results.tmp-*"), *(out.glob(".results.old-*") if (out / "results").is_dir() else ())]:
        shutil.rmtree(p, ignore_errors=True)


def _base_bank(bank: object) -> str:
    return re.sub(r"\[n=\d+,seed=\d+\]$", "", str(bank))


def earlier_units(out: Path, store: Store, units: Sequence[PlannedUnit], cfg: RunConfig) -> list[Path]:
    """Current units of earlier sweeps into OUT, of this sweep's studies, whose checkpoint and bank
    this plan does not cover: their rows stay in results/ (the tables are written from them and the
    plan's units together).

    Refused in one line instead (before any compute): such a unit computed with other settings than
    this sweep's (template, study options, precision: what this sweep's options give for its
    checkpoint's tokenizer), where merging would mix settings in one table; and a checkpoint of the
    same name from another directory holding other weights, which would replace the other one's
    units and rows. A damaged current.json (rebuilt by this sweep) confirms no earlier unit: said
    in a warning."""
    studies = {u.study for u in units}
    covered = {(u.study, u.identity.checkpoint, _base_bank(u.identity.bank)) for u in units}
    planned = {u.identity.checkpoint: u for u in units if u.model is None}
    try:
        current, _ = store.current_units(warn=False)
    except CacheError as exc:
        msg = f"{exc}; rows of earlier sweeps this one does not cover are left out of results/"
        warnings.warn(msg, stacklevel=3)
        return []
    keep: dict[tuple[str, str, str], Path] = {}
    clash: list[str] = []
    for p in current:
        attrs = store.unit_attrs(p)
        if attrs is None or str(attrs.get("study")) not in studies:
            continue  # an unreadable unit is reported by whoever reads it
        study, name = str(attrs["study"]), str(attrs.get("checkpoint"))
        _same_name_other_directory(out, attrs, planned.get(name), full_hash=cfg.full_hash)
        key = (study, name, _base_bank(attrs.get("bank")))
        if key in covered:
            continue
        mine = [u for u in units if u.study == study]
        if key in keep or not _same_settings(attrs, mine, cfg):
            clash.append(f"{name} / {attrs.get('bank')}")
        else:
            keep[key] = p
    if clash:
        study = sorted(studies)[0] if len(studies) == 1 else "these studies'"
        raise ConfigError(
            f"{out / 'results'}: holds {study} rows of earlier sweeps that this one does not cover, computed with "
            f"other settings (template, options or precision): {', '.join(clash[:3])}"
            f"{' ...' if len(clash) > 3 else ''}; writing this sweep's tables would drop them. To keep them, sweep "
            "into another --out; to replace them, sweep their checkpoints and banks with this command's options too"
        )
    return sorted(keep.values())


def _same_settings(attrs: dict, units: Sequence[PlannedUnit], cfg: RunConfig) -> bool:
    """Whether an earlier unit has the settings this sweep would give it: the plan's template, study
    version and backend, and the settings hash of this sweep's options over its own checkpoint's
    tokenizer (the chat template is part of the settings, and differs between models). Where that
    checkpoint is gone, its settings must equal one of the plan's units'."""
    from interp.model.checkpoint import inspect_checkpoint
    from interp.model.loading import shared_tokenizer
    from sweeps.plan import settings_hash, unit_settings

    u = units[0]
    if [str(attrs.get(k)) for k in ("study_version", "template_hash", "backend")] != [
        str(u.identity.study_version),
        str(u.identity.template_hash),
        str(u.identity.backend),
    ]:
        return False
    try:
        where = str(attrs.get("checkpoint_path") or "in-memory")
        tok = shared_tokenizer(inspect_checkpoint(where, allow_pickle=cfg.allow_pickle))
    except InterpError:  # moved, deleted or in memory: compare with the plan's own units
        return str(attrs.get("settings_hash")) in {x.identity.settings_hash for x in units}
    return str(attrs.get("settings_hash")) == settings_hash(unit_settings(get_study(u.study), tok, cfg), cfg)


def _same_name_other_directory(out: Path, attrs: dict, planned: PlannedUnit | None, *, full_hash: bool) -> None:
    """Refuse a planned checkpoint whose name already stands, in OUT, for another directory holding
    other weights (a moved directory with the same weights, or one edited in place, is the same
    checkpoint)."""
    recorded = str(attrs.get("checkpoint_path", ""))
    if planned is None or not recorded or recorded == "in-memory":
        return
    if recorded == str(Path(planned.checkpoint).resolve()):
        return
    if planned.content and attrs.get(CONTENT_ATTR):
        other = attrs[CONTENT_ATTR] != planned.content
    elif str(attrs.get(MODE_ATTR, "sampled")) == ("full" if full_hash else "sampled"):
        other = attrs.get("checkpoint_fingerprint") != planned.identity.checkpoint_fingerprint
    else:
        return  # fingerprints taken two ways cannot be compared, and the content is not known yet
    if other:
        raise ConfigError(
            f"{planned.checkpoint}: checkpoint name {planned.identity.checkpoint!r} already stands in {out} for "
            f"{recorded}, which holds other weights; sweeping both under one name would replace that one's units "
            "and rows. Sweep it into another --out, or give its directory another name"
        )


def _swap_results(results: Path, staging: Path) -> None:
    old = results.with_name(f".results.old-{os.getpid()}")
    os.rename(results, old)
    os.rename(staging, results)  # a crash between the renames is undone by _recover_results
    shutil.rmtree(old, ignore_errors=True)
