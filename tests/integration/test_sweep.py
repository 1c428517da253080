"""Sweeps over a tree of tiny checkpoints: discovery, resume after SIGKILL, Dask, the lock."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
from _cli_process import CLIProcess

from interp.core.errors import ConfigError, LockError
from interp.studies.base import RunConfig
from sweeps.discover import discover
from sweeps.lock import LOCK_NAME, sweep_lock

RESULT_FILES = ("pressure_trials.csv", "pressure_summary.csv", "item_maps.csv")


@pytest.fixture(scope="module")
def tree(tmp_path_factory, tokenizer):
    """base: stage1-step100, stage1-step200; routes sft and dpo with step50, step100, final."""
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("run")
    names = [
        "stage1-step200",
        "stage1-step100",
        "sft/step100",
        "sft/step50",
        "sft/final",
        "dpo/final",
        "dpo/step50",
        "dpo/step100",
    ]
    for i, name in enumerate(names):
        build_tiny_model(root / name, "llama", n_layers=2, d_model=32, seed=i, tokenizer=tokenizer)
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a checkpoint")
    return root


def test_discovery_orders_steps_and_groups_routes(tree):
    with pytest.warns(UserWarning, match="notes"):
        d = discover([tree])
    lin = d.lineage
    assert lin["base"] == ["stage1-step100", "stage1-step200"]
    assert lin["routes"] == {
        "dpo": ["dpo/step50", "dpo/step100", "dpo/final"],
        "sft": ["sft/step50", "sft/step100", "sft/final"],
    }
    assert lin["final"] == {"dpo": "dpo/final", "sft": "sft/final"}
    assert tree / "notes" in d.not_checkpoints


def test_trainer_state_and_lineage_toml(tree, tmp_path):
    (tree / "sft" / "final" / "trainer_state.json").write_text(json.dumps({"global_step": 10}))
    try:
        assert discover([tree]).lineage["routes"]["sft"][0] == "sft/final"
    finally:
        (tree / "sft" / "final" / "trainer_state.json").unlink()
    (tree / "lineage.toml").write_text('base = ["stage1-step100"]\n[routes]\nrl = ["sft/step50", "dpo/final"]\n')
    try:
        lin = discover([tree]).lineage
        assert lin == {
            "base": ["stage1-step100"],
            "routes": {"rl": ["sft/step50", "dpo/final"]},
            "final": {"rl": "dpo/final"},
        }
        (tree / "lineage.toml").write_text('base = ["nope"]\n')
        with pytest.raises(ConfigError, match="unknown checkpoint 'nope'"):
            discover([tree])
    finally:
        (tree / "lineage.toml").unlink()


def _cli(*args):
    """`interp sweep ARGS` in its own process (a fork-server child: no fresh imports)."""
    return CLIProcess(["sweep", *args], env=dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1"))


SWEEP_ARGS = ("--study", "pressure", "--bank", "moral", "--max-items", "2", "--threads", "1", "--quiet")


def _tables(out: Path) -> dict[str, bytes]:
    return {f: (out / "results" / f).read_bytes() for f in RESULT_FILES}


@pytest.fixture(scope="module")
def reference(tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    proc = _cli(tree, *SWEEP_ARGS, "--out", out)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return out


def test_dry_run_lists_units(tree, reference):
    proc = _cli(tree, *SWEEP_ARGS, "--out", reference, "--dry-run")
    text, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert text.count("done") == 8 and "todo" not in text


def test_sigkill_then_resume_gives_identical_tables(tree, reference, tmp_path):
    ref = _tables(reference)
    # one kill, after 3 of the 8 units (each kill costs two sweep processes, ~25 s of CPU; the
    # Dask and SLURM suites kill workers and jobs mid-unit too)
    n_done = 3
    out = tmp_path / f"kill{n_done}"
    proc = _cli(tree, *SWEEP_ARGS, "--out", out)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list((out / "cache").rglob("*.h5"))) >= n_done:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = {p: p.stat().st_mtime_ns for p in (out / "cache").rglob("*.h5")}
    assert 0 < len(done_before) < 8
    resume = _cli(tree, *SWEEP_ARGS, "--out", out)  # the dead sweep's lock is stale
    _, err = resume.communicate(timeout=600)
    assert resume.returncode == 0, err
    assert _tables(out) == ref
    for p, mtime in done_before.items():  # finished units were not recomputed
        assert p.stat().st_mtime_ns == mtime


def test_dask_executor_matches_local(tree, reference, tmp_path, monkeypatch):
    from sweeps.api import run_sweep

    out = tmp_path / "dask"
    # set after this process's fork server started (tests/conftest.py): a worker forked from it
    # sees it only if the sweep passes its environment on; each attempt logs the variable
    monkeypatch.setenv("SLURM_JOB_ID", "set-by-the-sweep")
    run_sweep(
        [tree],
        studies=["pressure"],
        banks=["moral"],
        out=out,
        cfg=RunConfig(max_items=2, threads=1),
        executor="dask",
        n_workers=2,
        progress=False,
    )
    assert _tables(out) == _tables(reference)
    started = [line for line in (out / "sweep.log").read_text().splitlines() if " started " in line]
    assert started and all("SLURM job set-by-the-sweep" in line for line in started), started


def test_lock_refuses_second_sweep_and_breaks_stale(tree, tmp_path):
    out = tmp_path / "locked"
    with sweep_lock(out):
        proc = _cli(tree, *SWEEP_ARGS, "--out", out)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 2
        assert "another sweep" in err and str(os.getpid()) in err
        with pytest.raises(LockError):
            with sweep_lock(out):
                pass
    assert not (out / LOCK_NAME).exists()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 2**22 + 12345, "host": os.uname().nodename, "since": 0}))
    with sweep_lock(out) as path:  # holder is dead: taken over
        assert json.loads(path.read_text())["pid"] == os.getpid()
