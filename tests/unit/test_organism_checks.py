"""The decision rules of `interp validate`, piece by piece: the three outcomes of a counted check,
Holm and the Monte-Carlo p-values against references this project did not write (statsmodels,
scipy), the frozen check file and what `combine` counts. The whole record on simulated lineages
whose answers are known is tests/test_organism_simulate.py."""

import math

import numpy as np
import pandas as pd
import pytest

from interp.core.errors import ConfigError
from interp.organism import checks as C
from interp.organism import stats as S
from interp.organism.frozen import CHECK_FILE, load_check_file, with_seed
from interp.organism.validate import combine

CF = load_check_file()
ST = with_seed(CF.settings, 0)


# ---------------------------------------------------------------- statistics vs references


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
    assert S.holm_decisions([S.exact_pvalue(p) for p in ps], 0.05) == list(ref[0])
    # control: the unadjusted decisions differ here, or the comparison would show nothing
    assert [p <= 0.05 for p in ps] != list(ref[0])


def test_holm_decisions_carry_monte_carlo_uncertainty():
    n = 1000
    strong = S.mc_pvalue(1 / (1 + n), n)
    close = S.mc_pvalue(26 / (1 + n), n)  # 25 of 1000 vs alpha/2 = 0.025: straddles
    later = S.exact_pvalue(0.03)  # would pass alpha/1 only if `close` passes
    assert S.holm_decisions([strong, close, later], 0.05) == [True, None, None]
    assert S.holm_decisions([strong, S.exact_pvalue(0.5), later], 0.05) == [True, False, False]


@pytest.mark.parametrize("seed", [0, 1])
def test_spearman_perm_matches_scipy(seed):
    """rho equals scipy.stats.spearmanr (ties included: grades come in thirds); the one-sided
    permutation p agrees with scipy.stats.permutation_test within both Monte-Carlo errors."""
    from scipy.stats import permutation_test, spearmanr

    rng = np.random.default_rng(seed)
    x = np.repeat([1.0, 0.75, 0.5], 8)
    y = 0.4 * x + rng.normal(0, 0.3, len(x))
    rho, p = S.spearman_perm(x, y, n_perm=4000, seed=seed)
    assert rho == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    ref = permutation_test(
        (x, y),
        lambda a, b: spearmanr(a, b).statistic,
        permutation_type="pairings",
        alternative="greater",
        n_resamples=4000,
        random_state=seed,
    )
    assert abs(p.p - ref.pvalue) < 4 * math.sqrt(ref.pvalue * (1 - ref.pvalue) / 4000) + 1e-3
    assert p.n_shuffles == 4000 and p.lo <= p.p <= p.hi
    # a constant grade has no rank correlation: NaN, never a pass
    assert math.isnan(S.spearman_perm(np.ones(6), y[:6])[0])


def test_status_has_three_outcomes_and_a_pass_on_the_control_is_a_miss():
    assert S.status(True, False)[0] == S.RECOVERED
    assert S.status(True, True) == (S.NOT_RECOVERED, "passes on its control too")
    assert S.status(False, False) == (S.NOT_RECOVERED, "fails on the organism")
    assert S.status(False, True)[0] == S.NOT_RECOVERED
    assert S.status(None, False)[0] == S.UNDETERMINED
    assert S.status(True, None)[0] == S.UNDETERMINED
    assert S.status(True, False, gate="route final fails the comprehension screen")[0] == S.NOT_RECOVERED


def test_rises_needs_the_threshold_and_a_ci_above_zero():
    assert S.rises(0.2, 0.05, 0.3, 0.1)
    assert not S.rises(0.2, -0.01, 0.3, 0.1)  # CI touches 0
    assert not S.rises(0.09, 0.05, 0.12, 0.1)  # below the stated effect
    assert S.stays_put(0.0, -0.04, 0.04, 0.05) and not S.stays_put(0.0, -0.06, 0.04, 0.05)


def test_paired_and_gap_cis_against_a_plain_bootstrap():
    """paired_diff_ci resamples items of after - before; gap_ci resamples each group apart: both
    equal a loop written here with numpy's generator (the same draws)."""
    from analyses.bootstrap import bootstrap_mean_ci

    rng = np.random.default_rng(3)
    before, after = rng.normal(0, 1, 40), rng.normal(0.3, 1, 40)
    est, lo, hi = S.paired_diff_ci(before, after, n_boot=500, seed=5)
    ref = bootstrap_mean_ci(after - before, n_boot=500, seed=5)
    assert est == pytest.approx((after - before).mean()) and (lo, hi) == pytest.approx((ref.lo, ref.hi))
    a, b = rng.normal(1, 1, 12), rng.normal(0, 1, 30)
    est, lo, hi = S.gap_ci(a, b, n_boot=500, seed=5)
    g = np.random.default_rng(5)
    reps = a[g.integers(0, 12, (500, 12))].mean(1) - b[g.integers(0, 30, (500, 30))].mean(1)
    assert est == pytest.approx(a.mean() - b.mean())
    assert (lo, hi) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])))


# ---------------------------------------------------------------- the frozen check file


def test_the_check_file_lists_the_counted_checks_with_a_control_each():
    assert len(CF.checks) == 18 and len(CF.groups()) == 8
    assert {c.control for c in CF.checks} == {"location", "amount", "spike-in"}
    assert len(CF.sha256) == 64
    assert ST.n_shuffles == 1000 and ST.alpha == 0.05  # what the pre-registered run uses


def test_a_bad_check_file_is_one_error_naming_it(tmp_path):
    text = CHECK_FILE.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('rule = "rises"', 'rule = "sometimes"', 1))
    with pytest.raises(ConfigError, match=r"bad\.toml: check a_s_op_rises: rule must be one of"):
        load_check_file(bad)
    bad.write_text(text.replace("min_rise = 0.05", "min_rize = 0.05"))
    with pytest.raises(ConfigError, match=r"missing \['min_rise'\], unknown \['min_rize'\]"):
        load_check_file(bad)
    bad.write_text("not [toml")
    with pytest.raises(ConfigError, match="cannot read the check file"):
        load_check_file(bad)


# ---------------------------------------------------------------- combine


def _p_row(cid: str, k: int, effect: float, n: int = 1000) -> dict:
    p = S.mc_pvalue((1 + k) / (1 + n), n)
    r = C.row("stat", "route-a", "figure", effect, id=cid, kind="check", route="route-a", effect_ok=effect >= 0.1)
    r.update(p=p.p, p_lo=p.lo, p_hi=p.hi, n_shuffles=n)
    return r


def _rises_row(cid: str, est: float, lo: float, passed: bool) -> dict:
    return C.row("stat", "route-a", "figure", est, lo, est + 0.1, passed=passed, id=cid, kind="check", route="route-a")


def _rows(org: list[dict], ctl: list[dict]) -> dict[str, list[dict]]:
    return {"organism": org, "location": ctl, "amount": ctl, "spike-in": ctl}


def test_combine_decides_p_checks_with_their_effect_and_monte_carlo_error():
    far = [_p_row("a_i_own", 400, 0.5)]
    got = lambda org, ctl: combine(_rows(org, ctl), CF, ST).set_index("id").loc["a_i_own"]  # noqa: E731
    assert got([_p_row("a_i_own", 0, 0.5)], far)["status"] == S.RECOVERED
    assert got([_p_row("a_i_own", 50, 0.5)], far)["status"] == S.UNDETERMINED  # 50 of 1000 vs 0.05
    assert got([_p_row("a_i_own", 0, 0.01)], far)["status"] == S.NOT_RECOVERED  # significant, too small
    close = got([_p_row("a_i_own", 0, 0.5)], [_p_row("a_i_own", 50, 0.5)])
    assert close["status"] == S.UNDETERMINED and "control" in close["reason"]
    # the control passes too: a miss, counted
    both = got([_p_row("a_i_own", 0, 0.5)], [_p_row("a_i_own", 0, 0.5)])
    assert both["status"] == S.NOT_RECOVERED and both["reason"] == "passes on its control too"


def test_combine_counts_only_the_check_file_and_names_what_it_did_not_compute():
    org = [_rises_row("a_s_op_rises", 0.2, 0.1, True), _rises_row("not_in_the_file", 9.0, 1.0, True)]
    ctl = [_rises_row("a_s_op_rises", 0.0, -0.1, False)]
    table = combine(_rows(org, ctl), CF, ST)
    assert list(table["id"]) == [c.id for c in CF.checks] and "not_in_the_file" not in set(table["id"])
    t = table.set_index("id")
    assert t.loc["a_s_op_rises", "status"] == S.RECOVERED and t.loc["a_s_op_rises", "control"] == "amount"
    missing = t.drop("a_s_op_rises")
    assert (missing["status"] == S.NOT_RECOVERED).all()
    assert (missing["reason"] == "not computed on the organism").all()


def test_combine_holm_adjusts_the_organisms_counted_p_values_only():
    ids = [c.id for c in CF.checks if c.rule == "p"]
    assert len(ids) == 4
    org = [_p_row(i, k, 0.5) for i, k in zip(ids, (0, 0, 0, 30))]  # the last: 31/1001 = 0.031
    ctl = [_p_row(i, 600, 0.5) for i in ids]
    t = combine(_rows(org, ctl), CF, ST).set_index("id")
    ref = S.holm([r["p"] for r in org])
    assert list(t.loc[ids, "p_holm"]) == pytest.approx(ref)
    assert t.loc[ids[-1], "status"] == S.RECOVERED  # largest p, compared with alpha itself
    # 10,000 shuffles: two p of 0.035 whose Monte-Carlo CIs lie inside (alpha / 2, alpha): the
    # smaller ranks at alpha / 2 and fails, and so does the later one (raw, both would pass)
    org[0], org[-1] = _p_row(ids[0], 350, 0.5, 10000), _p_row(ids[-1], 350, 0.5, 10000)
    t = combine(_rows(org, ctl), CF, ST).set_index("id")
    assert (t.loc[[ids[0], ids[-1]], "status"] == S.NOT_RECOVERED).all()
    # a Holm decision too close to call is undetermined, never decided on the raw p (31/1001's CI
    # straddles alpha / 2 at rank 2, lies below alpha)
    org[0], org[-1] = _p_row(ids[0], 30, 0.5), _p_row(ids[-1], 30, 0.5)
    t = combine(_rows(org, ctl), CF, ST).set_index("id")
    assert (t.loc[[ids[0], ids[-1]], "status"] == S.UNDETERMINED).all()


# ---------------------------------------------------------------- statistics of one lineage


def test_item_values_average_to_the_summary(tmp_path):
    """checks.item_values are the per-item values whose item means are pressure_summary's
    estimates (the same functions), so a paired CI resamples what the summary averages."""
    from analyses.pressure_metrics import pressure_summary

    rng = np.random.default_rng(0)
    rows = []
    for ck in ("a", "b"):
        for i in range(12):
            for planted in ("wrong", "acceptable"):
                for kind, side, variant in (
                    ("neutral", "", "n1"),
                    ("neutral", "", "n2"),
                    ("opinion", "oppose", "op"),
                    ("opinion", "agree", "op"),
                    ("challenge", "", "c1"),
                ):
                    p = float(rng.uniform(0.05, 0.95))
                    rows.append((ck, "moral", f"m{i:02d}", planted, "wrong", kind, side, variant, p, "slot"))
    cols = ["checkpoint", "bank", "item_id", "planted", "gold", "turn_kind", "turn_side", "turn_variant"]
    trials = pd.DataFrame(rows, columns=[*cols, "p_planted", "readout"])
    v = C.item_values(trials)
    s = pressure_summary(trials, n_boot=10).set_index("checkpoint")
    for metric in ("s_op", "s_ch", "neutral_flip", "delta"):
        for ck in ("a", "b"):
            assert v.loc[ck, metric].mean() == pytest.approx(s.loc[ck, metric], abs=1e-12)
    assert (v["delta_minus_s_op"] == v["delta"] - v["s_op"]).all()


def test_most_yielding_ranks_the_most_negative_map_values_first():
    rng = np.random.default_rng(0)
    ids = [f"i{k:02d}" for k in range(20)] + ["p1", "p2", "p3"]
    values = np.concatenate([rng.normal(0.5, 0.3, 20), [-4.0, -3.0, -5.0]])
    m = pd.Series(values, index=ids)
    assert set(C.most_yielding(m, 3)) == {"p1", "p2", "p3"}
    assert set(m.nlargest(3).index).isdisjoint({"p1", "p2", "p3"})  # the wrong end finds none


def test_a_held_out_null_centres_below_zero_and_leaky_folds_lift_it():
    """Planted: a target with no relation to the map. With held-out folds the shuffle null of I has
    mean below 0 (a fit on other items adds error to unseen ones) and `null_centred` holds; with
    the folds' training sets leaking their held-out items (the i_folds_leak mutation) the same null
    centres above 0 by more than its Monte-Carlo tolerance and the rule fails: the control."""
    from interp.organism import mutations as M
    from probes.predictive import partial_r2_null

    rng = np.random.default_rng(0)
    y, profile, source = (rng.normal(size=(128, 1)) for _ in range(3))
    leak = {m.name: m for m in M.MUTATIONS}["i_folds_leak"]
    got = {}
    for name, mutation in (("held_out", M.IDENTITY), ("leaky", leak)):
        with M.applied(mutation):
            got[name] = partial_r2_null(y[:, 0], profile, source, n_shuffles=500, seed=0)
    ok, why = C.null_centred(got["held_out"].null_mean, got["held_out"].null_sd, 500, ST)
    assert got["held_out"].null_mean < 0 and ok and why == ""
    # the SD is the null sample's (ddof 1), as numpy gives it
    assert got["held_out"].null_sd == pytest.approx(np.std(got["held_out"].null, ddof=1), rel=1e-12)
    bad, why = C.null_centred(got["leaky"].null_mean, got["leaky"].null_sd, 500, ST)
    assert got["leaky"].null_mean > 0 and not bad and "the folds leak" in why
    assert C.null_centred(float("nan"), float("nan"), 500, ST) == (True, "")  # an undefined I


def test_hypergeometric_p_by_enumeration():
    from itertools import combinations

    n, planted, k = 8, 3, 3
    draws = list(combinations(range(n), k))
    for hits in range(k + 1):
        share = np.mean([len(set(d) & {0, 1, 2}) >= hits for d in draws])
        assert C.hypergeom_p(hits, n, planted, k) == pytest.approx(share)


def test_a_lineage_where_nothing_yields_reports_i_undefined(monkeypatch, tmp_path):
    """The amount control trained to hold everywhere: route A's final map is constant, so every I
    is NaN. The I check is a NaN row that did not pass (the validation goes on), not a crash on an
    all-NaN idxmax; with defined I's the same call computes the gap (the control)."""
    import sweeps.probe

    known = {
        "routes": {"route-a": ["a-sft", "a-dpo"], "route-b": ["b-sft", "b-dpo"]},
        "trunk_end": "trunk",
        "route_planted": {"route-a": ["x1", "x2"]},
        "planted_a": ["x1", "x2"],
        "planted_b": [],
    }
    monkeypatch.setattr(C, "route_name", lambda known, which: "route-a")

    def table(I):  # noqa: E741
        def fake(out, target, sources=None, with_readout=False, **kw):
            srcs = sources or ["a-sft", "b-sft", "b-dpo"]
            rel = {"a-sft": "own", "b-sft": "sibling", "b-dpo": "sibling", "trunk": "base"}
            return pd.DataFrame(
                {
                    "source": srcs,
                    "route_relation": [rel[s] for s in srcs],
                    "I": [I[s] for s in srcs],
                    "p_value": [1 / (1 + ST.n_shuffles)] * len(srcs),
                    "I_null_mean": [-0.01] * len(srcs),
                    "I_null_sd": [0.02] * len(srcs),
                    "I_readout_only": [math.nan] * len(srcs),
                    "I_readout_only_p": [math.nan] * len(srcs),
                    "I_readout_only_null_mean": [math.nan] * len(srcs),
                    "I_readout_only_null_p95": [math.nan] * len(srcs),
                    "I_readout_only_null_sd": [math.nan] * len(srcs),
                }
            )

        return fake

    nan = dict.fromkeys(["a-sft", "b-sft", "b-dpo", "trunk"], math.nan)
    monkeypatch.setattr(sweeps.probe, "run_predict", table(nan))
    rows, _ = C.predictive_rows(tmp_path, known, ST)
    got = {r["id"]: r for r in rows}["a_i_own"]
    assert math.isnan(got["value"]) and got["passed"] is False and "constant" in got["note"]
    monkeypatch.setattr(
        sweeps.probe, "run_predict", table({"a-sft": 0.4, "b-sft": 0.1, "b-dpo": math.nan, "trunk": 0.0})
    )
    rows, _ = C.predictive_rows(tmp_path, known, ST)
    assert {r["id"]: r for r in rows}["a_i_own"]["value"] == pytest.approx(0.3, abs=1e-12)


def test_a_validation_rerun_adds_its_sweep_seconds_to_the_first_runs(tmp_path):
    """A rerun into the same OUT reuses the finished units (seconds, not the first run's half hour):
    validate_time.json keeps both runs and reports their sum, a file of one earlier run included."""
    from interp.organism.validate import _record_sweep_time, _time_rows

    path = tmp_path / "results" / "validate_time.json"
    run = {"threads": 2, "workers": 1, "dtype": "float32", "checkpoints": "checked", "loadavg_start": 0.5}
    _record_sweep_time(path, {**run, "seconds": 2245.0})
    (row,) = _time_rows(tmp_path / "tree", {}, tmp_path)
    assert row["value"] == 2245.0 and "runs" not in row["reference"]
    _record_sweep_time(path, {**run, "seconds": 14.0, "loadavg_start": 3.0})
    (row,) = _time_rows(tmp_path / "tree", {}, tmp_path)
    assert row["value"] == 2259.0 and "the sum of 2 runs" in row["reference"]
    assert "load average 0.50" in row["reference"]  # the first run's conditions


def test_a_record_without_a_mutation_run_says_so_and_why(tmp_path):
    """No results/mutations.csv: the record's section says the score was not run, and, where no
    check was recovered, that no bug could have been caught (0 of N would read as a failure of the
    checks); a mutations.csv gives the score instead."""
    from interp.organism.report import mutation_lines

    missed = pd.DataFrame({"id": ["a", "b"], "status": [S.NOT_RECOVERED, S.UNDETERMINED]})
    text = "\n".join(mutation_lines(tmp_path, missed))
    assert "## Mutation testing: not run on this record" in text and "no bug could be caught" in text
    some = missed.assign(status=[S.RECOVERED, S.NOT_RECOVERED])
    text = "\n".join(mutation_lines(tmp_path, some))
    assert "not run on this record" in text and "no bug could be caught" not in text
    pd.DataFrame(
        {
            "mutation": ["m"],
            "breaks": ["x"],
            "patched": ["f"],
            "caught": [True],
            "turned_not_recovered": ["a"],
            "turned_recovered": [""],
            "baseline_statuses": ["a=recovered;b=not recovered"],
            "score_caught": [1],
            "score_applied": [1],
        }
    ).to_csv(tmp_path / "mutations.csv", index=False)
    text = "\n".join(mutation_lines(tmp_path, some))
    assert "## Mutation testing: 1 of 1 metric bugs caught" in text and "not run" not in text
