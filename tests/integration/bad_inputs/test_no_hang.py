"""No path can hang (issue 23): every file the toolkit opens for reading goes through the same
regular-file check as banks and weights. Each case puts a FIFO where a file is read and runs
the command in its own process (tests/_cli_process.py) with a timeout: it must end with exit 2 and one line naming the
path (a hang is the timeout firing). The fingerprint memo is an optimisation: a FIFO there is
ignored and the command succeeds."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _cli_process import run_cli_process

from ._util import ERR_PREFIX, REPO, SWEEP, subprocess_env

HANG_S = 120  # far above a normal run of these commands (a few seconds); a FIFO read never returns


def _unit(out: Path) -> Path:
    return next((out / "cache").rglob("*.h5"))


def _fifo_at(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


def _memo(memo_dir: Path, ck: Path) -> Path:
    memo_dir.mkdir(parents=True, exist_ok=True)
    return memo_dir / (hashlib.sha256(str(ck.resolve()).encode()).hexdigest()[:32] + ".json")


def _probe(out):
    return ["probe", out, "--study", "pressure", "--target", "flipped", "--shuffles", "2", "--folds", "2"]


def _sweep(ck, out, *extra):
    return ["sweep", ck, *SWEEP, "--out", out, *extra]


# (id, where the FIFO goes, command, expected exit code)
CASES = {
    "current.json/probe": (lambda o, t, ck: o / "cache" / "current.json", lambda o, t, ck: _probe(o), 2),
    "current.json/sweep": (lambda o, t, ck: o / "cache" / "current.json", lambda o, t, ck: _sweep(ck, o), 2),
    "unit.h5/probe": (lambda o, t, ck: _unit(o), lambda o, t, ck: _probe(o), 2),
    "unit.h5/sweep": (lambda o, t, ck: _unit(o), lambda o, t, ck: _sweep(ck, o), 2),
    "unit.h5/predict": (lambda o, t, ck: _unit(o), lambda o, t, ck: ["predict", o, "--target", ck.name], 2),
    "lock/sweep": (lambda o, t, ck: o / ".interp-sweep.lock", lambda o, t, ck: _sweep(ck, o), 2),
    "config/sweep": (lambda o, t, ck: t / "run.toml", lambda o, t, ck: _sweep(ck, o, "--config", t / "run.toml"), 2),
    "template/sweep": (
        lambda o, t, ck: t / "tmpl.json",
        lambda o, t, ck: _sweep(ck, o, "--template", t / "tmpl.json"),
        2,
    ),
    "cluster-config/sweep": (
        lambda o, t, ck: t / "slurm.toml",
        lambda o, t, ck: _sweep(ck, o, "--executor", "slurm", "--cluster-config", t / "slurm.toml"),
        2,
    ),
    "results-csv/report": (
        lambda o, t, ck: o / "results" / "pressure_summary.csv",
        lambda o, t, ck: ["report", o],
        2,
    ),
    "fingerprint-memo/sweep": (lambda o, t, ck: _memo(t / "memo", ck), lambda o, t, ck: _sweep(ck, o), 0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fifo_never_hangs(case, bi_model, earlier_out, tmp_path):
    where, argv, code = CASES[case]
    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT", symlinks=True))
    fifo = _fifo_at(where(out, tmp_path, bi_model))
    env = subprocess_env(PYTHONPATH=str(REPO), INTERP_FINGERPRINT_CACHE=str(tmp_path / "memo"))
    try:
        res = run_cli_process(argv(out, tmp_path, bi_model), env=env, cwd=tmp_path, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: hung on the FIFO at {fifo} (no exit within {HANG_S} s)")
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.returncode == code, f"exit {res.returncode}: {res.stderr[-1500:]}"
    if code == 2:
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith(ERR_PREFIX)]
        assert len(errors) == 1 and str(fifo) in errors[0] and "FIFO" in errors[0], res.stderr[-1500:]
