"""Item-level (cluster) percentile bootstrap.

Items are the unit of resampling everywhere in the analyses: the trials of one item (all
planted verdicts, turn kinds and wordings) share the item's text, so they are not independent.
Both entry points draw the same resamples for the same ``seed`` and number of items:
``bootstrap_ci`` on a trials table whose statistic is the mean of per-item means returns exactly
what ``bootstrap_mean_ci`` returns on those per-item means (tested).

Also home of ``TableError`` and ``require_columns``, shared by the metric modules.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from interp.core.errors import InterpError

__all__ = [
    "CI",
    "MIN_CI_ITEMS",
    "UndefinedCIWarning",
    "ci_defined",
    "TableError",
    "bootstrap_ci",
    "bootstrap_mean_ci",
    "percentile_interval",
    "require_columns",
    "resample_counts",
    "resample_indices",
]


class TableError(InterpError, ValueError):
    """An input table lacks a column or holds a value the metric cannot use."""


def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise ``TableError`` naming every missing column of ``df``."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise TableError(f"{what}: missing column(s) {missing}; has {list(df.columns)}")


class CI(NamedTuple):
    """A percentile interval. Floats for one statistic, arrays for several (one per column)."""

    lo: float | np.ndarray
    hi: float | np.ndarray


# Fewest items over which an interval is reported. With n items a bootstrap has at most
# C(2n-1, n) distinct resamples (n=4: 35, n=2: 3, n=1: one: a zero-width "interval"); its 2.5 and
# 97.5 percentiles are then little more than the smallest and largest item, not a 95 % interval.
MIN_CI_ITEMS = 5


class UndefinedCIWarning(UserWarning):
    """An interval over fewer than MIN_CI_ITEMS items was reported as undefined (NaN)."""


def ci_defined(n_items: int, what: str = "CI", min_items: int = MIN_CI_ITEMS) -> bool:
    """False (with one warning line) when `n_items` is too few for an interval: report NaN, not a
    zero-width or min-max interval."""
    if 0 < n_items < min_items:
        warnings.warn(
            f"{what} over {n_items} item(s) is undefined (fewer than {min_items}): reported as NaN",
            UndefinedCIWarning,
            stacklevel=3,
        )
        return False
    return True


def _check_args(n_boot: int, ci: float) -> None:
    if int(n_boot) < 1:
        raise TableError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < ci < 1.0:
        raise TableError(f"ci must lie in (0, 1), got {ci}")


def resample_indices(n_items: int, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """(n_boot, n_items) item indices drawn with replacement by ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_items, size=(int(n_boot), n_items))


def resample_counts(
    n_items: int, *, n_boot: int = 1000, seed: int = 0, rng: np.random.Generator | None = None
) -> np.ndarray:
    """(n_boot, n_items) multiplicities of each item in each resample: the one resampler.

    The same draws as ``resample_indices`` (or, given ``rng``, the next draws of that
    generator); as weights they turn a resampled sum into one matrix product
    (``counts @ per_item_values``). Memory is n_boot x n_items.
    """
    if rng is not None:
        idx = rng.integers(0, n_items, size=(int(n_boot), n_items))
    else:
        idx = resample_indices(n_items, n_boot=n_boot, seed=seed)
    offsets = (np.arange(idx.shape[0]) * n_items)[:, None]
    flat = np.bincount((idx + offsets).ravel(), minlength=idx.shape[0] * n_items)
    return flat.reshape(idx.shape[0], n_items).astype(np.float64)


def percentile_interval(replicates: np.ndarray, ci: float = 0.95) -> CI:
    """Percentile interval of bootstrap replicates (axis 0 = replicate).

    Non-finite replicates (a resample where the statistic is undefined, e.g. no item had the
    condition) are dropped rather than poisoning the interval; if none is finite the bound is NaN.
    """
    reps = np.asarray(replicates, dtype=np.float64)
    alpha = (1.0 - ci) / 2.0
    reps = np.where(np.isfinite(reps), reps, np.nan)
    if reps.ndim == 1:
        if not np.isfinite(reps).any():
            return CI(float("nan"), float("nan"))
        lo, hi = np.nanquantile(reps, [alpha, 1.0 - alpha])
        return CI(float(lo), float(hi))
    out = np.full((2, reps.shape[1]), np.nan)
    ok = np.isfinite(reps).any(axis=0)
    if ok.any():
        out[:, ok] = np.nanquantile(reps[:, ok], [alpha, 1.0 - alpha], axis=0)
    return CI(out[0], out[1])


def bootstrap_mean_ci(
    values_by_item: np.ndarray | Sequence[float],
    *,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    min_items: int = MIN_CI_ITEMS,
) -> CI:
    """Percentile CI of the mean over items, resampling items with replacement.

    ``values_by_item`` is (n_items,) or (n_items, k); with k columns all columns are resampled
    jointly (same items per replicate) and ``lo``/``hi`` are arrays of length k. NaN marks an
    item without a value for that column: each replicate's column mean is taken over the
    resampled items that have one (so an item missing a condition neither counts as zero nor
    drops the item from the other columns). Vectorised as one (n_boot x n_items) matrix product.
    """
    _check_args(n_boot, ci)
    v = np.asarray(values_by_item, dtype=np.float64)
    one_d = v.ndim == 1
    if one_d:
        v = v[:, None]
    if v.ndim != 2:
        raise TableError(f"values_by_item must be 1-D or 2-D, got shape {v.shape}")
    if np.isinf(v).any():
        raise TableError("values_by_item holds infinite values")
    n_items = v.shape[0]
    if n_items == 0 or not ci_defined(n_items, min_items=min_items):
        nan = np.full(v.shape[1], np.nan)
        return CI(float("nan"), float("nan")) if one_d else CI(nan, nan.copy())
    present = ~np.isnan(v)
    w = resample_counts(n_items, n_boot=n_boot, seed=seed)
    sums = w @ np.where(present, v, 0.0)
    counts = w @ present.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = sums / counts
    out = percentile_interval(reps, ci)
    if one_d:
        return CI(float(out.lo[0]), float(out.hi[0]))
    return out


def bootstrap_ci(
    df: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], float],
    *,
    cluster: str | Sequence[str] = "item_id",
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    min_items: int = MIN_CI_ITEMS,
) -> CI:
    """Percentile CI of ``statistic(df)`` resampling whole clusters (items) with replacement.

    Each replicate is the rows of the drawn clusters, in draw order. A cluster drawn twice
    appears twice and must count twice, so in the replicate frame the cluster column(s) are
    replaced by the draw position (0..n_clusters-1, int): a statistic that groups by
    ``cluster`` then sees two distinct items, as the bootstrap requires. Statistics that need
    the original ids (e.g. to join another table) must not rely on them.

    Fewer than ``MIN_CI_ITEMS`` clusters: NaN (undefined), with a warning; so for
    ``bootstrap_mean_ci``.

    Clusters are ordered by sorted id before drawing, so results do not depend on row order.
    The row gathering is vectorised (one ``take`` per replicate); only ``statistic`` runs in
    Python per replicate. For a plain mean of per-item values use ``bootstrap_mean_ci``.
    """
    _check_args(n_boot, ci)
    cols = [cluster] if isinstance(cluster, str) else list(cluster)
    require_columns(df, cols, "bootstrap_ci")
    if len(df) == 0:
        return CI(float("nan"), float("nan"))
    if df[cols].isna().any().any():
        raise TableError(f"bootstrap_ci: cluster column(s) {cols} hold missing values")
    codes = df.groupby(cols, sort=True).ngroup().to_numpy()
    n_clusters = int(codes.max()) + 1
    if not ci_defined(n_clusters, min_items=min_items):
        return CI(float("nan"), float("nan"))
    order = np.argsort(codes, kind="stable")
    ordered = df.iloc[order].reset_index(drop=True)
    lengths = np.bincount(codes, minlength=n_clusters)
    starts = np.cumsum(lengths) - lengths
    idx = resample_indices(n_clusters, n_boot=n_boot, seed=seed)
    reps = np.empty(idx.shape[0])
    positions = np.arange(n_clusters)
    for b, draw in enumerate(idx):
        lens = lengths[draw]
        # rows of cluster draw[j] are starts[draw[j]] .. +lens[j]; build them without a loop
        out_starts = np.cumsum(lens) - lens
        rows = np.repeat(starts[draw] - out_starts, lens) + np.arange(lens.sum())
        boot = ordered.take(rows).reset_index(drop=True)
        relabel = np.repeat(positions, lens)
        for c in cols:
            boot[c] = relabel
        reps[b] = float(statistic(boot))
    return percentile_interval(reps, ci)
