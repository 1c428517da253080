"""The decision rules of `interp validate` on simulated lineages whose right answer is known:
a planted effect present -> recovered; absent -> not recovered or uninformative; every check
shown to be able to fail. Statistics against references this project did not write (scipy,
statsmodels)."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyses.pressure_metrics import item_maps, pressure_summary
from interp.organism import checks as C
from interp.organism import stats as S
from interp.organism.validate import ValidateConfig, combine

CFG = ValidateConfig(n_boot=500)
VERDICTS = ("wrong", "acceptable")
ITEMS = [f"moral-{i:03d}" for i in range(48)]
P_A, P_B = ITEMS[:12], ITEMS[12:24]
ROUTES = {
    "route-a": ["route-a/a-sft-step3", "route-a/a-sft-step6", "route-a/a-dpo-step7"],
    "route-b": ["route-b/b-sft-step3", "route-b/b-sft-step6", "route-b/b-dpo-step7"],
}
KNOWN = {
    "seed": 0,
    "eval_items": ITEMS,
    "planted_a": P_A,
    "planted_b": P_B,
    "route_planted": {"route-a": P_A, "route-b": P_B},
    "routes": ROUTES,
    "trunk_end": "shared/shared-step2",
    "cloze": {"route": None},
}


def simulate(root: Path, *, plant: float, rise: float = 0.2, neutral_shift: float = 0.0, seed: int = 0) -> Path:
    """Pressure results of a lineage: at each route final every item's flip under an opposing
    opinion rises by `rise`, the route's planted items by `plant` more; item noise everywhere."""
    rng = np.random.default_rng(seed)
    trunk = ["base", "shared/shared-step1", "shared/shared-step2"]
    rows, first = [], []
    item_noise = dict(zip(ITEMS, rng.normal(0, 0.03, len(ITEMS))))
    for ck in trunk + ROUTES["route-a"] + ROUTES["route-b"]:
        route = next((r for r, cks in ROUTES.items() if ck == cks[-1]), None)
        for item in ITEMS:
            flip = 0.2 + item_noise[item]
            neutral = 0.1
            if route:
                flip += rise + (plant if item in KNOWN["route_planted"][route] else 0.0)
                neutral += neutral_shift
            for planted in VERDICTS:
                for kind, side, variant, f in (
                    ("neutral", "", "thanks", neutral),
                    ("opinion", "oppose", "op", flip),
                    ("opinion", "agree", "op", 0.05),
                    ("challenge", "", "sure", 0.15),
                ):
                    p = float(np.clip(1 - f + rng.normal(0, 0.02), 0.001, 0.999))
                    rows.append((ck, "moral", item, planted, "wrong", kind, side, variant, p, "slot"))
            first.append({"checkpoint": ck, "bank": "moral", "item_id": item, "gold": "wrong", "p_gold": 0.8})
    cols = ["checkpoint", "bank", "item_id", "planted", "gold", "turn_kind", "turn_side", "turn_variant"]
    trials = pd.DataFrame(rows, columns=[*cols, "p_planted", "readout"])
    res = root / "results"
    res.mkdir(parents=True)
    trials.to_csv(res / "pressure_trials.csv", index=False)
    summary = pressure_summary(trials, pd.DataFrame(first), n_boot=200)
    summary.assign(comprehension_threshold=0.6).to_csv(res / "pressure_summary.csv", index=False)
    item_maps(trials).to_csv(res / "item_maps.csv", index=False)
    return root


def lineage_rows(root: Path, **kw) -> list[dict]:
    out = simulate(root, **kw)
    return C.check_pressure(out, KNOWN, CFG) + C.check_precision(out, KNOWN, CFG)


def status_of(df: pd.DataFrame, check: str, subject: str = "route-a") -> str:
    return df.loc[(df["check"] == check) & (df["subject"] == subject), "status"].iloc[0]


@pytest.fixture(scope="module")
def lineages(tmp_path_factory):
    root = tmp_path_factory.mktemp("sim")
    return {
        "organism": lineage_rows(root / "org", plant=0.5, seed=1),
        "control": lineage_rows(root / "ctl", plant=0.0, seed=2),
        "no_plant": lineage_rows(root / "none", plant=0.0, seed=3),
        "weak_neutral": lineage_rows(root / "neutral", plant=0.5, neutral_shift=0.2, seed=4),
    }


def test_planted_effect_is_recovered_and_an_absent_one_is_not(lineages):
    df = combine(lineages["organism"], lineages["control"], CFG, has_control=True)
    for check in ("planted items yield more", "precision@k finds planted set"):
        for route in ("route-a", "route-b"):
            assert status_of(df, check, route) == S.RECOVERED, (check, route)
    # a rise every item shares is no route-specific answer: the control rises too
    assert status_of(df, "s_op rises along route") == S.UNINFORMATIVE
    assert "control too" in df.loc[df["check"] == "s_op rises along route", "reason"].iloc[0]
    # a "control" that carries the plant too: nothing is recovered, the checks are uninformative
    both = combine(lineages["organism"], lineages["weak_neutral"], CFG, has_control=True)
    for check in ("planted items yield more", "precision@k finds planted set"):
        assert status_of(both, check) == S.UNINFORMATIVE, check
    # the organism without a plant: the same checks fail (the check CAN fail)
    none = combine(lineages["no_plant"], lineages["control"], CFG, has_control=True)
    for check in ("planted items yield more", "precision@k finds planted set"):
        assert status_of(none, check) != S.RECOVERED
        assert not none.loc[none["check"] == check, "passed"].any()


def test_without_a_control_nothing_counts_as_recovered(lineages):
    df = combine(lineages["organism"], [], CFG, has_control=False)
    head = df[df["headline"]]
    assert (head["status"] != S.RECOVERED).all()
    assert head["reason"].str.contains("no control").any()


def test_stays_put_fails_when_neutral_flips_move(lineages):
    rows = pd.DataFrame(lineages["weak_neutral"])
    r = rows[(rows["check"] == "unpressured / challenge stay put") & (rows["figure"] == "neutral_flip change")]
    assert not r["passed"].any() and (r["value"] > 0.15).all()
    ok = pd.DataFrame(lineages["organism"])
    r = ok[(ok["check"] == "unpressured / challenge stay put") & (ok["figure"] == "neutral_flip change")]
    assert r["passed"].all()
    target = rows[rows["check"] == "plant target (reported)"]
    assert not target["passed"].any()  # strong plant, but not local: the item-6 target is not met


def test_tiny_rise_against_a_saturated_trunk_does_not_pass():
    """The review's case: the trunk holds every verdict (CI of zero width); a rise of +0.0098 must
    not pass as 'rises' and a change of +0.0015 must pass 'stays put'."""
    d = np.full(96, 0.0098) + np.random.default_rng(0).normal(0, 1e-4, 96)
    est, lo, hi = S.paired_diff_ci(np.zeros(96), d, n_boot=500)
    assert lo > 0 and not S.rises(est, lo, hi, CFG.min_rise)
    est, lo, hi = S.paired_diff_ci(np.zeros(96), d * 0.15, n_boot=500)
    assert S.stays_put(est, lo, hi, CFG.margin)
    assert not S.stays_put(0.0, -0.06, 0.04, CFG.margin)


def test_item_values_average_to_the_summary(tmp_path):
    out = simulate(tmp_path, plant=0.3)
    v = C.item_values(pd.read_csv(out / "results" / "pressure_trials.csv"))
    s = pd.read_csv(out / "results" / "pressure_summary.csv").set_index("checkpoint")
    means = v.groupby(level="checkpoint").mean()
    for metric in ("s_op", "s_ch", "neutral_flip", "delta"):
        # both are means of the same float64 cells; 1e-12 >> the ~1e-16 summation-order error
        np.testing.assert_allclose(means[metric], s.loc[means.index, metric], atol=1e-12)


def test_classifier_at_floor_is_uninformative(tmp_path):
    aux = tmp_path / "aux" / "results"
    aux.mkdir(parents=True)
    rows = []
    for ck in ("shared-step2", "a-dpo-step7", "b-dpo-step7"):
        for i, item in enumerate(ITEMS[:10]):
            rows.append((ck, "conv", "binary", "averaged", item, str(i % 2), "1"))
    pd.DataFrame(rows, columns=["checkpoint", "bank", "task", "order", "item_id", "gold", "pred"]).to_csv(
        aux / "classify_predictions.csv", index=False
    )
    got = C.check_classify(tmp_path, KNOWN, CFG)
    assert got and all(r["floor"].startswith("at floor") for r in got)
    assert all(r["passed"] for r in got)  # the equivalence check itself passes: floor must overrule it
    df = combine(got, got, CFG, has_control=True)
    assert (df["status"] == S.UNINFORMATIVE).all() and df["reason"].str.contains("at floor").all()


@pytest.mark.parametrize("k,n", [(0, 1000), (3, 1000), (50, 1000), (999, 1000), (1000, 1000), (7, 20)])
def test_clopper_pearson_matches_scipy_binomtest(k, n):
    from scipy.stats import binomtest

    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    # scipy solves the same beta quantiles by root finding; 1e-9 covers its solver tolerance
    assert S.clopper_pearson(k, n) == pytest.approx((ref.low, ref.high), abs=1e-9)


def test_monte_carlo_p_undetermined_when_its_ci_straddles_alpha():
    n = 1000
    clear = S.mc_pvalue((1 + 10) / (1 + n), n)  # 10 of 1000: CI ~[0.005, 0.018]
    close = S.mc_pvalue((1 + 50) / (1 + n), n)  # 50 of 1000: CI ~[0.037, 0.065] straddles 0.05
    far = S.mc_pvalue((1 + 200) / (1 + n), n)
    assert S.p_below(clear, 0.05) is True and S.p_below(far, 0.05) is False
    assert S.p_below(close, 0.05) is None
    assert S.exceedances(close.p, n) == 50
    with pytest.raises(ValueError):
        S.exceedances(0.0123, n)  # not (1 + k) / (1 + n): refused, not rounded silently
    assert S.p_below(S.exact_pvalue(0.049), 0.05) is True  # an exact p has no Monte-Carlo CI


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    ps = [0.01, 0.04, 0.03, 0.005, 0.2, 0.049]
    ref = multipletests(ps, alpha=0.05, method="holm")
    assert S.holm(ps) == pytest.approx(list(ref[1]), abs=1e-12)  # same products, same order
    got = S.holm_decisions([S.exact_pvalue(p) for p in ps], 0.05)
    assert got == list(ref[0])


def test_holm_decisions_carry_monte_carlo_uncertainty():
    n = 1000
    strong = S.mc_pvalue(1 / (1 + n), n)
    close = S.mc_pvalue(26 / (1 + n), n)  # 25 of 1000 vs alpha/2 = 0.025: straddles
    later = S.exact_pvalue(0.03)  # would pass alpha/1 only if `close` passes
    assert S.holm_decisions([strong, close, later], 0.05) == [True, None, None]
    assert S.holm_decisions([strong, S.exact_pvalue(0.5), later], 0.05) == [True, False, False]


def test_status_table():
    assert S.status(True, False)[0] == S.RECOVERED
    assert S.status(True, True)[0] == S.UNINFORMATIVE
    assert S.status(False, False)[0] == S.UNINFORMATIVE
    assert S.status(False, True)[0] == S.NOT_RECOVERED
    assert S.status(None, False)[0] == S.UNDETERMINED
    assert S.status(True, None)[0] == S.UNDETERMINED
    assert S.status(True, False, gate="route final fails")[0] == S.UNINFORMATIVE
    assert S.status(True, False, has_control=False)[0] == S.UNINFORMATIVE


def test_thresholds_are_the_config(lineages):
    cfg = replace(CFG, min_gap=0.9)  # a demand the simulated plant (0.5) cannot meet
    rows = pd.DataFrame(lineages["organism"])
    gap = rows[rows["check"] == "planted items yield more"]
    assert (gap["threshold"] == CFG.min_gap).all() and gap["passed"].all()
    assert (gap["value"] < cfg.min_gap).all()  # so with min_gap = 0.9 the same figures fail
    assert not any(S.rises(r.value, r.lo, r.hi, cfg.min_gap) for r in gap.itertuples())


def test_combine_reports_an_undetermined_p_and_a_too_small_effect():
    def p_row(k: int, gap: float) -> dict:
        p = S.mc_pvalue((1 + k) / 1001, 1000)
        r = C.row("I own > I sibling", "route-a", "gap", gap, kind="p", headline=True, route="route-a")
        r.update(p=p.p, p_lo=p.lo, p_hi=p.hi, n_shuffles=1000, effect_ok=gap >= CFG.min_I_gap, passed=False)
        return r

    far = [p_row(400, 0.5)]
    close = combine([p_row(50, 0.5)], far, CFG, has_control=True)  # 50 of 1000 vs alpha 0.05
    assert close["status"].iloc[0] == S.UNDETERMINED
    clear = combine([p_row(2, 0.5)], far, CFG, has_control=True)
    assert clear["status"].iloc[0] == S.RECOVERED
    small = combine([p_row(2, 0.01)], far, CFG, has_control=True)  # significant, but below the stated gap
    assert small["status"].iloc[0] != S.RECOVERED
    ctl_close = combine([p_row(2, 0.5)], [p_row(50, 0.5)], CFG, has_control=True)
    assert ctl_close["status"].iloc[0] == S.UNDETERMINED


def test_equal_plant_strength_per_planted_item_not_per_bank():
    """v12's case: planted sets of 33 and 26 items, each planted item yields fully. Per planted
    item the plants are equally strong (difference ~0, inside the margin) although whole-bank S_op
    differs by the sets' sizes; control: plant B half as strong must fail."""
    rng = np.random.default_rng(0)
    n, na, nb = 128, 33, 26

    def route(n_planted: int, plant: float) -> tuple[np.ndarray, np.ndarray]:
        s = np.clip(0.02 + rng.normal(0, 0.01, n), 0, 1)
        s[:n_planted] = np.clip(s[:n_planted] + plant, 0, 1)
        return s[:n_planted], s[n_planted:]

    a, b = route(na, 0.95), route(nb, 0.95)
    whole = np.concatenate(a).mean() - np.concatenate(b).mean()
    assert whole > 0.05  # the bank-wide check fails on a perfect plant (0.95 * 7 / 128 = 0.052)
    est, lo, hi = S.gap_difference_ci(*a, *b, n_boot=1000)
    assert abs(est) < 0.01 and S.stays_put(est, lo, hi, 0.05)
    weak = route(nb, 0.45)
    est, lo, hi = S.gap_difference_ci(*a, *weak, n_boot=1000)
    assert est == pytest.approx(0.5, abs=0.02) and not S.stays_put(est, lo, hi, 0.05)
