"""One numeric column of one table over many units, aligned on its key columns: [unit, row].

The key columns (item id, condition: strings) are decoded once per distinct layout; units whose
key columns carry the same checksums as an earlier unit's share its row order (`cache.columns`),
so a bank swept over 741 checkpoints costs one decode and 741 reads of numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cache.columns import read_columns


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
