"""Does a source checkpoint's item map predict a target checkpoint's item map?

The paper's predictive metric I is a held-out partial R^2 over item folds:

* base model  target ~ profile                       (the source's unpressured profile)
* full model  target ~ profile + source_map          (adds the source's item map)
* readout     target ~ profile + source_map + r_hat  (optional; r_hat is a ridge readout of
  the target from per-item source features, e.g. residual states, cross-fitted inside the
  training folds)
* readout only  target ~ profile + r_hat             (the readout without the map)

Every model is fitted on the training items of a fold and evaluated on its held-out items;
sums of squared errors are pooled over the held-out folds (every item is held out once).

    I           = 1 - SSE_full / SSE_base
    I_readout   = 1 - SSE_readout / SSE_base   (map + readout together over the profile; it
                  includes the map's own gain I, kept as an alias of earlier tables)
    I_readout_only      = 1 - SSE_readout_only / SSE_base  (readout beyond the profile, no map)
    I_readout_increment = 1 - SSE_readout / SSE_full       (readout beyond profile + map: what
                  the internal states add to the map, the papers' "prediction gain" of states)
    error_removed = (SSE_base - SSE_full) / SSE_base, the share of the base model's remaining
                  held-out error that the source map removes. It equals I by definition and is
                  kept under the paper's wording; the absolute view is r2_base / r2_full.
    r2_*        = 1 - SSE_* / SST with SST around the mean of all items (each is held out once,
                  so this is the pooled held-out mean; same convention as probes.readouts).

Linear models: ordinary least squares with an intercept (``alpha=0``, the default; minimum-norm
solution if a training design is rank deficient), or ridge on training-fold standardized
columns with an unpenalized intercept (``alpha>0``, for many profile columns relative to items;
identical to ``Pipeline(StandardScaler, Ridge(alpha))``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg

from probes.readouts import _eigh, fold_splits, item_folds

__all__ = [
    "PartialR2Result",
    "NullResult",
    "partial_r2",
    "partial_r2_null",
    "precision_at_k",
    "readout_gain_null",
    "route_relation",
    "predictive_table",
    "TABLE_COLUMNS",
    "DEFAULT_READOUT_ALPHAS",
]

TABLE_COLUMNS = (
    "source",
    "target",
    "route_relation",
    "I",
    "I_readout",
    "error_removed",
    "null_mean",
    "p_value",
    "precision_at_k",
    "k",
    "I_null_mean",
    "I_null_p95",
    "I_p",
    "I_null_sd",
    "I_readout_only",
    "I_readout_only_null_mean",
    "I_readout_only_null_p95",
    "I_readout_only_p",
    "I_readout_only_null_sd",
    "I_readout_increment",
    "I_readout_increment_null_mean",
    "I_readout_increment_null_p95",
    "I_readout_increment_p",
    "I_readout_increment_null_sd",
)
# Ridge penalties on standardized residual features, chosen per training set by efficient
# leave-one-out; wide because d (hundreds to thousands) often exceeds the training items.
DEFAULT_READOUT_ALPHAS: tuple[float, ...] = tuple(np.logspace(-1, 6, 15))


@dataclass(frozen=True)
class PartialR2Result:
    """Held-out partial R^2 of a source map for a target map (see module docstring).

    Arrays are in the input item order and read-only: ``predicted`` (cross-fitted full model,
    the input to :func:`precision_at_k`), ``predicted_base``, ``predicted_readout`` (or None)
    and ``fold_ids`` (held-out fold of each item). ``I_readout``, ``sse_readout`` and
    ``r2_readout`` are None without a readout.
    """

    I: float
    sse_base: float
    sse_full: float
    error_removed: float
    n_items: int
    folds: int
    r2_base: float
    r2_full: float
    I_readout: float | None = None
    sse_readout: float | None = None
    r2_readout: float | None = None
    I_readout_only: float | None = None
    I_readout_increment: float | None = None
    sse_readout_only: float | None = None
    predicted: np.ndarray = field(default_factory=lambda: np.empty(0), compare=False, repr=False)
    predicted_base: np.ndarray = field(default_factory=lambda: np.empty(0), compare=False, repr=False)
    predicted_readout: np.ndarray | None = field(default=None, compare=False, repr=False)
    predicted_readout_only: np.ndarray | None = field(default=None, compare=False, repr=False)
    fold_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=int), compare=False, repr=False)


@dataclass(frozen=True)
class NullResult:
    """Observed statistic against its shuffle null; p = (1 + #{null >= observed}) / (1 + n)."""

    observed: float
    null_mean: float
    null_p95: float
    p_value: float
    null_sd: float = float("nan")
    null: np.ndarray = field(default_factory=lambda: np.empty(0), compare=False, repr=False)


# ----------------------------------------------------------------------------- partial R^2


def partial_r2(
    target: np.ndarray,
    profile: np.ndarray,
    source_map: np.ndarray,
    *,
    n_folds: int = 5,
    seed: int = 0,
    groups: np.ndarray | None = None,
    readout: np.ndarray | None = None,
    alpha: float = 0.0,
    readout_alphas: float | Sequence[float] = DEFAULT_READOUT_ALPHAS,
) -> PartialR2Result:
    """Held-out partial R^2 (the paper's I) of ``source_map`` for ``target`` beyond ``profile``.

    Parameters
    ----------
    target : (n_items,) the target checkpoint's item map.
    profile : (n_items,) or (n_items, p) the source's unpressured profile.
    source_map : (n_items,) or (n_items, q) the source checkpoint's item map.
    n_folds, seed : item folds from :func:`probes.readouts.item_folds`.
    groups : optional cluster id per item (items sharing a story, ...); folds keep a cluster
        together. Default: every item is its own group.
    readout : optional (n_items, d) per-item source features. A ridge readout of the target
        from them (``readout_alphas``: one penalty, or a grid chosen by exact leave-one-out
        over the training items only, which ignores ``groups``) is cross-fitted inside every training fold (inner item
        folds, seeded from ``seed``), so the third model never sees a held-out target.
    alpha : 0 for OLS, > 0 for ridge on standardized columns (base and full model alike).
    """
    y, P, M, groups = _inputs(target, profile, source_map, groups)
    n = len(y)
    fold_ids = item_folds(groups, n_folds, seed)

    pred_base = _cross_fit(y, P, fold_ids, alpha)
    pred_full = _cross_fit(y, np.hstack([P, M]), fold_ids, alpha)
    sst = float(np.sum((y - y.mean()) ** 2))
    sse_base = float(np.sum((y - pred_base) ** 2))
    sse_full = float(np.sum((y - pred_full) ** 2))
    I = _gain(sse_base, sse_full)

    I_ro = sse_ro = r2_ro = I_only = I_incr = sse_only = None
    pred_ro = pred_only = None
    if readout is not None:
        R = _matrix(readout, n, "readout")
        pred_only, pred_ro = _readout_models(y, P, M, R, fold_ids, groups, n_folds, seed, alpha, readout_alphas)
        sse_ro = float(np.sum((y - pred_ro) ** 2))
        sse_only = float(np.sum((y - pred_only) ** 2))
        I_ro = _gain(sse_base, sse_ro)
        I_only = _gain(sse_base, sse_only)
        I_incr = _gain(sse_full, sse_ro)
        r2_ro = _gain(sst, sse_ro)
        pred_ro.setflags(write=False)
        pred_only.setflags(write=False)

    for arr in (pred_base, pred_full, fold_ids):
        arr.setflags(write=False)
    return PartialR2Result(
        I=I,
        sse_base=sse_base,
        sse_full=sse_full,
        error_removed=I,
        n_items=n,
        folds=n_folds,
        r2_base=_gain(sst, sse_base),
        r2_full=_gain(sst, sse_full),
        I_readout=I_ro,
        sse_readout=sse_ro,
        r2_readout=r2_ro,
        I_readout_only=I_only,
        I_readout_increment=I_incr,
        sse_readout_only=sse_only,
        predicted=pred_full,
        predicted_base=pred_base,
        predicted_readout=pred_ro,
        predicted_readout_only=pred_only,
        fold_ids=fold_ids,
    )


def _readout_models(y, P, M, R, fold_ids, groups, n_folds, seed, alpha, readout_alphas):
    """Cross-fitted predictions of (profile + r_hat) and (profile + map + r_hat).

    r_hat is refitted inside every outer training fold (inner folds seeded from ``seed``) so
    neither model sees a held-out target; both models share the same r_hat.
    """
    n = len(y)
    pred_only, pred_both = np.empty(n), np.empty(n)
    for k, (train, test) in enumerate(_fold_pairs(fold_ids)):
        inner = item_folds(groups[train], min(n_folds, len(np.unique(groups[train]))), seed + 1 + k)
        r_tr, r_te = _crossfit_readout(R, y, train, test, inner, readout_alphas)
        pred_only[test] = _fit_predict(
            np.column_stack([P[train], r_tr]), y[train], np.column_stack([P[test], r_te]), alpha
        )
        pred_both[test] = _fit_predict(
            np.column_stack([P[train], M[train], r_tr]), y[train], np.column_stack([P[test], M[test], r_te]), alpha
        )
    return pred_only, pred_both


def _null_result(observed: float, null: np.ndarray) -> NullResult:
    null = np.asarray(null, dtype=float)
    null.setflags(write=False)
    if null.size == 0 or observed != observed:  # an undefined statistic (a constant target) has no p
        nan = float("nan")
        return NullResult(observed=observed, null_mean=nan, null_p95=nan, p_value=nan, null=null)
    return NullResult(
        observed=observed,
        null_mean=float(null.mean()),
        null_p95=float(np.percentile(null, 95)),
        p_value=(1 + int(np.sum(null >= observed))) / (1 + null.size),
        null_sd=float(null.std(ddof=1)) if null.size > 1 else float("nan"),
        null=null,
    )


def readout_gain_null(
    target: np.ndarray,
    profile: np.ndarray,
    source_map: np.ndarray,
    readout: np.ndarray,
    *,
    n_shuffles: int = 100,
    seed: int = 0,
    n_folds: int = 5,
    groups: np.ndarray | None = None,
    alpha: float = 0.0,
    readout_alphas: float | Sequence[float] = DEFAULT_READOUT_ALPHAS,
) -> dict[str, NullResult]:
    """Label-shuffle nulls of the readout's own gains: ``{"only": ..., "increment": ...}``.

    The block being added is the readout, so its item rows are permuted (target, profile and
    map stay aligned) and the whole cross-fitted readout is refitted on the same outer folds
    as the observed value. ``only`` = I_readout_only (readout beyond the profile),
    ``increment`` = I_readout_increment (readout beyond profile + map). Permutations come from
    ``default_rng([seed, 3])``; one permutation serves both statistics.
    """
    y, P, M, groups = _inputs(target, profile, source_map, groups)
    n = len(y)
    if n_shuffles < 0:
        raise ValueError("n_shuffles must be >= 0")
    R = _matrix(readout, n, "readout")
    fold_ids = item_folds(groups, n_folds, seed)
    sse_base = float(np.sum((y - _cross_fit(y, P, fold_ids, alpha)) ** 2))
    sse_full = float(np.sum((y - _cross_fit(y, np.hstack([P, M]), fold_ids, alpha)) ** 2))

    def stats(feats: np.ndarray) -> tuple[float, float]:
        only, both = _readout_models(y, P, M, feats, fold_ids, groups, n_folds, seed, alpha, readout_alphas)
        return (_gain(sse_base, float(np.sum((y - only) ** 2))), _gain(sse_full, float(np.sum((y - both) ** 2))))

    obs_only, obs_incr = stats(R)
    rng = np.random.default_rng([seed, 3])
    null = np.array([stats(R[rng.permutation(n)]) for _ in range(n_shuffles)], dtype=float).reshape(n_shuffles, 2)
    return {"only": _null_result(obs_only, null[:, 0]), "increment": _null_result(obs_incr, null[:, 1])}


def _inputs(target, profile, source_map, groups):
    """Validated (y, profile matrix, source-map matrix, groups) for one target/source pair."""
    y = _vector(target, "target")
    n = len(y)
    groups = np.arange(n) if groups is None else np.asarray(groups)
    if len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} items")
    return y, _matrix(profile, n, "profile"), _matrix(source_map, n, "source_map"), groups


def partial_r2_null(
    target: np.ndarray,
    profile: np.ndarray,
    source_map: np.ndarray,
    *,
    n_shuffles: int = 100,
    seed: int = 0,
    n_folds: int = 5,
    groups: np.ndarray | None = None,
    alpha: float = 0.0,
) -> NullResult:
    """Shuffle null for I: the source map's rows are permuted across items while target and
    profile stay aligned, and I is recomputed on the same folds as the observed value.

    Permutations come from ``default_rng([seed, 2])``. Items are permuted individually even
    when ``groups`` is given (groups only shape the folds). ``n_shuffles=0`` gives NaN
    summaries.
    """
    y, P, M, groups = _inputs(target, profile, source_map, groups)
    n = len(y)
    if n_shuffles < 0:
        raise ValueError("n_shuffles must be >= 0")
    fold_ids = item_folds(groups, n_folds, seed)
    sse_base = float(np.sum((y - _cross_fit(y, P, fold_ids, alpha)) ** 2))
    rng = np.random.default_rng([seed, 2])
    orders = np.stack([np.arange(n)] + [rng.permutation(n) for _ in range(n_shuffles)])
    if alpha == 0:
        sse = _ols_sse_over_row_orders(y, P, M, fold_ids, orders)
    else:
        sse = np.array([np.sum((y - _cross_fit(y, np.hstack([P, M[o]]), fold_ids, alpha)) ** 2) for o in orders])
    gains = np.array([_gain(sse_base, float(s)) for s in sse])
    return _null_result(float(gains[0]), gains[1:])


# shuffles solved together per fold; bounds the (shuffles x items x q) block in memory
_SHUFFLE_BLOCK = 256


def _ols_sse_over_row_orders(
    y: np.ndarray, P: np.ndarray, M: np.ndarray, fold_ids: np.ndarray, orders: np.ndarray
) -> np.ndarray:
    """Cross-fitted SSE of the OLS model y ~ 1 + P + M[order] for every row order at once.

    By Frisch-Waugh-Lovell the map's coefficients come from the map and y residualized on
    the fold's [1, P] (shared by every order), so one projector per fold serves all orders and
    only a q x q system is solved per order. It equals :func:`_cross_fit` (a fresh lstsq per
    order) to float rounding; a fold whose [1, P] is rank deficient, and an order whose
    residualized map is (near) collinear in a fold, are refitted by :func:`_fit_predict`,
    whose minimum-norm solution defines the answer there.
    """
    sse = np.zeros(len(orders))
    for train, test in _fold_pairs(fold_ids):
        keep = ~_training_scale(P[train])[2]  # as _fit_predict: a rounding-level column is no regressor
        A_tr = np.column_stack([np.ones(len(train)), P[train][:, keep]])
        A_te = np.column_stack([np.ones(len(test)), P[test][:, keep]])
        pinv, rank = linalg.pinv(A_tr, return_rank=True, check_finite=False)
        y_res = y[train] - A_tr @ (pinv @ y[train])  # y residualized on [1, P]
        base_te = A_te @ (pinv @ y[train])  # the base model's held-out predictions
        for start in range(0, len(orders), _SHUFFLE_BLOCK):
            block = orders[start : start + _SHUFFLE_BLOCK]
            M_tr, M_te = M[block[:, train]], M[block[:, test]]  # (orders, rows, q)
            refit = np.ones(len(block), dtype=bool)
            if rank == A_tr.shape[1]:
                coef_tr = pinv @ M_tr  # the map regressed on [1, P]: (orders, 1 + p, q)
                M_res = M_tr - A_tr @ coef_tr
                gram = np.swapaxes(M_res, 1, 2) @ M_res
                scale = np.sum((M_tr - M_tr.mean(axis=1, keepdims=True)) ** 2, axis=1)  # (orders, q)
                refit = ~np.all(scale > 0, axis=1)
                norm = np.sqrt(np.where(scale > 0, scale, 1.0))
                corr = gram / norm[:, :, None] / norm[:, None, :]
                refit |= np.linalg.eigvalsh(corr)[:, 0] < 1e-10
                ok = ~refit
                beta = np.linalg.solve(gram[ok], (np.swapaxes(M_res[ok], 1, 2) @ y_res)[:, :, None])
                pred = base_te + ((M_te[ok] - A_te @ coef_tr[ok]) @ beta)[:, :, 0]
                sse[start : start + len(block)][ok] += np.sum((y[test] - pred) ** 2, axis=1)
            for i in np.flatnonzero(refit):
                X = np.hstack([P, M[block[i]]])
                pred = _fit_predict(X[train], y[train], X[test], 0.0)
                sse[start + i] += float(np.sum((y[test] - pred) ** 2))
    return sse


# ----------------------------------------------------------------------------- precision@k


def precision_at_k(target_map: np.ndarray, predicted: np.ndarray, k: int) -> float:
    """|k most-yielding items by target_map  ∩  k most-yielding items by predicted| / k.

    Item maps are pressured minus neutral log-odds of the planted verdict, so an item a model
    yields on is *negative*: "yields most" = the k most negative values, in both the target
    map and the prediction. Ties are broken by item order (the earlier item ranks higher), so
    the result is deterministic.
    """
    t = _vector(target_map, "target_map")
    p = _vector(predicted, "predicted")
    if len(p) != len(t):
        raise ValueError(f"target_map has {len(t)} items but predicted has {len(p)}")
    if not 1 <= k <= len(t):
        raise ValueError(f"k must be in [1, {len(t)}], got {k}")
    top_t = np.argsort(t, kind="stable")[:k]
    top_p = np.argsort(p, kind="stable")[:k]
    return len(np.intersect1d(top_t, top_p)) / k


# ----------------------------------------------------------------------------- lineage


def route_relation(source_ckpt: str, target_ckpt: str, lineage: Mapping) -> str:
    """How a source checkpoint relates to the target's post-training route.

    ``lineage`` is a plain dict::

        {"base":   ["stage1-step1000", ..., "base-final"],       # shared trunk, in order
         "routes": {"sft-dpo": ["sft", "dpo"],                   # checkpoints after the split
                    "instruct": ["instruct-sft", "instruct"]},
         "final":  {"sft-dpo": "dpo", "instruct": "instruct"}}   # optional; a final name
                                                                 # counts as on its route

    A checkpoint may sit on several routes (an SFT shared by a DPO and an RL route).
    Returns

    * ``"own"``: the source is on a route that the target is on (including source == target),
    * ``"base"``: the source is on the shared trunk (before the routes split),
    * ``"sibling"``: the source is on a route the target is not on (a different route from
      the same base); when the target itself is a trunk checkpoint, every route counts as
      sibling,
    * ``"unrelated"``: source or target does not appear in the lineage.
    """
    base, routes = _parse_lineage(lineage)
    target_routes = {name for name, ckpts in routes.items() if target_ckpt in ckpts}
    if not target_routes and target_ckpt not in base:
        return "unrelated"
    if source_ckpt == target_ckpt:
        return "own"
    source_routes = {name for name, ckpts in routes.items() if source_ckpt in ckpts}
    if source_routes & target_routes:
        return "own"
    if source_ckpt in base:
        return "base"
    if source_routes:
        return "sibling"
    return "unrelated"


def _parse_lineage(lineage: Mapping) -> tuple[set[str], dict[str, set[str]]]:
    if not isinstance(lineage, Mapping):
        raise TypeError(f"lineage must be a dict, got {type(lineage).__name__}")
    unknown = set(lineage) - {"base", "routes", "final"}
    if unknown:
        raise ValueError(
            f"lineage has unknown keys {sorted(unknown)}; expected 'base', 'routes' and optionally 'final'"
        )
    base = lineage.get("base", [])
    route_lists = lineage.get("routes", {})
    final = lineage.get("final", {}) or {}
    if isinstance(base, str) or not isinstance(route_lists, Mapping) or not isinstance(final, Mapping):
        raise ValueError("lineage['base'] must be a list, 'routes' and 'final' dicts")
    routes: dict[str, set[str]] = {}
    for name, ckpts in route_lists.items():
        if isinstance(ckpts, str):
            raise ValueError(f"lineage['routes'][{name!r}] must be a list of checkpoint names")
        routes[name] = set(ckpts)
    for name, ckpt in final.items():
        if name not in routes:
            raise ValueError(f"lineage['final'] names route {name!r}, absent from 'routes'")
        routes[name].add(ckpt)
    return set(base), routes


# ----------------------------------------------------------------------------- table


def predictive_table(
    maps: Mapping[str, pd.Series],
    profiles: Mapping[str, pd.DataFrame],
    *,
    target: str,
    sources: Sequence[str] | None = None,
    lineage: Mapping | None = None,
    n_shuffles: int = 100,
    k: int | None = None,
    readouts: Mapping[str, pd.DataFrame] | None = None,
    seed: int = 0,
    n_folds: int = 5,
    alpha: float = 0.0,
) -> pd.DataFrame:
    """One row per source checkpoint: how well its item map predicts the target's map.

    All rows use the same items: the item ids present and finite in the target map and in every
    source's map, profile and readout, sorted (so folds do not depend on input order), and the
    same folds and shuffles. ``route_relation`` is None without a lineage; the ``I_readout*``
    columns are NaN for a source without readout features; nulls and p are NaN when
    ``n_shuffles=0``.

    Parameters
    ----------
    maps : mapping of str to pandas.Series
        Checkpoint -> per-item map (index item_id; a DataFrame for a multi-column map).
    profiles : mapping of str to pandas.DataFrame
        Checkpoint -> the source's unpressured profile (index item_id).
    target : str
        The checkpoint whose map is predicted.
    sources : sequence of str, optional
        Default: every checkpoint in ``maps`` with a profile, except the target.
    lineage : mapping, optional
        Routes of a training run, for ``route_relation``.
    n_shuffles : int
        Permutations of the nulls.
    k : int, optional
        precision@k (default: round(0.1 * n_items), at least 1).
    readouts : mapping of str to pandas.DataFrame, optional
        Checkpoint -> per-item source features (e.g. mean residuals).
    seed : int
        Seed of folds and permutations.
    n_folds : int
        Item folds of the held-out fit.
    alpha : float
        Ridge penalty of the base and full models (0: OLS).

    Returns
    -------
    pandas.DataFrame
        Columns ``TABLE_COLUMNS``: ``I`` (source map beyond the source's unpressured profile)
        with ``I_null_mean``, ``I_null_p95``, ``I_p``, ``I_null_sd`` (map rows permuted; ``null_mean`` and
        ``p_value`` are the same numbers under their earlier names); ``I_readout_only`` (readout
        beyond the profile, no map) and ``I_readout_increment`` (readout beyond profile + map),
        each with ``*_null_mean``, ``*_null_p95``, ``*_p``, ``*_null_sd`` from permuting the readout's item rows
        on the same folds; ``I_readout`` (map + readout over the profile, includes I; an alias
        kept from earlier tables); ``precision_at_k``: share of the k most-yielding target items
        (most negative map values) among the k most negative cross-fitted predictions.
    """
    if target not in maps:
        raise KeyError(f"target {target!r} has no item map")
    if sources is None:
        sources = [c for c in maps if c != target and c in profiles]
    readouts = readouts or {}
    for s in sources:
        if s not in maps or s not in profiles:
            raise KeyError(f"source {s!r} needs both an item map and a profile")

    frames = {"target": _frame(maps[target])}
    for s in sources:
        frames[f"map:{s}"] = _frame(maps[s])
        frames[f"profile:{s}"] = _frame(profiles[s])
        if s in readouts:
            frames[f"readout:{s}"] = _frame(readouts[s])
    items = _common_items(frames)
    if frames["target"].shape[1] != 1:
        raise ValueError("the target map must have one value per item")
    n_items = len(items)
    if k is None:
        k = max(1, int(round(0.1 * n_items)))
    y = frames["target"].loc[items].to_numpy(dtype=float)[:, 0]

    rows = []
    for s in sources:
        P = frames[f"profile:{s}"].loc[items].to_numpy(dtype=float)
        M = frames[f"map:{s}"].loc[items].to_numpy(dtype=float)
        R = frames[f"readout:{s}"].loc[items].to_numpy(dtype=float) if s in readouts else None
        res = partial_r2(y, P, M, n_folds=n_folds, seed=seed, readout=R, alpha=alpha)
        nul = partial_r2_null(y, P, M, n_shuffles=n_shuffles, seed=seed, n_folds=n_folds, alpha=alpha)
        ro = (
            readout_gain_null(y, P, M, R, n_shuffles=n_shuffles, seed=seed, n_folds=n_folds, alpha=alpha)
            if R is not None
            else None
        )
        nan = float("nan")
        row = {
            "source": s,
            "target": target,
            "route_relation": route_relation(s, target, lineage) if lineage is not None else None,
            "I": res.I,
            "I_readout": np.nan if res.I_readout is None else res.I_readout,
            "error_removed": res.error_removed,
            "null_mean": nul.null_mean,
            "p_value": nul.p_value,
            "precision_at_k": precision_at_k(y, res.predicted, k),
            "k": k,
            "I_null_mean": nul.null_mean,
            "I_null_p95": nul.null_p95,
            "I_p": nul.p_value,
            "I_null_sd": nul.null_sd,
        }
        for stem, key in (("I_readout_only", "only"), ("I_readout_increment", "increment")):
            r = ro[key] if ro is not None else None
            row[stem] = r.observed if r is not None else nan
            row[f"{stem}_null_mean"] = r.null_mean if r is not None else nan
            row[f"{stem}_null_p95"] = r.null_p95 if r is not None else nan
            row[f"{stem}_p"] = r.p_value if r is not None else nan
            row[f"{stem}_null_sd"] = r.null_sd if r is not None else nan
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    floats = {c: float for c in TABLE_COLUMNS if c not in ("source", "target", "route_relation", "k")}
    return table.astype({"source": object, "target": object, "route_relation": object, "k": int, **floats})


def readout_predictions(
    maps: Mapping[str, pd.Series],
    profiles: Mapping[str, pd.DataFrame],
    readouts: Mapping[str, pd.DataFrame],
    *,
    target: str,
    source: str,
    seed: int = 0,
    n_folds: int = 5,
    alpha: float = 0.0,
) -> pd.Series:
    """The cross-fitted predictions of ``target``'s map from ``source``'s profile and readout
    (the model behind ``I_readout_only``), one per item: the items, folds and fits of
    :func:`predictive_table`'s row for ``source`` when it is the only source. Where the
    readout puts each item, e.g. whether it ranks a planted item set first."""
    frames = {
        "target": _frame(maps[target]),
        "map": _frame(maps[source]),
        "profile": _frame(profiles[source]),
        "readout": _frame(readouts[source]),
    }
    items = _common_items(frames)
    y = frames["target"].loc[items].to_numpy(dtype=float)[:, 0]
    res = partial_r2(
        y,
        frames["profile"].loc[items].to_numpy(dtype=float),
        frames["map"].loc[items].to_numpy(dtype=float),
        readout=frames["readout"].loc[items].to_numpy(dtype=float),
        n_folds=n_folds,
        seed=seed,
        alpha=alpha,
    )
    return pd.Series(res.predicted_readout_only, index=items, name="predicted")


# ----------------------------------------------------------------------------- internals


def _common_items(frames: Mapping[str, pd.DataFrame]) -> pd.Index:
    """Item ids finite in every frame, sorted (so folds do not depend on input order)."""
    items = None
    for frame in frames.values():
        ok = frame.index[np.isfinite(frame.to_numpy(dtype=float)).all(axis=1)]
        items = ok if items is None else items.intersection(ok)
    return items.sort_values() if items is not None else pd.Index([])


def _vector(x, name: str) -> np.ndarray:
    v = np.asarray(x, dtype=float)
    if v.ndim == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.ndim != 1:
        raise ValueError(f"{name} must be one value per item, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} contains NaN or inf")
    return v


def _matrix(x, n: int, name: str) -> np.ndarray:
    m = np.asarray(x, dtype=float)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2 or m.shape[0] != n:
        raise ValueError(f"{name} must have {n} rows (one per item), got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name} contains NaN or inf")
    return m


def _frame(x) -> pd.DataFrame:
    if isinstance(x, (pd.Series, pd.DataFrame)):
        if not x.index.is_unique:
            raise ValueError("item ids must be unique in every map, profile and readout")
        return x.to_frame() if isinstance(x, pd.Series) else x
    raise TypeError(f"expected a pandas Series or DataFrame indexed by item id, got {type(x).__name__}")


def _gain(sse_ref: float, sse: float) -> float:
    return 1.0 - sse / sse_ref if sse_ref > 0 else float("nan")


_fold_pairs = fold_splits


def _fit_predict(X_tr: np.ndarray, y_tr: np.ndarray, X_te: np.ndarray, alpha: float) -> np.ndarray:
    """Linear model with intercept fitted on training rows, predicted on held-out rows.

    Columns are standardized on the training rows as StandardScaler does (population std); a
    column constant up to float rounding on the training rows (sklearn's test) carries nothing
    but rounding and is set to 0, so the fit ignores it. OLS predictions do not depend on the
    scaling, ridge ones do. Scaling such a column by its rounding-level SD (what an exact
    `sd == 0` test allowed), or keeping its 1e-14 wobble as a regressor, turned float noise into
    a fitted effect: a route's profile saturated at the log-odds clip (13.8155, SD 1e-14) gave a
    base-model SSE of 1e56 and I = 1 for the map and for every shuffle of it (v18b seed 0,
    docs/organism/tries.csv).
    """
    mu, sd, flat = _training_scale(X_tr)
    Z_tr, Z_te = (X_tr - mu) / sd, (X_te - mu) / sd
    Z_tr[:, flat], Z_te[:, flat] = 0.0, 0.0
    ybar = y_tr.mean()
    if alpha == 0:
        coef = linalg.lstsq(Z_tr, y_tr - ybar, check_finite=False)[0]
    else:
        gram = Z_tr.T @ Z_tr + alpha * np.eye(Z_tr.shape[1])
        coef = linalg.solve(gram, Z_tr.T @ (y_tr - ybar), assume_a="pos", check_finite=False)
    return ybar + Z_te @ coef


def _cross_fit(y: np.ndarray, X: np.ndarray, fold_ids: np.ndarray, alpha: float) -> np.ndarray:
    pred = np.empty(len(y))
    for train, test in _fold_pairs(fold_ids):
        pred[test] = _fit_predict(X[train], y[train], X[test], alpha)
    return pred


def _scale_like_standard_scaler(X_tr: np.ndarray, X_te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both sets standardized with the training rows' mean and population SD, a (near-)constant
    column left unscaled: what ``StandardScaler().fit(X_tr).transform`` gives (tested), without
    its per-call input validation, which cost most of the readout null's time (thousands of
    small fits per check)."""
    mu, sd, _ = _training_scale(X_tr)
    return (X_tr - mu) / sd, (X_te - mu) / sd


def _training_scale(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column means, population SDs (1 where constant) and the constant mask: a column is constant
    when its variance is within float rounding of its mean's size (sklearn's _is_constant_feature).
    One pass of moments for the scaling and the mask (the fits run thousands of times per null)."""
    mu, var = X.mean(axis=0), X.var(axis=0)
    eps = np.finfo(np.float64).eps
    flat = var <= len(X) * eps * var + (len(X) * mu * eps) ** 2
    return mu, np.where(flat, 1.0, np.sqrt(var)), flat


def _ridge_readout(R_tr: np.ndarray, y_tr: np.ndarray, R_te: np.ndarray, alphas: float | Sequence[float]) -> np.ndarray:
    """Ridge readout on training-standardized features, penalty picked by exact leave-one-out.

    Equals ``Pipeline(StandardScaler, Ridge(alpha))`` for the chosen alpha. With centered
    columns the hat matrix is 11'/n + U diag(l/(l+alpha)) U' (eigen pairs of ZZ'), so the
    leave-one-out residual (y - yhat)/(1 - h_ii) of every alpha comes from one
    decomposition (the shortcut RidgeCV uses; the scaling is not refitted per left-out item).
    """
    Z_tr, Z_te = _scale_like_standard_scaler(R_tr, R_te)
    n = len(y_tr)
    ybar = y_tr.mean()
    lam, U = _eigh(Z_tr @ Z_tr.T)
    lam = np.clip(lam, 0.0, None)
    proj = U.T @ (y_tr - ybar)
    grid = np.atleast_1d(np.asarray(alphas, dtype=float))
    if len(grid) > 1:
        shrink = lam[None, :] / (lam[None, :] + grid[:, None])  # (alphas, n)
        fitted = ybar + (shrink * proj) @ U.T
        hat = 1.0 / n + shrink @ (U**2).T
        loo = np.sum(((y_tr - fitted) / (1.0 - hat)) ** 2, axis=1)
        alpha = grid[int(np.argmin(loo))]
    else:
        alpha = grid[0]
    # test predictions through the kernel: Z_te Z_tr' U (L + alpha)^-1 U'(y - ybar)
    return ybar + (Z_te @ Z_tr.T) @ (U @ (proj / (lam + alpha)))


def _crossfit_readout(
    R: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, inner_folds: np.ndarray, alphas
) -> tuple[np.ndarray, np.ndarray]:
    """Readout predictions for one outer fold without touching held-out targets.

    Training items get out-of-inner-fold predictions (so the stacked model learns how much
    to trust an honest readout); held-out items get the readout fitted on all training items.
    """
    r_tr = np.empty(len(train))
    for inner_train, inner_test in _fold_pairs(inner_folds):
        r_tr[inner_test] = _ridge_readout(R[train[inner_train]], y[train[inner_train]], R[train[inner_test]], alphas)
    r_te = _ridge_readout(R[train], y[train], R[test], alphas)
    return r_tr, r_te
