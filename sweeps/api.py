"""`run_sweep`: the Python entry point behind `interp sweep` (plan -> execute -> merge -> report)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import pandas as pd

from cache.store import Store, read_unit
from interp.errors import ConfigError
from interp.studies import get_study
from interp.studies.base import RunConfig
from sweeps.discover import discover
from sweeps.execute import execute
from sweeps.lock import sweep_lock
from sweeps.plan import PlannedUnit, describe_plan, plan_units


def make_output_dirs(out: Path) -> None:
    """Create OUT and its folders up front, so an unwritable OUT fails before any work."""
    for d in (out, out / "cache", out / "results", out / "figures"):
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{d}: cannot create output directory ({exc.strerror or exc})") from None


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
    checkpoints: Sequence[str | Path],
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
) -> dict[str, pd.DataFrame]:
    """Discover checkpoints, plan units, run what is missing, write OUT/results/*.csv.

    Returns the results tables by name (or, with dry_run, {"plan": table}).
    """
    out = Path(out)
    _check_names(studies, cfg, executor)
    found = discover([Path(c) for c in checkpoints])
    if not dry_run:
        make_output_dirs(out)
    units = plan_units(found.checkpoints, studies, banks=banks, template=template, cfg=cfg, names=found.names)
    store = Store(out / "cache")
    if dry_run:
        return {"plan": pd.DataFrame(describe_plan(units, store))}
    with sweep_lock(out, wait=lock_wait):
        handler = _attach_log(out)
        try:
            execute(units, store, cfg, executor=executor, scheduler=scheduler, n_workers=n_workers, progress=progress)
            found.write(out)  # only after success: a failed sweep keeps the previous lineage
            tables = analyze(out, units, cfg)
            if report:
                from sweeps.report import write_report

                write_report(out)
        finally:
            logging.getLogger("interp.sweep").removeHandler(handler)
            handler.close()
    return tables


def analyze(out: Path, units: Sequence[PlannedUnit], cfg: RunConfig) -> dict[str, pd.DataFrame]:
    """Merge the plan's units per study and write the study's results tables."""
    store = Store(out / "cache")
    results = out / "results"
    results.mkdir(parents=True, exist_ok=True)
    tables: dict[str, pd.DataFrame] = {}
    for study_name in dict.fromkeys(u.study for u in units):
        paths = [store.path_for(u.identity) for u in units if u.study == study_name]
        loaded = [read_unit(p, expect=u.identity.key()) for p, u in zip(paths, [u for u in units if u.study == study_name])]
        tables.update(get_study(study_name).analyze(loaded, results, cfg))
    return tables
