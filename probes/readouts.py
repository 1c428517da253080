"""Linear readouts of residual activations: grouped cross-validation and item-level shuffle nulls.

Inputs are plain arrays: ``X`` (n_rows x d activations), ``y`` (one target per row) and
``groups`` (the item id of each row). An item usually contributes several rows (e.g. 16
conditions), so every split here is made over items, never over rows: rows of one item are
never on both sides of a fold, and the shuffle null moves whole items.

Choices (also stated where they are made):

* Folds: :func:`item_folds` shuffles the sorted unique item ids with ``seed`` and deals them
  round-robin into ``n_folds`` folds. Item counts per fold differ by at most one, and the
  assignment depends only on the set of item ids and the seed (not on row order), so two
  readouts over the same items share folds.
* Standardization sits inside the folds: ``Pipeline(StandardScaler, [PCA,] Ridge | LogisticRegression)``.
* Ridge score: pooled out-of-fold R^2 = 1 - SSE/SST, where SSE sums squared errors of the
  held-out predictions over all folds and SST is taken around the overall mean of ``y``
  (the convention of ``r2_score(y, cross_val_predict(...))``). The overall mean minimizes SST,
  so this is the conservative choice among the common ones.
* Logistic score: pooled out-of-fold ROC AUC of the decision values (accuracy on request,
  ``metric="accuracy"``, threshold at decision 0 as ``LogisticRegression.predict`` does).
* Null: see :func:`item_shuffle_indices`; p = (1 + #{null >= score}) / (1 + n_shuffles).
* Speed: the scaler (and PCA) depend on X only, so the null reuses one singular basis per
  training fold (from the eigendecomposition of its Gram matrix). Ridge then costs a few
  matrix products per fold for all shuffles at once; logistic runs one batched Newton-CG for
  all shuffles, preconditioned by that basis. Both are checked against the scikit-learn
  pipeline in the tests (``engine="sklearn"`` runs that reference in place of the fast path).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import linalg
from scipy.special import expit
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, clone
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import ThreadpoolController

Kind = Literal["ridge", "logistic"]
Metric = Literal["r2", "roc_auc", "accuracy"]
Engine = Literal["fast", "sklearn"]

__all__ = [
    "LinearReadout",
    "ReadoutResult",
    "ItemKFold",
    "fold_splits",
    "item_folds",
    "item_shuffle_indices",
    "readout_with_null",
]


# ----------------------------------------------------------------------------- folds


def item_folds(groups: np.ndarray, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Fold index (0..n_folds-1) of every row, with all rows of an item in the same fold.

    The sorted unique item ids are permuted with ``np.random.default_rng(seed)`` and dealt
    round-robin, so fold sizes (in items) differ by at most one and the result does not
    depend on row order.
    """
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(f"groups must be 1-D, got shape {groups.shape}")
    if n_folds < 2:
        raise ValueError(f"n_folds must be at least 2, got {n_folds}")
    uniq, inverse = np.unique(groups, return_inverse=True)
    if len(uniq) < n_folds:
        raise ValueError(f"{len(uniq)} items cannot fill {n_folds} folds")
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of_item = np.empty(len(uniq), dtype=np.intp)
    fold_of_item[order] = np.arange(len(uniq)) % n_folds
    return fold_of_item[inverse.ravel()]


def fold_splits(fold_ids: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(train rows, test rows) for each fold id in sorted order: the one fold splitter."""
    for k in np.unique(fold_ids):
        yield np.flatnonzero(fold_ids != k), np.flatnonzero(fold_ids == k)


_splits = fold_splits


class ItemKFold:
    """scikit-learn splitter over :func:`item_folds` (usable as ``cv=`` in sklearn helpers)."""

    def __init__(self, n_splits: int = 5, seed: int = 0) -> None:
        self.n_splits = n_splits
        self.seed = seed

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        return self.n_splits

    def split(self, X, y=None, groups=None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if groups is None:
            raise ValueError("ItemKFold needs groups (one item id per row)")
        yield from _splits(item_folds(groups, self.n_splits, self.seed))


# ----------------------------------------------------------------------------- shuffles


def item_shuffle_indices(
    y: np.ndarray, groups: np.ndarray, n_shuffles: int, seed: int | np.random.Generator = 0
) -> np.ndarray:
    """Row indices (n_shuffles x n_rows) such that ``y[idx[s]]`` is the s-th shuffled target.

    The shuffle permutes items, not rows, so within-item structure survives and only the
    link between an item's activations and its labels is broken:

    * ``y`` constant within every item: a random permutation of the item -> label map; every
      row of item i receives the label of item pi(i). Item sizes may differ.
    * otherwise: items are permuted among items with the same number of rows, and the j-th
      row of item i (in row order) receives the j-th label of item pi(i). Rows inside an item
      must therefore be in a consistent order (e.g. by condition); an item whose row count is
      unique keeps its own labels.
    """
    y = np.asarray(y)
    groups = np.asarray(groups)
    if y.shape[0] != groups.shape[0]:
        raise ValueError(f"y has {y.shape[0]} rows but groups has {groups.shape[0]}")
    rng = np.random.default_rng(seed)
    _, inverse = np.unique(groups, return_inverse=True)
    inverse = inverse.ravel()
    n_items = int(inverse.max()) + 1
    order = np.argsort(inverse, kind="stable")  # rows grouped by item, row order kept inside
    counts = np.bincount(inverse, minlength=n_items)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    first_row = order[starts]
    out = np.empty((n_shuffles, len(y)), dtype=np.intp)
    if np.array_equal(y, y[first_row[inverse]]):
        for s in range(n_shuffles):
            out[s] = first_row[rng.permutation(n_items)][inverse]
        return out
    strata = [np.flatnonzero(counts == m) for m in np.unique(counts)]
    if all(len(items) < 2 for items in strata):
        raise ValueError(
            "y varies within items and no two items have the same number of rows: an item-level shuffle is impossible"
        )
    # rows_m[j, r] = r-th row of the j-th item with m rows
    blocks = [order[starts[items][:, None] + np.arange(counts[items[0]])] for items in strata]
    for s in range(n_shuffles):
        for rows_m in blocks:
            out[s, rows_m] = rows_m[rng.permutation(len(rows_m))]
    return out


# ----------------------------------------------------------------------------- estimator


class LinearReadout(BaseEstimator):
    """Standardized linear readout (ridge regression or L2 logistic regression).

    Parameters
    ----------
    kind : "ridge" predicts a continuous target (score: pooled out-of-fold R^2);
        "logistic" a binary one (score: pooled out-of-fold ROC AUC).
    alpha : ridge penalty on the standardized features (``sklearn.linear_model.Ridge``).
    C : inverse L2 penalty of ``LogisticRegression``.
    n_folds, seed : grouped folds, see :func:`item_folds`.
    n_components : optional PCA inside the pipeline (after scaling); None keeps all features.
    max_iter : solver iterations for the logistic model.

    Fitted attributes: ``pipeline_``, ``coef_`` and ``intercept_`` (in the standardized, or
    PCA, feature space the final step sees), ``classes_`` (logistic), ``n_features_in_``.
    """

    def __init__(
        self,
        kind: Kind = "ridge",
        *,
        alpha: float = 1.0,
        C: float = 1.0,
        n_folds: int = 5,
        seed: int = 0,
        n_components: int | None = None,
        max_iter: int = 1000,
    ) -> None:
        self.kind = kind
        self.alpha = alpha
        self.C = C
        self.n_folds = n_folds
        self.seed = seed
        self.n_components = n_components
        self.max_iter = max_iter

    def build_pipeline(self) -> Pipeline:
        """Unfitted pipeline; scaling (and PCA) are refit on every training fold."""
        if self.kind == "ridge":
            model = Ridge(alpha=self.alpha)
        elif self.kind == "logistic":
            model = LogisticRegression(C=self.C, max_iter=self.max_iter)
        else:
            raise ValueError(f"kind must be 'ridge' or 'logistic', got {self.kind!r}")
        steps = [("scale", StandardScaler())]
        if self.n_components is not None:
            steps.append(("pca", PCA(n_components=self.n_components, svd_solver="full")))
        steps.append(("model", model))
        return Pipeline(steps)

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> LinearReadout:
        """Fit on all rows (groups only matter for cross-validation; accepted for symmetry)."""
        X, y = _check_xy(X, y, self.kind)
        if groups is not None and len(groups) != len(y):
            raise ValueError(f"groups has {len(groups)} rows but y has {len(y)}")
        self.pipeline_ = self.build_pipeline().fit(X, y)
        model = self.pipeline_[-1]
        self.coef_ = np.ravel(model.coef_)
        self.intercept_ = float(np.ravel(model.intercept_)[0])
        if self.kind == "logistic":
            self.classes_ = model.classes_
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "pipeline_")
        return self.pipeline_.predict(np.asarray(X, dtype=float))

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Continuous score: the prediction (ridge) or the log-odds of the second class."""
        check_is_fitted(self, "pipeline_")
        X = np.asarray(X, dtype=float)
        if self.kind == "ridge":
            return self.pipeline_.predict(X)
        return self.pipeline_.decision_function(X)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "pipeline_")
        if self.kind != "logistic":
            raise AttributeError("predict_proba exists only for kind='logistic'")
        return self.pipeline_.predict_proba(np.asarray(X, dtype=float))

    def cross_val_predict(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Out-of-fold decision values (reference path: a fresh sklearn pipeline per fold)."""
        X, y = _check_xy(X, y, self.kind)
        folds = item_folds(groups, self.n_folds, self.seed)
        out = np.empty(len(y))
        for train, test in _splits(folds):
            pipe = clone(self.build_pipeline()).fit(X[train], y[train])
            out[test] = pipe.predict(X[test]) if self.kind == "ridge" else pipe.decision_function(X[test])
        return out

    def cross_val_score(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray, metric: Metric | None = None) -> float:
        """Pooled out-of-fold score: R^2 (ridge) or ROC AUC / accuracy (logistic)."""
        metric = _default_metric(self.kind, metric)
        _, y = _check_xy(X, y, self.kind)
        scores = self.cross_val_predict(X, y, groups)
        return float(_score(_encode(y, self.kind)[:, None], scores[:, None], metric)[0])


# ----------------------------------------------------------------------------- null


@dataclass(frozen=True)
class ReadoutResult:
    """Out-of-fold readout score and its item-level label-shuffle null.

    ``null_mean``/``null_p95``/``p_value`` are NaN when ``n_shuffles == 0``.
    ``null`` holds the shuffled scores (read-only array).
    """

    score: float
    null_mean: float
    null_p95: float
    p_value: float
    n_shuffles: int
    n_items: int
    n_rows: int
    folds: int
    metric: str
    null: np.ndarray = field(default_factory=lambda: np.empty(0), compare=False, repr=False)


def readout_with_null(
    X: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    *,
    kind: Kind,
    n_shuffles: int = 100,
    seed: int = 0,
    n_folds: int = 5,
    alpha: float = 1.0,
    C: float = 1.0,
    n_components: int | None = None,
    metric: Metric | None = None,
    engine: Engine = "fast",
    max_iter: int = 1000,
) -> ReadoutResult:
    """Grouped out-of-fold readout score with an item-level label-shuffle null.

    Folds come from ``seed`` (identical to ``LinearReadout(seed=seed).cross_val_score``);
    shuffles from an independent stream ``default_rng([seed, 1])``, and every shuffle reuses the
    same folds. Labels are shuffled as in `item_shuffle_indices`.

    Parameters
    ----------
    X : numpy.ndarray
        Activations [n_rows, d].
    y : numpy.ndarray
        One target per row.
    groups : numpy.ndarray
        One item id per row: folds and shuffles keep an item's rows together.
    kind : {"ridge", "logistic"}
        Continuous or binary target.
    n_shuffles : int
        Label shuffles of the null.
    seed : int
        Seed of folds and shuffles.
    n_folds : int
        Grouped folds.
    alpha : float
        Ridge penalty.
    C : float
        Inverse penalty of the logistic readout.
    n_components : int, optional
        PCA inside the pipeline, after scaling (None keeps all features).
    metric : {"r2", "roc_auc", "accuracy"}, optional
        The score (default: "r2" for ridge, "roc_auc" for logistic).
    engine : {"fast", "sklearn"}
        "fast" uses the shared per-fold singular basis (ridge: closed form; logistic: batched
        Newton-CG to a tighter tolerance than sklearn's default); "sklearn" refits
        ``LinearReadout.build_pipeline()`` per fold and shuffle.
    max_iter : int
        Iteration limit of the logistic fit.

    Returns
    -------
    ReadoutResult
        ``score``, ``null_mean``, ``null_p95``, ``p_value`` (NaN when ``n_shuffles == 0``) and the
        shuffled scores ``null``.
    """
    metric = _default_metric(kind, metric)
    X, y = _check_xy(X, y, kind)
    groups = np.asarray(groups)
    if len(groups) != len(y):
        raise ValueError(f"groups has {len(groups)} rows but y has {len(y)}")
    if n_shuffles < 0:
        raise ValueError("n_shuffles must be >= 0")
    folds = item_folds(groups, n_folds, seed)
    target = _encode(y, kind)
    Y = target[:, None]
    if n_shuffles:
        perm = item_shuffle_indices(y, groups, n_shuffles, np.random.default_rng([seed, 1]))
        Y = np.column_stack([target, target[perm].T])
    if engine == "fast":
        scores = _fast_oof(X, Y, folds, kind=kind, alpha=alpha, C=C, n_components=n_components, max_iter=max_iter)
    elif engine == "sklearn":
        scores = _sklearn_oof(
            X, Y, folds, LinearReadout(kind, alpha=alpha, C=C, n_components=n_components, max_iter=max_iter)
        )
    else:
        raise ValueError(f"engine must be 'fast' or 'sklearn', got {engine!r}")
    values = _score(Y, scores, metric)
    null = values[1:]
    null.setflags(write=False)
    observed = float(values[0])
    if n_shuffles:
        null_mean, null_p95 = float(null.mean()), float(np.percentile(null, 95))
        p_value = (1 + int(np.sum(null >= observed))) / (1 + n_shuffles)
    else:
        null_mean = null_p95 = p_value = float("nan")
    return ReadoutResult(
        score=observed,
        null_mean=null_mean,
        null_p95=null_p95,
        p_value=float(p_value),
        n_shuffles=n_shuffles,
        n_items=len(np.unique(groups)),
        n_rows=len(y),
        folds=n_folds,
        metric=metric,
        null=null,
    )


# ----------------------------------------------------------------------------- internals


def _default_metric(kind: str, metric: str | None) -> str:
    if kind not in ("ridge", "logistic"):
        raise ValueError(f"kind must be 'ridge' or 'logistic', got {kind!r}")
    if metric is None:
        return "r2" if kind == "ridge" else "roc_auc"
    allowed = ("r2",) if kind == "ridge" else ("roc_auc", "accuracy")
    if metric not in allowed:
        raise ValueError(f"metric {metric!r} does not fit kind={kind!r}; use one of {allowed}")
    return metric


def _check_xy(X, y, kind: str) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows x features), got shape {X.shape}")
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(f"y must be 1-D with {len(X)} rows, got shape {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or inf")
    if kind == "ridge":
        y = y.astype(float)
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or inf")
    elif len(np.unique(y)) != 2:
        raise ValueError(f"logistic readout needs exactly two classes, got {len(np.unique(y))}")
    return X, y


def _encode(y: np.ndarray, kind: str) -> np.ndarray:
    """Ridge: float targets; logistic: 0/1 with 1 = the larger label (sklearn's classes_[1])."""
    if kind == "ridge":
        return y.astype(float)
    return (y == np.unique(y)[1]).astype(float)


def _score(Y: np.ndarray, S: np.ndarray, metric: str) -> np.ndarray:
    """Column-wise pooled score of out-of-fold decision values S against targets Y."""
    if metric == "r2":
        sse = np.sum((Y - S) ** 2, axis=0)
        sst = np.sum((Y - Y.mean(axis=0)) ** 2, axis=0)
        return 1.0 - sse / sst
    if metric == "accuracy":
        return np.mean((S > 0) == (Y == 1), axis=0)
    # ROC AUC via the Mann-Whitney statistic with mid-ranks for ties (= roc_auc_score)
    ranks = rankdata(S, axis=0)
    pos = Y == 1
    n1 = pos.sum(axis=0)
    n0 = len(Y) - n1
    return (np.sum(ranks * pos, axis=0) - n1 * (n1 + 1) / 2) / (n1 * n0)


def _sklearn_oof(X: np.ndarray, Y: np.ndarray, folds: np.ndarray, readout: LinearReadout) -> np.ndarray:
    out = np.empty_like(Y)
    for train, test in _splits(folds):
        for j in range(Y.shape[1]):
            pipe = clone(readout.build_pipeline()).fit(X[train], Y[train, j])
            out[test, j] = pipe.predict(X[test]) if readout.kind == "ridge" else pipe.decision_function(X[test])
    return out


def _eigh(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigendecomposition of a symmetric Gram matrix (ascending eigenvalues).

    Threaded LAPACK gains little below a few thousand columns, and on a busy machine
    (parallel sweep workers) OpenBLAS threads spin: measured 0.1 s -> 2.7 s for d=576.
    """
    if len(gram) > 2048:
        return linalg.eigh(gram, check_finite=False)
    with _blas_controller().limit(limits=1, user_api="blas"):
        # numpy's LAPACK call has less per-call overhead than scipy's; the readout nulls make
        # thousands of these small decompositions
        return np.linalg.eigh(gram)


@functools.lru_cache(maxsize=1)
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()  # scanning the loaded libraries costs ~10 ms: do it once


def _fold_basis(
    X: np.ndarray, train: np.ndarray, test: np.ndarray, n_components: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Standardized fold data and the singular basis of the training design.

    Returns Z_tr, Z_te, W (d x r) and s such that A_tr = Z_tr W = U S has centered columns
    with A_tr'A_tr = diag(s^2), and A_te = Z_te W puts held-out rows in the same basis.
    Ridge and L2-logistic penalties are rotation invariant and the optimum lies in the row
    space of Z_tr, so fitting on A_tr is exact; keeping the top ``n_components`` directions
    is exactly PCA(n_components) (sign flips matter to neither model). The basis comes from
    the eigendecomposition of the smaller Gram matrix (Z'Z or ZZ'): several times cheaper
    than an SVD, and as accurate as the Cholesky solve sklearn's Ridge runs on the same Gram.
    """
    scaler = StandardScaler().fit(X[train])  # sklearn's own scaling, incl. constant columns
    Z_tr = scaler.transform(X[train])
    Z_te = scaler.transform(X[test])
    n_tr, d = Z_tr.shape
    primal = n_tr >= d
    evals, vecs = _eigh(Z_tr.T @ Z_tr if primal else Z_tr @ Z_tr.T)
    s2, vecs = np.clip(evals[::-1], 0.0, None), vecs[:, ::-1]
    # directions at rounding level of the Gram (constant columns, d > n) carry no signal
    keep = s2 > (s2[0] * max(n_tr, d) * np.finfo(float).eps if s2.size else 0.0)
    if n_components is not None:
        keep &= np.arange(len(s2)) < n_components
    s, vecs = np.sqrt(s2[keep]), vecs[:, keep]
    W = vecs if primal else (Z_tr.T @ vecs) / s  # dual: right singular vectors from left ones
    return Z_tr, Z_te, W, s


def _fast_oof(
    X: np.ndarray,
    Y: np.ndarray,
    folds: np.ndarray,
    *,
    kind: str,
    alpha: float,
    C: float,
    n_components: int | None,
    max_iter: int,
) -> np.ndarray:
    out = np.empty_like(Y)
    for train, test in _splits(folds):
        Z_tr, Z_te, W, s = _fold_basis(X, train, test, n_components)
        Y_tr = Y[train]
        if kind == "ridge":
            # ridge with intercept on the centered basis: coef = (S^2 + alpha)^-1 A'(y - ybar);
            # A_tr is never formed, each shuffle costs a few matrix-vector products
            ybar = Y_tr.mean(axis=0)
            coef = (W.T @ (Z_tr.T @ (Y_tr - ybar))) / (s**2 + alpha)[:, None]
            out[test] = ybar + Z_te @ (W @ coef)
        else:
            coef, intercept = _logistic_newton_cg(Z_tr @ W, s, Y_tr, C, max_iter=max_iter)
            out[test] = Z_te @ (W @ coef) + intercept
    return out


def _logistic_newton_cg(
    A: np.ndarray, s: np.ndarray, Y: np.ndarray, C: float, *, max_iter: int = 100, gtol: float = 1e-10
) -> tuple[np.ndarray, np.ndarray]:
    """Minimize C * sum(logloss) + ||c||^2 / 2 (intercept unpenalized) for every column of Y.

    This is LogisticRegression's L2 objective, solved by truncated Newton for all columns at
    once so that every matrix product serves all shuffles. Converged when the gradient of the
    mean log-loss is below ``gtol`` in every coordinate (sklearn's lbfgs default stops near
    1e-4, so this is the tighter of the two).
    """
    n, r = A.shape
    n_cols = Y.shape[1]
    coef = np.zeros((r, n_cols))
    b = np.zeros(n_cols)
    A32 = A.astype(np.float32)  # CG only shapes the step; gradients stay in float64
    todo = np.arange(n_cols)
    for _ in range(max_iter):
        c, bb, Yt = coef[:, todo], b[todo], Y[:, todo]
        eta = A @ c + bb
        p = expit(eta)
        g_c = C * (A.T @ (p - Yt)) + c
        g_b = C * np.sum(p - Yt, axis=0)
        grel = np.maximum(np.abs(g_c).max(axis=0, initial=0.0), np.abs(g_b)) / (C * n)
        live = grel > gtol
        if not live.any():
            return coef, b
        todo, c, bb, Yt, eta, p = todo[live], c[:, live], bb[live], Yt[:, live], eta[:, live], p[:, live]
        g_c, g_b, grel = g_c[:, live], g_b[live], grel[live]
        # forcing term: rough steps far away, accurate ones near the optimum (superlinear)
        d_c, d_b = _pcg(A32, C * p * (1.0 - p), g_c, g_b, s**2, forcing=np.clip(np.sqrt(grel), 1e-4, 0.5))

        # Armijo backtracking per column; trial points need no new product with A
        def objective(eta_: np.ndarray, c_: np.ndarray) -> np.ndarray:
            return C * np.sum(np.logaddexp(0.0, eta_) - Yt * eta_, axis=0) + 0.5 * np.sum(c_ * c_, axis=0)

        f = objective(eta, c)
        step_eta = (A32 @ d_c.astype(np.float32)).astype(float) + d_b  # line search only

        slope = np.sum(g_c * d_c, axis=0) + g_b * d_b
        slack = 1e-12 * (1.0 + np.abs(f))  # near the optimum f changes below rounding
        t = np.ones(len(todo))
        for _ in range(40):
            ok = objective(eta + t * step_eta, c + t * d_c) <= f + 1e-4 * t * slope + slack
            if ok.all():
                break
            t = np.where(ok, t, 0.5 * t)
        coef[:, todo] = c + t * d_c
        b[todo] = bb + t * d_b
    warnings.warn(
        f"logistic Newton-CG stopped after {max_iter} iterations without converging", ConvergenceWarning, stacklevel=3
    )
    return coef, b


def _pcg(
    A32: np.ndarray,
    D: np.ndarray,
    g_c: np.ndarray,
    g_b: np.ndarray,
    s2: np.ndarray,
    *,
    forcing: np.ndarray,
    max_cg: int = 500,
) -> tuple[np.ndarray, np.ndarray]:
    """Preconditioned CG on H d = -g for every column, H = [A 1]' diag(D) [A 1] + diag(I, 0).

    A has centered columns with A'A = diag(s^2), so diag(mean(D) s^2 + 1) (and sum(D) for the
    intercept) is close to H and CG needs few steps even on strongly anisotropic activations.
    """
    D32 = D.astype(np.float32)
    m_c = D.mean(axis=0)[None, :] * s2[:, None] + 1.0
    m_b = np.maximum(D.sum(axis=0), 1e-300)
    d_c, d_b = np.zeros_like(g_c), np.zeros_like(g_b)
    r_c, r_b = -g_c, -g_b
    z_c, z_b = r_c / m_c, r_b / m_b
    q_c, q_b = z_c.copy(), z_b.copy()
    rz = np.sum(r_c * z_c, axis=0) + r_b * z_b
    target = forcing * np.sqrt(np.sum(r_c**2, axis=0) + r_b**2)
    live = np.ones(len(g_b), dtype=bool)
    for _ in range(max_cg):
        u = D32 * (A32 @ q_c.astype(np.float32) + q_b.astype(np.float32))
        h_c = (A32.T @ u).astype(float) + q_c
        h_b = u.sum(axis=0, dtype=float)
        qh = np.sum(q_c * h_c, axis=0) + q_b * h_b
        step = np.where(live & (qh > 0), rz / np.where(qh > 0, qh, 1.0), 0.0)
        d_c += step * q_c
        d_b += step * q_b
        r_c -= step * h_c
        r_b -= step * h_b
        live &= np.sqrt(np.sum(r_c**2, axis=0) + r_b**2) > target
        if not live.any():
            break
        z_c, z_b = r_c / m_c, r_b / m_b
        rz_new = np.sum(r_c * z_c, axis=0) + r_b * z_b
        beta = np.where(live, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        q_c = z_c + beta * q_c
        q_b = z_b + beta * q_b
        rz = rz_new
    return d_c, d_b
