"""A few columns of one table of a unit, without reading the rest (`interp view` over many units).

A unit's table is one dataset per column, each with the blake2b checksum of its contents
(`cache.store`). Two units whose key columns carry the same checksums hold the same rows in the
same order, so a reader of many units of one bank decodes the key columns (strings: the slow
part) once and reads only the numbers from the others. Values read here are verified against
their checksum, as `read_unit` verifies them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import h5py
import numpy as np

from cache.store import CHECKSUM, _get, _plain
from interp.core.errors import CacheError
from interp.core.files import regular_file


def read_columns(
    path: str | Path, table: str, load: Iterable[str], *, digests: Iterable[str] = ()
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """({column: values} for `load`, {column: checksum} for `digests`) of `table` in the unit at
    `path`. A missing table or column, an incomplete unit or a damaged dataset: one `CacheError`."""
    path = Path(path)
    regular_file(path, error=CacheError)
    try:
        with h5py.File(path, "r") as f:
            if not f.attrs.get("complete"):
                raise CacheError(f"{path}: cache unit is incomplete (writer did not finish)")
            group = f[f"tables/{table}"]
            verify = bool(f.attrs.get("checksums"))
            values = {c: _get(group[c], path, verify) for c in load}
            sums = {c: str(_plain(group[c].attrs.get(CHECKSUM, ""))) for c in digests}
    except KeyError as exc:
        raise CacheError(f"{path}: table {table!r} lacks {exc}") from None
    except OSError as exc:
        raise CacheError(f"{path}: not a readable HDF5 cache unit ({exc})") from None
    return values, sums


def has_table(path: str | Path, table: str) -> bool:
    """Whether the unit at `path` holds `table` (units written before a table existed do not)."""
    try:
        with h5py.File(Path(path), "r") as f:
            return f"tables/{table}" in f
    except OSError as exc:
        raise CacheError(f"{path}: not a readable HDF5 cache unit ({exc})") from None


def unit_attrs(path: str | Path) -> dict:
    """The attributes (identity and provenance) of the unit at `path`, reading no table."""
    path = Path(path)
    regular_file(path, error=CacheError)
    try:
        with h5py.File(path, "r") as f:
            return {k: _plain(v) for k, v in f.attrs.items()}
    except OSError as exc:
        raise CacheError(f"{path}: not a readable HDF5 cache unit ({exc})") from None
