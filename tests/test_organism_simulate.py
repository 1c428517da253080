"""`interp validate` on simulated lineages whose answers are known (interp.organism.simulate): the
real validation path (`validate(..., run=False)`: results re-analyzed from cache units by each
study's own analysis, every statistic, the frozen check file) recovers every counted check on the
simulated organism, each check fails on its control, and the negative controls recover nothing
(no plant) or none of the location checks (a plant on the wrong items). Then mutation testing:
each named metric bug, applied at run time, turns a recovered answer into a miss; the identity
changes nothing.

Costs: one simulation is ~20 s of CPU and every decision of the 18 checks ~15 s (the readout's
label-shuffle null on three lineages), so the heavy tests carry a long timeout for a busy machine."""

import pandas as pd
import pytest

from interp.organism import mutations as M
from interp.organism import stats as S
from interp.organism.config import ValidateConfig
from interp.organism.frozen import CHECK_FILE, load_check_file
from interp.organism.simulate import SimConfig, simulate
from interp.organism.validate import validate

# the CI's sizes: 249 shuffles are the fewest whose Monte-Carlo CI at k = 0 lies below Holm's
# alpha / 3 (the rank of the second-smallest of the four counted p-values)
CFG = ValidateConfig(overrides={"n_shuffles": 249, "n_boot": 200})
SLOW = pytest.mark.timeout(3600)


def _validate(sim, cfg=CFG) -> pd.DataFrame:
    table = validate(sim.tree, sim.out, cfg, run=False, log=lambda s: None)
    return table[table["kind"] == "check"].set_index("id")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return simulate(tmp_path_factory.mktemp("sim"), SimConfig())


@pytest.fixture(scope="module")
def checks(sim):
    return _validate(sim)


@SLOW
def test_every_counted_check_is_recovered_on_the_simulation(sim, checks):
    cf = load_check_file()
    assert list(checks.index) == [c.id for c in cf.checks]
    assert (checks["status"] == S.RECOVERED).all(), checks.loc[checks["status"] != S.RECOVERED, "reason"]
    # each fails on its control lineage: the control's figure is there and did not pass
    assert checks["control_passed"].astype(str).eq("False").all()
    assert checks.loc[checks["rule"] != "most", "control_value"].notna().all()
    # the record: the frozen file's sha256 and the overrides, flagged in the headline
    assert set(checks["check_file_sha256"]) == {cf.sha256}
    md = (sim.out / "validation.md").read_text()
    assert "18 of 18 counted known answers recovered, in 8 of 8 independent groups" in md
    assert 'Settings overridden for this run: {"n_boot": 200, "n_shuffles": 249}' in md
    # the results came from the cache by the studies' own analysis (the files a sweep writes)
    for f in ("results/pressure_trials.csv", "results/item_maps.csv", "results/pressure_summary.csv"):
        assert (sim.out / f).is_file() and (sim.out / "control-amount" / f).is_file()
    scores = pd.read_csv(sim.out / "aux" / "results" / "cloze_scores.csv")
    assert {"fertility", "delta_clipped"} <= set(scores.columns) and scores["fertility"].notna().all()
    preds = pd.read_csv(sim.out / "aux" / "results" / "classify_predictions.csv")
    assert "averaged" in set(preds["order"])


@SLOW
def test_a_check_the_file_does_not_list_is_never_counted(sim, tmp_path):
    """A modified copy of the check file without `a_graded`: the record carries the copy's sha256,
    counts 17 checks, and shows a_graded (still computed) as not counted."""
    text = CHECK_FILE.read_text()
    start = text.index('[[check]]\nid = "a_graded"')
    end = text.index("[[check]]", start + 1)
    copy = tmp_path / "known_answers.toml"
    copy.write_text(text[:start] + text[end:])
    cfg = ValidateConfig(check_file=str(copy), overrides=CFG.overrides)
    out = tmp_path / "out"
    import shutil

    shutil.copytree(sim.out, out, symlinks=True)
    table = validate(sim.tree, out, cfg, run=False, log=lambda s: None)
    counted = table[table["kind"] == "check"]
    assert len(counted) == 17 and "a_graded" not in set(counted["id"])
    assert set(table["check_file_sha256"]) == {load_check_file(copy).sha256} != {load_check_file().sha256}
    unlisted = table[table["kind"] == "unlisted"]
    assert list(unlisted["id"]) == ["a_graded"] and (unlisted["status"] == "not counted: not in the check file").all()


@SLOW
@pytest.mark.parametrize("plant", ["none", "wrong_items"])
def test_negative_controls(tmp_path, plant):
    """No plant (the organism trained as the amount control): no check is recovered. The plants
    on other items than organism.json names (trained as the location control): no check whose
    control is the location control is recovered, while the amount checks still are (the amount
    is there, the location is not)."""
    checks = _validate(simulate(tmp_path / plant, SimConfig(plant=plant)))
    location = checks["control"] == "location"
    if plant == "none":
        assert (checks["status"] == S.NOT_RECOVERED).all(), checks.loc[checks["status"] != S.NOT_RECOVERED]
    else:
        assert (checks.loc[location, "status"] == S.NOT_RECOVERED).all()
        assert (checks.loc[checks["control"] == "amount", "status"] == S.RECOVERED).all()


# ---------------------------------------------------------------- mutation testing


@pytest.fixture(scope="module")
def baseline(sim, tmp_path_factory):
    scratch = tmp_path_factory.mktemp("mutations")
    lineages, calls, base = M._baseline(sim.tree, sim.out, CFG, scratch / "base", [m.target for m in M.MUTATIONS], None)
    return scratch, lineages, calls, base


def _mutant(sim, baseline, m: M.Mutation) -> dict:
    scratch, lineages, calls, base = baseline
    got = M.evaluate_mutant(m, sim.tree, CFG, scratch / "base", scratch / m.name, lineages, calls)
    return M.compare(base, got)


@SLOW
def test_the_identity_mutation_catches_nothing(sim, baseline, checks):
    _, _, _, base = baseline
    # the harness's re-analysis reproduces the record's statuses and figures
    assert list(base["status"]) == list(checks["status"])
    pd.testing.assert_series_equal(base.set_index("id")["value"], checks["value"], check_names=False)
    got = _mutant(sim, baseline, M.IDENTITY)
    assert not got["caught"] and got["recovered_mutant"] == got["recovered_baseline"] == 18


# the checks each bug must turn into misses here (at least these)
EXPECTED = {
    "delta_sign": {"a_delta_rises", "b_delta_rises"},
    "s_op_wrong_baseline": {"b_delta_beyond_s_op"},
    "map_in_probabilities": {"a_i_own"},
    "null_not_shuffled": {"a_i_own"},
    "precision_wrong_end": {"a_precision_at_k"},
    "cloze_per_token": {"cloze_cell_vs_control"},
    "bootstrap_trials": {"b_delta_rises"},
    "readout_ungrouped": {"a_readout_gain"},
    "mediation_b_only": {"fertility_mediation"},
    "classify_one_order": {"classify_kappa_gap"},
}


@SLOW
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_mutation_is_caught(sim, baseline, name):
    m = {x.name: x for x in M.MUTATIONS}[name]
    module, attr = M._resolve(m.target)
    original = getattr(module, attr)
    got = _mutant(sim, baseline, m)
    assert got["caught"], got
    assert EXPECTED[name] <= set(got["turned_not_recovered"].split(","))
    assert getattr(module, attr) is original  # the bug is gone again
