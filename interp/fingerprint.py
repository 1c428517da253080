"""File digests for checkpoint fingerprints: sampled by default, full on request, memoised.

Sampled digest of a weight file (mode "sampled-v1-32x8192"): its size, its whole safetensors header
(tensor names, dtypes, shapes, byte offsets, metadata) and `SAMPLE_BLOCKS` blocks of
`SAMPLE_BYTES` bytes at fixed, evenly spaced offsets of the data region (the first and the
last block included). A planner reads 256 KiB (32 x 8 KiB) per weight file instead of all of it.

What the sampled digest can miss: an edit that keeps the file size and the header and
touches only bytes outside the sampled blocks (e.g. one weight changed in place in the
middle of a tensor). Training steps change nearly every weight, so successive checkpoints
always differ in the samples; for hand-edited weights use full hashing (`--full-hash`,
mode "full"). The two modes give different fingerprints, so units computed under one are
not reused under the other.

Small files (config, tokenizer, templates) are always hashed in full.

Memo: digests are kept in a sidecar per checkpoint directory under
`$INTERP_FINGERPRINT_CACHE` (default `$XDG_CACHE_HOME/interp/fingerprints`), keyed by the
file's size, mtime, inode and ctime. `touch -r` restores mtime but not ctime, and a copy
gets a new inode, so neither serves a stale digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from pathlib import Path
from typing import Iterable

from interp.core.errors import CheckpointError, InterpError
from interp.core.hashing import sha256_file

SAMPLE_BLOCKS = 32
SAMPLE_BYTES = 8 << 10
MAX_HEADER_BYTES = 100 << 20  # the safetensors format's own limit
MAX_SMALL_FILE = 1 << 30  # tokenizer, config, template files: anything bigger is not one
SAMPLED = f"sampled-v1-{SAMPLE_BLOCKS}x{SAMPLE_BYTES}"  # the memo never serves another sampling's digest
FULL = "full"


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


def _data_start(f, size: int, path: Path) -> tuple[int, bytes]:
    """(offset of the data region, header bytes) of a safetensors file; (0, b"") otherwise."""
    if path.suffix != ".safetensors" or size < 8:
        return 0, b""
    (n,) = struct.unpack("<Q", f.read(8))
    if n > min(MAX_HEADER_BYTES, size - 8):
        raise CheckpointError(f"{path}: safetensors header length {n} is impossible for a {size}-byte file")
    return 8 + n, f.read(n)


def safetensors_header(path: Path) -> dict:
    """The JSON header of a safetensors file (tensor name -> dtype, shape, offsets)."""
    size = regular_file(path, error=CheckpointError).st_size
    with open(path, "rb") as f:
        _, raw = _data_start(f, size, path)
    try:
        header = json.loads(raw)
    except ValueError:
        raise CheckpointError(f"{path}: safetensors header is not valid JSON") from None
    return header if isinstance(header, dict) else {}


def sample_offsets(start: int, size: int) -> list[int]:
    """Offsets of the sampled blocks in [start, size): evenly spaced, first and last included."""
    span = size - start
    if span <= SAMPLE_BLOCKS * SAMPLE_BYTES:
        return [start + i * SAMPLE_BYTES for i in range((span + SAMPLE_BYTES - 1) // SAMPLE_BYTES)]
    last = span - SAMPLE_BYTES
    return [start + last * i // (SAMPLE_BLOCKS - 1) for i in range(SAMPLE_BLOCKS)]


def sampled_digest(path: Path) -> str:
    size = regular_file(path).st_size
    h = hashlib.sha256(f"{SAMPLED}|{size}|".encode())
    with open(path, "rb") as f:
        start, header = _data_start(f, size, path)
        h.update(header)
        for off in sample_offsets(start, size):
            f.seek(off)
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def full_digest(path: Path) -> str:
    regular_file(path)
    return sha256_file(path)


def _memo_dir() -> Path:
    if os.environ.get("INTERP_FINGERPRINT_CACHE"):
        return Path(os.environ["INTERP_FINGERPRINT_CACHE"])
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "interp" / "fingerprints"


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


class _Memo:
    """The sidecar of one checkpoint directory: {file name: {key, mode: digest}}."""

    def __init__(self, directory: Path):
        name = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:32]
        self.path = _memo_dir() / f"{name}.json"
        try:
            self.data = json.loads(self.path.read_text())
            if not isinstance(self.data, dict):
                self.data = {}
        except (OSError, ValueError):
            self.data = {}
        self.dirty = False

    def digest(self, path: Path, mode: str, *, limit: int | None = None) -> str:
        st = regular_file(path, limit=limit, error=CheckpointError)
        key = _stat_key(st)
        entry = self.data.get(path.name)
        if not isinstance(entry, dict) or entry.get("key") != key:
            entry = {"key": key}
        if mode not in entry:
            entry[mode] = sampled_digest(path) if mode == SAMPLED else full_digest(path)
            self.data[path.name] = entry
            self.dirty = True
        return entry[mode]

    def save(self) -> None:
        if not self.dirty:
            return
        from interp.core.atomic import atomic_write_text

        try:  # the memo is an optimisation: failing to write it never fails a run
            atomic_write_text(self.path, json.dumps(self.data))
        except OSError:
            pass


def checkpoint_digests(
    directory: Path, *, config: str, inputs: Iterable[str], weights: Iterable[str], full_hash: bool = False
) -> dict:
    """{config, inputs: {name: sha}, weights: {name: digest}, weights_mode} for one directory."""
    directory = Path(directory)
    memo = _Memo(directory)
    mode = FULL if full_hash else SAMPLED
    try:
        cfg = json.loads((directory / config).read_text(encoding="utf-8"))
        parts = {
            "config": cfg,
            "inputs": {n: memo.digest(directory / n, FULL, limit=MAX_SMALL_FILE) for n in sorted(inputs)},
            "weights": {n: memo.digest(directory / n, mode) for n in sorted(weights)},
            "weights_mode": mode,
        }
    except OSError as exc:
        raise CheckpointError(f"{directory}: cannot read for fingerprinting ({exc.strerror or exc})") from None
    memo.save()
    return parts


def file_signature(directory: Path, names: Iterable[str]) -> dict[str, list[int]]:
    """(size, mtime, inode, ctime) of each file: compared before and after a load."""
    sig = {}
    for n in sorted(names):
        try:
            sig[n] = _stat_key(os.stat(Path(directory) / n))
        except OSError:
            sig[n] = []
    return sig
