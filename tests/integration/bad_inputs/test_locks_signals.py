"""The sweep lock under contention and the exit codes of signals (issue 13)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import time
from pathlib import Path

import pytest
from _cli_process import CLIProcess

from ._util import REPO, SWEEP, subprocess_env

pytestmark = pytest.mark.timeout(300)


def _contender(out: str, barrier, results, hold: float) -> None:
    import sweeps.lock as lock
    from interp.core.errors import LockError
    from sweeps.lock import sweep_lock

    real = lock._holder

    def slow_holder(path):  # widen any window between reading the holder and acting on it
        info = real(path)
        time.sleep(random.random() * 0.1)
        return info

    lock._holder = slow_holder
    barrier.wait()
    try:
        with sweep_lock(Path(out)):
            t0 = time.monotonic()
            time.sleep(hold)
            results.put((os.getpid(), t0, time.monotonic()))
    except LockError:
        results.put((os.getpid(), None, None))


def test_stale_lock_is_taken_over_by_exactly_one_contender(tmp_path):
    """20 trials, 6 processes racing for a lock left by a dead process: never two holders at once."""
    from sweeps.lock import LOCK_NAME

    ctx = mp.get_context("fork")
    overlaps, winners = 0, []
    for trial in range(20):
        out = tmp_path / f"OUT{trial}"
        out.mkdir()
        (out / LOCK_NAME).write_text(json.dumps({"pid": 2**22 + 777, "host": os.uname().nodename, "since": 0}))
        barrier, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_contender, args=(str(out), barrier, results, 0.3)) for _ in range(6)]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        held = sorted((t0, t1) for _, t0, t1 in got if t0 is not None)
        winners.append(len(held))
        overlaps += sum(1 for a, b in zip(held, held[1:]) if b[0] < a[1])
        assert not (out / LOCK_NAME).exists(), "lock left behind"
    assert overlaps == 0, f"two holders at once in {overlaps} of 20 trials (winners per trial {winners})"
    assert all(w >= 1 for w in winners), "the stale lock was never taken over"


def test_foreign_lock_names_break_lock_and_break_lock_takes_it(tmp_path):
    from interp.core.errors import LockError
    from sweeps.lock import LOCK_NAME, sweep_lock

    out = tmp_path / "OUT"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 4242, "host": "node-17.cluster", "since": time.time() - 60}))
    with pytest.raises(LockError, match="node-17.cluster.*--break-lock"):
        with sweep_lock(out):
            pass
    with sweep_lock(out, break_lock=True) as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_foreign_lock_expires_after_the_age_limit(tmp_path, monkeypatch):
    import sweeps.lock as lock

    out = tmp_path / "OUT"
    out.mkdir()
    (out / lock.LOCK_NAME).write_text(json.dumps({"pid": 4242, "host": "node-17.cluster", "since": time.time() - 7200}))
    monkeypatch.setattr(lock, "FOREIGN_MAX_AGE", 3600.0)
    with lock.sweep_lock(out) as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_exits_with_its_code_one_line_and_releases_the_lock(sig, code, bi_model, tmp_path):
    from sweeps.lock import LOCK_NAME

    out = tmp_path / "OUT"
    env = subprocess_env(PYTHONPATH=str(REPO), INTERP_FINGERPRINT_CACHE=str(tmp_path / "memo"))
    proc = CLIProcess(["sweep", bi_model, *SWEEP, "--max-items", "40", "--out", out], env=env)
    deadline = time.monotonic() + 120
    while not (out / LOCK_NAME).exists():  # the sweep holds the lock: it is running
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "sweep did not start"
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == code, err[-2000:]
    assert lines and lines[-1].startswith(f"interp: interrupted by {sig.name}"), lines
    assert "Traceback" not in err, err[-2000:]
    assert not (out / LOCK_NAME).exists(), "lock left behind"
