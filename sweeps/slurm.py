"""A SLURM cluster for `interp sweep --executor slurm --cluster-config FILE` (dask-jobqueue).

One SLURM job = one Dask worker = one model at a time: the worker gets `cores` CPUs, torch
threads capped at `cores` (OMP_NUM_THREADS in the job script), and the resource `GPU` =
`gpus_per_job`, which every unit task asks for (so a worker never holds two models on one
GPU). Jobs are requested with `jobs`; a job that SLURM stops (SIGTERM at its time limit or
preemption) loses only its unfinished unit, which the scheduler reruns elsewhere.

The config file is TOML (see examples/slurm.toml):

    [slurm]          # passed to dask_jobqueue.SLURMCluster
    queue, account, walltime, cores, memory, gpus_per_job, jobs,
    job_extra_directives = [...], prologue = [...], local_directory, log_directory, interface
    [run]            # run-config options for the Dask executor
    dask_retries, dask_allowed_failures, dask_worker_timeout
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

from interp.core.files import regular_file
from interp.errors import ConfigError

_RUN_KEYS = {"dask_retries", "dask_allowed_failures", "dask_worker_timeout", "dask_resources"}
_KNOWN = {
    "queue",
    "account",
    "walltime",
    "cores",
    "memory",
    "gpus_per_job",
    "jobs",
    "job_extra_directives",
    "prologue",
    "local_directory",
    "log_directory",
    "interface",
    "python",
}


def read_cluster_config(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if path.exists():
        regular_file(path, limit=16 << 20, error=ConfigError)  # a FIFO would hang the read
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: cluster config does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    slurm = data.get("slurm")
    if not isinstance(slurm, dict):
        raise ConfigError(f"{path}: needs a [slurm] table")
    unknown = sorted(set(slurm) - _KNOWN)
    if unknown:
        raise ConfigError(f"{path}: field slurm.{unknown[0]} unknown (known: {', '.join(sorted(_KNOWN))})")
    for field in ("cores", "memory", "walltime"):
        if field not in slurm:
            raise ConfigError(f"{path}: field slurm.{field} is required")
    if not isinstance(slurm["cores"], int) or slurm["cores"] < 1:
        raise ConfigError(f"{path}: field slurm.cores must be a positive integer")
    run = dict(data.get("run", {}))
    bad = sorted(set(run) - _RUN_KEYS)
    if bad:
        raise ConfigError(f"{path}: field run.{bad[0]} unknown (known: {', '.join(sorted(_RUN_KEYS))})")
    return {"slurm": slurm, "run": run, "path": str(path)}


def task_resources(config: dict) -> dict[str, float]:
    gpus = config["slurm"].get("gpus_per_job", 0)
    return {"GPU": float(gpus)} if gpus else {"model_slot": 1.0}


def make_slurm_cluster(config: dict):
    """The SLURMCluster for `config` (nothing is submitted until `.scale(jobs=...)`)."""
    from dask_jobqueue import SLURMCluster

    s = config["slurm"]
    resources = task_resources(config)
    res_arg = ",".join(f"{k}={v:g}" for k, v in resources.items())
    prologue = [
        f"export OMP_NUM_THREADS={s['cores']}",
        f"export MKL_NUM_THREADS={s['cores']}",
        "export TOKENIZERS_PARALLELISM=false",
        "export HF_HUB_OFFLINE=1",
        *s.get("prologue", []),
    ]
    directives = list(s.get("job_extra_directives", []))
    if s.get("gpus_per_job") and not any("gres" in d or "gpus" in d for d in directives):
        directives.append(f"--gres=gpu:{s['gpus_per_job']}")
    kwargs: dict[str, Any] = dict(
        queue=s.get("queue"),
        account=s.get("account"),
        walltime=s["walltime"],
        cores=s["cores"],
        memory=s["memory"],
        processes=1,  # one worker per job: one model per job's GPU
        worker_extra_args=["--nthreads", "1", "--resources", res_arg],
        job_extra_directives=directives,
        job_script_prologue=prologue,
        python=s.get("python", sys.executable),
        silence_logs="error",
    )
    for k in ("local_directory", "log_directory", "interface"):
        if s.get(k):
            kwargs[k] = s[k]
    return SLURMCluster(**kwargs)
