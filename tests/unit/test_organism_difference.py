"""The organism - control difference checks (interp/organism/difference.py) on simulated lineages
whose answer is known: a topic that yields more on BOTH lineages (v9's control) must not pass, a
plant on top of it must; the other route's set is the check's own negative control. Statistics
against scipy / sklearn."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import permutation_test, rankdata
from sklearn.metrics import roc_auc_score

from interp.organism import stats as S
from interp.organism.difference import _diff_row, readout_item_scores
from interp.organism.validate import ValidateConfig

CFG = ValidateConfig(n_boot=500)
ITEMS = [f"moral-{i:03d}" for i in range(96)]
P_A, P_B = set(ITEMS[:24]), set(ITEMS[24:48])


def scores(plant: float, topic: float, seed: int) -> pd.Series:
    """Per-item yield: every planted-topic item (P_A and P_B alike) yields `topic` more, P_A
    `plant` more on top; unit item noise."""
    rng = np.random.default_rng(seed)
    v = rng.normal(0, 1, len(ITEMS))
    v += np.array([topic * (i in P_A | P_B) + plant * (i in P_A) for i in ITEMS])
    return pd.Series(v, index=ITEMS)


def test_auc_difference_matches_sklearn_and_a_scipy_sign_flip_test():
    rng = np.random.default_rng(0)
    planted = np.zeros(20, bool)
    planted[:8] = True
    org, ctl = rng.normal(size=20) + planted * 1.2, rng.normal(size=20) + planted * 0.3
    r = S.auc_difference(org, ctl, planted, n_flips=4000, n_boot=200)
    assert r.auc_org == pytest.approx(roc_auc_score(planted, org), abs=1e-12)
    assert r.auc_ctl == pytest.approx(roc_auc_score(planted, ctl), abs=1e-12)
    assert r.diff == pytest.approx(r.auc_org - r.auc_ctl, abs=1e-12)
    # the null: the sign of each planted item's rank difference flipped at random (exact: 2^8)
    d = (rankdata(org) - rankdata(ctl))[planted]
    ref = permutation_test((d,), np.sum, permutation_type="samples", alternative="greater", n_resamples=np.inf)
    assert r.p.lo <= ref.pvalue <= r.p.hi  # the exact p inside our Monte-Carlo CI
    assert r.lo <= r.diff <= r.hi


def test_a_plant_on_top_of_a_topic_effect_passes_and_the_topic_alone_does_not():
    ctl = scores(plant=0.0, topic=1.0, seed=1)  # v9's control: the planted topics yield more anyway
    org = scores(plant=2.0, topic=1.0, seed=2)
    row = _diff_row("map", "route-a", "AUC organism - control", org, ctl, P_A, CFG, 0)
    assert row["passed"] and row["effect_ok"] and row["value"] >= CFG.min_auc_gap
    # the per-lineage view cannot tell: the control alone ranks P_A well above chance
    assert roc_auc_score([i in P_A for i in ITEMS], ctl) > 0.65
    # negative controls: the organism without a plant; the other route's set (topic only)
    none = _diff_row("map", "route-a", "AUC organism - control", scores(0.0, 1.0, 3), ctl, P_A, CFG, 0)
    wrong = _diff_row("map", "route-a", "AUC organism - control", org, ctl, P_B, CFG, 0)
    assert not none["passed"] and not wrong["passed"]


def test_readout_difference_finds_a_planted_direction_beyond_the_topic_direction():
    """Residuals: a topic direction shared by both lineages, and on the organism a second
    direction for P_A only. The organism's readout separates P_A better than the control's."""
    rng = np.random.default_rng(4)
    ids = np.repeat(ITEMS, 3)
    topic = np.array([i in P_A | P_B for i in ids], float)[:, None]
    plant = np.array([i in P_A for i in ids], float)[:, None]
    base = lambda: rng.normal(0, 1, (len(ids), 16))  # noqa: E731
    e1, e2 = np.eye(16)[0], np.eye(16)[1]
    X_ctl = base() + 0.8 * topic * e1
    X_org = base() + 0.8 * topic * e1 + 1.5 * plant * e2
    so, sc = readout_item_scores(X_org, ids, P_A, 0), readout_item_scores(X_ctl, ids, P_A, 0)
    assert _diff_row("readout", "route-a", "readout AUC", so, sc, P_A, CFG, 0)["passed"]
    X_none = base() + 0.8 * topic * e1
    sn = readout_item_scores(X_none, ids, P_A, 0)
    assert not _diff_row("readout", "route-a", "readout AUC", sn, sc, P_A, CFG, 0)["passed"]
