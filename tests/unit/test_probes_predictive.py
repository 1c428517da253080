"""Predictive metric I (held-out partial R^2), its shuffle null, precision@k, lineage relations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from probes.predictive import (
    DEFAULT_READOUT_ALPHAS,
    TABLE_COLUMNS,
    PartialR2Result,
    partial_r2,
    partial_r2_null,
    precision_at_k,
    predictive_table,
    route_relation,
)
from probes.predictive import _ridge_readout


def _maps(seed: int, n: int = 240, p: int = 16, copy_noise: float = 0.5, resid_sd: float = 0.5):
    """target = profile effect + item effect u + noise; a source map that is a noisy copy of u.

    Base residual variance is var(u) + resid_sd^2 = 1.25; the copy explains u up to
    copy_noise^2 / (1 + copy_noise^2) = 0.2, so the full residual variance is 0.45 and the
    population I = 1 - 0.45 / 1.25 = 0.64 (both models lose the same share to estimation).
    """
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(n, p))
    u = rng.normal(size=n)
    target = 0.3 * P @ rng.normal(size=p) + u + resid_sd * rng.normal(size=n)
    copy = u + copy_noise * rng.normal(size=n)
    return rng, target, P, copy, u


# ----------------------------------------------------------------------------- models


def test_ols_models_equal_statsmodels_on_every_fold():
    rng, target, P, copy, _ = _maps(0, n=60, p=5)
    res = partial_r2(target, P, copy, n_folds=5, seed=3)
    full = np.column_stack([P, copy])
    sse_base = sse_full = 0.0
    for k in range(5):
        tr, te = res.fold_ids != k, res.fold_ids == k
        assert tr.sum() + te.sum() == 60 and te.sum() == 12
        base = sm.OLS(target[tr], sm.add_constant(P[tr])).fit().predict(sm.add_constant(P[te]))
        both = sm.OLS(target[tr], sm.add_constant(full[tr])).fit().predict(sm.add_constant(full[te]))
        np.testing.assert_allclose(res.predicted_base[te], base, rtol=0, atol=1e-10)
        np.testing.assert_allclose(res.predicted[te], both, rtol=0, atol=1e-10)
        sse_base += np.sum((target[te] - base) ** 2)
        sse_full += np.sum((target[te] - both) ** 2)
    assert res.sse_base == pytest.approx(sse_base, rel=1e-12)
    assert res.I == pytest.approx(1 - sse_full / sse_base, rel=1e-10)
    assert res.error_removed == pytest.approx((sse_base - sse_full) / sse_base, rel=1e-10)
    sst = np.sum((target - target.mean()) ** 2)
    assert res.r2_base == pytest.approx(1 - sse_base / sst)
    assert res.r2_full == pytest.approx(1 - sse_full / sst)


def test_ridge_option_equals_sklearn_pipeline():
    rng, target, P, copy, _ = _maps(1, n=50, p=30)
    P[:, 0] *= 100.0
    res = partial_r2(target, P, copy, alpha=3.0, seed=1)
    full = np.column_stack([P, copy])
    for k in range(5):
        tr, te = res.fold_ids != k, res.fold_ids == k
        ref = Pipeline([("s", StandardScaler()), ("r", Ridge(alpha=3.0))]).fit(full[tr], target[tr])
        np.testing.assert_allclose(res.predicted[te], ref.predict(full[te]), rtol=0, atol=1e-10)


def test_grouped_item_folds_keep_clusters_together():
    rng, target, P, copy, _ = _maps(2, n=90, p=3)
    clusters = np.repeat(np.arange(30), 3)
    res = partial_r2(target, P, copy, groups=clusters, seed=5)
    for c in range(30):
        assert len(np.unique(res.fold_ids[clusters == c])) == 1


# ----------------------------------------------------------------------------- known answers


def test_noisy_copy_recovers_expected_I_and_beats_unrelated_source():
    rng, target, P, copy, _ = _maps(3)
    unrelated = rng.normal(size=len(target))
    own = partial_r2(target, P, copy)
    other = partial_r2(target, P, unrelated)
    assert own.I == pytest.approx(0.64, abs=0.08)
    assert abs(other.I) < 0.05
    own_null = partial_r2_null(target, P, copy, n_shuffles=99)
    other_null = partial_r2_null(target, P, unrelated, n_shuffles=99)
    assert own_null.observed == pytest.approx(own.I, rel=1e-12)
    assert own_null.p_value == pytest.approx(0.01)
    assert abs(own_null.null_mean) < 0.03 and own_null.null_p95 < 0.05
    assert other_null.p_value > 0.05


def _clipped(n: int, rng) -> np.ndarray:
    """A profile column at the log-odds clip logit(1 - 1e-6) = 13.8155, wobbling by a unit in the
    last place as sums of saturated readings do (SD ~1e-15): constant in all but rounding."""
    clip = np.log((1 - 1e-6) / 1e-6)
    return clip + np.spacing(clip) * rng.integers(-1, 2, size=n)


def test_a_profile_column_constant_up_to_rounding_is_no_regressor():
    """A route whose unpressured profile saturates at the log-odds clip (v18b seed 0): the column
    differs from a constant only by rounding. I must be what it is without that column (the
    reference: statsmodels OLS on the other columns), and a shuffled map must not explain the
    target. The old `sd == 0` rule scaled the wobble up into a regressor: I = 1 for the map and for
    every shuffle (the control below: the same data with the column scaled as that rule did)."""
    rng, target, P, copy, _ = _maps(5, n=128, p=3)
    Pc = np.column_stack([P, _clipped(128, rng), _clipped(128, rng)])
    res = partial_r2(target, Pc, copy, seed=2)
    folds = res.fold_ids
    sse = {"base": 0.0, "full": 0.0}
    for k in range(5):
        tr, te = folds != k, folds == k
        for name, X in (("base", P), ("full", np.column_stack([P, copy]))):
            pred = sm.OLS(target[tr], sm.add_constant(X[tr])).fit().predict(sm.add_constant(X[te]))
            sse[name] += np.sum((target[te] - pred) ** 2)
    assert res.I == pytest.approx(1 - sse["full"] / sse["base"], abs=1e-10)
    nul = partial_r2_null(target, Pc, copy, n_shuffles=50, seed=2)
    assert nul.null.max() < 0.2 and nul.p_value == pytest.approx(1 / 51)
    # control: the wobble scaled to unit SD, as the old rule did, is a regressor the comparison
    # above sees (two noise columns move I far beyond its 1e-10 tolerance)
    assert np.ptp(Pc[:, 3]) > 0  # the column really wobbles
    wobble = Pc[:, 3:] - Pc[:, 3:].mean(axis=0)
    old_rule = partial_r2(target, np.column_stack([P, wobble / wobble.std(axis=0)]), copy, seed=2)
    assert abs(old_rule.I - res.I) > 1e-6


def _degenerate_cases():
    rng = np.random.default_rng(11)
    n = 40
    y, P = rng.normal(size=n), rng.normal(size=(n, 3))
    M = 0.8 * y + rng.normal(size=n)
    return {
        "plain": (y, P, M),
        "two map columns": (y, P, np.column_stack([M, rng.normal(size=n)])),
        "constant map": (y, P, np.ones(n)),
        "map equals a profile column": (y, P, P[:, 1].copy()),
        "profile rank deficient": (y, np.column_stack([P, 2 * P[:, 0]]), M),
        "profile column saturated at a clip": (y, np.column_stack([P, _clipped(n, rng)]), M),
        "map columns collinear": (y, P, np.column_stack([M, -3 * M])),
        "rare binary map": (y, P, (rng.random(n) < 0.08).astype(float)),
    }


@pytest.mark.parametrize("case", list(_degenerate_cases()))
def test_null_equals_a_fresh_fit_per_permutation(case):
    """The null solves all shuffles per fold at once (OLS); each value must be partial_r2 refitted
    on that permutation of the map (a fresh lstsq per fold), degenerate designs included."""
    y, P, M = _degenerate_cases()[case]
    nul = partial_r2_null(y, P, M, n_shuffles=40, seed=4, groups=np.arange(len(y)) // 2)
    rng = np.random.default_rng([4, 2])  # the documented permutation stream
    ref = [partial_r2(y, P, M[rng.permutation(len(y))], seed=4, groups=np.arange(len(y)) // 2).I for _ in range(40)]
    # I's are O(1) ratios of sums over 40 squared residuals: float error ~1e-15
    np.testing.assert_allclose(nul.null, ref, rtol=0, atol=1e-12)
    assert nul.observed == pytest.approx(partial_r2(y, P, M, seed=4, groups=np.arange(len(y)) // 2).I, abs=1e-12)
    # control: another permutation stream gives other null values, so the comparison can fail
    if case != "constant map":
        other = partial_r2_null(y, P, M, n_shuffles=40, seed=5, groups=np.arange(len(y)) // 2)
        assert np.max(np.abs(other.null - np.asarray(ref))) > 1e-3


def test_pure_noise_gives_I_near_zero_and_uniform_p_values():
    Is, ps = [], []
    for seed in range(30):
        rng = np.random.default_rng(1000 + seed)
        target, P, source = rng.normal(size=60), rng.normal(size=(60, 3)), rng.normal(size=60)
        nul = partial_r2_null(target, P, source, n_shuffles=19, seed=seed)
        Is.append(nul.observed)
        ps.append(nul.p_value)
    Is, ps = np.array(Is), np.array(ps)
    assert abs(Is.mean()) < 0.05 and Is.max() < 0.2
    assert 0.3 <= ps.mean() <= 0.7
    assert np.mean(ps <= 0.05) < 0.2


def test_readout_is_cross_fitted_without_leakage():
    rng = np.random.default_rng(4)
    n, d = 80, 300
    P = rng.normal(size=(n, 3))
    target = P[:, 0] + rng.normal(size=n)
    noise_features = rng.normal(size=(n, d))
    # a weakly penalized ridge on d > n features interpolates any target: fitted on the
    # held-out items it would "explain" them perfectly; cross-fitted it explains nothing
    res = partial_r2(target, P, rng.normal(size=n), readout=noise_features, readout_alphas=1.0)
    leaky = Pipeline([("s", StandardScaler()), ("r", Ridge(1.0))]).fit(noise_features, target)
    assert np.corrcoef(leaky.predict(noise_features), target)[0, 1] > 0.9
    assert res.I_readout is not None and res.I_readout < res.I + 0.05
    # training items get out-of-inner-fold readouts; in-sample ones would look perfect,
    # earn full weight, and wreck the held-out predictions
    assert res.I_readout > res.I - 0.1
    assert res.predicted_readout.shape == (n,)


@pytest.mark.parametrize("n, d", [(60, 200), (120, 30)])
def test_readout_ridge_matches_sklearn_ridgecv(n, d):
    rng = np.random.default_rng(n)
    R = rng.normal(size=(n + 20, d)) * rng.uniform(0.1, 10, size=d)
    y = R[:, :3] @ [0.05, -0.1, 0.2] + rng.normal(size=n + 20)
    ref = Pipeline([("s", StandardScaler()), ("r", RidgeCV(alphas=DEFAULT_READOUT_ALPHAS))])
    ref.fit(R[:n], y[:n])
    ours = _ridge_readout(R[:n], y[:n], R[n:], DEFAULT_READOUT_ALPHAS)
    np.testing.assert_allclose(ours, ref.predict(R[n:]), rtol=0, atol=1e-8)
    fixed = Pipeline([("s", StandardScaler()), ("r", Ridge(alpha=7.0))]).fit(R[:n], y[:n])
    np.testing.assert_allclose(_ridge_readout(R[:n], y[:n], R[n:], 7.0), fixed.predict(R[n:]), rtol=0, atol=1e-8)


def test_readout_recovers_signal_the_source_map_lacks():
    rng, target, P, _, u = _maps(5, n=200)
    states = np.outer(u, rng.normal(size=150)) * 0.3 + rng.normal(size=(200, 150))
    res = partial_r2(target, P, rng.normal(size=200), readout=states)
    assert abs(res.I) < 0.05
    assert res.I_readout > 0.4
    assert res.r2_readout > res.r2_full + 0.2
    plain = partial_r2(target, P, rng.normal(size=200))
    assert plain.I_readout is None and plain.predicted_readout is None


def test_result_is_immutable_and_inputs_are_checked():
    rng, target, P, copy, _ = _maps(6, n=40, p=2)
    res = partial_r2(target, P, copy)
    assert isinstance(res, PartialR2Result) and res.n_items == 40 and res.folds == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.I = 0.0
    with pytest.raises(ValueError):
        res.predicted[0] = 0.0
    with pytest.raises(ValueError):
        partial_r2(target[:-1], P, copy)
    bad = target.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError):
        partial_r2(bad, P, copy)
    empty = partial_r2_null(target, P, copy, n_shuffles=0)
    assert np.isnan(empty.p_value) and empty.null.size == 0


def test_constant_target_has_no_I_and_no_p():
    """A target map with no variance (a lineage where nothing yields) leaves I undefined; its p
    must be undefined too, never the smallest p the shuffles allow (NaN >= x is False)."""
    rng, target, P, copy, _ = _maps(6, n=40, p=2)
    flat = partial_r2_null(np.zeros(40), P, copy, n_shuffles=19, seed=1)
    assert np.isnan(flat.observed) and np.isnan(flat.p_value)
    # control: the same call on a varying target has a defined I and p
    live = partial_r2_null(target, P, copy, n_shuffles=19, seed=1)
    assert np.isfinite(live.observed) and 0 < live.p_value <= 1


# ----------------------------------------------------------------------------- precision@k


def test_precision_at_k_by_hand():
    target = np.array([0.9, 0.1, 0.5, 0.7, 0.3])
    predicted = np.array([0.2, 0.8, 0.6, 0.9, 0.1])
    # most-yielding = most negative: 2 lowest target {1, 4}, 2 lowest predicted {4, 0}: one shared
    assert precision_at_k(target, predicted, 2) == 0.5
    # 3 lowest target {1, 4, 2}, 3 lowest predicted {4, 0, 2}: two shared
    assert precision_at_k(target, predicted, 3) == pytest.approx(2 / 3)
    assert precision_at_k(target, target, 4) == 1.0
    assert precision_at_k(target, -target, 2) == 0.0
    # ties go to the earlier item: target picks item 0, prediction picks item 1
    assert precision_at_k([0.0, 0.0, 1.0], [1.0, 0.0, 0.0], 1) == 0.0
    with pytest.raises(ValueError):
        precision_at_k(target, predicted, 0)
    with pytest.raises(ValueError):
        precision_at_k(target, predicted[:4], 2)


# ----------------------------------------------------------------------------- lineage

LINEAGE = {
    "base": ["stage1-1000", "stage1-2000", "mid-2000", "base"],
    "routes": {"sft-dpo": ["sft", "dpo"], "sft-rl": ["sft", "rl"], "instruct": ["inst-sft", "inst-dpo"]},
    "final": {"sft-dpo": "dpo-final", "instruct": "instruct-final"},
}


@pytest.mark.parametrize(
    "source, target, expected",
    [
        ("dpo", "dpo-final", "own"),
        ("sft", "dpo-final", "own"),  # shared by two routes, one of them the target's
        ("dpo-final", "dpo-final", "own"),
        ("rl", "dpo-final", "sibling"),
        ("inst-dpo", "dpo-final", "sibling"),
        ("instruct-final", "dpo-final", "sibling"),
        ("base", "dpo-final", "base"),
        ("stage1-1000", "instruct-final", "base"),
        ("other-model", "dpo-final", "unrelated"),
        ("dpo", "not-in-lineage", "unrelated"),
        ("stage1-1000", "base", "base"),
        ("sft", "base", "sibling"),
    ],
)
def test_route_relation(source, target, expected):
    assert route_relation(source, target, LINEAGE) == expected


def test_route_relation_rejects_malformed_lineage():
    with pytest.raises(ValueError):
        route_relation("a", "b", {"base": [], "routes": {"r": "abc"}})
    with pytest.raises(ValueError):
        route_relation("a", "b", {"base": [], "routes": {}, "final": {"r": "x"}})
    with pytest.raises(ValueError):
        route_relation("a", "b", {"trunk": []})
    with pytest.raises(TypeError):
        route_relation("a", "b", [])


# ----------------------------------------------------------------------------- table


def _checkpoint_tables(seed: int = 7, n: int = 120):
    rng, target, P, copy, u = _maps(seed, n=n, p=4)
    ids = np.array([f"it{i:03d}" for i in range(n)])
    maps = {
        "dpo-final": pd.Series(target, index=ids),
        "dpo": pd.Series(copy, index=ids),
        "rl": pd.Series(rng.normal(size=n), index=ids),
    }
    profiles = {name: pd.DataFrame(P, index=ids, columns=[f"c{j}" for j in range(4)]) for name in ("dpo", "rl")}
    return rng, maps, profiles, ids


def test_predictive_table_columns_alignment_and_ranking():
    rng, maps, profiles, ids = _checkpoint_tables()
    maps["dpo"] = maps["dpo"].drop("it005")  # missing in one source
    profiles["rl"] = profiles["rl"].copy()
    profiles["rl"].loc["it010", "c1"] = np.nan  # not finite in another
    order = rng.permutation(len(ids))
    shuffled = {name: s.iloc[rng.permutation(len(s))] for name, s in maps.items()}
    table = predictive_table(maps, profiles, target="dpo-final", lineage=LINEAGE, n_shuffles=49)
    again = predictive_table(
        shuffled, {k: v.iloc[order] for k, v in profiles.items()}, target="dpo-final", lineage=LINEAGE, n_shuffles=49
    )
    pd.testing.assert_frame_equal(table, again)  # input order does not matter

    assert tuple(table.columns) == TABLE_COLUMNS
    assert list(table["source"]) == ["dpo", "rl"]
    assert list(table["route_relation"]) == ["own", "sibling"]
    assert (table["k"] == 12).all()  # round(0.1 * 118)
    own, sib = table.iloc[0], table.iloc[1]
    assert own["I"] > 0.4 and abs(sib["I"]) < 0.1
    assert own["p_value"] == pytest.approx(0.02) and sib["p_value"] > 0.05
    assert own["precision_at_k"] > sib["precision_at_k"]
    assert own["error_removed"] == own["I"]
    assert table["I_readout"].isna().all()

    keep = ids[~np.isin(ids, ["it005", "it010"])]
    direct = partial_r2(maps["dpo-final"].loc[keep], profiles["dpo"].loc[keep], maps["dpo"].loc[keep])
    assert own["I"] == direct.I
    assert own["precision_at_k"] == precision_at_k(maps["dpo-final"].loc[keep], direct.predicted, 12)


def test_predictive_table_options():
    rng, maps, profiles, ids = _checkpoint_tables(seed=8, n=60)
    readouts = {"rl": pd.DataFrame(rng.normal(size=(60, 20)), index=ids)}
    table = predictive_table(maps, profiles, target="dpo-final", sources=["rl"], n_shuffles=0, k=5, readouts=readouts)
    assert list(table["source"]) == ["rl"] and table["route_relation"].isna().all()
    assert np.isfinite(table["I_readout"]).all() and (table["k"] == 5).all()
    assert table[["null_mean", "p_value"]].isna().all().all()
    with pytest.raises(KeyError):
        predictive_table(maps, profiles, target="missing")
    with pytest.raises(KeyError):
        predictive_table(maps, profiles, target="dpo-final", sources=["dpo-final"])


def test_readout_standardisation_is_standard_scalers():
    """`_scale_like_standard_scaler` (the readout's scaling without sklearn's per-call checks) gives
    StandardScaler's numbers, a constant column and one constant up to float rounding included."""
    from probes.predictive import _scale_like_standard_scaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 12))
    X[:, 3] = 5.0
    X[:, 4] = 1e8 + rng.normal(size=40) * 1e-9
    T = rng.normal(size=(9, 12))
    a, b = _scale_like_standard_scaler(X, T)
    s = StandardScaler().fit(X)
    np.testing.assert_array_equal(a, s.transform(X))
    np.testing.assert_array_equal(b, s.transform(T))


def test_readout_predictions_are_the_readout_only_model_of_the_table_and_locate_a_readable_set():
    """`readout_predictions` returns the cross-fitted predictions behind the table's I_readout_only
    (its SSE against the base model's gives the table's figure exactly) on the same items; a target
    that yields on a set the residual features carry is ranked set-first, and the same features
    say nothing about a target that yields on a random set of the same size (the control)."""
    from probes.predictive import readout_predictions

    rng = np.random.default_rng(3)
    n, d, k = 120, 8, 30
    ids = np.array([f"it{i:03d}" for i in range(n)])
    planted = rng.choice(n, k, replace=False)
    other = rng.choice(np.setdiff1d(np.arange(n), planted), k, replace=False)
    direction = rng.normal(size=d)
    feats = rng.normal(size=(n, d))
    feats[planted] += 1.5 * direction  # the residuals carry the planted set's setting
    prof = pd.DataFrame(rng.normal(size=(n, 2)), index=ids, columns=["c0", "c1"])
    readout = pd.DataFrame(feats, index=ids)
    src_map = pd.Series(rng.normal(size=n), index=ids)

    def target(on):
        y = 0.3 * rng.normal(size=n)
        y[on] -= 3.0  # the yielding items: most negative map values
        return pd.Series(y, index=ids)

    for on, located in ((planted, True), (other, False)):
        maps = {"final": target(on), "trunk": src_map}
        maps["final"] = maps["final"].drop(ids[7])  # one item missing: both drop it
        profiles, readouts = {"trunk": prof}, {"trunk": readout}
        pred = readout_predictions(maps, profiles, readouts, target="final", source="trunk", seed=0)
        table = predictive_table(maps, profiles, target="final", readouts=readouts, n_shuffles=0, seed=0)
        assert list(pred.index) == sorted(set(ids) - {ids[7]})
        y = maps["final"].loc[pred.index].to_numpy()
        base = partial_r2(y, prof.loc[pred.index], src_map.loc[pred.index], seed=0).sse_base
        gain = 1.0 - float(np.sum((y - pred.to_numpy()) ** 2)) / base
        assert gain == pytest.approx(table["I_readout_only"].iloc[0], rel=1e-12, abs=1e-12)
        top = set(pred.sort_values().index[:k])
        hits = len(top & set(ids[planted]))
        if located:
            assert hits >= 0.7 * k
        else:  # chance is k * k / n = 7.5 planted items among the top k
            assert hits <= 0.5 * k
