"""Item-level percentile bootstrap."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from analyses.bootstrap import (
    MIN_CI_ITEMS,
    TableError,
    UndefinedCIWarning,
    bootstrap_ci,
    bootstrap_mean_ci,
    percentile_interval,
    resample_counts,
    resample_indices,
)


def _trials(n_items: int, rows_per_item: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item_effect = rng.normal(size=n_items)
    ids = np.repeat([f"it{i:04d}" for i in range(n_items)], rows_per_item)
    x = np.repeat(item_effect, rows_per_item) + 0.3 * rng.normal(size=n_items * rows_per_item)
    return pd.DataFrame({"item_id": ids, "x": x})


def _mean_of_item_means(df: pd.DataFrame) -> float:
    return float(df.groupby("item_id")["x"].mean().mean())


def test_resample_counts_match_indices() -> None:
    idx = resample_indices(7, n_boot=50, seed=3)
    counts = resample_counts(7, n_boot=50, seed=3)
    assert counts.shape == (50, 7)
    np.testing.assert_array_equal(counts.sum(axis=1), np.full(50, 7))
    for b in range(50):
        np.testing.assert_array_equal(counts[b], np.bincount(idx[b], minlength=7))


def test_percentile_interval_matches_numpy_and_drops_nan() -> None:
    reps = np.random.default_rng(0).normal(size=999)
    lo, hi = percentile_interval(reps, 0.9)
    assert lo == pytest.approx(np.quantile(reps, 0.05), abs=1e-15)
    assert hi == pytest.approx(np.quantile(reps, 0.95), abs=1e-15)
    with_nan = np.concatenate([reps, [np.nan, np.inf]])
    assert percentile_interval(with_nan, 0.9) == (lo, hi)


def test_mean_ci_by_hand_against_explicit_loop() -> None:
    values = np.random.default_rng(5).exponential(size=40)
    idx = resample_indices(40, n_boot=300, seed=11)
    reps = values[idx].mean(axis=1)
    want = np.quantile(reps, [0.025, 0.975])
    lo, hi = bootstrap_mean_ci(values, n_boot=300, seed=11)
    np.testing.assert_allclose([lo, hi], want, rtol=0, atol=1e-12)


def test_cluster_bootstrap_equals_fast_path() -> None:
    # same seed, same resamples: the generic path on rows must reproduce the per-item fast path
    df = _trials(30, 4)
    item_means = df.groupby("item_id", sort=True)["x"].mean().to_numpy()
    slow = bootstrap_ci(df.sample(frac=1.0, random_state=2), _mean_of_item_means, n_boot=200, seed=7)
    fast = bootstrap_mean_ci(item_means, n_boot=200, seed=7)
    np.testing.assert_allclose(slow, fast, rtol=0, atol=1e-12)


def test_duplicated_clusters_count_twice() -> None:
    # one item with 3 rows of 1.0 and one with 1 row of 0.0; item-weighted mean of a
    # resample is (#draws of item A)/2, so the only possible replicate values are 0, 0.5, 1.
    df = pd.DataFrame({"item_id": ["a", "a", "a", "b"], "x": [1.0, 1.0, 1.0, 0.0]})
    seen: list[float] = []

    def stat(d: pd.DataFrame) -> float:
        v = _mean_of_item_means(d)
        seen.append(v)
        return v

    bootstrap_ci(df, stat, n_boot=200, seed=0, min_items=1)  # the resampling itself, on 2 items
    assert set(np.round(seen, 12)) == {0.0, 0.5, 1.0}
    # P(both draws equal) = 1/2 -> the extremes are common, and 0.5 shows up too
    assert 0.3 < np.mean(np.isclose(seen, 0.5)) < 0.7


def test_ci_contains_estimate_and_narrows_with_items() -> None:
    widths = []
    for n in (20, 320):
        df = _trials(n, 3, seed=n)
        est = _mean_of_item_means(df)
        lo, hi = bootstrap_ci(df, _mean_of_item_means, n_boot=300, seed=0)
        assert lo < est < hi
        widths.append(hi - lo)
    assert widths[1] < 0.5 * widths[0]  # ~ 1/sqrt(16) = 0.25 expected


def test_ci_level_is_respected() -> None:
    vals = np.random.default_rng(8).normal(size=100)
    lo90, hi90 = bootstrap_mean_ci(vals, ci=0.90, seed=1)
    lo99, hi99 = bootstrap_mean_ci(vals, ci=0.99, seed=1)
    assert lo99 < lo90 < hi90 < hi99


def test_mean_ci_2d_joint_and_nan_as_missing() -> None:
    rng = np.random.default_rng(4)
    a = rng.normal(size=50)
    b = rng.normal(loc=3.0, size=50)
    b_missing = b.copy()
    b_missing[::5] = np.nan
    lo, hi = bootstrap_mean_ci(np.column_stack([a, b_missing]), n_boot=400, seed=2)
    # column a resampled exactly as alone
    lo_a, hi_a = bootstrap_mean_ci(a, n_boot=400, seed=2)
    assert (lo[0], hi[0]) == pytest.approx((lo_a, hi_a), abs=1e-12)
    # column b: mean over present items only, by explicit loop
    idx = resample_indices(50, n_boot=400, seed=2)
    reps = np.array([np.nanmean(b_missing[r]) for r in idx])
    np.testing.assert_allclose([lo[1], hi[1]], np.quantile(reps, [0.025, 0.975]), atol=1e-12)
    assert lo[1] < np.nanmean(b_missing) < hi[1]


def test_seeded_and_reproducible() -> None:
    vals = np.random.default_rng(0).normal(size=60)
    assert bootstrap_mean_ci(vals, seed=3) == bootstrap_mean_ci(vals, seed=3)
    assert bootstrap_mean_ci(vals, seed=3) != bootstrap_mean_ci(vals, seed=4)


def test_edge_cases_and_errors() -> None:
    assert np.isnan(bootstrap_mean_ci(np.array([]))).all()
    # one item (or any count under MIN_CI_ITEMS): undefined, never a zero-width interval
    for n in range(1, MIN_CI_ITEMS):
        with pytest.warns(UndefinedCIWarning, match=f"over {n} item"):
            assert np.isnan(bootstrap_mean_ci(np.arange(n, dtype=float))).all()
    with pytest.warns(UndefinedCIWarning):
        assert np.isnan(bootstrap_ci(pd.DataFrame({"item_id": [1, 2], "x": [0.0, 1.0]}), lambda d: 0.0)).all()
    # negative control: at MIN_CI_ITEMS the interval is defined and contains the mean
    lo, hi = bootstrap_mean_ci(np.arange(MIN_CI_ITEMS, dtype=float))
    assert lo < (MIN_CI_ITEMS - 1) / 2 < hi
    with pytest.raises(TableError):
        bootstrap_mean_ci(np.array([1.0, np.inf]))
    with pytest.raises(TableError):
        bootstrap_mean_ci(np.array([1.0, 2.0]), ci=1.5)
    with pytest.raises(TableError):
        bootstrap_ci(pd.DataFrame({"x": [1.0]}), lambda d: 0.0)
    with pytest.raises(ValueError):  # TableError is a ValueError too
        bootstrap_mean_ci(np.array([1.0]), n_boot=0)


def test_speed_240_items() -> None:
    df = _trials(240, 40)
    t0 = time.perf_counter()
    bootstrap_mean_ci(df.groupby("item_id")["x"].mean().to_numpy(), n_boot=1000)
    assert time.perf_counter() - t0 < 0.5
    t0 = time.perf_counter()
    bootstrap_ci(df, lambda d: float(d["x"].mean()), n_boot=1000)
    assert time.perf_counter() - t0 < 10.0
