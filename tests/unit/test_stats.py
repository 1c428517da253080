"""Repeated-measures statistics checked against scipy, statsmodels and pingouin."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from analyses.stats import (
    FriedmanResult,
    adjust_pvalues,
    friedman,
    holm,
    mixed_model,
    pairwise_wilcoxon,
    wilcoxon_rows,
    rank_biserial,
)

pg = pytest.importorskip("pingouin")

LANGS = ["en", "hi", "bn", "mr", "ta", "hing"]


def _tidy(seed: int, n: int = 40, shift: float = 0.5, integer: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 1))
    eff = np.array([0.0, shift, 1.5 * shift, shift, shift, 0.5 * shift])
    vals = base + eff + rng.normal(size=(n, len(LANGS)))
    if integer:  # ties and zero differences on purpose
        vals = np.round(vals * 2)
    wide = pd.DataFrame(vals, columns=LANGS)
    wide["prompt_id"] = [f"p{i:03d}" for i in range(n)]
    return wide.melt(id_vars="prompt_id", var_name="language", value_name="delta")


@pytest.mark.parametrize("integer", [False, True])
def test_friedman_matches_scipy_and_pingouin(integer: bool) -> None:
    df = _tidy(1, integer=integer)
    res = friedman(df)
    wide = df.pivot(index="prompt_id", columns="language", values="delta")[LANGS]
    ref = sps.friedmanchisquare(*wide.to_numpy().T)
    assert res.statistic == pytest.approx(ref.statistic, abs=1e-8)
    assert res.p_value == pytest.approx(ref.pvalue, abs=1e-12)
    pgr = pg.friedman(data=df, dv="delta", within="language", subject="prompt_id")
    # pingouin's W is tie-corrected, as is scipy's chi2, so W = chi2 / (n (k-1)) agrees
    assert res.kendall_w == pytest.approx(float(pgr["W"].iloc[0]), abs=1e-8)
    assert res.statistic == pytest.approx(float(pgr["Q"].iloc[0]), abs=1e-8)
    assert (res.n_subjects, res.k_conditions, res.n_dropped) == (40, 6, 0)
    assert res.conditions == tuple(LANGS)


def test_friedman_kendall_w_hand_formula_without_ties() -> None:
    df = _tidy(2)
    wide = df.pivot(index="prompt_id", columns="language", values="delta")
    n, k = wide.shape
    ranks = sps.rankdata(wide.to_numpy(), axis=1)
    rsum = ranks.sum(axis=0)
    w = 12 * ((rsum - rsum.mean()) ** 2).sum() / (n**2 * (k**3 - k))
    assert friedman(df).kendall_w == pytest.approx(w, abs=1e-12)


def test_friedman_drops_incomplete_subjects() -> None:
    df = _tidy(3)
    drop = (df.prompt_id == "p000") & (df.language == "ta")
    df = df[~drop].copy()
    df.loc[(df.prompt_id == "p001") & (df.language == "hi"), "delta"] = np.nan
    res = friedman(df)
    assert (res.n_subjects, res.n_dropped) == (38, 2)
    keep = df[~df.prompt_id.isin(["p000", "p001"])]
    assert res.statistic == pytest.approx(friedman(keep).statistic, abs=1e-12)


def test_friedman_result_is_frozen_and_validates() -> None:
    res = friedman(_tidy(4))
    assert isinstance(res, FriedmanResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.statistic = 0.0  # type: ignore[misc]
    df = _tidy(4)
    with pytest.raises(ValueError, match="duplicate"):
        friedman(pd.concat([df, df.iloc[:1]]))
    with pytest.raises(ValueError, match="3 conditions"):
        friedman(df[df.language.isin(["en", "hi"])])


def test_friedman_multi_column_subject() -> None:
    a, b = _tidy(5), _tidy(6)
    a["model"], b["model"] = "m1", "m2"
    both = pd.concat([a, b])
    res = friedman(both, subject=("model", "prompt_id"))
    flat = both.assign(prompt_id=both.model + "/" + both.prompt_id)
    assert res.n_subjects == 80
    assert res.statistic == pytest.approx(friedman(flat).statistic, abs=1e-12)


def test_holm_matches_statsmodels_and_keeps_nan() -> None:
    rng = np.random.default_rng(7)
    p = rng.uniform(0, 0.2, size=15)
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1], atol=1e-12)
    # hand-computed Holm on a tiny family
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06], atol=1e-12)
    withnan = np.array([0.01, np.nan, 0.04, 0.03])
    out = holm(withnan)
    assert np.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3]], [0.03, 0.06, 0.06], atol=1e-12)
    np.testing.assert_allclose(adjust_pvalues(p, "fdr_bh"), multipletests(p, method="fdr_bh")[1], atol=1e-12)


@pytest.mark.parametrize("integer", [False, True])
def test_pairwise_wilcoxon_matches_scipy_and_pingouin(integer: bool) -> None:
    df = _tidy(8, integer=integer)
    out = pairwise_wilcoxon(df)
    assert list(out.columns) == [
        "a",
        "b",
        "n",
        "n_nonzero",
        "statistic",
        "p_value",
        "p_holm",
        "rank_biserial",
        "median_diff",
    ]
    assert len(out) == 15
    assert list(zip(out.a, out.b)) == list(itertools.combinations(LANGS, 2))
    wide = df.pivot(index="prompt_id", columns="language", values="delta")
    for row in out.itertuples():
        x, y = wide[row.a].to_numpy(), wide[row.b].to_numpy()
        ref = sps.wilcoxon(x, y, zero_method="wilcox", alternative="two-sided")
        assert row.statistic == pytest.approx(ref.statistic, abs=1e-8)
        assert row.p_value == pytest.approx(ref.pvalue, abs=1e-12)
        pgr = pg.wilcoxon(x, y, alternative="two-sided")
        assert row.statistic == pytest.approx(float(pgr["W_val"].iloc[0]), abs=1e-8)
        assert row.rank_biserial == pytest.approx(float(pgr["RBC"].iloc[0]), abs=1e-8)
        assert row.median_diff == pytest.approx(float(np.median(x - y)), abs=1e-12)
        assert row.n == 40 and row.n_nonzero == int(np.count_nonzero(x - y))
    np.testing.assert_allclose(out.p_holm, multipletests(out.p_value, method="holm")[1], atol=1e-12)


def test_wilcoxon_asymptotic_p_by_hand_and_rbc_sign() -> None:
    rng = np.random.default_rng(9)
    n = 30
    x = rng.normal(size=n) + 0.6
    y = rng.normal(size=n)
    df = pd.DataFrame(
        {
            "prompt_id": np.tile(np.arange(n), 3),
            "language": np.repeat(["hi", "en", "bn"], n),
            "delta": np.concatenate([x, y, rng.normal(size=n)]),
        }
    )
    out = pairwise_wilcoxon(df, method="asymptotic", alternative="greater")
    row = out[(out.a == "hi") & (out.b == "en")].iloc[0]
    d = x - y
    r = sps.rankdata(np.abs(d))
    r_plus = r[d > 0].sum()
    z = (r_plus - n * (n + 1) / 4) / np.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    assert row.statistic == pytest.approx(r_plus, abs=1e-9)  # one-sided: R+
    assert row.p_value == pytest.approx(sps.norm.sf(z), abs=1e-12)
    assert row.rank_biserial == pytest.approx((2 * r_plus - r.sum()) / r.sum(), abs=1e-12)
    assert row.rank_biserial > 0  # hi shifted up relative to en
    assert rank_biserial(y, x) == pytest.approx(-row.rank_biserial, abs=1e-12)


def test_pairwise_wilcoxon_options() -> None:
    df = _tidy(10, n=25)
    # subject p000 lacks "ta": listwise deletion drops it from every pair
    df = df[~((df.prompt_id == "p000") & (df.language == "ta"))]
    listwise = pairwise_wilcoxon(df)
    pairwise = pairwise_wilcoxon(df, complete_only=False)
    assert set(listwise.n) == {24}
    assert pairwise.loc[(pairwise.a == "en") & (pairwise.b == "hi"), "n"].item() == 25
    assert pairwise.loc[(pairwise.a == "en") & (pairwise.b == "ta"), "n"].item() == 24
    bonf = pairwise_wilcoxon(df, correction="bonferroni", order=["ta", "en", "hi"])
    assert list(zip(bonf.a, bonf.b)) == [("ta", "en"), ("ta", "hi"), ("en", "hi")]
    np.testing.assert_allclose(bonf.p_bonferroni, np.minimum(bonf.p_value * 3, 1.0), atol=1e-12)
    # pratt keeps zeros in the ranking: the statistic must differ from wilcox on tied data
    tied = _tidy(11, integer=True)
    w = pairwise_wilcoxon(tied, zero_method="wilcox")
    p = pairwise_wilcoxon(tied, zero_method="pratt")
    wide = tied.pivot(index="prompt_id", columns="language", values="delta")
    ref = sps.wilcoxon(wide["en"], wide["hi"], zero_method="pratt")
    assert p.statistic.iloc[0] == pytest.approx(ref.statistic, abs=1e-9)
    assert not np.allclose(w.statistic, p.statistic)


def _balanced_mixed(seed: int, n: int = 60) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    langs = ["en", "hi", "bn", "ta"]
    eff = np.array([0.0, 0.3, 0.8, -0.2])
    u = rng.normal(scale=1.0, size=(n, 1))
    y = 1.0 + eff + u + rng.normal(scale=0.5, size=(n, len(langs)))
    wide = pd.DataFrame(y, columns=langs)
    wide["prompt_id"] = np.arange(n)
    return wide.melt(id_vars="prompt_id", var_name="language", value_name="delta"), y


def test_mixed_model_balanced_matches_anova_estimators() -> None:
    """Balanced complete data: GLS fixed effects equal cell-mean contrasts and REML
    variance components equal the two-way ANOVA moment estimators."""
    df, y = _balanced_mixed(12)
    res = mixed_model(df)
    n, k = y.shape
    means = y.mean(axis=0)
    coef = res.coefficients
    assert coef.loc["Intercept", "estimate"] == pytest.approx(means[0], abs=1e-6)
    for j, lang in enumerate(["hi", "bn", "ta"], start=1):
        term = f"C(language, Treatment('en'))[T.{lang}]"
        assert coef.loc[term, "estimate"] == pytest.approx(means[j] - means[0], abs=1e-6)
    resid = y - y.mean(axis=1, keepdims=True) - means + y.mean()
    ms_err = (resid**2).sum() / ((n - 1) * (k - 1))
    ms_subj = k * ((y.mean(axis=1) - y.mean()) ** 2).sum() / (n - 1)
    assert res.residual_variance == pytest.approx(ms_err, rel=1e-4)
    assert res.group_variance == pytest.approx((ms_subj - ms_err) / k, rel=1e-4)
    # SE of a treatment contrast in the balanced model: sqrt(2 sigma^2 / n)
    term = "C(language, Treatment('en'))[T.bn]"
    assert coef.loc[term, "std_err"] == pytest.approx(np.sqrt(2 * ms_err / n), rel=1e-4)
    z = coef.loc[term, "estimate"] / coef.loc[term, "std_err"]
    assert coef.loc[term, "p_value"] == pytest.approx(2 * sps.norm.sf(abs(z)), abs=1e-10)
    assert res.converged and res.n_obs == n * k and res.n_groups == n
    assert list(coef.columns) == ["estimate", "std_err", "z", "p_value", "ci_low", "ci_high"]


def test_mixed_model_matches_statsmodels_and_variance_component() -> None:
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(13)
    rows = []
    for p in range(30):
        u = rng.normal()
        for m in ["m1", "m2", "m3"]:
            v = rng.normal(scale=0.7)
            for lang, e in zip(["en", "hi", "bn"], [0.0, 0.5, 1.0]):
                rows.append((p, m, lang, u + v + e + rng.normal(scale=0.3)))
    df = pd.DataFrame(rows, columns=["prompt_id", "model", "language", "delta"])
    res = mixed_model(df, extra_groups="model")
    ref = smf.mixedlm(
        "delta ~ C(language, Treatment('en'))",
        df,
        groups="prompt_id",
        re_formula="1",
        vc_formula={"model": "0 + C(model)"},
    ).fit(reml=True)
    np.testing.assert_allclose(res.coefficients.estimate, ref.fe_params, atol=1e-8)
    assert res.log_likelihood == pytest.approx(ref.llf, abs=1e-8)
    assert set(res.variance_components) == {"model"}
    # planted SDs: prompt 1.0, prompt-x-model 0.7, residual 0.3
    assert 0.2 < res.variance_components["model"] < 0.9
    assert 0.05 < res.residual_variance < 0.15
    assert 0.4 < res.group_variance < 2.0 and res.n_groups == 30 and res.n_obs == 270
    coef = res.coefficients.estimate
    assert coef["C(language, Treatment('en'))[T.hi]"] == pytest.approx(0.5, abs=0.15)
    assert coef["C(language, Treatment('en'))[T.bn]"] == pytest.approx(1.0, abs=0.15)


def test_pairwise_wilcoxon_all_zero_differences() -> None:
    df = _tidy(14, n=20)
    copy = df[df.language == "en"].assign(language="en_copy")
    out = pairwise_wilcoxon(pd.concat([df, copy]), order=["en", "en_copy", "hi", "bn"])
    row = out[(out.a == "en") & (out.b == "en_copy")].iloc[0]
    x = df[df.language == "en"]["delta"].to_numpy()
    # p = 1 for the all-zero pair: what scipy gives when zeros are split instead of dropped
    assert row.n_nonzero == 0 and row.p_value == sps.wilcoxon(x, x, zero_method="zsplit").pvalue == 1.0
    assert np.isnan(row.rank_biserial) and row.median_diff == 0.0
    # Holm over the whole family of 6 pairs (statsmodels as reference), the all-zero pair included
    assert len(out) == 6 and out.p_value.notna().all()
    np.testing.assert_allclose(out.p_holm, multipletests(out.p_value, method="holm")[1], atol=1e-12)
    # negative control: leaving the pair out (the earlier family of 5) gives smaller p_holm
    rest = out[out.n_nonzero > 0]
    five = multipletests(rest.p_value, method="holm")[1]
    assert (rest.p_holm.to_numpy() >= five - 1e-15).all() and (rest.p_holm.to_numpy() > five).any()
    rows = wilcoxon_rows(out)
    assert [r["note"] for r in rows if r["b"] == "en_copy"] == [
        "all differences zero: p = 1, counted in the Holm family"
    ]
