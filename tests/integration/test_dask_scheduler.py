"""Dask with an external scheduler (issue 26): `dask scheduler` and two `dask worker` processes
started here on 127.0.0.1, the sweep connected with `--executor dask --scheduler tcp://...`; the
worker process running a unit is SIGKILLed mid-unit, the unit is retried, and the tables equal the
local executor's byte for byte (same machine, same kernels, one torch thread on both sides)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli_process import CLIProcess

pytestmark = pytest.mark.timeout(300)

RESULT_FILES = ("pressure_trials.csv", "pressure_summary.csv", "item_maps.csv")
LINEAGE = ("stage1-step100", "sft/final", "dpo/final")  # a base checkpoint and two routes
STARTED = re.compile(r"^(\S+ \S+) INFO started (\S+) on (\S+) \(pid (\d+)\)$", re.M)
LOOPBACK = ("--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0")


@pytest.fixture(scope="module")
def lineage(tmp_path_factory, tokenizer):
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("lineage")
    for i, name in enumerate(LINEAGE):
        build_tiny_model(root / name, "llama", n_layers=2, d_model=32, seed=i, tokenizer=tokenizer)
    return root


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process group we started (a worker and its nanny), then SIGKILL what is left."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    end = time.monotonic() + 20
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the group: a nanny's worker child too
        except ProcessLookupError:
            pass
        p.wait()


@pytest.fixture
def external_dask(tmp_path):
    """`dask scheduler` + two `dask worker` (with nannies), loopback only; yields the scheduler address."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    sched_file = tmp_path / "scheduler.json"
    procs: list[subprocess.Popen] = []

    def start(*args: str, log: str) -> subprocess.Popen:
        with open(tmp_path / log, "w") as fh:
            p = subprocess.Popen(
                [sys.executable, "-m", "dask", *args],
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        procs.append(p)
        return p

    try:
        start(
            "scheduler",
            *LOOPBACK,
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(sched_file),
            log="sched.log",
        )
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:"), address
        for i in range(2):
            start("worker", address, *LOOPBACK, "--no-dashboard", "--nthreads", "1", "--name", f"w{i}", log=f"w{i}.log")
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
            assert all(a.startswith("tcp://127.0.0.1:") for a in client.scheduler_info()["workers"])
        yield address, procs
    finally:
        _stop(procs)


def _tables(out: Path) -> dict[str, bytes]:
    return {f: (out / "results" / f).read_bytes() for f in RESULT_FILES}


def _starts(out: Path) -> list[tuple[str, int]]:
    log = out / "sweep.log"
    return [(m.group(2), int(m.group(4))) for m in STARTED.finditer(log.read_text())] if log.exists() else []


def test_dask_scheduler_external_matches_local_and_retries_a_killed_worker(lineage, external_dask, tmp_path):
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    address, procs = external_dask
    run_sweep(
        [lineage],
        studies=["pressure"],
        banks=["moral"],
        out=tmp_path / "REF",
        cfg=RunConfig(max_items=2, threads=1),
        progress=False,
    )
    out = tmp_path / "OUT"
    cmd = ["sweep", lineage, "--study", "pressure", "--bank", "moral"]
    cmd += [
        "--max-items",
        "2",
        "--threads",
        "1",
        "--quiet",
        "--out",
        str(out),
        "--executor",
        "dask",
        "--scheduler",
        address,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    proc = CLIProcess(cmd, env=env)  # the driver in its own process (a fork-server child)
    try:
        deadline = time.monotonic() + 120
        while not _starts(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _starts(out), f"no unit started: {proc.poll()}"
        path, pid = _starts(out)[0]
        ours = {p.pid for p in procs}
        assert os.getpgid(pid) in ours, "the pid in the log is not a worker this test started"
        checkpoint = Path(path).relative_to(lineage).as_posix()
        unit_dir = out / "cache" / "pressure" / checkpoint.replace("/", "--")
        assert not list(unit_dir.glob("*.h5"))  # mid-unit
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert not (out / "failures.csv").exists()
    assert [p for ck, p in _starts(out) if ck == path and p != pid], f"{checkpoint} not retried: {_starts(out)}"
    (unit,) = unit_dir.glob("*.h5")
    assert unit.stat().st_mtime > killed_at  # written by the retry
    assert _tables(out) == _tables(tmp_path / "REF")
