"""Check file version 5's family-wise spike-in (`interp.organism.checks.holm_spike_rows`):
p-values of alpha / 2 planted into the organism's counted family, each below alpha and none below
the family-wise level, are all held back by Holm's step-down (statsmodels' Holm agrees); its
control plants p-values below every level, all rejected; comparing each p with alpha itself (the
`holm_skipped` mutation) rejects the planted ones and turns the check into a miss."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from interp.organism import checks as C
from interp.organism import mutations as M
from interp.organism import stats as S
from interp.organism.frozen import CHECK_FILE, load_check_file, with_seed

V5 = load_check_file(CHECK_FILE.with_name("known_answers_v5.toml"))
ST = with_seed(V5.settings, 0)
P_IDS = [c.id for c in V5.checks if c.rule == "p"]


def _org(ps: list[float], n_shuffles: int = 0) -> dict[str, dict]:
    """The organism's rows of the counted p checks, with these p-values (exact, or Monte-Carlo)."""
    out = {}
    for cid, p in zip(P_IDS, ps):
        pv = S.mc_pvalue(p, n_shuffles) if n_shuffles else S.exact_pvalue(p)
        out[cid] = C.row("x", "route-a", "f", 0.5, id=cid, kind="check", p=pv.p, p_lo=pv.lo, p_hi=pv.hi,
                         n_shuffles=pv.n_shuffles)  # fmt: skip
    return out


def _spike(org, st=ST, **kw) -> dict:
    (r,) = C.holm_spike_rows(org, V5.checks, st, **kw)
    assert r["id"] == "holm_level_spike" and r["kind"] == "check"
    return r


@pytest.mark.parametrize("seed", range(20))
def test_planted_p_values_are_held_back_as_statsmodels_holm_holds_them(seed):
    """Families from all-significant to none, exact p-values: the held share is 1 (the known answer)
    and equals the share statsmodels' Holm does not reject; the control's p-values are all rejected."""
    rng = np.random.default_rng(seed)
    ps = list(rng.uniform(0, 1, len(P_IDS)) ** rng.uniform(1, 12))  # skewed toward 0 on some seeds
    k = ST.holm_spike_k
    for control, planted in ((False, ST.alpha / 2), (True, ST.alpha / (2 * (len(ps) + k)))):
        r = _spike(_org(ps), control=control)
        reject = multipletests([*ps, *[planted] * k], alpha=ST.alpha, method="holm")[0]
        assert r["value"] == pytest.approx(1.0 - reject[len(ps) :].mean(), abs=0)
        assert r["value"] == (0.0 if control else 1.0) and r["passed"] is (not control)


def test_holm_skipped_rejects_every_planted_p_and_the_check_fails():
    """The bug the spike-in was added for: each p compared with alpha rejects all planted ones."""
    org = _org([k / 1001 for k in (1, 20, 300, 900)], n_shuffles=1000)  # shuffle p-values (1 + k) / (1 + n)
    assert _spike(org)["passed"] is True
    bug = {m.name: m for m in M.MUTATIONS}["holm_skipped"]
    with M.applied(bug):
        r = _spike(org)
    assert r["value"] == 0.0 and r["passed"] is False


def test_three_planted_p_values_are_needed():
    """Why holm_spike_k >= 3: after a family Holm rejects whole, two planted alpha / 2 meet the
    last two levels (alpha / 2, alpha) and are rejected; three are not (the first meets alpha / 3)."""
    from dataclasses import replace

    org = _org([1e-6] * len(P_IDS))
    assert _spike(org, st=replace(ST, holm_spike_k=2))["value"] == 0.0
    assert _spike(org, st=replace(ST, holm_spike_k=3))["value"] == 1.0


def test_check_files_1_to_4_compute_no_holm_spike():
    for name in ("known_answers.toml", "known_answers_v2.toml", "known_answers_v3.toml", "known_answers_v4.toml"):
        cf = load_check_file(CHECK_FILE.with_name(name))
        assert C.holm_spike_rows(_org([0.01, 0.5]), cf.checks, with_seed(cf.settings, 0)) == []
        assert "holm_level_spike" not in cf.by_id()


def test_version_5_is_version_4_plus_the_holm_spike_in():
    """Every check and setting of v4 unchanged: v5's other decisions are v4's (the spike-in is not of
    rule "p", so Holm's family is the same)."""
    from dataclasses import asdict

    v4 = load_check_file(CHECK_FILE.with_name("known_answers_v4.toml"))
    assert V5.checks[:-1] == v4.checks and V5.checks[-1].id == "holm_level_spike"
    assert V5.checks[-1].rule == "rises" and V5.checks[-1].control == "spike-in"
    assert {**asdict(v4.settings), "holm_spike_k": ST.holm_spike_k} == asdict(V5.settings)
    assert ST.holm_spike_k >= 3
