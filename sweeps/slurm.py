"""A SLURM cluster for `interp sweep --executor slurm --cluster-config FILE` (dask-jobqueue).

One SLURM job = one Dask worker = one model at a time: the worker gets `cores` CPUs, torch
threads capped at `cores` (OMP_NUM_THREADS in the job script), and the resource `GPU` =
`gpus_per_job`, which every unit task asks for (so a worker never holds two models on one
GPU). Jobs are requested with `jobs`; a job that SLURM stops (SIGTERM at its time limit or
preemption) loses only its unfinished unit, which the scheduler reruns elsewhere.

SLURM enforces the memory request (`memory` -> `#SBATCH --mem`); the worker's nanny does not kill
at 95 % of it (DASK_DISTRIBUTED__WORKER__MEMORY__TERMINATE=False), so a unit that needs more ends
its job the way the site's policy says, and `job_end_reason` puts SLURM's account of it
(state, reason, exit code, slurmstepd's "Exceeded job memory limit") into OUT/failures.csv.
No dashboards: the scheduler's only with `dashboard_address`, the workers' never.

The config file is TOML (see examples/slurm.toml):

    [slurm]          # passed to dask_jobqueue.SLURMCluster
    queue, account, walltime, cores, memory, gpus_per_job, jobs,
    job_extra_directives = [...], prologue = [...], local_directory, log_directory, interface,
    python, dashboard_address
    [run]            # run-config options for the Dask executor
    dask_retries, dask_allowed_failures, dask_worker_timeout
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from interp.core.files import regular_file
from interp.core.errors import ConfigError

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
    "dashboard_address",
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


def _scheduler_http(s: dict) -> dict[str, Any]:
    """The scheduler's HTTP server: the dashboard only where `dashboard_address` asks for it; else
    a free port on the interface's address (dask-jobqueue's default, ":8787" on every address,
    collides between users of one login node)."""
    if s.get("dashboard_address"):
        return {"dashboard_address": s["dashboard_address"], "dashboard": True}
    if s.get("interface"):
        from distributed.utils import get_ip_interface

        return {"dashboard_address": f"{get_ip_interface(s['interface'])}:0", "dashboard": False}
    return {"dashboard_address": None, "dashboard": False}


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
        # SLURM enforces --mem and can say why a job ended; the nanny's own kill would not
        "export DASK_DISTRIBUTED__WORKER__MEMORY__TERMINATE=False",
        *s.get("prologue", []),
    ]
    directives = list(s.get("job_extra_directives", []))
    if s.get("gpus_per_job") and not any("gres" in d or "gpus" in d for d in directives):
        directives.append(f"--gres=gpu:{s['gpus_per_job']}")
    # a worker's HTTP server (health, metrics) listens on every address unless told one: on the
    # loopback interface, keep it there too
    http = ["--dashboard-address", "127.0.0.1:0"] if s.get("interface") == "lo" else []
    kwargs: dict[str, Any] = dict(
        queue=s.get("queue"),
        account=s.get("account"),
        walltime=s["walltime"],
        cores=s["cores"],
        memory=s["memory"],
        processes=1,  # one worker per job: one model per job's GPU
        worker_extra_args=["--nthreads", "1", "--resources", res_arg, "--no-dashboard", *http],
        job_extra_directives=directives,
        job_script_prologue=prologue,
        python=s.get("python", sys.executable),
        silence_logs="error",
        scheduler_options=_scheduler_http(s),
    )
    for k in ("local_directory", "log_directory", "interface"):
        if s.get(k):
            kwargs[k] = s[k]
    return SLURMCluster(**kwargs)


# states of a job that has not ended yet (scontrol / sacct spelling)
_ACTIVE = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
}


def job_end_reason(job_id: str, *, wait: float = 10.0) -> str | None:
    """How SLURM says job `job_id` ended, in one line, or None when SLURM cannot say.

    State, reason and exit code from `scontrol show job` (the controller keeps an ended job for
    MinJobAge seconds, 300 by default), else from `sacct` (clusters with accounting); then the
    `slurmstepd` error lines of the job's stderr file (e.g. "Exceeded job memory limit", "CANCELLED
    ... DUE TO TIME LIMIT"). A job still ending is polled for up to `wait` seconds.
    """
    end = time.monotonic() + wait
    while True:
        info = _scontrol_job(job_id) or _sacct_job(job_id)
        if info is None:
            return None
        if info["state"] not in _ACTIVE or time.monotonic() >= end:
            break
        time.sleep(0.5)
    details = [f"reason {info['reason']}" if info.get("reason", "None") != "None" else ""]
    details.append(f"exit {info['exit']}" if info.get("exit") else "")
    text = f"SLURM job {job_id} {info['state']}"
    if any(details):
        text += f" ({', '.join(d for d in details if d)})"
    stepd = _stepd_errors(info.get("stderr"))
    return f"{text}: {'; '.join(stepd)}" if stepd else text


def _run(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def _scontrol_job(job_id: str) -> dict[str, str] | None:
    out = _run(["scontrol", "show", "job", "-o", str(job_id)])
    if out is None:
        return None
    keys = ("JobState", "Reason", "ExitCode", "StdErr", "JobName", "UserId", "NodeList")
    fields = {k: m.group(1) for k in keys if (m := re.search(rf"\b{k}=(\S*)", out))}
    if "JobState" not in fields:
        return None
    # scontrol shows the file name pattern (slurm-logs/dask-worker-%J.err): fill in what a batch job uses
    subst = {
        "j": job_id,
        "J": job_id,
        "x": fields.get("JobName", ""),
        "u": fields.get("UserId", "").split("(")[0],
        "N": fields.get("NodeList", ""),
        "%": "%",
    }
    stderr = re.sub(r"%(\w|%)", lambda m: subst.get(m.group(1), m.group(0)), fields.get("StdErr", ""))
    return {
        "state": fields["JobState"],
        "reason": fields.get("Reason", "None"),
        "exit": fields.get("ExitCode", ""),
        "stderr": stderr,
    }


def _sacct_job(job_id: str) -> dict[str, str] | None:
    out = _run(["sacct", "-j", str(job_id), "-X", "-n", "-P", "-o", "State,ExitCode"])
    if out is None:
        return None
    state, _, code = out.strip().splitlines()[0].partition("|")
    return {"state": state.split()[0], "exit": code}  # "CANCELLED by 0" -> CANCELLED


def _stepd_errors(path: str | None, *, tail: int = 65536) -> list[str]:
    """The distinct `slurmstepd: error:` messages in the last `tail` bytes of a job's stderr file."""
    if not path:
        return []
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - tail))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    found = [m.group(1).strip() for m in re.finditer(r"slurmstepd[^:]*: error: (.+)", text)]
    return list(dict.fromkeys(found))[-3:]
