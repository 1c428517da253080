"""Reading files that may not be regular: every open-for-read in the toolkit goes through here.

A FIFO blocks the first open or read forever, /dev/zero never ends, a directory fails with a
traceback: each is refused with one line naming the path, before it is opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from interp.core.errors import InterpError


def regular_file(path: Path, *, limit: int | None = None, error: type[InterpError] = InterpError) -> os.stat_result:
    """stat of `path` (links followed) if it is a regular file within `limit` bytes; else one-line error.

    A FIFO blocks the first read forever and /dev/zero never ends: neither is opened.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a directory"
            if stat.S_ISDIR(st.st_mode)
            else "not a regular file"
        )
        raise error(f"{path}: {kind}, not a regular file; refusing to read it")
    if limit is not None and st.st_size > limit:
        raise error(f"{path}: {st.st_size} bytes, over the limit of {limit} for this kind of file")
    return st


def read_text(
    path: Path, *, limit: int | None = 1 << 30, error: type[InterpError] = InterpError, encoding: str = "utf-8"
) -> str:
    """The text of a regular file (see `regular_file`); a decoding or OS error is one line."""
    regular_file(path, limit=limit, error=error)
    try:
        return Path(path).read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not valid {encoding} ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None


def decode_utf8(raw: bytes, path: Path, *, error: type[InterpError] = InterpError, unit: str = "line") -> str:
    """`raw` as UTF-8 (a BOM dropped); else one line naming the file, the line (or row) and the byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(f"{path}: {unit} {line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


def writable_dirs(*dirs: Path, error: type[InterpError] = InterpError) -> None:
    """Create each directory and check it can be written, before any work: one line naming it
    (a read-only OUT used to fail with a traceback after the work was done)."""
    for d in dirs:
        try:
            Path(d).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise error(f"{d}: cannot create output directory ({exc.strerror or exc})") from None
        if not os.access(d, os.W_OK | os.X_OK):
            raise error(f"{d}: output directory is not writable")
