"""Issue #12, items 1-2: precision@k ranks the most-yielding (most negative) items; the
readout's own gain (alone, and beyond the map) each with a label-shuffle null."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probes.predictive import (
    TABLE_COLUMNS,
    partial_r2,
    precision_at_k,
    predictive_table,
    readout_gain_null,
)


def test_precision_at_k_counts_the_most_yielding_items():
    # item maps are negative where a model yields: the 24 most negative items are the
    # "yields most" set. A prediction that gets exactly those right scores 1.0.
    rng = np.random.default_rng(0)
    target = np.concatenate([-rng.uniform(2, 4, 24), rng.uniform(-1, 1, 216)])
    rng.shuffle(target)
    yielding = np.argsort(target)[:24]
    predicted = rng.uniform(0, 1, size=240)
    predicted[yielding] = -5.0 - rng.uniform(0, 1, 24)  # the most negative predictions
    assert precision_at_k(target, predicted, 24) == 1.0
    # the reversed prediction (those items predicted to yield least) scores 0
    assert precision_at_k(target, -predicted, 24) == 0.0


def _readout_case(seed: int, n: int = 120, d: int = 40, signal: bool = True):
    """target = profile effect + u + v + noise; the source map copies u, the states carry v."""
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(n, 3))
    u, v = rng.normal(size=n), rng.normal(size=n)
    target = 0.5 * P[:, 0] + u + (v if signal else 0) + 0.3 * rng.normal(size=n)
    M = u + 0.2 * rng.normal(size=n)
    if signal:
        R = np.outer(v, rng.normal(size=d)) + 0.5 * rng.normal(size=(n, d))
    else:
        R = rng.normal(size=(n, d))
    return target, P, M, R


def test_readout_increment_beyond_the_map_is_large_and_above_its_null():
    target, P, M, R = _readout_case(1)
    res = partial_r2(target, P, M, readout=R)
    # v is half of what remains after the map: the increment over profile + map is large
    assert res.I_readout_increment > 0.5
    assert res.I_readout_only > res.I_readout_increment * 0.3
    nul = readout_gain_null(target, P, M, R, n_shuffles=19, seed=0)
    assert nul["increment"].observed == pytest.approx(res.I_readout_increment)
    assert nul["only"].observed == pytest.approx(res.I_readout_only)
    assert nul["increment"].null_p95 < 0.1
    assert nul["increment"].p_value == pytest.approx(1 / 20)
    assert nul["only"].p_value == pytest.approx(1 / 20)


def test_pure_noise_readout_gets_no_increment():
    # noise states are exchangeable with their permutations: increments near 0, p values
    # spread over (0, 1] rather than piling up at the minimum
    ps, obs = [], []
    for s in range(8):
        target, P, M, R = _readout_case(100 + s, n=60, d=20, signal=False)
        nul = readout_gain_null(target, P, M, R, n_shuffles=19, seed=s)
        ps.append(nul["increment"].p_value)
        obs.append(nul["increment"].observed)
        assert abs(nul["increment"].null_mean) < 0.05
    assert max(abs(np.array(obs))) < 0.06
    assert 0.3 <= np.mean(ps) <= 0.8 and np.mean(np.array(ps) <= 0.05) <= 0.125


def test_predictive_table_has_each_gain_with_its_own_null():
    target, P, M, R = _readout_case(3, n=60, d=20)
    ids = [f"i{j:02d}" for j in range(60)]
    maps = {"t": pd.Series(target, index=ids), "s": pd.Series(M, index=ids)}
    profiles = {"s": pd.DataFrame(P, index=ids)}
    table = predictive_table(maps, profiles, target="t", readouts={"s": pd.DataFrame(R, index=ids)}, n_shuffles=9)
    for stem in ("I", "I_readout_only", "I_readout_increment"):
        for suffix in ("", "_null_mean", "_null_p95", "_p"):
            assert stem + suffix in TABLE_COLUMNS and np.isfinite(table[stem + suffix]).all()
    row = table.iloc[0]
    assert row["I_null_mean"] == row["null_mean"] and row["I_p"] == row["p_value"]
    assert row["I_readout_increment"] > row["I_readout_increment_null_p95"]
