"""Word Embedding Association Test (Caliskan, Bryson & Narayanan, Science 2017).

Targets X, Y (e.g. identity-group terms) and attributes A, B (stereotypical vs
anti-stereotypical attributes) are embedding matrices, one row per word/phrase.

    s(w, A, B)   = mean_a cos(w, a) - mean_b cos(w, b)
    statistic    = sum_x s(x, A, B) - sum_y s(y, A, B)
    effect size  = (mean_x s - mean_y s) / std_{w in X u Y} s(w, A, B)

Embeddings come in as arrays: the model side (mean-pooled causal-LM embeddings, the two
packaged sentence embedders) is in interp/tools/embedders.py.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "WeatResult",
    "association_scores",
    "weat",
]


@dataclass(frozen=True)
class WeatResult:
    """``effect_size`` (Cohen's-d-like, ddof=1), ``statistic`` (test statistic),
    one-sided ``p_value``, ``n_perm`` partitions used (all of them when ``exact``)."""

    effect_size: float
    statistic: float
    p_value: float
    n_perm: int
    exact: bool


def _unit_rows(m: np.ndarray, name: str) -> np.ndarray:
    m = np.atleast_2d(np.asarray(m, dtype=float))
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    if m.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if (norms == 0).any():
        raise ValueError(f"{name} has a zero vector; cosine is undefined")
    return m / norms


def association_scores(W: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """s(w, A, B) = mean cos(w, a) - mean cos(w, b) for every row w of ``W``."""
    w, a, b = _unit_rows(W, "W"), _unit_rows(A, "A"), _unit_rows(B, "B")
    return (w @ a.T).mean(axis=1) - (w @ b.T).mean(axis=1)


def weat(
    X: np.ndarray,
    Y: np.ndarray,
    A: np.ndarray,
    B: np.ndarray,
    *,
    n_perm: int = 10000,
    seed: int = 0,
    exact_if_small: bool = True,
) -> WeatResult:
    """WEAT effect size and one-sided permutation test.

    Effect size divides by the *sample* standard deviation (ddof=1) of s over X u Y;
    Caliskan et al. write "std-dev" without saying which, and implementations differ
    (ddof=0 gives a value larger by sqrt(N/(N-1))).

    p-value: the share of re-partitions (X_i, Y_i) of X u Y into sets of sizes |X|, |Y|
    whose statistic is >= the observed one, i.e. evidence that X is more associated
    with A (relative to B) than Y is. Caliskan et al. write ">"; ">=" (with a 100-ulp
    tolerance for equal partitions computed in another order, as in
    scipy.stats.permutation_test) is the conservative, valid choice and counts the
    observed partition. With ``exact_if_small`` and at most ``n_perm`` partitions all
    are enumerated (p = count / total); otherwise ``n_perm`` random partitions from a
    seeded Generator give p = (count + 1) / (n_perm + 1).
    """
    sx = association_scores(X, A, B)
    sy = association_scores(Y, A, B)
    s = np.concatenate([sx, sy])
    nx, n = len(sx), len(s)
    observed = float(sx.sum() - sy.sum())
    sd = s.std(ddof=1) if n > 1 else float("nan")
    effect = float((sx.mean() - sy.mean()) / sd) if sd > 0 else float("nan")

    # a partition's statistic is 2 * sum(s over X_i) - sum(s), so only X_i's sum matters
    total = float(s.sum())
    n_partitions = math.comb(n, nx)
    tol = np.finfo(float).eps * 100 * abs(observed)
    exact = exact_if_small and n_partitions <= n_perm
    if exact:
        idx = np.fromiter(
            itertools.chain.from_iterable(itertools.combinations(range(n), nx)),
            dtype=np.intp,
            count=n_partitions * nx,
        ).reshape(n_partitions, nx)
        null = 2 * s[idx].sum(axis=1) - total
        p = float(np.mean(null >= observed - tol))
        used = n_partitions
    else:
        rng = np.random.default_rng(seed)
        hits = 0
        chunk = max(1, int(2e6 // n))  # bound the (chunk, n) permutation matrix
        for start in range(0, n_perm, chunk):
            k = min(chunk, n_perm - start)
            perm = rng.permuted(np.tile(np.arange(n), (k, 1)), axis=1)[:, :nx]
            null = 2 * s[perm].sum(axis=1) - total
            hits += int(np.count_nonzero(null >= observed - tol))
        p = (hits + 1) / (n_perm + 1)
        used = n_perm
    return WeatResult(effect_size=effect, statistic=observed, p_value=p, n_perm=int(used), exact=bool(exact))
