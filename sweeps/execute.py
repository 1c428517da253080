"""Run planned units: in-process, or on Dask distributed. Each unit is one atomic cache file.

Workers write their own unit files (the shards) straight into OUT/cache; the driver only
waits and then merges by reading them. A unit that is complete is never recomputed, so an
interrupted sweep resumes where it stopped and ends with the same tables.

Dask (see `DaskOptions`): one task per checkpoint (one model load), declaring resources
(`model_slot`=1 on a LocalCluster; whatever the config names on a real cluster, e.g. GPU=1);
a task that raises is retried `retries` times and a task whose worker dies is rescheduled up to
`allowed_failures` times (a killed worker loses only its unfinished unit: finished ones are
already complete files). A task that still fails is returned as failures (written to
OUT/failures.csv by the sweep) while the others finish. The driver gives up with one line
when no worker has been connected for `worker_timeout` seconds. Each worker caps torch
threads (cfg.threads, else its cores, or its SLURM job's CPUs, / worker threads) and fingerprints
what it loaded. Each task attempt logs which worker (pid, SLURM job) runs it to OUT/sweep.log; a
task whose workers died inside SLURM jobs fails with SLURM's account of how those jobs ended
(`sweeps.slurm.job_end_reason`: out of memory, time limit, cancelled) in OUT/failures.csv.

The local executor stops at the first error (a bad input is reported, exit 2).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from collections import defaultdict
from pathlib import Path
from typing import Callable, Sequence

from tqdm.auto import tqdm

from cache.store import CONTENT_ATTR, MODE_ATTR, Store
from interp.model.devices import MEDIUM_DTYPES, tie_guard_in_force
from interp.core.errors import CheckpointError, ConfigError, InterpError
from interp.core.registry import Registry
from interp.studies import get_study
from interp.studies.base import RunConfig
from sweeps.plan import PlannedUnit, reuse_status
from sweeps.precision import PRECISION_TABLE

log = logging.getLogger("interp.sweep")


def run_checkpoint_units(
    checkpoint: Path,
    units: Sequence[PlannedUnit],
    store_root: Path,
    cfg: RunConfig,
    on_done: Callable[[PlannedUnit, float], None] | None = None,
) -> list[str]:
    """Load one checkpoint once and run its units that are not complete yet, or whose recorded
    content hash does not match the bytes loaded now (said in one line each)."""
    store = Store(store_root)
    todo = [u for u in units if reuse_status(store, u, u.content)[0] != "done"]
    if not todo:
        return []
    from interp.model.loading import load

    lm = todo[0].model or load(
        checkpoint,
        backend=cfg.backend,
        threads=cfg.threads,
        dtype=cfg.dtype,
        device=cfg.device,
        device_map=cfg.device_map,
        allow_pickle=cfg.allow_pickle,
        full_hash=cfg.full_hash,
    )
    planned = {u.identity.checkpoint_fingerprint for u in todo}
    if planned != {lm.fingerprint}:
        # the weights (or tokenizer) changed after planning: numbers would go under a stale id
        raise CheckpointError(
            f"{checkpoint}: checkpoint changed since the sweep was planned (fingerprint "
            f"{sorted(planned)[0][:12]} -> {lm.fingerprint[:12]}); rerun the sweep to plan it afresh"
        )
    # re-verified on load: the content hash of the bytes just loaded decides reuse. Units that
    # run anyway go first, while the hash is still being taken in the background (`lm.content`
    # waits for it: at the first unit written, or here for the units that wait on it).
    must = {id(u) for u in todo if reuse_status(store, u, u.content)[0] == "todo"}
    done = []
    for u in sorted(todo, key=lambda u: id(u) not in must):
        if id(u) not in must:
            status, why = reuse_status(store, u, lm.content)
            if status == "done":
                log.info("verified %s %s %s: same weight bytes, reused", u.identity.checkpoint, u.study, u.bank.name)
                continue
            if why:
                warnings.warn(why, stacklevel=2)
                log.warning(why)
        t0 = time.perf_counter()
        study = get_study(u.study)
        steer = cfg.steering
        from interp.runner.precision import audited

        # a reduced precision re-scores a seeded sample in float32 (stored as table precision_sample)
        try:
            with audited(lm, seed=cfg.seed) as audit:
                if steer:  # add alpha x direction at resid_pre while the unit is scored (interp.runner.steering)
                    from interp.runner.steering import Steering, steering, steering_json

                    spec = Steering.from_options(steer)
                    with steering(lm, spec):
                        payload = study.run_unit(lm, u.bank, u.template, u.identity.layers, cfg)
                        if audit is not None:  # its top-up to 32 prompts re-scores them steered too
                            audit.finish()
                else:
                    payload = study.run_unit(lm, u.bank, u.template, u.identity.layers, cfg)
        except Exception:
            # what the load's content hash found (a NaN in a weight, files changed while loading)
            # is the cause to report, not the scoring error it led to ("p_gold must be a probability")
            _ = lm.content
            raise
        guard = {}
        if audit is not None:
            payload.tables[PRECISION_TABLE] = audit.table()
            # the tie guard in force and how many prompts it re-scored in float32 (precision.csv)
            guard = {
                "tie_guard": tie_guard_in_force(lm.dtype, cfg.scoring.tie_guard),
                "tie_guarded": audit.guarded,
                # what the precision bought: its realised speed-up over float32 and where the time went
                **{f"precision_{k}": v for k, v in audit.timing().items()},
            }
            if lm.dtype in MEDIUM_DTYPES and lm.device_class in ("cpu", "cuda"):
                # what "medium" did on the machine that scored the unit (mixed-bf16-medium's layout
                # depends on it: interp.runner.mixed.make_mixed_medium)
                from interp.runner.mixed import medium_operand_error

                guard["medium_operand_error"] = medium_operand_error(lm.device_class)
        for df in payload.tables.values():
            if "bank" not in df:
                df.insert(0, "bank", u.bank.name)
            if "checkpoint" not in df:
                df.insert(0, "checkpoint", u.identity.checkpoint)
        store.write(
            u.identity,
            tables=payload.tables,
            arrays=payload.arrays,
            extra_attrs={
                "checkpoint_path": "in-memory" if u.model is not None else str(Path(checkpoint).resolve()),
                "n_items": len(u.bank),
                **({"steering": steering_json(spec)} if steer else {}),
                "bank_source": _source_path(u.bank.source),
                "template": u.template.name,
                # residual arrays carry a layer axis in this order (cache.layers)
                "layers": list(u.identity.layers),
                "n_layers": lm.n_layers,
                "dtype": lm.dtype,
                "device": lm.device,
                CONTENT_ATTR: lm.content,
                MODE_ATTR: "wrapped" if u.model is not None else "full" if cfg.full_hash else "sampled",
                **guard,
            },
        )
        done.append(u.identity.hash)
        if on_done:
            on_done(u, time.perf_counter() - t0)
    return done


@dataclass(frozen=True)
class DaskOptions:
    """How units run on Dask (config keys dask_retries, dask_allowed_failures, dask_worker_timeout,
    dask_resources in the run config's options; CLI --retries, --worker-timeout)."""

    retries: int = 2  # re-runs of a task that raised
    allowed_failures: int = 3  # worker deaths a task may cause before it is given up
    worker_timeout: float = 300.0  # seconds without any connected worker before the driver gives up
    resources: dict = field(default_factory=dict)  # declared per task on an external cluster

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "DaskOptions":
        res = dict(cfg.dask_resources or {})
        if not all(isinstance(v, (int, float)) for v in res.values()):
            raise ConfigError(f"option dask_resources must map resource names to numbers (got {res!r})")
        if cfg.dask_retries < 0 or cfg.dask_allowed_failures < 0 or cfg.dask_worker_timeout <= 0:
            raise ConfigError("dask_retries and dask_allowed_failures must be >= 0, dask_worker_timeout > 0")
        return cls(
            retries=int(cfg.dask_retries),
            allowed_failures=int(cfg.dask_allowed_failures),
            worker_timeout=float(cfg.dask_worker_timeout),
            resources=res,
        )


@dataclass(frozen=True)
class Failure:
    checkpoint: str
    unit: str
    study: str
    bank: str
    error: str


def execute(
    units: Sequence[PlannedUnit],
    store: Store,
    cfg: RunConfig,
    *,
    executor: str = "local",
    scheduler: str | None = None,
    n_workers: int = 2,
    progress: bool = True,
    failures: list[Failure] | None = None,
    cluster_config: dict | None = None,
) -> int:
    """Run every unit not yet complete; returns how many were to run.

    With Dask, units that fail after their retries are appended to `failures` (when given;
    otherwise the first failure is raised) and the others still run.
    """
    store.clean_stale()
    if progress and executor == "local":  # a bar inside each unit too (scoring batches)
        cfg = replace(cfg, scoring=replace(cfg.scoring, progress=True))
    todo = []
    n_verify = 0
    for u in units:
        if store.is_complete(u.identity):
            problem = store.verify(u.identity)  # a complete unit whose body was damaged on disk
            if problem is None:
                status, why = reuse_status(store, u, u.content)
                if status == "done":
                    continue
                if why:  # known now (memo) to differ from the bytes it ran on: one line
                    warnings.warn(why, stacklevel=2)
                    log.warning(why)
                    u = replace(u, recompute=why)  # no second line at load
                else:
                    n_verify += 1  # checked against the bytes when its checkpoint loads
            else:
                aside = store.set_aside(store.path_for(u.identity))
                msg = f"{problem}: moved to {aside.name}, recomputing"
                warnings.warn(msg, stacklevel=2)
                log.warning(msg)
        todo.append(u)
    by_ckpt: dict[Path, list[PlannedUnit]] = defaultdict(list)
    for u in todo:
        by_ckpt[u.checkpoint].append(u)
    log.info(
        "plan: %d units, %d to run, %d already complete%s",
        len(units),
        len(todo) - n_verify,
        len(units) - len(todo),
        f", {n_verify} complete but checked against the weight bytes when loaded" if n_verify else "",
    )
    bar = tqdm(total=len(todo), desc="units", unit="unit", disable=not progress)

    def done(u: PlannedUnit, seconds: float) -> None:
        log.info("done %s %s %s (%.1fs)", u.identity.checkpoint, u.study, u.bank.name, seconds)
        bar.update(1)

    run = EXECUTORS.get(executor)  # an unknown name is a one-line ConfigError before any work
    try:
        if executor != "local" and any(u.model is not None for u in todo):
            raise ConfigError("in-memory models (interp.wrap) run with executor='local' only")
        got = run(
            by_ckpt,
            store,
            cfg,
            scheduler=scheduler,
            n_workers=n_workers,
            bar=bar,
            on_done=done,
            cluster_config=cluster_config,
        )
        if got and failures is None:
            raise InterpError(f"unit {got[0].unit} ({got[0].checkpoint}) failed: {got[0].error}")
        if got:
            failures.extend(got)
    finally:
        bar.close()
    return len(todo)


# An executor runs {checkpoint: units} (each checkpoint's units in one worker, which loads the
# model once) and reports progress; workers write their own unit files into the store. It
# returns the units that failed after their retries (Dask), or raises (local).
Executor = Callable[..., "list[Failure] | None"]
EXECUTORS: Registry[Executor] = Registry("executor")


@EXECUTORS.register("local")
def _execute_local(by_ckpt, store: Store, cfg: RunConfig, *, on_done, **_) -> None:
    for ck, us in by_ckpt.items():
        run_checkpoint_units(ck, us, store.root, cfg, on_done=on_done)


# Each task attempt announces itself under this event topic: the driver logs which worker (and
# SLURM job) runs which checkpoint, and a failed task's error carries how SLURM ended its jobs.
ATTEMPT_TOPIC = "interp-attempt"


def _dask_task(checkpoint: Path, units: Sequence[PlannedUnit], store_root: Path, cfg: RunConfig) -> list[str]:
    """Runs on a worker: announce the attempt, cap torch threads to this worker's share of the cores, run."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except Exception:  # noqa: BLE001 - not on a worker (tests call it directly)
        worker = None
    if worker is not None:
        worker.log_event(
            ATTEMPT_TOPIC,
            {
                "key": str(worker.get_current_task()),
                "checkpoint": str(checkpoint),
                "worker": str(worker.address),
                "pid": os.getpid(),
                "slurm_job": os.environ.get("SLURM_JOB_ID", ""),
            },
        )
    if not cfg.threads:
        per_worker = worker.state.nthreads if worker is not None else 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        # a SLURM job may see every core of its node (TaskPlugin=task/none binds nothing): keep to its CPUs
        slurm_cpus = os.environ.get("SLURM_CPUS_PER_TASK", "")
        if slurm_cpus.isdigit() and int(slurm_cpus) > 0:
            cores = min(cores, int(slurm_cpus))
        cfg = replace(cfg, threads=max(1, cores // max(1, per_worker)))
    return run_checkpoint_units(checkpoint, units, store_root, cfg)


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, InterpError) else str(exc)
    return " ".join(text.split())[:500]


@EXECUTORS.register("slurm")
def _execute_slurm(by_ckpt, store: Store, cfg: RunConfig, *, cluster_config: dict | None = None, **kw) -> list[Failure]:
    if not cluster_config:
        raise ConfigError("--executor slurm needs --cluster-config FILE (see examples/slurm.toml)")
    return _execute_dask(by_ckpt, store, cfg, cluster_config=cluster_config, **kw)


@EXECUTORS.register("dask")
def _execute_dask(
    by_ckpt, store: Store, cfg: RunConfig, *, scheduler, n_workers, bar, cluster_config: dict | None = None, **_
) -> list[Failure]:
    import dask
    from distributed import Client, LocalCluster, wait
    from distributed.scheduler import KilledWorker

    if not by_ckpt:  # nothing to run: start no cluster, submit no job
        return []
    opts = DaskOptions.from_config(cfg)
    cluster = None
    with dask.config.set({"distributed.scheduler.allowed-failures": opts.allowed_failures}):
        try:
            if cluster_config:
                from sweeps.slurm import make_slurm_cluster, task_resources

                cluster = make_slurm_cluster(cluster_config)
                cluster.scale(jobs=int(cluster_config["slurm"].get("jobs", n_workers)))
                client = Client(cluster)
                resources = {**task_resources(cluster_config), **opts.resources}
            elif scheduler:
                client = Client(scheduler, timeout=opts.worker_timeout)
                resources = dict(opts.resources)
            else:
                cluster = LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.CRITICAL,
                    resources={"model_slot": 1},
                    # the sweep's environment (memo and cache paths, offline flags) in every
                    # worker, also where Dask is set to fork workers from a server started earlier
                    env=dict(os.environ),
                )
                client = Client(cluster)
                resources = {"model_slot": 1, **opts.resources}
        except Exception as exc:  # noqa: BLE001 - a worker killed during start-up raises many types
            if cluster is not None:
                cluster.close()
            raise InterpError(f"dask: cannot start or reach the cluster ({_one_line(exc)})") from None
    failures: list[Failure] = []
    attempts: dict[str, list[dict]] = defaultdict(list)  # task key -> its attempts (ATTEMPT_TOPIC events)

    def on_attempt(event: tuple) -> None:
        msg = event[1]
        attempts[msg["key"]].append(msg)
        job = f", SLURM job {msg['slurm_job']}" if msg.get("slurm_job") else ""
        log.info("started %s on %s (pid %s%s)", msg["checkpoint"], msg["worker"], msg["pid"], job)

    try:
        client.subscribe_topic(ATTEMPT_TOPIC, on_attempt)
        futures = {}
        for ck, us in by_ckpt.items():
            fut = client.submit(
                _dask_task,
                ck,
                us,
                store.root,
                cfg,
                pure=False,
                retries=opts.retries,
                resources=resources or None,
                key=f"interp-unit-{us[0].identity.hash[:16]}-{uuid.uuid4().hex[:8]}",
            )
            futures[fut] = (ck, us)
        pending = set(futures)
        no_worker_since: float | None = None
        while pending:
            try:
                wait(pending, timeout=2.0, return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
            finished = {f for f in pending if f.done()}
            pending -= finished
            for fut in finished:
                ck, us = futures[fut]
                if fut.status == "finished":
                    for u in us:
                        log.info("done %s %s %s (dask)", u.identity.checkpoint, u.study, u.bank.name)
                    bar.update(len(us))
                    continue
                jobs: list[str] = []
                try:
                    fut.result()
                    error = "task cancelled"
                except BaseException as exc:  # noqa: BLE001 - a worker's error, whatever it is
                    error = _one_line(exc)
                    if isinstance(exc, KilledWorker):  # the SLURM jobs its workers died in
                        key = str(fut.key)
                        tried = attempts.get(key) or [
                            m for _, m in client.get_events(ATTEMPT_TOPIC) if m.get("key") == key
                        ]
                        # a job killed before the task started (e.g. while it imported) sent no event:
                        # our own dask-jobqueue cluster knows the last worker's job
                        last = getattr(getattr(cluster, "workers", {}).get(exc.last_worker.name), "job_id", None)
                        jobs = [a["slurm_job"] for a in tried if a.get("slurm_job")] + ([str(last)] if last else [])
                if jobs:  # SLURM's word on how those jobs ended (out of memory, time limit, cancelled)
                    from sweeps.slurm import job_end_reason

                    why = "; ".join(filter(None, (job_end_reason(j) for j in dict.fromkeys(jobs))))
                    error = f"{why} | {error}"[:1000] if why else error
                for u in us:
                    if not store.is_complete(u.identity):
                        failures.append(
                            Failure(str(u.identity.checkpoint), u.identity.hash[:16], u.study, u.bank.name, error)
                        )
                        log.error("failed %s %s %s: %s", u.identity.checkpoint, u.study, u.bank.name, error)
                bar.update(len(us))
            if not pending:
                break
            n_workers_now = len(client.scheduler_info().get("workers", {}))
            if n_workers_now:
                no_worker_since = None
            elif no_worker_since is None:
                no_worker_since = time.monotonic()
            elif time.monotonic() - no_worker_since > opts.worker_timeout:
                raise InterpError(
                    f"dask: no worker connected for {opts.worker_timeout:.0f} s with "
                    f"{len(pending)} task(s) left; units finished so far are kept in {store.root}"
                )
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return failures


def _source_path(source: str) -> str:
    """A bank file named relative to the sweep's working directory, made absolute: the viewer and
    `interp steer` read it back from elsewhere. A bank's name (an embedded bank) stays as it is."""
    path = Path(source)
    return str(path.resolve()) if not path.is_absolute() and path.is_file() else source
