"""A real single-node SLURM in the tests (issue 26): `interp sweep --executor slurm` submits its
workers with sbatch through dask-jobqueue, using examples/slurm.toml as is; a job cancelled with
scancel mid-unit has its unit retried on another job; a job over its memory request is killed by
SLURM and the unit lands in failures.csv with SLURM's reason; a rerun completes.

The cluster is scripts/slurm-local.sh (munged, slurmctld, slurmd from Debian's slurm-wlm, all on
127.0.0.1, state in a temporary directory), started once per session by the `slurm_cluster`
fixture and stopped by PID. Without root or without slurm-wlm the tests skip with one line, and
the test command prints it (tests/conftest.py, pytest_terminal_summary).

Tables are compared byte for byte with the local executor's: the same kernels run on the same
machine with one torch thread on both sides (the local reference with threads=1, each SLURM job
with cores = 1, so its worker caps torch at 1 thread), so there is no float difference to allow.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from _cli_process import CLIProcess

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "slurm-local.sh"
EXAMPLE = REPO / "examples" / "slurm.toml"
SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "squeue")
RESULT_FILES = ("pressure_trials.csv", "pressure_summary.csv", "item_maps.csv")
SWEEP_ARGS = ("--study", "pressure", "--bank", "moral", "--max-items", "2", "--quiet")
# a lineage: a base checkpoint and two routes (sft, dpo)
LINEAGE = ("stage1-step100", "sft/step50", "sft/final", "dpo/final")


@dataclass(frozen=True)
class SlurmCluster:
    dir: Path
    conf: Path
    pids: dict[str, int]

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")

    def run(self, *cmd: str) -> str:
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60, check=True).stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon_pids(state: Path) -> dict[str, int]:
    files = {
        "munged": state / "munge" / "munged.pid",
        "slurmctld": state / "slurmctld.pid",
        "slurmd": state / "slurmd.pid",
    }
    return {name: int(f.read_text()) for name, f in files.items() if f.is_file() and f.read_text().strip().isdigit()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="session")
def slurm_cluster():
    """munged + slurmctld + slurmd on 127.0.0.1 (scripts/slurm-local.sh up), stopped by PID at the end."""
    missing = [b for b in SLURM_BINARIES if shutil.which(b) is None]
    if missing:
        pytest.skip(f"SLURM not installed ({', '.join(missing)} missing; as root: bash scripts/slurm-local.sh install)")
    if os.geteuid() != 0:
        pytest.skip("SLURM: the local cluster runs as root (SlurmUser=root); not root here")
    # not under pytest's basetemp (mode 700): munged wants its socket's directories searchable by all
    state = Path(tempfile.mkdtemp(prefix="interp-slurm-"))
    env = dict(
        os.environ,
        SLURM_LOCAL_DIR=str(state),
        SLURM_LOCAL_CTLD_PORT=str(_free_port()),
        SLURM_LOCAL_SLURMD_PORT=str(_free_port()),
    )
    pids: dict[str, int] = {}
    try:
        up = subprocess.run(["bash", str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=120)
        pids = _daemon_pids(state)
        if up.returncode != 0:
            last = (up.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"SLURM could not start: {last}")
        assert set(pids) == {"munged", "slurmctld", "slurmd"}, pids
        yield SlurmCluster(state, state / "slurm.conf", pids)
    finally:
        # down cancels every job first (a job's processes belong to slurmstepd, not slurmd)
        subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, timeout=120)
        for pid in pids.values():  # down stops them by PID; make sure of it
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def lineage(tmp_path_factory, tokenizer):
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("lineage")
    for i, name in enumerate(LINEAGE):
        build_tiny_model(root / name, "llama", n_layers=2, d_model=32, seed=i, tokenizer=tokenizer)
    return root


def _local_tables(checkpoints: list[Path], out: Path) -> dict[str, bytes]:
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    run_sweep(
        checkpoints,
        studies=["pressure"],
        banks=["moral"],
        out=out,
        cfg=RunConfig(max_items=2, threads=1),
        progress=False,
    )
    return _tables(out)


def _tables(out: Path) -> dict[str, bytes]:
    return {f: (out / "results" / f).read_bytes() for f in RESULT_FILES}


def _sweep(cluster: SlurmCluster, tree: Path, out: Path, config: Path, cwd: Path) -> CLIProcess:
    """The sweep driver in its own process (a fork-server child); its units run as SLURM jobs."""
    return CLIProcess(
        ["sweep", tree, *SWEEP_ARGS, "--out", out, "--executor", "slurm", "--cluster-config", config],
        env=cluster.env,
        cwd=cwd,
    )


STARTED = re.compile(r"^(\S+ \S+) INFO started (\S+) on \S+ \(pid (\d+), SLURM job (\d+)\)$", re.M)


def _starts(out: Path) -> list[tuple[str, str, str]]:
    """(checkpoint, pid, job) of every unit task started, from OUT/sweep.log."""
    log = out / "sweep.log"
    return [m.group(2, 3, 4) for m in STARTED.finditer(log.read_text())] if log.exists() else []


def _job_count(cluster: SlurmCluster) -> int:
    return len(cluster.run("scontrol", "show", "jobs", "-o").strip().splitlines())


def _unit_file(out: Path, checkpoint: str) -> Path | None:
    found = list((out / "cache" / "pressure" / checkpoint.replace("/", "--")).glob("pressure-*.h5"))
    return found[0] if found else None


def test_slurm_sweep_matches_local_and_retries_a_scancelled_job(slurm_cluster, lineage, tmp_path):
    ref = _local_tables([lineage], tmp_path / "REF")
    out = tmp_path / "OUT"
    proc = _sweep(slurm_cluster, lineage, out, EXAMPLE, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 150
        while not _starts(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _starts(out), (
            f"no unit started on a SLURM job: {proc.poll()} {proc.communicate(5)[1] if proc.poll() is not None else ''}"
        )
        path, _, job = _starts(out)[0]
        checkpoint = Path(path).relative_to(lineage).as_posix()
        assert _unit_file(out, checkpoint) is None  # mid-unit: its file is not written yet
        slurm_cluster.run("scancel", job)
        cancelled_at = time.time()
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert not (out / "failures.csv").exists()
    assert "CANCELLED" in slurm_cluster.run("scontrol", "show", "job", "-o", job)
    retried = [j for ck, _, j in _starts(out) if ck == path and j != job]
    assert retried, f"unit of {checkpoint} not retried on another job: {_starts(out)}"
    unit = _unit_file(out, checkpoint)
    assert unit is not None and unit.stat().st_mtime > cancelled_at  # written by the retry
    assert _tables(out) == ref
    assert len(list((tmp_path / "slurm-logs").glob("*.err"))) == 2  # examples/slurm.toml: jobs = 2, log_directory

    # a rerun finds every unit complete: it submits no job and rewrites the same tables
    jobs_before = _job_count(slurm_cluster)
    rerun = _sweep(slurm_cluster, lineage, out, EXAMPLE, cwd=tmp_path)
    _, err = rerun.communicate(timeout=240)
    assert rerun.returncode == 0, err
    assert _job_count(slurm_cluster) == jobs_before
    assert "4 units, 0 to run" in (out / "sweep.log").read_text()
    assert _tables(out) == ref


def test_slurm_job_over_its_memory_request_goes_to_failures_csv_then_a_rerun_completes(
    slurm_cluster, lineage, tmp_path
):
    checkpoint = lineage / "sft" / "final"
    ref = _local_tables([checkpoint], tmp_path / "REF")
    # examples/slurm.toml with one job of 300 MB and no second chance. A worker idles at ~135 MB
    # (nanny + worker); a unit task (its imports, the model, scoring) reaches ~700 MB, measured
    # here by summing the job's RSS (scontrol listpids): SLURM kills the job while the worker loads
    # the unit's code, before the task announces itself (the sweep finds the job through
    # dask-jobqueue's worker-to-job map).
    text = EXAMPLE.read_text()
    for key, value in (("memory", '"300MB"'), ("jobs", "1"), ("dask_allowed_failures", "0")):
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
        assert n == 1, key
    small = tmp_path / "small.toml"
    small.write_text(text)
    out = tmp_path / "OUT"
    proc = _sweep(slurm_cluster, checkpoint, out, small, cwd=tmp_path)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 3, err  # units failed after their retries
    assert "1 of 1 units failed" in err
    failures = pd.read_csv(out / "failures.csv")
    assert failures["checkpoint"].tolist() == ["final"]
    error = failures["error"].iloc[0]
    # SLURM's account (scontrol + slurmstepd's lines in the job's stderr), then Dask's
    assert re.search(r"SLURM job \d+ (FAILED|OUT_OF_MEMORY)", error), error
    assert "Exceeded job memory limit" in error, error
    assert "KilledWorker" in error, error

    rerun = _sweep(slurm_cluster, checkpoint, out, EXAMPLE, cwd=tmp_path)  # the example asks for 2 GB
    _, err = rerun.communicate(timeout=240)
    assert rerun.returncode == 0, err
    assert not (out / "failures.csv").exists()
    assert _tables(out) == ref


def test_slurm_local_script_status_reports_the_running_daemons(slurm_cluster):
    env = dict(os.environ, SLURM_LOCAL_DIR=str(slurm_cluster.dir))
    status = subprocess.run(["bash", str(SCRIPT), "status"], env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    for name, pid in slurm_cluster.pids.items():
        assert f"{name}: running (pid {pid})" in status.stdout
    assert "idle" in status.stdout or "mix" in status.stdout or "alloc" in status.stdout
    if shutil.which("ss"):  # slurmctld and slurmd listen on loopback only (munged: a UNIX socket)
        ss = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True, check=True).stdout.splitlines()
        ours = [line for line in ss if any(f"pid={pid}," in line for pid in slurm_cluster.pids.values())]
        assert len(ours) >= 2, ss
        for line in ours:
            assert re.search(r"\s127\.0\.0\.1:\d+\s", line), line


def test_slurm_job_end_reason_parses_scontrol_and_the_stepd_lines(tmp_path, monkeypatch):
    """Runs without SLURM: a stand-in `scontrol` prints what slurm 22.05 printed here for a job
    killed over its memory request (the real one is exercised by the cluster tests above)."""
    from sweeps.slurm import job_end_reason

    logs = tmp_path / "slurm-logs"
    logs.mkdir()
    (logs / "dask-worker-10.err").write_text(
        "2026-12-01 15:21:20,000 - distributed.worker - INFO - Starting Worker plugin shuffle\n"
        "slurmstepd-vm: error: StepId=10.batch exceeded memory limit (405934080 > 314572800), being killed\n"
        "slurmstepd-vm: error: Exceeded job memory limit\n"
        "slurmstepd-vm: error: StepId=10.batch exceeded memory limit (405934080 > 314572800), being killed\n"
    )
    states = {"10": "FAILED Reason=JobLaunchFailure", "11": "RUNNING Reason=None"}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lines = "\n".join(
        f'  {job}) echo "JobId={job} JobName=dask-worker UserId=root(0) JobState={state} Dependency=(null) '
        f'ExitCode=0:9 NodeList=vm StdErr={logs}/%x-%J.err StdOut={logs}/%x-%J.out" ;;'
        for job, state in states.items()
    )
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\ncase "$4" in\n{lines}\n  *) exit 1 ;;\nesac\n')
    (bin_dir / "scontrol").chmod(0o755)
    (bin_dir / "sacct").write_text("#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n")
    (bin_dir / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    reason = job_end_reason("10", wait=0)
    assert reason == (
        "SLURM job 10 FAILED (reason JobLaunchFailure, exit 0:9): StepId=10.batch exceeded memory limit "
        "(405934080 > 314572800), being killed; Exceeded job memory limit"
    )
    # negative controls: a job still running has no stepd lines to report; an unknown job, nothing
    (logs / "dask-worker-11.err").write_text("2026-12-01 INFO - nothing went wrong\n")
    assert job_end_reason("11", wait=0) == "SLURM job 11 RUNNING (exit 0:9)"
    assert job_end_reason("12", wait=0) is None
