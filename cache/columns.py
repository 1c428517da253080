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

from cache.store import CHECKSUM, Store, _get, _plain, slot_of
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


def unit_header(path: str | Path) -> tuple[dict, list[str]]:
    """(attributes, table names) of the unit at `path`, reading no table: what a reader of many
    units needs to know of each (units written before a table existed lack it)."""
    path = Path(path)
    regular_file(path, error=CacheError)
    try:
        with h5py.File(path, "r") as f:
            return {k: _plain(v) for k, v in f.attrs.items()}, sorted(f.get("tables", {}))
    except OSError as exc:
        raise CacheError(f"{path}: not a readable HDF5 cache unit ({exc})") from None


def current_slots(root: str | Path, study: str) -> list[dict]:
    """The current units of `study` under the cache `root`, each with its slot's fields (study,
    checkpoint, bank without the subsample, backend, layer) and path, read from current.json:
    no unit is opened, except one current.json does not list (its attributes name its slot)."""
    store = Store(root)
    by_path = {store.root / rel: slot for slot, rel in store._manifest().items()}
    out = []
    for path in store.current_units(study, warn=False)[0]:
        slot = by_path.get(path) or slot_of(unit_header(path)[0])
        head, bank, backend, layer = slot.rsplit("|", 3)
        study_name, checkpoint = head.split("|", 1)
        out.append({"study": study_name, "checkpoint": checkpoint, "bank_base": bank, "backend": backend,
                    "layer": layer, "path": path})  # fmt: skip
    return out
