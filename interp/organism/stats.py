"""Decision rules of `interp validate`, stated in advance and testable on simulated lineages.

Every counted check follows one rule, its threshold fixed in `known_answers.toml` before a run
(and written beside the result into validation_checks.csv):

- **rises**: an effect of at least `min_effect`, and a CI that excludes 0;
- **stays put**: an equivalence margin: the whole CI inside [-margin, +margin];
- **null-based**: a p-value at or below alpha. A Monte-Carlo p (k of n shuffles at least the observed
  value) carries the Clopper-Pearson 95% CI of k / n; a p whose CI straddles the threshold it is
  compared with is *undetermined*, not a pass or a fail.

A known answer is **recovered** only when its check passes on the organism and fails on the
control lineage named for it (`status`); anything else is a miss (**not recovered**) or, for a
Monte-Carlo p too close to call, **undetermined**. The counted p-values are Holm-adjusted (`holm`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

RECOVERED = "recovered"
NOT_RECOVERED = "not recovered"
UNDETERMINED = "undetermined"
REPORTED = "reported"
GUARD = "guard"


class PValue(NamedTuple):
    p: float
    lo: float  # Clopper-Pearson CI of the exceedance share (NaN for an exact p)
    hi: float
    n_shuffles: int  # 0: an exact p (no Monte-Carlo error)


def clopper_pearson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) CI of a binomial proportion k / n."""
    from scipy.stats import beta

    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    a = (1.0 - conf) / 2.0
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


def exceedances(p_value: float, n_shuffles: int) -> int:
    """k from p = (1 + k) / (1 + n), the toolkit's shuffle p-value (probes.readouts / predictive)."""
    k = round(p_value * (1 + n_shuffles) - 1)
    if not 0 <= k <= n_shuffles or abs((1 + k) / (1 + n_shuffles) - p_value) > 1e-9:
        raise ValueError(f"p = {p_value} is not (1 + k) / (1 + {n_shuffles}) for an integer k")
    return int(k)


def mc_pvalue(p_value: float, n_shuffles: int) -> PValue:
    """A shuffle p with the Monte-Carlo 95% CI of its exceedance count."""
    if not n_shuffles or p_value != p_value:
        return PValue(float(p_value), math.nan, math.nan, int(n_shuffles or 0))
    lo, hi = clopper_pearson(exceedances(p_value, n_shuffles), n_shuffles)
    return PValue(float(p_value), lo, hi, int(n_shuffles))


def exact_pvalue(p_value: float) -> PValue:
    return PValue(float(p_value), math.nan, math.nan, 0)


def p_below(p: PValue, threshold: float) -> bool | None:
    """p <= threshold (the usual rejection rule, as statsmodels' Holm): True / False, or None
    (undetermined) when the Monte-Carlo CI straddles the threshold."""
    if p.p != p.p:
        return False
    if p.n_shuffles and p.lo <= threshold <= p.hi:
        return None
    return bool(p.p <= threshold)


def holm(ps: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as `ps`); NaN stays NaN and is not counted."""
    idx = [i for i, p in enumerate(ps) if p == p]
    m = len(idx)
    out = [math.nan] * len(ps)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def holm_decisions(ps: list[PValue], alpha: float) -> list[bool | None]:
    """Holm's step-down rejections at family-wise level alpha, with Monte-Carlo uncertainty: each
    p (ascending) is compared with alpha / (m - rank) by `p_below`; the first False stops (it and
    every larger p fail); after an undetermined one, a later pass is undetermined too (it would
    pass only if the earlier one does). A NaN p fails and is not counted in m."""
    out: list[bool | None] = [False] * len(ps)
    idx = sorted((i for i, p in enumerate(ps) if p.p == p.p), key=lambda j: ps[j].p)
    m, unsure = len(idx), False
    for rank, i in enumerate(idx):
        d = p_below(ps[i], alpha / (m - rank))
        if d is False:
            break
        out[i] = None if (d is None or unsure) else True
        unsure = unsure or d is None
    return out


def rises(est: float, lo: float, hi: float, min_effect: float) -> bool:
    """At least `min_effect`, and the CI excludes 0 (from above)."""
    return bool(est >= min_effect and lo > 0.0)


def stays_put(est: float, lo: float, hi: float, margin: float) -> bool:
    """The whole CI inside the equivalence margin [-margin, margin]."""
    return bool(-margin <= lo and hi <= margin)


def percentile_ci(reps, ci: float) -> tuple[float, float]:
    """The central `ci` percentile interval of bootstrap replicates."""
    a = (1.0 - ci) / 2.0
    lo, hi = np.quantile(reps, [a, 1.0 - a])
    return float(lo), float(hi)


def paired_diff_ci(
    before: np.ndarray, after: np.ndarray, *, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of after - before over the same items, percentile bootstrap CI resampling items."""
    from analyses.bootstrap import bootstrap_mean_ci

    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return math.nan, math.nan, math.nan
    c = bootstrap_mean_ci(d, n_boot=n_boot, ci=ci, seed=seed)
    return float(d.mean()), float(c.lo), float(c.hi)


def _gap_reps(planted, rest, n_boot: int, seed: int) -> tuple[float, np.ndarray]:
    """mean(planted) - mean(rest) and its bootstrap replicates, each group's items resampled separately."""
    a = np.asarray(planted, dtype=float)
    b = np.asarray(rest, dtype=float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if a.size == 0 or b.size == 0:
        return math.nan, np.full(n_boot, math.nan)
    rng = np.random.default_rng(seed)
    reps = a[rng.integers(0, a.size, (n_boot, a.size))].mean(1) - b[rng.integers(0, b.size, (n_boot, b.size))].mean(1)
    return float(a.mean() - b.mean()), reps


def gap_ci(
    planted: np.ndarray, rest: np.ndarray, *, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """mean(planted) - mean(rest), bootstrap resampling each group's items separately."""
    est, reps = _gap_reps(planted, rest, n_boot, seed)
    if math.isnan(est):
        return math.nan, math.nan, math.nan
    lo, hi = percentile_ci(reps, ci)
    return est, lo, hi


def gap_difference_ci(
    a_planted: np.ndarray,
    a_rest: np.ndarray,
    b_planted: np.ndarray,
    b_rest: np.ndarray,
    *,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(planted - rest on A) - (planted - rest on B): how much stronger plant A is than plant B, per
    planted item, so planted sets of different sizes do not enter it. The four groups are resampled
    separately (independent bootstraps of the two gaps)."""
    ga, ra = _gap_reps(a_planted, a_rest, n_boot, seed)
    gb, rb = _gap_reps(b_planted, b_rest, n_boot, seed + 1)
    if math.isnan(ga) or math.isnan(gb):
        return math.nan, math.nan, math.nan
    lo, hi = percentile_ci(ra - rb, ci)
    return ga - gb, lo, hi


def status(organism: bool | None, control: bool | None, *, gate: str = "") -> tuple[str, str]:
    """(status, reason) of one counted check from its outcome on the organism and on its control.

    `organism` / `control`: passed, failed, or None (undetermined: a Monte-Carlo p whose CI
    straddles its threshold). `gate`: a condition the organism fails that makes its answer
    unusable (the comprehension screen). Every outcome but a pass on the organism with a fail on
    the control is a miss, counted as such: a check that passes on its control too did not find
    the plant, only something both lineages share."""
    if gate:
        return NOT_RECOVERED, gate
    if organism is None:
        return UNDETERMINED, "organism p-value's Monte-Carlo CI straddles its threshold"
    if not organism:
        return NOT_RECOVERED, "fails on the organism"
    if control is None:
        return UNDETERMINED, "control p-value's Monte-Carlo CI straddles its threshold"
    if control:
        return NOT_RECOVERED, "passes on its control too"
    return RECOVERED, "passes on the organism, fails on its control"


def spearman_perm(x: np.ndarray, y: np.ndarray, *, n_perm: int = 1000, seed: int = 0) -> tuple[float, PValue]:
    """Spearman's rho of x and y and its one-sided permutation p (rho at least as large with x
    shuffled over the items), (1 + k) / (1 + n) with its Monte-Carlo CI."""
    from scipy.stats import rankdata

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = ~(np.isnan(x) | np.isnan(y))
    rx, ry = rankdata(x[ok]), rankdata(y[ok])
    if rx.size < 3 or rx.std() == 0 or ry.std() == 0:
        return math.nan, PValue(math.nan, math.nan, math.nan, n_perm)
    rx, ry = (rx - rx.mean()) / rx.std(), (ry - ry.mean()) / ry.std()
    rho = float(rx @ ry / rx.size)
    rng = np.random.default_rng(seed)
    null = np.array([rng.permutation(rx) @ ry / rx.size for _ in range(n_perm)])
    k = int((null >= rho - 1e-12).sum())
    return rho, mc_pvalue((1 + k) / (1 + n_perm), n_perm)
