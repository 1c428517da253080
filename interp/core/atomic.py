"""Write to a temporary file in the same directory, fsync, rename last, fsync the directory.

A process killed at any moment leaves either the old file (or none) or the complete new one
under the final name, never half a file. Temporaries are hidden (`.NAME.tmp-PID-HOST-RAND`) so
`cache.Store.clean_stale` and a rerun can sweep them, but only those whose writer is gone
(`writer_gone`): another sweep writing into the same OUT at the same time, on this machine or on
another node of a cluster sharing the file system, keeps its temporaries. Every writer in the
project uses this.
"""

from __future__ import annotations

import os
import re
import socket
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

TMP_MARK = ".tmp-"
# A temporary whose writer cannot be checked (written on another host, or named before the host
# joined the name) is stale once untouched this long: a unit is written in seconds, so an hour
# leaves a wide margin for a slow shared file system while still cleaning up after crashed nodes.
STALE_AGE_S = 3600.0


def host_tag() -> str:
    """This machine's name as it goes into a temporary's name (no '-', which separates fields)."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def tmp_path_for(path: Path) -> Path:
    """The hidden temporary a write of `path` goes through: same directory, a name that neither
    ends like the final file (globs such as `*.h5` never see it) nor is visible (`.NAME...`),
    naming the writer (pid, host) so that a cleaner can tell whether it still runs."""
    path = Path(path)
    return path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}-{host_tag()}-{uuid.uuid4().hex[:8]}")


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists on this machine (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def writer_gone(tmp: Path, *, max_age: float = STALE_AGE_S) -> bool:
    """Whether the writer of temporary `tmp` has certainly stopped: on this host, its pid no longer
    runs (this process's own temporaries are live: a write that fails removes its own); written
    elsewhere or under the older `PID-RAND` name, the file is untouched for `max_age` seconds."""
    fields = tmp.name.split(TMP_MARK, 1)[-1].split("-")
    if len(fields) == 3 and fields[0].isdigit() and fields[1] == host_tag():
        pid = int(fields[0])
        return pid != os.getpid() and not pid_alive(pid)
    try:
        age = time.time() - tmp.stat().st_mtime
    except FileNotFoundError:
        return False
    return age > max_age


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path, *, mkdir: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; on success it is fsynced and renamed to `path`.

    On any exception the temporary is removed and the previous file at `path` is untouched.
    An OSError propagates with `path` as its filename when it names no file or the temporary (a
    full disk while matplotlib or pandas writes: the message names the figure or table); callers
    turn it into their own one-line error.
    """
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path_for(path)
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        if exc.filename in (None, str(tmp), tmp):  # name the file being written, not its temporary
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    finally:
        if tmp.exists():
            tmp.unlink(missing_ok=True)


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call `write(tmp)` and move the result to `path` atomically; returns `path`."""
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding=encoding))
