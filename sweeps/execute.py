"""Run planned units: in-process, or on Dask distributed. Each unit is one atomic cache file.

Workers write their own unit files (the shards) straight into OUT/cache; the driver only
waits and then merges by reading them. A unit that is complete is never recomputed, so an
interrupted sweep resumes where it stopped and ends with the same tables.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from collections import defaultdict
from pathlib import Path
from typing import Callable, Sequence

from tqdm.auto import tqdm

from cache.store import Store
from interp.core.registry import Registry
from interp.studies import get_study
from interp.studies.base import RunConfig
from sweeps.plan import PlannedUnit

log = logging.getLogger("interp.sweep")


def run_checkpoint_units(checkpoint: Path, units: Sequence[PlannedUnit], store_root: Path, cfg: RunConfig,
                         on_done: Callable[[PlannedUnit, float], None] | None = None) -> list[str]:
    """Load one checkpoint once and run its units that are not complete yet."""
    store = Store(store_root)
    todo = [u for u in units if not store.is_complete(u.identity)]
    if not todo:
        return []
    from interp.loading import load

    lm = load(checkpoint, backend=cfg.backend, threads=cfg.threads, allow_pickle=cfg.allow_pickle)
    done = []
    for u in todo:
        t0 = time.perf_counter()
        study = get_study(u.study)
        payload = study.run_unit(lm, u.bank, u.template, u.identity.layer, cfg)
        for df in payload.tables.values():
            if "bank" not in df:
                df.insert(0, "bank", u.bank.name)
            if "checkpoint" not in df:
                df.insert(0, "checkpoint", u.identity.checkpoint)
        store.write(u.identity, tables=payload.tables, arrays=payload.arrays,
                    extra_attrs={"checkpoint_path": str(Path(checkpoint).resolve()), "n_items": len(u.bank),
                                 "bank_source": u.bank.source, "template": u.template.name})
        done.append(u.identity.hash)
        if on_done:
            on_done(u, time.perf_counter() - t0)
    return done


def execute(units: Sequence[PlannedUnit], store: Store, cfg: RunConfig, *, executor: str = "local",
            scheduler: str | None = None, n_workers: int = 2, progress: bool = True) -> int:
    """Run every unit not yet complete; returns how many were computed now."""
    store.clean_stale()
    if progress and executor == "local":  # a bar inside each unit too (scoring batches)
        cfg = replace(cfg, scoring=replace(cfg.scoring, progress=True))
    todo = [u for u in units if not store.is_complete(u.identity)]
    by_ckpt: dict[Path, list[PlannedUnit]] = defaultdict(list)
    for u in todo:
        by_ckpt[u.checkpoint].append(u)
    log.info("plan: %d units, %d to run, %d already complete", len(units), len(todo), len(units) - len(todo))
    bar = tqdm(total=len(todo), desc="units", unit="unit", disable=not progress)

    def done(u: PlannedUnit, seconds: float) -> None:
        log.info("done %s %s %s (%.1fs)", u.identity.checkpoint, u.study, u.bank.name, seconds)
        bar.update(1)

    run = EXECUTORS.get(executor)  # an unknown name is a one-line ConfigError before any work
    try:
        run(by_ckpt, store, cfg, scheduler=scheduler, n_workers=n_workers, bar=bar, on_done=done)
    finally:
        bar.close()
    return len(todo)


# An executor runs {checkpoint: units} (each checkpoint's units in one worker, which loads the
# model once) and reports progress; workers write their own unit files into the store.
Executor = Callable[..., None]
EXECUTORS: Registry[Executor] = Registry("executor")


@EXECUTORS.register("local")
def _execute_local(by_ckpt, store: Store, cfg: RunConfig, *, on_done, **_) -> None:
    for ck, us in by_ckpt.items():
        run_checkpoint_units(ck, us, store.root, cfg, on_done=on_done)


@EXECUTORS.register("dask")
def _execute_dask(by_ckpt, store: Store, cfg: RunConfig, *, scheduler, n_workers, bar, **_) -> None:
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
    try:
        futures = {client.submit(run_checkpoint_units, ck, us, store.root, cfg, pure=False): us
                   for ck, us in by_ckpt.items()}
        for fut in as_completed(futures):
            fut.result()  # re-raise a worker's error here
            for u in futures[fut]:
                log.info("done %s %s %s (dask)", u.identity.checkpoint, u.study, u.bank.name)
            bar.update(len(futures[fut]))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
