"""One sweep at a time per output directory.

The lock is a file created with O_EXCL holding pid, host and start time. A lock whose
process is gone (same host) is stale and is taken over; a live one is refused with a
message that says who holds it, unless the caller asks to wait.
"""
from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from interp.errors import LockError

LOCK_NAME = ".interp-sweep.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _try_take(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}, f)
        f.flush()
        os.fsync(f.fileno())
    return True


def _holder(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@contextmanager
def sweep_lock(out: Path, *, wait: float = 0.0) -> Iterator[Path]:
    """Hold OUT's lock for the duration; `wait` seconds to wait for a live holder."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LockError(f"{out}: cannot create output directory ({exc.strerror or exc})") from None
    path = out / LOCK_NAME
    deadline = time.monotonic() + wait
    while not _try_take(path):
        info = _holder(path)
        if info is None:
            # written but not yet filled by its taker, or garbage: give the taker a moment
            time.sleep(0.2)
            info = _holder(path)
        if info and info.get("host") == socket.gethostname() and not _alive(int(info.get("pid", -1))):
            path.unlink(missing_ok=True)  # stale: its process died
            continue
        if info is None and path.exists() and time.time() - path.stat().st_mtime > 60:
            path.unlink(missing_ok=True)
            continue
        if time.monotonic() >= deadline:
            who = f"pid {info.get('pid')} on {info.get('host')}" if info else "an unknown process"
            raise LockError(f"{out}: another sweep ({who}) is writing here; wait for it or use another --out")
        time.sleep(0.5)
    try:
        yield path
    finally:
        info = _holder(path)
        if info and info.get("pid") == os.getpid():
            path.unlink(missing_ok=True)
