"""Dask under faults (issues 13 and 15): a failing unit goes to failures.csv while the rest
finishes; a SIGKILLed worker loses nothing; repeated worker deaths and a cluster with no
worker end with one line instead of a hang; the SLURM recipe builds the job script it would
submit."""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(autouse=True)
def _private_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "fp-memo"))


def _cfg(**options):
    from interp.studies.base import RunConfig

    return RunConfig(max_items=2, threads=1, options=options)


@pytest.fixture
def tree(tiny_models, tmp_path):
    root = tmp_path / "tree"
    for i, arch in enumerate(("gpt2", "llama", "qwen2")):
        shutil.copytree(tiny_models[arch], root / f"step{i + 1}")
    return root


def _tables(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "results").glob("*.csv"))}


def _cluster(n_workers: int, **kw):
    import logging

    from distributed import LocalCluster

    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.CRITICAL,
        resources={"model_slot": 1},
        env=dict(os.environ),  # this test's memo path, as the sweep's own cluster passes it
        **kw,
    )


def test_failed_unit_goes_to_failures_csv_and_the_rest_finishes(tree, tmp_path):
    from interp.core.errors import UnitsFailedError
    from sweeps.api import run_sweep

    (w,) = (tree / "step2").glob("*.safetensors")
    data = bytearray(w.read_bytes())
    data[8] = ord("X")  # the header is no longer JSON: planning (sampled) passes, loading on the worker fails
    w.write_bytes(bytes(data))
    ref = tmp_path / "REF"
    shutil.copytree(tree / "step1", tmp_path / "only" / "step1")
    shutil.copytree(tree / "step3", tmp_path / "only" / "step3")
    run_sweep([tmp_path / "only"], studies=["pressure"], banks=["moral"], out=ref, cfg=_cfg(), progress=False)
    out = tmp_path / "OUT"
    with pytest.raises(UnitsFailedError, match="1 of 3 units failed") as err:
        run_sweep(
            [tree],
            studies=["pressure"],
            banks=["moral"],
            out=out,
            executor="dask",
            n_workers=2,
            cfg=_cfg(dask_retries=1),
            progress=False,
        )
    assert err.value.exit_code == 3
    failures = pd.read_csv(out / "failures.csv")
    assert failures["checkpoint"].tolist() == ["step2"]
    assert list(failures.columns[:5]) == ["checkpoint", "unit", "study", "bank", "error"]
    assert "step2" in failures["error"].iloc[0]
    trials = pd.read_csv(out / "results" / "pressure_trials.csv")
    assert sorted(trials["checkpoint"].unique()) == ["step1", "step3"]
    ref_trials = pd.read_csv(ref / "results" / "pressure_trials.csv")
    pd.testing.assert_frame_equal(trials, ref_trials)


def test_sigkill_of_a_worker_mid_unit_loses_nothing(tree, tmp_path):
    from distributed import Client

    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    ref = tmp_path / "REF"
    # a unit long enough (12 items x 31 conditions) to be killed inside, however fast a worker starts
    cfg = RunConfig(max_items=12, threads=1)
    shutil.rmtree(tree / "step3")
    run_sweep([tree], studies=["pressure"], banks=["moral"], out=ref, cfg=cfg, progress=False)
    out = tmp_path / "OUT"
    with _cluster(2) as cluster, Client(cluster) as client:
        errors: list[BaseException] = []

        def sweep():
            try:
                run_sweep(
                    [tree],
                    studies=["pressure"],
                    banks=["moral"],
                    out=out,
                    executor="dask",
                    scheduler=cluster.scheduler_address,
                    cfg=cfg,
                    progress=False,
                )
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        t = threading.Thread(target=sweep)
        t.start()
        killed = _kill_a_busy_worker(client, deadline=120)
        t.join(timeout=300)
        assert not t.is_alive(), "sweep hung after a worker was killed"
    assert killed, "no worker was busy to kill"
    assert not errors, errors
    assert _tables(out) == _tables(ref)
    # the kill was inside a unit: that checkpoint's unit was started again on another worker
    started = re.findall(r"started (\S+) on ", (out / "sweep.log").read_text())
    assert sorted(started) != sorted(set(started)), f"no unit was restarted: {started}"


def _kill_a_busy_worker(client, deadline: float, sweep: threading.Thread | None = None) -> bool:
    """SIGKILL the process of a worker that is running a unit task; True once done (False after
    the deadline, or once `sweep` has ended)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end and (sweep is None or sweep.is_alive()):
        busy = [w for w, tasks in client.processing().items() if any("interp-unit" in str(k) for k in tasks)]
        if busy:
            pids = client.run(os.getpid, workers=busy[:1])
            time.sleep(0.5)  # inside the unit: loading or scoring
            for pid in pids.values():
                os.kill(pid, signal.SIGKILL)
            return True
        time.sleep(0.1)
    return False


def test_repeated_worker_loss_ends_with_a_failure_not_a_hang(tree, tmp_path):
    from distributed import Client

    from interp.core.errors import UnitsFailedError
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    import dask

    out = tmp_path / "OUT"
    single = tmp_path / "single"
    shutil.copytree(tree / "step2", single / "step2")
    # an external scheduler applies its own allowed-failures (the sweep sets it only on its own cluster)
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 1}),
        _cluster(1) as cluster,
        Client(cluster) as client,
    ):
        errors: list[BaseException] = []

        def sweep():
            try:
                run_sweep(
                    [single],
                    studies=["pressure"],
                    banks=["moral"],
                    out=out,
                    executor="dask",
                    scheduler=cluster.scheduler_address,
                    cfg=RunConfig(threads=1),  # the whole bank: a unit the kill loop is sure to interrupt
                    progress=False,
                )
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        t = threading.Thread(target=sweep)
        t.start()
        kills = 0
        while t.is_alive() and kills < 4:
            if _kill_a_busy_worker(client, deadline=60, sweep=t):
                kills += 1
            time.sleep(0.2)
        t.join(timeout=120)
        assert not t.is_alive(), "the driver waits forever after repeated worker deaths"
    assert kills >= 2
    assert len(errors) == 1 and isinstance(errors[0], UnitsFailedError), errors
    failures = pd.read_csv(out / "failures.csv")
    assert failures["checkpoint"].tolist() == ["step2"]
    assert "KilledWorker" in failures["error"].iloc[0] or "died" in failures["error"].iloc[0]


def test_no_worker_at_all_gives_one_line_after_the_deadline(tree, tmp_path):
    from interp.core.errors import InterpError
    from sweeps.api import run_sweep

    with _cluster(0) as cluster:
        t0 = time.monotonic()
        with pytest.raises(InterpError, match="no worker connected for 3 s") as err:
            run_sweep(
                [tree / "step1"],
                studies=["pressure"],
                banks=["moral"],
                out=tmp_path / "OUT",
                executor="dask",
                scheduler=cluster.scheduler_address,
                cfg=_cfg(dask_worker_timeout=3),
                progress=False,
            )
        assert time.monotonic() - t0 < 60
    assert "\n" not in str(err.value)
    assert not (tmp_path / "OUT" / ".interp-sweep.lock").exists()


# SCALE.md's GPU version of examples/slurm.toml (a real cluster: partition, account, GPUs, modules)
GPU_CLUSTER_TOML = """
[slurm]
queue = "gpu"
account = "my-project"
walltime = "12:00:00"
cores = 8
memory = "96GB"
gpus_per_job = 1
jobs = 16
interface = "ib0"
job_extra_directives = ["--constraint=a100|h100"]
prologue = ["module load cuda/12.4", "source $HOME/interp/.venv/bin/activate"]
log_directory = "slurm-logs"

[run]
dask_retries = 2
dask_allowed_failures = 3
dask_worker_timeout = 1800
"""


def test_slurm_recipe_builds_the_job_script_without_submitting(tmp_path, monkeypatch):
    from sweeps.slurm import make_slurm_cluster, read_cluster_config, task_resources

    repo = Path(__file__).resolve().parents[2]
    assert "```toml" + GPU_CLUSTER_TOML in (repo / "SCALE.md").read_text()  # the documented one
    (tmp_path / "gpu.toml").write_text(GPU_CLUSTER_TOML)
    config = read_cluster_config(tmp_path / "gpu.toml")
    config["slurm"]["interface"] = None  # this machine has no ib0; the job script does not depend on it
    monkeypatch.chdir(tmp_path)  # log_directory is created relative to the working directory
    assert task_resources(config) == {"GPU": 1.0}
    assert config["run"]["dask_retries"] == 2
    cluster = make_slurm_cluster(config)
    try:
        script = cluster.job_script()
        assert len(cluster.workers) == 0, "nothing may be submitted"
    finally:
        cluster.close()
    for line in (
        "#SBATCH -p gpu",
        "#SBATCH -A my-project",
        "#SBATCH -t 12:00:00",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --constraint=a100|h100",
        "export OMP_NUM_THREADS=8",
        "module load cuda/12.4",
    ):
        assert line in script, f"{line!r} not in the job script:\n{script}"
    assert "--resources GPU=1" in script and "--nthreads 1" in script
    assert "#SBATCH --cpus-per-task=8" in script
    assert "#SBATCH --mem=90G" in script or "#SBATCH --mem=" in script
    assert "--no-dashboard" in script and "export DASK_DISTRIBUTED__WORKER__MEMORY__TERMINATE=False" in script


def test_slurm_example_config_is_the_local_cluster_one(tmp_path, monkeypatch):
    """examples/slurm.toml (what tests/integration/test_slurm_cluster.py submits): loopback, no GPU, 1 CPU per job."""
    from sweeps.slurm import make_slurm_cluster, read_cluster_config, task_resources

    config = read_cluster_config(Path(__file__).resolve().parents[2] / "examples" / "slurm.toml")
    assert task_resources(config) == {"model_slot": 1.0}
    monkeypatch.chdir(tmp_path)
    cluster = make_slurm_cluster(config)
    try:
        script = cluster.job_script()
        address = cluster.scheduler_address
        http = [sock.getsockname() for sock in cluster.scheduler.http_server._sockets.values()]
    finally:
        cluster.close()
    assert address.startswith("tcp://127.0.0.1:"), address
    assert http and all(host == "127.0.0.1" and port != 8787 for host, port, *_ in http), http
    for line in ("#SBATCH -p debug", "#SBATCH --cpus-per-task=1", "--interface lo", "--dashboard-address 127.0.0.1:0"):
        assert line in script, f"{line!r} not in the job script:\n{script}"
    assert "--gres" not in script and "#SBATCH -A" not in script


def test_slurm_config_errors_are_one_line(tmp_path):
    from interp.core.errors import ConfigError
    from sweeps.slurm import read_cluster_config

    bad = tmp_path / "c.toml"
    bad.write_text("[slurm]\ncores = 4\nmemory = '8GB'\nwalltime = '1:00:00'\nqueu = 'gpu'\n")
    with pytest.raises(ConfigError, match="slurm.queu unknown"):
        read_cluster_config(bad)
