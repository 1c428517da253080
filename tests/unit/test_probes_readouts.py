"""Linear readouts: grouped folds, item-level shuffle null, fast engines against sklearn."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import cross_val_score as sk_cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from probes.readouts import (
    ItemKFold,
    LinearReadout,
    ReadoutResult,
    _fast_oof,
    item_folds,
    item_shuffle_indices,
    readout_with_null,
)


def _items(seed: int, n_items: int = 40, rows: int = 4, d: int = 8, item_sd: float = 1.0):
    """Activations with a shared per-item component, as residual states of one item have."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_items), rows)
    X = item_sd * rng.normal(size=(n_items, d))[groups] + rng.normal(size=(n_items * rows, d))
    return rng, X, groups


# ----------------------------------------------------------------------------- folds


def test_item_folds_never_split_an_item():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 7, size=37)
    groups = np.repeat(np.array([f"item{i:02d}" for i in range(37)]), sizes)
    order = rng.permutation(len(groups))
    folds = item_folds(groups[order], n_folds=5, seed=3)
    for g in np.unique(groups):
        assert len(np.unique(folds[groups[order] == g])) == 1, g
    items_per_fold = [len(np.unique(groups[order][folds == k])) for k in range(5)]
    assert max(items_per_fold) - min(items_per_fold) <= 1
    assert sum(items_per_fold) == 37
    # the assignment is a property of the item ids and the seed, not of row order
    fold_of = dict(zip(groups[order], folds))
    again = item_folds(groups, n_folds=5, seed=3)
    assert all(fold_of[g] == f for g, f in zip(groups, again))
    assert not np.array_equal(again, item_folds(groups, n_folds=5, seed=4))


def test_item_kfold_splits_are_disjoint_in_items_and_work_as_sklearn_cv():
    rng, X, groups = _items(1, n_items=30, rows=3)
    y = X @ rng.normal(size=X.shape[1]) + rng.normal(size=len(X))
    cv = ItemKFold(n_splits=5, seed=7)
    tests = []
    for train, test in cv.split(X, y, groups):
        assert not set(groups[train]) & set(groups[test])
        tests.append(test)
    assert np.array_equal(np.sort(np.concatenate(tests)), np.arange(len(X)))
    scores = sk_cross_val_score(Ridge(), X, y, groups=groups, cv=cv)
    assert scores.shape == (5,)
    with pytest.raises(ValueError):
        next(cv.split(X, y))
    with pytest.raises(ValueError):
        item_folds(np.arange(3), n_folds=5)


def test_grouped_folds_do_not_leak_item_identity():
    # X and y are both pure item effects and unrelated: row-level folds would let ridge
    # memorise items (rows of a test item sit in training) and score R^2 near 1.
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(60), 8)
    X = rng.normal(size=(60, 100))[groups] + 0.01 * rng.normal(size=(480, 100))
    y = rng.normal(size=60)[groups]
    leaky = 1 - np.mean((y - _row_level_oof(X, y)) ** 2) / np.var(y)
    assert leaky > 0.5  # the failure mode is real on this data
    res = readout_with_null(X, y, groups, kind="ridge", alpha=1.0, n_shuffles=0)
    assert res.score < 0.05


def _row_level_oof(X, y):
    pred = np.empty(len(y))
    fold = np.arange(len(y)) % 5
    for k in range(5):
        m = Pipeline([("s", StandardScaler()), ("r", Ridge(1.0))]).fit(X[fold != k], y[fold != k])
        pred[fold == k] = m.predict(X[fold == k])
    return pred


# ----------------------------------------------------------------------------- shuffles


def test_item_shuffle_moves_whole_items_when_labels_are_item_level():
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 6, size=25)
    groups = np.repeat(np.arange(25), sizes)
    item_label = rng.normal(size=25)
    y = item_label[groups]
    idx = item_shuffle_indices(y, groups, n_shuffles=50, seed=1)
    assert idx.shape == (50, len(y))
    moved = 0
    for row in idx:
        ys = y[row]
        per_item = np.array([ys[groups == g] for g in range(25)], dtype=object)
        assert all(np.all(v == v[0]) for v in per_item)  # an item keeps one label
        got = np.array([v[0] for v in per_item])
        assert np.array_equal(np.sort(got), np.sort(item_label))  # labels are permuted
        moved += not np.array_equal(got, item_label)
    assert moved == 50


def test_item_shuffle_permutes_blocks_when_labels_vary_within_items():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(20), 6)
    y = rng.normal(size=120)
    blocks = {tuple(y[groups == g]) for g in range(20)}
    for row in item_shuffle_indices(y, groups, n_shuffles=20, seed=2):
        got = [tuple(y[row][groups == g]) for g in range(20)]
        assert set(got) == blocks  # each item receives exactly one other item's block, in order
    with pytest.raises(ValueError):  # varying labels, no two items of equal size
        item_shuffle_indices(np.arange(6.0), np.array([0, 1, 1, 2, 2, 2]), 3)


# ----------------------------------------------------------------------------- fast engines


@pytest.mark.parametrize(
    "shape, n_components",
    [
        ((30, 5, 12), None),  # n_train > d: primal basis, plus a constant column below
        ((12, 4, 90), None),  # d > n_train: dual basis
        ((30, 5, 12), 4),  # PCA inside the pipeline
    ],
)
def test_fast_ridge_equals_sklearn_pipeline(shape, n_components):
    n_items, rows, d = shape
    rng, X, groups = _items(5, n_items, rows, d)
    X[:, 0] = 3.0
    X[:, 1] *= 1e3  # scaling must happen inside the folds
    y = X[:, 2] - 0.5 * X[:, 3] + rng.normal(size=len(X))
    readout = LinearReadout("ridge", alpha=2.5, n_components=n_components, seed=11)
    folds = item_folds(groups, readout.n_folds, readout.seed)
    shuffled = y[item_shuffle_indices(y, groups, 3, seed=0)].T
    Y = np.column_stack([y, shuffled])
    fast = _fast_oof(X, Y, folds, kind="ridge", alpha=2.5, C=1.0, n_components=n_components, max_iter=100)
    for j in range(Y.shape[1]):
        ref = readout.cross_val_predict(X, Y[:, j], groups)
        np.testing.assert_allclose(fast[:, j], ref, rtol=0, atol=1e-8)
    res = readout_with_null(X, y, groups, kind="ridge", alpha=2.5, n_components=n_components, seed=11, n_shuffles=5)
    assert res.score == pytest.approx(readout.cross_val_score(X, y, groups), abs=1e-10)
    ref_null = readout_with_null(
        X, y, groups, kind="ridge", alpha=2.5, seed=11, n_shuffles=5, n_components=n_components, engine="sklearn"
    )
    np.testing.assert_allclose(res.null, ref_null.null, rtol=0, atol=1e-8)


@pytest.mark.parametrize("shape, n_components", [((30, 5, 12), None), ((12, 4, 90), None), ((30, 5, 12), 4)])
def test_fast_logistic_equals_sklearn_pipeline(shape, n_components):
    n_items, rows, d = shape
    rng, X, groups = _items(6, n_items, rows, d)
    X[:, 1] *= 1e3
    y = (X[:, 2] + rng.normal(size=len(X)) > 0).astype(int)
    folds = item_folds(groups, 5, 0)
    Y = np.column_stack([y, y[item_shuffle_indices(y, groups, 1, seed=0)].T]).astype(float)
    fast = _fast_oof(X, Y, folds, kind="logistic", alpha=1.0, C=0.7, n_components=n_components, max_iter=100)
    steps = [("scale", StandardScaler())]
    if n_components:
        steps.append(("pca", PCA(n_components, svd_solver="full")))
    for j in range(Y.shape[1]):
        for k in range(5):
            tr, te = folds != k, folds == k
            # tight tolerance: sklearn's default lbfgs stops early
            model = LogisticRegression(C=0.7, solver="newton-cholesky", tol=1e-10, max_iter=1000)
            ref = Pipeline(steps + [("m", model)])
            ref.fit(X[tr], Y[tr, j])
            np.testing.assert_allclose(fast[te, j], ref.decision_function(X[te]), atol=2e-5)


def test_fast_logistic_score_and_null_match_sklearn_engine():
    rng, X, groups = _items(7, n_items=30, rows=4, d=10)
    y = np.where(X[:, 0] + rng.normal(size=len(X)) > 0, "yes", "no")
    fast = readout_with_null(X, y, groups, kind="logistic", n_shuffles=2, seed=2)
    ref = readout_with_null(X, y, groups, kind="logistic", n_shuffles=2, seed=2, engine="sklearn")
    assert fast.metric == "roc_auc"
    assert fast.score == pytest.approx(LinearReadout("logistic", seed=2).cross_val_score(X, y, groups), abs=1e-3)
    np.testing.assert_allclose(fast.null, ref.null, atol=1e-3)


# ----------------------------------------------------------------------------- known answers


def test_planted_ridge_signal_recovers_its_variance_share():
    # y = Xw + e with var(Xw) = 0.5 and var(e) = 0.5: the population R^2 is 0.5; with
    # 3072 training rows and 20 features the out-of-sample loss is about 20/3072 * 0.5.
    rng = np.random.default_rng(10)
    groups = np.repeat(np.arange(240), 16)
    X = rng.normal(size=(3840, 20))
    w = rng.normal(size=20)
    w *= np.sqrt(0.5) / np.linalg.norm(w)
    y = X @ w + np.sqrt(0.5) * rng.normal(size=3840)
    res = readout_with_null(X, y, groups, kind="ridge", n_shuffles=50, seed=1)
    assert res.score == pytest.approx(0.5, abs=0.04)
    assert res.p_value == pytest.approx(1 / 51)
    assert res.null_mean < 0.01 and res.null_p95 < 0.02
    assert (res.n_items, res.n_rows, res.folds, res.n_shuffles) == (240, 3840, 5, 50)


def test_planted_logistic_signal_reaches_the_oracle_auc():
    rng = np.random.default_rng(11)
    groups = np.repeat(np.arange(150), 8)
    X = rng.normal(size=(1200, 10))
    w = np.zeros(10)
    w[:3] = [1.0, -0.7, 0.5]
    score = X @ w
    y = (score + rng.logistic(size=1200) > 0).astype(int)
    oracle = roc_auc_score(y, score)  # the true linear predictor on the same rows
    res = readout_with_null(X, y, groups, kind="logistic", n_shuffles=20, seed=0)
    assert oracle - 0.03 < res.score <= oracle + 0.01
    assert res.p_value == pytest.approx(1 / 21)
    acc = readout_with_null(X, y, groups, kind="logistic", n_shuffles=0, metric="accuracy")
    oof = LinearReadout("logistic").cross_val_predict(X, y, groups)
    assert acc.score == pytest.approx(accuracy_score(y, oof > 0), abs=0.01)
    assert np.isnan(acc.p_value) and acc.null.size == 0


@pytest.mark.parametrize("kind", ["ridge", "logistic"])
def test_shuffle_null_is_calibrated_on_item_structured_noise(kind):
    # no link between X and y, but both carry strong item effects: the p-values must be
    # roughly uniform. A row-level shuffle fails here (checked when this was written: mean p
    # 0.97 for ridge; 20% of p <= 0.05 for logistic).
    pvals = []
    for seed in range(30):
        rng, X, groups = _items(100 + seed, n_items=40, rows=16, d=6, item_sd=2.0)
        item_y = rng.normal(size=40)
        y = item_y[groups] if kind == "ridge" else (item_y[groups] > 0).astype(int)
        pvals.append(readout_with_null(X, y, groups, kind=kind, n_shuffles=19, seed=seed).p_value)
    pvals = np.array(pvals)
    assert 0.3 <= pvals.mean() <= 0.7
    assert np.mean(pvals <= 0.05) < 0.2


# ----------------------------------------------------------------------------- contract


def test_linear_readout_follows_the_sklearn_contract():
    rng, X, groups = _items(3, n_items=20, rows=3, d=5)
    y = np.where(X[:, 0] > 0, "b", "a")
    est = LinearReadout("logistic", C=0.5)
    with pytest.raises(NotFittedError):
        est.predict(X)
    assert est.fit(X, y, groups) is est
    assert est.coef_.shape == (5,) and isinstance(est.intercept_, float)
    assert est.n_features_in_ == 5 and list(est.classes_) == ["a", "b"]
    assert set(est.predict(X)) <= {"a", "b"}
    assert est.predict_proba(X).shape == (60, 2)
    twin = clone(est)
    assert twin.get_params()["C"] == 0.5 and not hasattr(twin, "pipeline_")
    ridge = LinearReadout("ridge").fit(X, X[:, 1])
    np.testing.assert_allclose(ridge.decision_function(X), ridge.predict(X))
    with pytest.raises(AttributeError):
        ridge.predict_proba(X)
    with pytest.raises(ValueError):
        LinearReadout("lasso").fit(X, X[:, 1])
    with pytest.raises(ValueError):
        LinearReadout("logistic").fit(X, np.arange(60) % 3)
    with pytest.raises(ValueError):
        readout_with_null(X, X[:, 1], groups, kind="ridge", metric="roc_auc")


def test_readout_result_is_immutable():
    rng, X, groups = _items(4)
    res = readout_with_null(X, X[:, 0] + rng.normal(size=len(X)), groups, kind="ridge", n_shuffles=5)
    assert isinstance(res, ReadoutResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.score = 1.0
    with pytest.raises(ValueError):
        res.null[0] = 1.0
    assert res.p_value == (1 + np.sum(res.null >= res.score)) / 6
