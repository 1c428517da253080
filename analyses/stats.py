"""Repeated-measures statistics for cross-lingual bias scores.

Input is always a tidy table: one row per (subject, condition) with a numeric value,
e.g. ``prompt_id`` x ``language`` -> ``delta``. The same prompt translated into several
languages is a matched block, so the tests here are the within-subject ones the INCLUDE
paper uses (Friedman + Kendall's W, pairwise Wilcoxon signed-rank with Holm correction)
plus a linear mixed model with a random intercept per prompt.

Every function returns a small immutable result (or a tidy DataFrame); tests check the
numbers against scipy, statsmodels and pingouin.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

__all__ = [
    "FriedmanResult",
    "MixedModelResult",
    "adjust_pvalues",
    "friedman",
    "friedman_row",
    "holm",
    "mixed_model",
    "pairwise_wilcoxon",
    "rank_biserial",
    "wilcoxon_rows",
]

Subject = str | Sequence[str]


@dataclass(frozen=True)
class FriedmanResult:
    """Friedman test over complete matched subjects.

    ``statistic`` is scipy's tie-corrected chi-square; ``kendall_w = statistic / (n (k-1))``.
    ``n_dropped`` counts subjects removed because they lacked at least one condition
    (or had a missing value).
    """

    statistic: float
    p_value: float
    kendall_w: float
    n_subjects: int
    k_conditions: int
    n_dropped: int = 0
    conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class MixedModelResult:
    """Fit summary of a statsmodels MixedLM.

    ``coefficients`` has one row per fixed-effect term (index = term name) and columns
    estimate, std_err, z, p_value, ci_low, ci_high (Wald, 95%).
    ``group_variance`` is the random-intercept variance of ``groups``;
    ``variance_components`` maps each extra group name to its variance;
    ``residual_variance`` is the residual scale. ``fit_warnings`` keeps the messages
    statsmodels emitted (e.g. a boundary / singular random-effects fit).
    """

    coefficients: pd.DataFrame
    converged: bool
    log_likelihood: float
    n_obs: int
    n_groups: int
    group_variance: float
    residual_variance: float
    variance_components: dict[str, float] = field(default_factory=dict)
    formula: str = ""
    reml: bool = True
    fit_warnings: tuple[str, ...] = ()


def _subject_cols(subject: Subject) -> list[str]:
    return [subject] if isinstance(subject, str) else list(subject)


def _wide(df: pd.DataFrame, subject: Subject, condition: str, value: str) -> pd.DataFrame:
    """Pivot to subjects x conditions (NaN where a subject lacks a condition).

    Columns keep the order in which conditions first appear, so results are stable
    for a given table. Duplicate (subject, condition) rows are an error rather than
    silently averaged: they usually mean a model or axis column was left out of
    ``subject``.
    """
    subj = _subject_cols(subject)
    missing = [c for c in (*subj, condition, value) if c not in df.columns]
    if missing:
        raise KeyError(f"columns not in table: {missing}")
    data = df[[*subj, condition, value]]
    dup = data.duplicated(subset=[*subj, condition])
    if dup.any():
        example = data.loc[dup, [*subj, condition]].iloc[0].to_dict()
        raise ValueError(
            f"{int(dup.sum())} duplicate (subject, condition) rows, e.g. {example}; "
            "aggregate first or add the distinguishing column (e.g. model) to `subject`"
        )
    order = list(pd.unique(data[condition]))
    wide = data.pivot(index=subj, columns=condition, values=value)
    return wide.reindex(columns=order).astype(float)


def friedman(
    df: pd.DataFrame,
    *,
    subject: Subject = "prompt_id",
    condition: str = "language",
    value: str = "delta",
) -> FriedmanResult:
    """Friedman test of ``value`` across ``condition`` with ``subject`` as blocks.

    Only complete subjects (a finite value for every condition) are used; the number
    removed is reported in ``n_dropped``. ``subject`` may be several columns, e.g.
    ``("model", "prompt_id")`` to treat each model's prompt as its own block.

    The chi-square statistic and p-value are scipy.stats.friedmanchisquare (with its
    correction for ties). Kendall's W is ``chi2 / (n (k - 1))``; since scipy's chi2 is
    tie-corrected this equals the tie-corrected W that pingouin.friedman reports.
    """
    wide = _wide(df, subject, condition, value)
    complete = wide.dropna()
    n, k = complete.shape
    if k < 3:
        raise ValueError(f"Friedman needs at least 3 conditions, got {k}")
    if n < 2:
        raise ValueError(f"Friedman needs at least 2 complete subjects, got {n}")
    chi2, p = sps.friedmanchisquare(*complete.to_numpy().T)
    return FriedmanResult(
        statistic=float(chi2),
        p_value=float(p),
        kendall_w=float(chi2 / (n * (k - 1))),
        n_subjects=int(n),
        k_conditions=int(k),
        n_dropped=int(len(wide) - n),
        conditions=tuple(str(c) for c in complete.columns),
    )


def adjust_pvalues(pvalues: Sequence[float] | np.ndarray, method: str = "holm") -> np.ndarray:
    """Multiplicity-adjusted p-values via statsmodels ``multipletests``.

    NaN entries (a test that could not run, e.g. a pair with no matched subjects) stay NaN
    and are not counted in the family; callers say so in the table. (A pair whose
    differences are all zero is not NaN: :func:`pairwise_wilcoxon` gives it p = 1.)
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        # Holm computed here: multipletests runs gc.collect() per call (0.3 s with torch loaded)
        out[ok] = _holm(p[ok]) if method == "holm" else multipletests(p[ok], method=method)[1]
    return out


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm step-down: sorted p_(i) * (m - i), running maximum, capped at 1 (tested vs statsmodels)."""
    m = len(p)
    order = np.argsort(p, kind="mergesort")
    adj = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adj
    return out


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (NaN-aware; see :func:`adjust_pvalues`)."""
    return adjust_pvalues(pvalues, "holm")


def rank_biserial(a: np.ndarray, b: np.ndarray) -> float:
    """Matched-pairs rank-biserial correlation (Kerby 2014) of ``d = a - b``.

    ``r = (R+ - R-) / (R+ + R-)`` with ranks of ``|d|`` over the non-zero differences.
    Positive means ``a`` tends to exceed ``b``. This is pingouin.wilcoxon's RBC for
    ``alternative`` two-sided/greater; pingouin flips the sign for "less", we do not.
    """
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    d = d[d != 0]
    if d.size == 0:
        return float("nan")
    r = sps.rankdata(np.abs(d))
    return float((r[d > 0].sum() - r[d < 0].sum()) / r.sum())


def pairwise_wilcoxon(
    df: pd.DataFrame,
    *,
    subject: Subject = "prompt_id",
    condition: str = "language",
    value: str = "delta",
    correction: str = "holm",
    zero_method: Literal["wilcox", "pratt", "zsplit"] = "wilcox",
    alternative: Literal["two-sided", "greater", "less"] = "two-sided",
    method: Literal["auto", "exact", "asymptotic"] = "auto",
    complete_only: bool = True,
    order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Wilcoxon signed-rank test for every pair of conditions, with multiplicity correction.

    One row per unordered pair (a, b) in ``order`` (default: order of first appearance),
    testing ``d = value[a] - value[b]`` over matched subjects.

    - ``complete_only=True`` uses the same complete subjects as :func:`friedman`
      (listwise deletion); ``False`` uses every subject that has both a and b.
    - ``zero_method`` / ``alternative`` / ``method`` go to scipy.stats.wilcoxon unchanged.
      Defaults: "wilcox" (zero differences are discarded, the classic test),
      two-sided, "auto" (exact null for small n without zeros/ties, else normal
      approximation). scipy's ``statistic`` is min(R+, R-) when two-sided and R+
      otherwise.
    - ``rank_biserial``: see :func:`rank_biserial` (sign: positive when a > b).
    - ``median_diff``: median of a - b over the matched subjects (zeros included).
    - A pair whose differences are all zero has p = 1 (no evidence of a difference; what
      scipy's ``zero_method="zsplit"`` gives) and NaN statistic: it stays in the family, so
      the correction is over every pair tested. A pair without matched subjects has NaN p
      and is left out of the family (``wilcoxon_rows`` notes it).
    - The adjusted column is named ``p_<correction>`` (``p_holm`` by default), using
      statsmodels multipletests over all pairs with a finite p-value.

    Columns: a, b, n, n_nonzero, statistic, p_value, p_<correction>, rank_biserial,
    median_diff.
    """
    wide = _wide(df, subject, condition, value)
    if order is not None:
        unknown = set(order) - set(wide.columns)
        if unknown:
            raise KeyError(f"conditions not in table: {sorted(unknown)}")
        wide = wide[list(order)]
    if complete_only:
        wide = wide.dropna()
    rows = []
    for a, b in itertools.combinations(wide.columns, 2):
        pair = wide[[a, b]].dropna()
        xa, xb = pair[a].to_numpy(), pair[b].to_numpy()
        d = xa - xb
        n_nonzero = int(np.count_nonzero(d))
        if d.size == 0:
            stat, p = np.nan, np.nan  # nothing to test: left out of the family
        elif n_nonzero == 0:
            stat, p = np.nan, 1.0  # scipy cannot rank an all-zero difference; no evidence of one
        else:
            res = sps.wilcoxon(xa, xb, zero_method=zero_method, alternative=alternative, method=method)
            stat, p = float(res.statistic), float(res.pvalue)
        rows.append(
            {
                "a": a,
                "b": b,
                "n": int(d.size),
                "n_nonzero": n_nonzero,
                "statistic": stat,
                "p_value": p,
                "rank_biserial": rank_biserial(xa, xb),
                "median_diff": float(np.median(d)) if d.size else np.nan,
            }
        )
    cols = ["a", "b", "n", "n_nonzero", "statistic", "p_value", "rank_biserial", "median_diff"]
    out = pd.DataFrame(rows, columns=cols)
    out.insert(6, f"p_{correction}", adjust_pvalues(out["p_value"].to_numpy(), correction))
    out.attrs.update(correction=correction, zero_method=zero_method, alternative=alternative)
    return out


def mixed_model(
    df: pd.DataFrame,
    *,
    formula: str = "delta ~ C(language, Treatment('en'))",
    groups: str = "prompt_id",
    extra_groups: str | Sequence[str] | None = None,
    reml: bool = True,
) -> MixedModelResult:
    """Linear mixed model (statsmodels MixedLM) with a random intercept per ``groups``.

    Repeated prompts across languages violate ANOVA's independence assumption; the
    random intercept absorbs each prompt's baseline.

    ``extra_groups`` adds one variance component per named column, as
    ``vc_formula={g: "0 + C(g)"}``. In statsmodels variance components are *nested in*
    ``groups``, so ``extra_groups="model"`` gives a random intercept per (prompt, model)
    cell - the right term when each model scored every prompt in several languages.
    With only a handful of models, put the model's main effect in the formula as a
    fixed effect (``+ C(model)``) rather than as a random effect.
    """
    extras = [] if extra_groups is None else _subject_cols(extra_groups)
    import statsmodels.formula.api as smf  # deferred: heavy import, only needed here

    vc = {g: f"0 + C({g})" for g in extras} or None
    # re_formula must be explicit: with vc_formula set, statsmodels drops the
    # default random intercept otherwise.
    model = smf.mixedlm(formula, df, groups=groups, re_formula="1", vc_formula=vc)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = model.fit(reml=reml)
    fe = res.fe_params
    k_fe = len(fe)
    ci = np.asarray(res.conf_int())[:k_fe]
    coef = pd.DataFrame(
        {
            "estimate": fe.to_numpy(),
            "std_err": np.asarray(res.bse_fe),
            "z": np.asarray(res.tvalues)[:k_fe],
            "p_value": np.asarray(res.pvalues)[:k_fe],
            "ci_low": ci[:, 0],
            "ci_high": ci[:, 1],
        },
        index=pd.Index(fe.index, name="term"),
    )
    vcomp = dict(zip(model.exog_vc.names, map(float, res.vcomp))) if extras else {}
    return MixedModelResult(
        coefficients=coef,
        converged=bool(res.converged),
        log_likelihood=float(res.llf),
        n_obs=int(res.nobs),
        n_groups=len(model.group_labels),
        group_variance=float(np.asarray(res.cov_re)[0, 0]),
        residual_variance=float(res.scale),
        variance_components=vcomp,
        formula=formula,
        reml=reml,
        fit_warnings=tuple(dict.fromkeys(str(w.message) for w in caught)),
    )


def friedman_row(fr: FriedmanResult, *, dropped: str = "subjects") -> dict:
    """A Friedman result as one row of a statistics table (cloze_stats.csv, weat_stats.csv)."""
    return {
        "test": "friedman",
        "statistic": fr.statistic,
        "p_value": fr.p_value,
        "effect": fr.kendall_w,
        "effect_name": "kendall_w",
        "n": fr.n_subjects,
        "k": fr.k_conditions,
        "note": f"{fr.n_dropped} incomplete {dropped} dropped" if fr.n_dropped else "",
    }


def wilcoxon_rows(pw: pd.DataFrame, *, with_estimate: bool = False) -> list[dict]:
    """`pairwise_wilcoxon` pairs as rows of a statistics table; `estimate` = median difference."""
    rows = []
    for r in pw.itertuples(index=False):
        row = {
            "test": "wilcoxon",
            "a": r.a,
            "b": r.b,
            "statistic": r.statistic,
            "p_value": r.p_value,
            "p_holm": r.p_holm,
            "effect": r.rank_biserial,
            "effect_name": "rank_biserial",
        }
        if with_estimate:
            row["estimate"] = r.median_diff
        if r.n == 0:
            note = "no matched subjects: not tested, left out of the Holm family"
        elif r.n_nonzero == 0:
            note = "all differences zero: p = 1, counted in the Holm family"
        else:
            note = ""
        rows.append({**row, "n": r.n, "k": 2, "note": note})
    return rows
