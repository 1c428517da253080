"""Determinism and concurrency of sweeps.

Determinism: two identical sweeps (pressure and cloze, --max-items 3, one tiny model) into two
different OUT directories, one in this process and one in a fresh process with its own hash seed,
write byte-identical results tables.
Concurrency: two `interp sweep` processes started at once on one OUT: without --wait exactly one
is refused (exit 2, one line naming OUT and "another sweep"); with --wait both finish, the second
after the first, computing nothing twice. Either way the tables equal a single run's and every
cache unit reads back.

All sweeps of the module start together (each is mostly import time) to keep it fast on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _cli_process import CLIProcess

REPO = Path(__file__).resolve().parents[2]
ARGS = ("--study", "pressure", "--study", "cloze", "--max-items", "3", "--threads", "1", "--quiet")
N_UNITS = 3  # pressure: moral + factual, cloze: cloze
KEY_TABLES = ("pressure_trials.csv", "pressure_summary.csv", "item_maps.csv", "cloze_scores.csv", "cloze_abs.csv")


def _env(hashseed: str) -> dict[str, str]:
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONHASHSEED=hashseed,
    )


def _sweep(model: Path, out: Path, *extra: str, hashseed: str = "random") -> subprocess.Popen:
    """A fresh interpreter with its own hash seed (what the determinism claim is about)."""
    return subprocess.Popen(
        [sys.executable, "-m", "interp.cli", "sweep", str(model), *ARGS, "--out", str(out), *extra],
        cwd=REPO,
        env=_env(hashseed),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _tables(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "results").glob("*.csv"))}


def _assert_same_tables(out: Path, ref: Path) -> None:
    got, want = _tables(out), _tables(ref)
    assert sorted(got) == sorted(want)
    for name in want:
        if got[name] != want[name]:
            diff = [(a, b) for a, b in zip(got[name].decode().splitlines(), want[name].decode().splitlines()) if a != b]
            pytest.fail(f"{name} differs from a single run's ({out} vs {ref}); first differing lines: {diff[:2]}")


def _assert_cache_sound(out: Path) -> None:
    from cache.store import read_unit
    from sweeps.lock import LOCK_NAME

    units = sorted(p for p in (out / "cache").rglob("*.h5") if not p.name.startswith("."))
    assert len(units) == N_UNITS
    for p in units:
        assert read_unit(p).attrs["complete"]
    assert not list((out / "cache").rglob(".*.tmp-*")), "temporary files left in the cache"
    assert not (out / LOCK_NAME).exists(), "lock left behind"


@pytest.fixture(scope="module")
def model(tmp_path_factory, tokenizer):
    """A 2-layer tiny Llama: every sweep here loads it (5 processes), so the smaller the better."""
    from interp.testing import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("det-model") / "tiny", "llama", n_layers=2, d_model=32, seed=3, tokenizer=tokenizer
    )


@pytest.fixture(scope="module")
def runs(model, tmp_path_factory):
    """Every sweep of this module, started together: refused/1, refused/2: two processes on one OUT
    (hash seeds 1 and 2; the one that gets the lock writes OUT alone, a single fresh-process run);
    waited/1, waited/2: two processes with --wait 120 on another OUT; and "single", the same sweep in
    this process while the others run. Returns the root directory and {name: (returncode, stderr)}."""
    root = tmp_path_factory.mktemp("determinism")
    procs = {
        "refused/1": _sweep(model, root / "refused", hashseed="1"),
        "refused/2": _sweep(model, root / "refused", hashseed="2"),
        # the concurrency pair needs separate processes, not fresh interpreters: fork-server children
        "waited/1": CLIProcess(["sweep", model, *ARGS, "--out", root / "waited", "--wait", "120"], env=_env("random")),
        "waited/2": CLIProcess(["sweep", model, *ARGS, "--out", root / "waited", "--wait", "120"], env=_env("random")),
    }
    from interp.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["interp", "sweep", str(model), *ARGS, "--out", str(root / "single")])
        try:
            main()
        except SystemExit as e:  # main() returns on success; an exit here is a failure
            pytest.fail(f"in-process sweep exited with {e.code}")
    done = {}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=600)
        done[name] = (proc.returncode, err)
    return root, done


def test_identical_runs_write_byte_identical_tables(runs):
    root, done = runs
    assert 0 in (done["refused/1"][0], done["refused/2"][0]), [done[k][1][-1500:] for k in ("refused/1", "refused/2")]
    a, b = root / "single", root / "refused"  # this process's run; the fresh process's run
    tables = _tables(a)
    for name in KEY_TABLES:
        assert name in tables and tables[name].count(b"\n") > 1, f"{name} missing or empty"
    _assert_same_tables(b, a)
    # the same units (identity hashes are the file names) in both caches
    assert sorted(p.relative_to(a) for p in (a / "cache").rglob("*.h5")) == sorted(
        p.relative_to(b) for p in (b / "cache").rglob("*.h5")
    )
    _assert_cache_sound(a)
    _assert_cache_sound(b)


def test_two_sweeps_at_once_one_is_refused(runs):
    root, done = runs
    out = root / "refused"
    codes = [done["refused/1"][0], done["refused/2"][0]]
    errs = [done["refused/1"][1], done["refused/2"][1]]
    assert sorted(codes) == [0, 2], f"exit codes {codes}; stderr: {[e[-1500:] for e in errs]}"
    lines = [line for line in errs[codes.index(2)].splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("interp: error:") and "another sweep" in lines[0] and str(out) in lines[0]
    _assert_same_tables(out, root / "single")
    _assert_cache_sound(out)


def test_two_sweeps_at_once_with_wait_both_finish_in_turn(runs):
    root, done = runs
    out = root / "waited"
    assert [done["waited/1"][0], done["waited/2"][0]] == [0, 0], [done[k][1][-1500:] for k in ("waited/1", "waited/2")]
    log = (out / "sweep.log").read_text().splitlines()
    plans = [i for i, line in enumerate(log) if " plan: " in line]
    finished = [i for i, line in enumerate(log) if " done " in line]
    assert len(plans) == 2 and len(finished) == N_UNITS, log  # nothing computed twice
    # the second plans while the first runs: its units are "already complete" or, when it read the
    # fingerprint memo before the first sweep wrote it, "complete but checked" (verified on load)
    assert f"{N_UNITS} to run" in log[plans[0]] and "0 to run," in log[plans[1]], log
    assert plans[1] > finished[-1], "the second sweep started executing before the first finished"
    _assert_same_tables(out, root / "single")
    _assert_cache_sound(out)
