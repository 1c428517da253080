"""Write to a temporary file in the same directory, fsync, rename last, fsync the directory.

A process killed at any moment leaves either the old file (or none) or the complete new one
under the final name, never half a file. Temporaries are hidden (`.NAME.tmp-PID-RAND`) so
`cache.Store.clean_stale` and a rerun can sweep them. Every writer in the project uses this.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

TMP_MARK = ".tmp-"


def tmp_path_for(path: Path) -> Path:
    """The hidden temporary a write of `path` goes through: same directory, a name that neither
    ends like the final file (globs such as `*.h5` never see it) nor is visible (`.NAME...`)."""
    path = Path(path)
    return path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")


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
    OSError propagates unchanged: callers turn it into their own one-line error.
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
