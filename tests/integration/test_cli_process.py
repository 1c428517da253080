"""tests/_cli_process.py, the fork-server runner of `interp` commands that other tests rely on to
catch hangs, signals and exit codes: a command that blocks must time out and be killed (else a
hang test could never fail), and a failing one must come back with its own exit code, stderr
and working directory."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from _cli_process import CLIProcess, run_cli_process

from bad_inputs._util import SWEEP  # a small pressure sweep
from interp.core.atomic import pid_alive
from sweeps.lock import sweep_lock


def test_a_blocked_command_times_out_and_is_killed(tiny_models, tmp_path):
    out = tmp_path / "OUT"
    with sweep_lock(out):  # held here: the child waits for it (--wait 120) and never gets it
        t0 = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            run_cli_process(["sweep", tiny_models["llama"], *SWEEP, "--out", out, "--wait", "120"], timeout=3)
        assert time.monotonic() - t0 < 60
    # control: the same command with the lock free runs to the end
    done = run_cli_process(["sweep", tiny_models["llama"], *SWEEP, "--out", out, "--wait", "120"], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_exit_code_stderr_and_working_directory_are_the_childs(tmp_path):
    (tmp_path / "here").mkdir()
    res = run_cli_process(
        ["sweep", "missing-ck", *SWEEP, "--out", "OUT"], cwd=tmp_path / "here", env=dict(os.environ), timeout=120
    )
    assert res.returncode == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interp: error:") and "missing-ck" in lines[0], lines
    assert not (tmp_path / "here" / "OUT").exists() and not (tmp_path / "OUT").exists()
    usage = run_cli_process(["--no-such-option"], timeout=120)
    assert usage.returncode == 2 and "No such option" in usage.stderr


def test_a_killed_command_reports_the_signal(tiny_models, tmp_path):
    out = tmp_path / "OUT"
    with sweep_lock(out):
        proc = CLIProcess(["sweep", tiny_models["llama"], *SWEEP, "--out", out, "--wait", "120"])
        time.sleep(1.0)  # waiting for the lock
        assert proc.poll() is None
        proc.kill()
        assert proc.wait(60) == -9
    assert not pid_alive(proc.pid)
