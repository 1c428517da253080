"""`run_sweep`: the Python entry point behind `interp sweep` (plan -> execute -> merge -> report)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Sequence

import pandas as pd

from cache.store import Store, read_unit
from analyses.io import write_table
from interp.core.errors import ConfigError, UnitsFailedError
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
        _, stale = store.current_units(warn=False) if store.root.is_dir() else ([], [])
        return {
            "plan": pd.DataFrame(describe_plan(units, store)),
            "stale": pd.DataFrame({"unit": [str(p.relative_to(store.root)) for p in stale]}, dtype=object),
        }
    failures: list[Failure] = []
    with sweep_lock(out, wait=lock_wait, break_lock=break_lock):
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
                found.write(out)  # only after success: a failed sweep keeps the previous lineage
            finished = [u for u in units if store.is_complete(u.identity)]
            tables = analyze(out, finished, cfg) if finished else {}
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


def analyze(out: Path, units: Sequence[PlannedUnit], cfg: RunConfig) -> dict[str, pd.DataFrame]:
    """Merge the plan's units per study and write the study's results tables.

    The tables are written as a set: into a staging directory (holding links to the other
    tables already in results/) that replaces results/ at the end, so a failure while writing
    (disk full) leaves the previous tables, all of them, and never a mix.
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
            if f.is_file():
                try:
                    os.link(f, staging / f.name)
                except OSError:
                    shutil.copy2(f, staging / f.name)
        every = []
        for study_name in dict.fromkeys(u.study for u in units):
            mine = [u for u in units if u.study == study_name]
            loaded = [read_unit(store.path_for(u.identity), expect=u.identity.key()) for u in mine]
            tables.update(get_study(study_name).analyze(loaded, staging, cfg))
            every += loaded
        precision = write_precision(every, staging)  # reduced-precision units only (sweeps.precision)
        if precision is not None:
            tables["precision"] = precision
        _swap_results(results, staging)
    except OSError as exc:
        raise ConfigError(
            f"{results}: cannot write the results tables ({exc.strerror or exc}); the previous tables are unchanged"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tables


def _swap_results(results: Path, staging: Path) -> None:
    old = results.with_name(f".results.old-{os.getpid()}")
    os.rename(results, old)
    os.rename(staging, results)  # a crash between the renames is undone by _recover_results
    shutil.rmtree(old, ignore_errors=True)
