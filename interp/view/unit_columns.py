"""One numeric column of one table over many units, aligned on its key columns: [unit, row].

The key columns (item id, condition: strings) are decoded once per distinct layout; units whose
key columns carry the same checksums as an earlier unit's share its row order (`cache.columns`),
so a bank swept over 741 checkpoints costs one decode and 741 reads of numbers.

`align_units_kept` keeps the result as .npy files in a directory (`interp view --serve`: OUT/.view-index), named
by the units it was read from (file names, which hold each unit's identity hash, sizes and
modification times): a later server loads it instead of reading every unit again, and a unit
rewritten since gives another name, so a kept index never outlives what it copies.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cache.columns import read_columns
from interp.core.atomic import atomic_path


@dataclass(frozen=True)
class Aligned:
    keys: pd.DataFrame  # one row per distinct key over all units, in order of first appearance
    checkpoints: list[str]  # the checkpoint of each unit (row of `values`)
    values: np.ndarray  # [unit, key row], NaN where a unit has no such row

    def rows_where(self, column: str, value: str) -> np.ndarray:
        return np.flatnonzero(self.keys[column].to_numpy() == value)


def align_units(units: pd.DataFrame, table: str, keys: tuple[str, ...], value: str) -> Aligned:
    """`value` of `table` in each unit of `units` (columns `path`, `checkpoint`), aligned on `keys`."""
    index: dict[tuple, int] = {}
    layouts: dict[tuple, np.ndarray] = {}  # checksums of the key columns -> positions in the union
    per_unit: list[tuple[np.ndarray, np.ndarray]] = []
    for path in units["path"]:
        vals, sums = read_columns(path, table, [value], digests=keys)
        layout = tuple(sums[k] for k in keys)
        if layout not in layouts or not all(layout):
            decoded, _ = read_columns(path, table, keys)
            tuples = zip(*(decoded[k].tolist() for k in keys))
            layouts[layout] = np.array([index.setdefault(t, len(index)) for t in tuples], dtype=np.int64)
        per_unit.append((layouts[layout], np.asarray(vals[value], dtype=np.float64)))
    matrix = np.full((len(per_unit), len(index)), np.nan)
    for u, (pos, v) in enumerate(per_unit):
        matrix[u, pos] = v
    key_frame = pd.DataFrame(list(index), columns=list(keys)) if index else pd.DataFrame(columns=list(keys))
    return Aligned(keys=key_frame, checkpoints=[str(c) for c in units["checkpoint"]], values=matrix)


def _kept_name(units: pd.DataFrame, table: str, keys: tuple[str, ...], value: str) -> str:
    h = hashlib.sha256(repr((table, keys, value)).encode())
    for path, ck in zip(units["path"], units["checkpoint"]):
        st = Path(path).stat()
        h.update(f"{Path(path).name}|{ck}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return f"{table}-{value}-{h.hexdigest()[:24]}"


def align_units_kept(units: pd.DataFrame, table: str, keys: tuple[str, ...], value: str, where: Path) -> Aligned:
    """`align_units`, kept in `where` as .npy files (read back memory-mapped when the same units are
    asked for again; not kept when `where` cannot be written: a read-only sweep is never changed)."""
    kept = Path(where) / _kept_name(units, table, keys, value)
    if (kept / "done").is_file():
        try:
            frame = pd.DataFrame({k: np.load(kept / f"key_{k}.npy").astype(object) for k in keys}, columns=list(keys))
            return Aligned(
                keys=frame,
                checkpoints=np.load(kept / "checkpoints.npy").astype(str).tolist(),
                values=np.load(kept / "values.npy", mmap_mode="r"),
            )
        except (OSError, ValueError):
            pass  # unreadable: read the units again and keep a new copy
    al = align_units(units, table, keys, value)
    arrays = {
        "values": al.values,
        "checkpoints": np.array(al.checkpoints, dtype=str),
        **{f"key_{k}": al.keys[k].astype(str).to_numpy(dtype=str) for k in keys},
    }
    try:
        kept.mkdir(parents=True, exist_ok=True)
        for name, a in arrays.items():
            with atomic_path(kept / f"{name}.npy") as tmp:
                with open(tmp, "wb") as f:
                    np.save(f, a, allow_pickle=False)
        (kept / "done").write_text("complete\n")  # last: a half-written index is never read
    except OSError:
        pass
    return al
