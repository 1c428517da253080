"""Issue #12, item 4: WEAT as INCLUDE defines it (per-tuple cosine score, fixed thresholds) and
the closed-cohort statistics (Friedman + Kendall's W, Wilcoxon-Holm, rank-biserial)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import scipy.stats as sps
from statsmodels.stats.multitest import multipletests

from analyses.weat_include import include_band, include_tuple_scores, weat_stats


def _unit(angle: float) -> np.ndarray:
    return np.array([np.cos(angle), np.sin(angle), 0.0])


def _vectors_for(score_by_lang: dict[str, list[float]]):
    """Target along e1; stereo attribute at cos 0.5 + s/2, anti at cos 0.5 - s/2, so that
    cos(t, stereo) - cos(t, anti) = s exactly."""
    sets, vec = [], {}
    for lang, scores in score_by_lang.items():
        A, B = [], []
        for i, s in enumerate(scores):
            a, b = f"{lang}-stereo{i}", f"{lang}-anti{i}"
            vec[a], vec[b] = _unit(np.arccos(0.5 + s / 2)), _unit(-np.arccos(0.5 - s / 2))
            A.append(a)
            B.append(b)
        t = f"{lang}-target"
        vec[t] = np.array([2.0, 0.0, 0.0])  # cosine ignores the norm
        sets.append({"axis": "caste", "language": lang, "X": [t], "Y": [f"{lang}-other"], "A": A, "B": B})
        vec[f"{lang}-other"] = np.array([0.0, 0.0, 1.0])
    return sets, vec


def test_tuple_score_is_cosine_difference_with_the_papers_bands():
    planted = [0.005, -0.005, 0.03, 0.07, 0.2, -0.2]
    sets, vec = _vectors_for({"en": planted})
    t = include_tuple_scores("m", vec, sets)
    np.testing.assert_allclose(t["score"], planted, atol=1e-12)
    np.testing.assert_allclose(t["cos_stereo"] - t["cos_anti"], planted, atol=1e-12)
    assert list(t["band"]) == ["negligible", "negligible", "below_significance", "significant", "extreme", "extreme"]
    assert list(t["direction"][-2:]) == ["stereotypical", "anti-stereotypical"]
    assert [include_band(x) for x in (0.0099, 0.01, 0.0499, 0.05, 0.0999, 0.10)] == [
        "negligible",
        "below_significance",
        "below_significance",
        "significant",
        "significant",
        "extreme",
    ]


def test_weat_stats_planted_language_effect_and_references():
    rng = np.random.default_rng(0)
    n = 12
    base = rng.uniform(-0.05, 0.05, n)
    langs = {
        "en": base + 0.3,
        "hi": base + rng.normal(0, 0.02, n),
        "bn": base - 0.1 + rng.normal(0, 0.02, n),
        "ta": base + rng.normal(0, 0.02, n),
    }
    frames = []
    for m, shift in (("m1", 0.0), ("m2", 0.01)):
        sets, vec = _vectors_for({k: list(np.clip(v + shift, -0.9, 0.9)) for k, v in langs.items()})
        frames.append(include_tuple_scores(m, vec, sets))
    scores = pd.concat(frames, ignore_index=True)
    st = weat_stats(scores, reference="en")
    fr = st[(st["test"] == "friedman") & (st["model"] == "m1")].iloc[0]
    wide = scores[scores["model"] == "m1"].pivot(index="tuple_id", columns="language", values="score")
    ref = pg.friedman(data=scores[scores["model"] == "m1"], dv="score", within="language", subject="tuple_id")
    assert fr["effect"] == pytest.approx(float(ref["W"].iloc[0]), rel=1e-9)
    assert fr["p_value"] == pytest.approx(float(sps.friedmanchisquare(*wide.to_numpy().T).pvalue), rel=1e-9)
    assert fr["p_value"] < 0.001
    pairs = st[(st["test"] == "wilcoxon") & (st["model"] == "m1")]
    assert len(pairs) == 6
    p_raw = [sps.wilcoxon(wide[r.a], wide[r.b]).pvalue for r in pairs.itertuples()]
    np.testing.assert_allclose(pairs["p_value"], p_raw, rtol=1e-9)
    np.testing.assert_allclose(pairs["p_holm"], multipletests(p_raw, method="holm")[1], rtol=1e-9)
    # English is above every other language on every tuple: rank-biserial 1 for each en pair
    en_pairs = pairs[pairs["a"] == "en"]
    assert (en_pairs["effect"] == 1.0).all()
    mean_r = st[(st["test"] == "mean_rank_biserial") & (st["model"] == "all")].iloc[0]
    assert mean_r["a"] == "en" and mean_r["effect"] == pytest.approx(1.0) and mean_r["n"] == 6
    assert "pooled" in set(st[st["test"] == "friedman"]["model"])
