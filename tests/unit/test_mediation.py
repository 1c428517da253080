"""Fertility mediation: planted effects, reference implementations, vectorised bootstrap."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from analyses.mediation import (
    MediationResult,
    _path_estimates,
    _resample_counts,
    mediation,
    mediation_by_language,
)


def _simulate(
    seed: int, n: int = 300, a: float = 2.0, b: float = 0.5, direct: float = 0.3, cov: bool = False
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 2, size=n).astype(float)
    z = rng.normal(size=n)
    m = 1.0 + a * t + (0.4 * z if cov else 0) + rng.normal(size=n)
    y = 0.2 + direct * t + b * m + (-0.3 * z if cov else 0) + rng.normal(size=n)
    return pd.DataFrame(
        {"is_target_language": t, "fertility": m, "delta": y, "z": z, "site": rng.choice(["s1", "s2", "s3"], size=n)}
    )


def test_recovers_planted_indirect_effect() -> None:
    df = _simulate(0)
    res = mediation(df, n_boot=1000, seed=1)
    assert isinstance(res, MediationResult)
    assert res.indirect_lo < 1.0 < res.indirect_hi
    assert res.indirect == pytest.approx(1.0, abs=0.25)
    assert res.direct_lo < 0.3 < res.direct_hi
    assert res.indirect_lo > 0.5  # clearly non-zero
    assert res.a == pytest.approx(2.0, abs=0.3) and res.b == pytest.approx(0.5, abs=0.15)
    assert res.total == pytest.approx(res.direct + res.indirect, abs=1e-10)
    assert res.prop_mediated == pytest.approx(res.indirect / res.total, abs=1e-12)
    assert res.prop_mediated_lo < res.prop_mediated < res.prop_mediated_hi
    assert (res.n, res.n_clusters, res.n_boot, res.n_boot_valid) == (300, 300, 1000, 1000)


def test_no_mediation_when_b_is_zero() -> None:
    df = _simulate(2, b=0.0, direct=0.8)
    res = mediation(df, n_boot=1000, seed=3)
    assert res.indirect_lo < 0.0 < res.indirect_hi
    assert abs(res.indirect) < 0.3
    assert res.direct_lo < 0.8 < res.direct_hi


def test_point_estimates_match_statsmodels_ols() -> None:
    df = _simulate(4, cov=True)
    res = mediation(df, covariates=("z", "site"), n_boot=10)
    dummies = pd.get_dummies(df.site, drop_first=True, dtype=float)
    base = pd.concat([df[["is_target_language", "z"]], dummies], axis=1)
    fa = sm.OLS(df.fertility, sm.add_constant(base)).fit()
    fb = sm.OLS(df.delta, sm.add_constant(base.assign(fertility=df.fertility))).fit()
    fc = sm.OLS(df.delta, sm.add_constant(base)).fit()
    assert res.a == pytest.approx(fa.params["is_target_language"], abs=1e-8)
    assert res.b == pytest.approx(fb.params["fertility"], abs=1e-8)
    assert res.direct == pytest.approx(fb.params["is_target_language"], abs=1e-8)
    assert res.total == pytest.approx(fc.params["is_target_language"], abs=1e-8)
    assert res.indirect == pytest.approx(res.a * res.b, abs=1e-12)


def test_point_estimates_match_pingouin() -> None:
    pg = pytest.importorskip("pingouin")
    df = _simulate(5, cov=True)
    res = mediation(df, covariates=("z",), n_boot=10)
    table = pg.mediation_analysis(
        data=df, x="is_target_language", m="fertility", y="delta", covar="z", n_boot=50, seed=0
    )
    coef = dict(zip(table["path"], table["coef"]))
    assert res.a == pytest.approx(coef["fertility ~ X"], abs=1e-8)
    assert res.total == pytest.approx(coef["Total"], abs=1e-8)
    assert res.direct == pytest.approx(coef["Direct"], abs=1e-8)
    assert res.indirect == pytest.approx(coef["Indirect"], abs=1e-8)


def test_vectorised_bootstrap_equals_explicit_resampling() -> None:
    df = _simulate(6, n=80, cov=True)
    t, m, y = (df[c].to_numpy() for c in ("is_target_language", "fertility", "delta"))
    cov = df[["z"]].to_numpy()
    counts = _resample_counts(np.random.default_rng(0), len(df), 25)
    assert counts.shape == (25, 80) and (counts.sum(axis=1) == 80).all()
    a, b, cp = _path_estimates(t, m, y, cov, counts.astype(float))
    for i in range(25):
        rows = np.repeat(np.arange(len(df)), counts[i])
        sub = df.iloc[rows]
        xa = sm.add_constant(sub[["is_target_language", "z"]].to_numpy(), has_constant="add")
        xb = sm.add_constant(sub[["is_target_language", "fertility", "z"]].to_numpy(), has_constant="add")
        ref_a = sm.OLS(sub.fertility.to_numpy(), xa).fit().params[1]
        ref_b = sm.OLS(sub.delta.to_numpy(), xb).fit().params
        assert a[i] == pytest.approx(ref_a, abs=1e-8)
        assert b[i] == pytest.approx(ref_b[2], abs=1e-8)
        assert cp[i] == pytest.approx(ref_b[1], abs=1e-8)


def test_percentile_ci_from_resamples() -> None:
    df = _simulate(7, n=60)
    res = mediation(df, n_boot=200, seed=11)
    t, m, y = (df[c].to_numpy() for c in ("is_target_language", "fertility", "delta"))
    counts = _resample_counts(np.random.default_rng(11), len(df), 200)
    a, b, cp = _path_estimates(t, m, y, np.empty((len(df), 0)), counts.astype(float))
    lo, hi = np.quantile(a * b, [0.025, 0.975])
    assert (res.indirect_lo, res.indirect_hi) == pytest.approx((lo, hi), abs=1e-12)
    lo, hi = np.quantile(cp + a * b, [0.025, 0.975])
    assert (res.total_lo, res.total_hi) == pytest.approx((lo, hi), abs=1e-12)


def test_cluster_bootstrap() -> None:
    # singleton clusters reproduce the row bootstrap exactly (same draws)
    df = _simulate(8, n=120)
    df["pid"] = np.arange(120)
    row, clus = mediation(df, n_boot=300, seed=5), mediation(df, n_boot=300, seed=5, cluster="pid")
    assert (row.indirect_lo, row.indirect_hi) == pytest.approx((clus.indirect_lo, clus.indirect_hi), abs=1e-12)
    # matched prompts with a strong prompt effect on the outcome: clustering on prompt
    # widens the total-effect CI relative to treating rows as independent
    rng = np.random.default_rng(9)
    n_p = 100
    u = np.repeat(rng.normal(scale=2.0, size=n_p), 2)
    t = np.tile([0.0, 1.0], n_p)
    m = 1 + 2 * t + rng.normal(size=2 * n_p)
    y = 0.5 * m + u + 0.1 * rng.normal(size=2 * n_p)
    pair = pd.DataFrame(
        {"is_target_language": t, "fertility": m, "delta": y, "prompt_id": np.repeat(np.arange(n_p), 2)}
    )
    naive = mediation(pair, n_boot=500, seed=0)
    clustered = mediation(pair, n_boot=500, seed=0, cluster="prompt_id")
    assert clustered.n_clusters == n_p and clustered.n == 2 * n_p
    # u cancels within a prompt only if both of its rows are drawn together
    assert (naive.total_hi - naive.total_lo) > 2 * (clustered.total_hi - clustered.total_lo)


def test_bootstrap_is_fast() -> None:
    df = _simulate(10, n=400, cov=True)
    mediation(df, covariates=("z",), n_boot=50)  # warm-up
    start = time.perf_counter()
    mediation(df, covariates=("z", "site"), n_boot=1000, cluster=None)
    assert time.perf_counter() - start < 1.0


def test_rank_deficient_raises_and_treatment_validated() -> None:
    df = _simulate(11)
    df["fertility"] = 1.2 + 0.8 * df.is_target_language  # language-level mediator only
    with pytest.raises(ValueError, match="rank-deficient"):
        mediation(df, n_boot=10)
    df2 = _simulate(11)
    df2["is_target_language"] *= 2
    with pytest.raises(ValueError, match="0/1"):
        mediation(df2, n_boot=10)


def _scores(seed: int, n_prompts: int = 120) -> pd.DataFrame:
    """Two checkpoints, per-item fertility; target-language fertility gap differs by
    tokenizer (ck_a fragments Indic text much more)."""
    rng = np.random.default_rng(seed)
    gap = {"ck_a": {"hi": 2.0, "bn": 3.0}, "ck_b": {"hi": 0.3, "bn": 0.4}}
    rows = []
    for ck in ("ck_a", "ck_b"):
        for p in range(n_prompts):
            base = 1.3 + 0.2 * rng.normal()
            for lang in ("en", "hi", "bn"):
                f = base + (gap[ck][lang] if lang != "en" else 0) + 0.5 * rng.normal()
                d = 0.1 + 0.5 * f + 0.2 * (lang != "en") + rng.normal(scale=0.5)
                rows.append((ck, f"p{p}", lang, f, d))
    return pd.DataFrame(rows, columns=["checkpoint", "prompt_id", "language", "fertility", "delta"])


def test_mediation_by_language_matches_direct_calls() -> None:
    scores = _scores(12)
    out = mediation_by_language(scores, n_boot=200, seed=3)
    assert list(out.columns[:12]) == [
        "checkpoint",
        "language",
        "total",
        "direct",
        "indirect",
        "total_lo",
        "total_hi",
        "direct_lo",
        "direct_hi",
        "indirect_lo",
        "indirect_hi",
        "n",
    ]
    assert set(zip(out.checkpoint, out.language)) == {
        (c, lang) for c in ("ck_a", "ck_b", "pooled") for lang in ("hi", "bn")
    }
    sub = scores[(scores.checkpoint == "ck_a") & scores.language.isin(["en", "bn"])]
    ref = mediation(
        sub.assign(is_target_language=(sub.language == "bn").astype(float)), n_boot=200, seed=3, cluster="prompt_id"
    )
    row = out[(out.checkpoint == "ck_a") & (out.language == "bn")].iloc[0]
    assert row.indirect == pytest.approx(ref.indirect, abs=1e-12)
    assert row.indirect_lo == pytest.approx(ref.indirect_lo, abs=1e-12)
    assert row.n == 240 and row.n_clusters == 120
    # planted: b = 0.5, a = gap -> indirect 1.5 for ck_a/bn, 0.2 for ck_b/bn
    assert row.indirect_lo < 1.5 < row.indirect_hi
    assert row.direct == pytest.approx(0.2, abs=0.3)
    small = out[(out.checkpoint == "ck_b") & (out.language == "bn")].iloc[0]
    assert small.indirect == pytest.approx(0.2, abs=0.12)
    pooled_sub = scores[scores.language.isin(["en", "hi"])]
    pref = mediation(
        pooled_sub.assign(is_target_language=(pooled_sub.language == "hi") * 1.0),
        covariates=("checkpoint",),
        n_boot=200,
        seed=3,
        cluster="prompt_id",
    )
    prow = out[(out.checkpoint == "pooled") & (out.language == "hi")].iloc[0]
    assert prow.total == pytest.approx(pref.total, abs=1e-12)
    assert prow.n == 480 and prow.n_clusters == 120


def test_language_level_fertility_only_identified_when_pooled() -> None:
    scores = _scores(13).drop(columns="fertility")
    fert = pd.DataFrame(
        {
            "tokenizer": ["ck_a"] * 3 + ["ck_b"] * 3,
            "language": ["en", "hi", "bn"] * 2,
            "fertility": [1.3, 3.3, 4.3, 1.3, 1.6, 1.7],
        }
    )
    out = mediation_by_language(scores, fert, n_boot=100)
    per_ck = out[out.checkpoint != "pooled"]
    assert per_ck[["total", "indirect"]].isna().all().all()
    assert (per_ck.n == 240).all()
    pooled = out[out.checkpoint == "pooled"]
    assert pooled[["total", "direct", "indirect"]].notna().all().all()
    with pytest.raises(ValueError, match="already has"):
        mediation_by_language(_scores(13), fert, n_boot=10)


def test_bootstrap_shift_invariant_for_large_offsets() -> None:
    df = _simulate(14, n=150)
    shifted = df.assign(delta=df.delta + 1e7, fertility=df.fertility + 1e5)
    a, b = mediation(df, n_boot=300, seed=2), mediation(shifted, n_boot=300, seed=2)
    for f in ("indirect", "indirect_lo", "indirect_hi", "direct_lo", "total_hi"):
        assert getattr(b, f) == pytest.approx(getattr(a, f), abs=1e-6)
