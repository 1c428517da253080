"""Reads of a results table the item pages share: an item x checkpoint matrix, one item's rows."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from interp.core.errors import ConfigError
from interp.view.sweep_files import SweepFiles


def item_matrix(rows: pd.DataFrame, ids: Sequence[str], checkpoints: Sequence[str], path: Path) -> np.ndarray:
    """map_value of `rows` (item_id, checkpoint, map_value) as [item, checkpoint] in the given
    orders, NaN where not measured: a pivot by position, without pandas' reshaping of 741,000 rows.
    Two rows for one cell is an error naming `path`."""
    r = pd.Index(ids).get_indexer(rows["item_id"])
    c = pd.Index(checkpoints).get_indexer(rows["checkpoint"])
    keep = (c >= 0) & (r >= 0)
    cells = r[keep] * len(checkpoints) + c[keep]
    if len(cells) and np.bincount(cells, minlength=len(ids) * len(checkpoints)).max() > 1:
        raise ConfigError(f"{path}: an item appears twice for one checkpoint")
    z = np.full(len(ids) * len(checkpoints), np.nan)
    z[cells] = rows["map_value"].to_numpy(dtype=np.float64)[keep]
    return z.reshape(len(ids), len(checkpoints))


def order_rows(z: np.ndarray, toward_user: int) -> np.ndarray:
    """Rows of an item matrix, those most on the user's side first by their mean over the measured
    checkpoints (toward_user -1: the lowest mean first; +1: the highest), unmeasured items last."""
    with warnings.catch_warnings():  # an item no checkpoint measured
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(z, axis=1) if z.shape[1] else np.full(len(z), np.nan)
    return np.argsort(np.where(np.isnan(mean), np.inf, -toward_user * mean), kind="stable")


def rows_of_item(sw: SweepFiles, key: object, table: Callable[[], pd.DataFrame], item_id: str) -> pd.DataFrame:
    """The rows of `table()` (an item_id column as text) whose item is `item_id`: the table's row
    numbers are grouped by item once per `key` (a hash factorization and an integer sort: a
    741-checkpoint sweep's 1.5 million map rows in a fraction of a second) and kept."""

    def build() -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
        t = table().reset_index(drop=True)
        codes, uniques = pd.factorize(t["item_id"])
        order = np.argsort(codes, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(codes[codes >= 0], minlength=len(uniques)))])
        return t, {str(u): order[bounds[i] : bounds[i + 1]] for i, u in enumerate(uniques)}

    t, rows = sw.memo(key, build)
    return t.iloc[rows.get(item_id, np.zeros(0, dtype=np.int64))].reset_index(drop=True)


def by_column(sw: SweepFiles, checkpoints: Iterable[str], values: Iterable[object]) -> list:
    """`values` (one per checkpoint name) placed at each checkpoint's display column; None where a
    column has none (a checkpoint the sweep's columns do not show is left out)."""
    col = sw.column_index()
    line = [None] * len(sw.columns)
    for ck, v in zip(checkpoints, values):
        if ck in col:
            line[col[ck]] = v
    return line
