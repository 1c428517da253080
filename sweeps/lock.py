"""One sweep at a time per output directory.

The lock is an `fcntl.flock` on OUT/.interp-sweep.lock, which also holds pid, host and start
time for messages. The kernel releases a flock when its holder dies however it dies (SIGKILL
included), so there is no stale-lock check-then-delete race: taking over a dead holder's
lock is the same atomic call as taking a free one. After locking, the holder checks that the
file it locked is still the one at the path (a releasing holder unlinks it), else retries.

A lock file that names another host is honoured for `FOREIGN_MAX_AGE` seconds even when the
flock is free (file systems mounted without cross-host locking grant it locally); after that,
or with `break_lock` (CLI `--break-lock`), it is taken over. Where the file system refuses
flock altogether, an O_EXCL file with the same pid/host/age rules is used instead.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from interp.core.files import regular_file
from interp.core.errors import LockError

LOCK_NAME = ".interp-sweep.lock"
FOREIGN_MAX_AGE = float(os.environ.get("INTERP_LOCK_MAX_AGE", 24 * 3600))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _info() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}


def _holder(path: Path) -> dict | None:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _who(info: dict | None) -> str:
    if not info:
        return "an unknown process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info.get("since", 0) or 0)))
    return f"pid {info.get('pid')} on {info.get('host')} since {since}"


def _foreign_live(info: dict | None) -> bool:
    """A lock written on another host and younger than the age limit."""
    if not info or info.get("host") == socket.gethostname():
        return False
    try:
        age = time.time() - float(info.get("since", 0))
    except (TypeError, ValueError):
        return False
    return age < FOREIGN_MAX_AGE


def _try_flock(path: Path, break_lock: bool) -> tuple[int | None, dict | None]:
    """(fd holding the lock, None) or (None, holder info). Raises OSError if flock is unsupported."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None, _holder(path) or {}
    except OSError:
        os.close(fd)
        raise
    try:
        same = os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        same = False
    if not same:  # the previous holder unlinked it after we opened it: lock the new file
        os.close(fd)
        return None, None
    info = _holder(path)
    if not break_lock and _foreign_live(info):
        os.close(fd)
        return None, info
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(_info()).encode(), 0)
    os.fsync(fd)
    return fd, None


def _try_excl(path: Path, break_lock: bool) -> dict | None:
    """O_EXCL fallback: None when taken, else the holder's info."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        info = _holder(path) or {}
        local = info.get("host") == socket.gethostname()
        dead = local and not _alive(int(info.get("pid", -1)))
        if break_lock or dead or (not local and not _foreign_live(info)):
            # rename to a unique name first: of several contenders only one renames this file
            grave = path.with_name(f"{path.name}.stale-{os.getpid()}")
            try:
                os.rename(path, grave)
            except FileNotFoundError:
                return info
            grave.unlink(missing_ok=True)
            return _try_excl(path, False)
        return info
    with os.fdopen(fd, "w") as f:
        json.dump(_info(), f)
        f.flush()
        os.fsync(f.fileno())
    return None


@contextmanager
def sweep_lock(out: Path, *, wait: float = 0.0, break_lock: bool = False) -> Iterator[Path]:
    """Hold OUT's lock for the duration; `wait` seconds to wait for a live holder."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LockError(f"{out}: cannot create output directory ({exc.strerror or exc})") from None
    path = out / LOCK_NAME
    if os.path.lexists(path):  # a FIFO here would hang the holder read; a directory would fail later
        regular_file(path, error=LockError)
    if break_lock:
        info = _holder(path)
        if (
            info
            and info.get("host") == socket.gethostname()
            and _alive(int(info.get("pid", -1)))
            and int(info.get("pid", -1)) != os.getpid()
        ):
            raise LockError(
                f"{path}: held by live {_who(info)} on this host; --break-lock only clears a dead sweep's lock"
            )
    deadline = time.monotonic() + wait
    fd: int | None = None
    use_flock = True
    while True:
        info: dict | None
        try:
            if use_flock:
                fd, info = _try_flock(path, break_lock)
                taken = fd is not None
            else:
                info = _try_excl(path, break_lock)
                taken = info is None
        except OSError as exc:
            if use_flock and exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                use_flock = False
                continue
            raise LockError(f"{path}: cannot take the sweep lock ({exc.strerror or exc})") from None
        if taken:
            break
        if info is None:  # lost an unlink race with a releasing holder: try again at once
            continue
        if time.monotonic() >= deadline:
            hint = (
                " If that sweep is dead (e.g. its job was cancelled), rerun with --break-lock."
                if info.get("host") not in (None, socket.gethostname())
                else ""
            )
            raise LockError(
                f"{out}: another sweep ({_who(info)}) is writing here; wait for it (--wait) or use another --out.{hint}"
            )
        time.sleep(0.2)
    try:
        yield path
    finally:
        mine = _holder(path)
        if mine and mine.get("pid") == os.getpid():
            path.unlink(missing_ok=True)  # unlink before unlocking: a waiter re-checks the inode
        if fd is not None:
            os.close(fd)
