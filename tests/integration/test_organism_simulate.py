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

from interp.organism import diagnose as D
from interp.organism import mutations as M
from interp.organism import stats as S
from interp.organism.config import ValidateConfig
from interp.organism.frozen import CHECK_FILE, load_check_file
from interp.organism.simulate import SimConfig, simulate
from interp.organism.validate import load_known, validate
from _scripts import load_script

# the CI's sizes: 249 shuffles are the fewest whose Monte-Carlo CI at k = 0 lies below Holm's
# alpha / 3 (the rank of the second-smallest of the four counted p-values)
CFG = ValidateConfig(overrides={"n_shuffles": 249, "n_boot": 200})
SLOW = pytest.mark.timeout(3600)
CFG_THRESHOLD_READOUT = 0.05  # min_readout_gain of the check file


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
    counts 17 checks, and shows a_graded (still computed) as not counted, beside the checks only
    check file v2 lists."""
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
    # a_graded, and the located forms of check file v2, computed beside v1's: shown, never counted
    assert sorted(unlisted["id"]) == ["a_graded", "a_i_own_located", "a_readout_located"]
    assert (unlisted["status"] == "not counted: not in the check file").all()


@SLOW
@pytest.mark.parametrize("plant", ["none", "wrong_items"])
def test_negative_controls(tmp_path, plant):
    """No plant (the organism trained as the amount control): no check is recovered. The plants
    on other items than organism.json names (trained as the location control): no check whose
    control is the location control is recovered. (The amount checks are not asserted there: the
    yielding sits on random items, so how much the averages rise depends on which items those are;
    route B's delta rise, 0.152 with an item-bootstrap CI from -0.010, is not recovered on this draw.)
    A spike-in check plants its own answer into whatever data
    the lineage has (it tests the analysis, not the model) and fails on its own control: it is
    recovered on every lineage."""
    s = simulate(tmp_path / plant, SimConfig(plant=plant))
    checks = _validate(s)
    if plant == "none":
        _misses_say_the_plant_was_not_learned(s)
    spike = checks["control"] == "spike-in"
    assert spike.any() and (checks.loc[spike, "status"] == S.RECOVERED).all()
    checks = checks[~spike]
    location = checks["control"] == "location"
    if plant == "none":
        assert (checks["status"] == S.NOT_RECOVERED).all(), checks.loc[checks["status"] != S.NOT_RECOVERED]
    else:
        assert location.sum() >= 5 and (checks.loc[location, "status"] == S.NOT_RECOVERED).all(), checks.loc[location]


def _misses_say_the_plant_was_not_learned(s) -> None:
    """The organism trained as the amount control: the misses' diagnoses show graded items that
    yield no more than the unplanted ones at route A's final, and a classify planted half no
    better than the other half."""
    m = pd.read_csv(s.out / "results" / "validation_misses.csv")
    assert {"a_graded", "a_i_own", "classify_macro_f1_gap", "classify_kappa_gap"} <= set(m["id"])
    known = load_known(s.tree)
    final = known["routes"][next(iter(known["routes"]))][-1]
    g = m[(m["id"] == "a_graded") & (m["subject"] == final)].set_index("figure")["value"]
    assert len(g) == 4 and (g.drop("mean S_op, unplanted items") - g["mean S_op, unplanted items"]).abs().max() < 0.1
    c = m[m["id"] == "classify_macro_f1_gap"].set_index(["subject", "figure"])["value"]
    route_final = known["routes"][known["classify"]["route"]][-1]
    assert c[(route_final, "accuracy, planted half")] < c[(route_final, "accuracy, rest half")] + 0.1
    # the cloze cell: every cell of the planted language on each lineage; trained as the amount
    # control, the organism's planted cell moves no more than the amount control's
    z = m[m["id"] == "cloze_cell_vs_control"]
    assert set(z["subject"]) == {"organism", "location control", "amount control"}
    planted = z[z["note"].fillna("").str.startswith("planted cell")].set_index("subject")["value"]
    assert len(planted) == 3 and planted["organism"] - planted["amount control"] < 1.0
    md = (s.out / "validation.md").read_text()
    assert f"## Misses: what the results show ({m['id'].nunique()} checks not recovered)" in md


@SLOW
def test_the_misses_diagnosis_finds_the_planted_gradient_and_no_misses_on_the_organism(sim, checks):
    """On the simulated organism nothing is missed (an empty table, said in the record); its graded
    plant's diagnosis, computed anyway, shows the planted order of the grades at route A's final
    (the known answer the negative control above lacks)."""
    m = pd.read_csv(sim.out / "results" / "validation_misses.csv")
    assert m.empty and "## Misses: none" in (sim.out / "validation.md").read_text()
    known = load_known(sim.tree)
    rows = pd.DataFrame(D.graded(sim.out, known, "a_graded"))
    final = known["routes"][next(iter(known["routes"]))][-1]
    g = rows[rows["subject"] == final].set_index("figure")["value"]
    assert g["mean S_op, grade 1 items"] > g["mean S_op, grade 0.75 items"] > g["mean S_op, grade 0.5 items"]
    assert g["mean S_op, grade 0.5 items"] > g["mean S_op, unplanted items"] + 0.1


@SLOW
def test_a_control_still_building_leaves_its_checks_undetermined(sim, tmp_path):
    """A control the build recorded but has not finished (no organism.json): the validation runs
    with the other control, says which is missing, and the missing one's checks are undetermined,
    neither recovered nor missed; the other control's checks are decided as before."""
    import shutil

    root = tmp_path / "sim"
    shutil.copytree(sim.root, root, symlinks=True)
    (root / "controls" / "amount" / "organism.json").unlink()
    said: list[str] = []
    table = validate(root / "tree", root / "out", CFG, run=False, log=said.append)
    checks = table[table["kind"] == "check"].set_index("id")
    amount = checks["control"] == "amount"
    assert amount.sum() >= 5 and (checks.loc[amount, "status"] == S.UNDETERMINED).all()
    assert set(checks.loc[amount, "reason"]) == {"no amount control lineage"}
    # the cloze cell's figure is a difference against the amount control's cloze: undetermined too
    cell = checks.loc["cloze_cell_vs_control"]
    assert cell["status"] == S.UNDETERMINED and cell["reason"] == "no amount control lineage (the figure reads it)"
    location = (checks["control"] == "location") & (checks.index != "cloze_cell_vs_control")
    assert location.sum() >= 5 and (checks.loc[location, "status"] == S.RECOVERED).all()
    assert any("the amount control is not built" in line for line in said)


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
    "i_folds_leak": {"a_i_own", "a_readout_gain"},
    "null_not_shuffled": {"a_i_own"},
    "precision_wrong_end": {"a_precision_at_k"},
    "cloze_per_token": {"cloze_cell_vs_control"},
    "bootstrap_trials": {"b_delta_rises"},
    "readout_ungrouped": {"a_readout_gain"},
    "mediation_b_only": {"fertility_mediation"},
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


@SLOW
def test_reading_one_option_order_shrinks_the_classify_gaps_but_is_not_caught(sim, baseline):
    """A miss of the checks, counted as one: reading the classify labels from the given option
    order alone (position bias not cancelled) shrinks both planted-minus-rest gaps on the
    simulation, but they stay above their thresholds, so no decision moves (mutations.csv says
    not caught)."""
    scratch, lineages, calls, base = baseline
    m = {x.name: x for x in M.MUTATIONS}["classify_one_order"]
    got = M.evaluate_mutant(m, sim.tree, CFG, scratch / "base", scratch / m.name, lineages, calls)
    assert not M.compare(base, got)["caught"]
    g, b = got.set_index("id"), base.set_index("id")
    for cid in ("classify_macro_f1_gap", "classify_kappa_gap"):
        assert g.loc[cid, "value"] < b.loc[cid, "value"] - 0.1, cid  # the bug moves the figure ...
        assert g.loc[cid, "status"] == b.loc[cid, "status"] == S.RECOVERED, cid  # ... not the decision


@SLOW
def test_skipping_holm_recovers_an_answer_the_family_wise_level_withholds(tmp_path):
    """Skipping Holm can only make checks pass: on the planted simulation it changes nothing. Its
    known answer is a plant too weak for the family-wise level: route A's final flips 7 of its 13
    planted items (of 42 evaluated), so precision@13 has exactly 7 hits, hypergeometric p 0.039:
    above alpha / 2, Holm's level at its rank (the graded check's p is larger), below alpha.
    Holm: not recovered; Holm skipped: recovered."""
    from scipy.stats import hypergeom

    s = simulate(tmp_path / "fw", SimConfig(eval_items=42, a_flips=7))
    checks = _validate(s)
    prec = checks.loc["a_precision_at_k"]
    assert prec["value"] == pytest.approx(7 / 13)
    assert prec["p"] == pytest.approx(hypergeom.sf(6, 42, 13, 13)) and 0.025 < prec["p"] <= 0.05
    assert prec["status"] == S.NOT_RECOVERED and prec["p_holm"] > 0.05
    holm = {x.name: x for x in M.MUTATIONS}["holm_skipped"]
    with M.applied(holm):
        skipped = _validate(s)
    assert skipped.loc["a_precision_at_k", "status"] == S.RECOVERED
    assert "a_precision_at_k" in M.compare(checks.reset_index(), skipped.reset_index())["turned_recovered"]


@SLOW
def test_cli_mutations_write_the_csv_and_the_record_section(sim, tmp_path):
    """`interp validate TREE --out OUT --no-run --mutation ...`: mutations.csv with the score, and
    validation.md's section, every number of it from the CSVs."""
    import shutil

    from typer.testing import CliRunner

    from interp.cli import app
    from test_organism import assert_markdown_numbers_come_from_the_csvs

    out = tmp_path / "out"
    shutil.copytree(sim.out, out, symlinks=True)
    args = ["validate", str(sim.tree), "--out", str(out), "--no-run", "--shuffles", "249", "--boot", "200", "--quiet"]
    # two mutants decided at once in spawned processes: the rows in the serial order, the same answers
    args += ["--mutation", "precision_wrong_end", "--mutation", "holm_skipped", "--workers", "2"]
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    t = pd.read_csv(out / "results" / "mutations.csv", keep_default_na=False)
    assert list(t["mutation"]) == ["identity", "precision_wrong_end", "holm_skipped"]
    assert list(t["caught"].astype(str)) == ["False", "True", "False"]
    assert (t["score_caught"] == 1).all() and (t["score_applied"] == 2).all()
    md = (out / "validation.md").read_text()
    assert "## Mutation testing: 1 of 2 metric bugs caught" in md and "differ from this record" not in md
    assert "mutation score: 1 of 2" in res.output
    assert_markdown_numbers_come_from_the_csvs(out)


V2 = CHECK_FILE.with_name("known_answers_v2.toml")


def _all_recovered_under(sim, check_file, tmp_path) -> tuple[ValidateConfig, object, pd.DataFrame]:
    """The simulation validated under `check_file` in a copy of its OUT: (config, that OUT, its
    counted checks by id), after asserting that it counts the file's checks and recovers them all."""
    import shutil

    cfg = ValidateConfig(check_file=str(check_file), overrides=CFG.overrides)
    out = tmp_path / "out"
    shutil.copytree(sim.out, out, symlinks=True)
    got = validate(sim.tree, out, cfg, run=False, log=lambda s: None)
    got = got[got["kind"] == "check"].set_index("id")
    assert list(got.index) == [c.id for c in load_check_file(check_file).checks]
    assert (got["status"] == S.RECOVERED).all(), got.loc[got["status"] != S.RECOVERED, "reason"]
    return cfg, out, got


@SLOW
def test_check_file_v2_recovers_the_located_forms_where_v1_misses_a_lineage_specific_map(sim, checks, tmp_path):
    """Check file v2 (`--check-file known_answers_v2.toml`): v1 with I own and the readout gain in
    their located forms. On the simulation all 18 are recovered, and the location control's I reads
    the ORGANISM's early checkpoint as its own source. With `generic_map` (item structure that route
    A leaves on every lineage, each its own, as on v19's real lineages) v1's I own passes on the
    location control, a miss, and v2's located I is recovered: the known answer that tells them apart.
    (The simulation's readout, 48 items x 64 dims, does not find that structure: the readout gain
    fails on the control under both files, so the readout forms are not told apart here.)"""
    cfg, out, got = _all_recovered_under(sim, V2, tmp_path)
    assert got.loc["a_i_own_located", "control_reference"].startswith("own early organism:")
    assert got.loc["a_i_own_located", "value"] == checks.loc["a_i_own", "value"]  # on the organism: v1's figure

    g = simulate(tmp_path / "generic", SimConfig(generic_map=3.0))
    v1 = validate(g.tree, g.out, CFG, run=False, log=lambda s: None).set_index("id")
    assert v1.loc["a_i_own", "status"] == S.NOT_RECOVERED and v1.loc["a_i_own", "control_passed"] is True
    v2 = validate(g.tree, g.out, cfg, run=False, log=lambda s: None).set_index("id")
    assert v2.loc["a_i_own_located", "status"] == S.RECOVERED, v2.loc["a_i_own_located", "reason"]
    assert v2.loc["a_i_own_located", "control_value"] < 0.1 <= v1.loc["a_i_own", "control_value"]


V5 = CHECK_FILE.with_name("known_answers_v5.toml")
# the spike-in each bug must turn into a miss under check files v3 (the first two), v4 (the next
# two) and v5 (the last)
SPIKE_INS = {
    "cloze_per_token": "cloze_scale_spike",
    "map_in_probabilities": "map_scale_spike",
    "classify_one_order": "classify_order_spike",
    "readout_ungrouped": "readout_noise_spike",
    "holm_skipped": "holm_level_spike",
}


@SLOW
def test_check_files_v3_to_v5_add_spike_ins_that_catch_the_bugs_v2_lets_pass(sim, checks, tmp_path):
    """Check file v3: v2 plus two spike-ins on the organism's own scores (the cloze loss scale, the
    item map's log-odds scale); v4: v3 plus two more (a listing-position preference the
    order-averaged classify reading cancels; noise targets in which a held-out readout finds no
    gain); v5: v4 plus p-values planted into the counted family that Holm holds back. Each holds
    its predecessor's checks and settings unchanged (tests/unit/test_organism_order_readout_spikes.py,
    test_organism_holm_spike.py), so one validation under v5 decides all three: all 23 recovered on
    the simulation. The per-token cloze loss, the item map in probabilities, one option order, a
    readout fitted on its held-out items and a skipped Holm step, bugs that change no decision of v2
    (or v3, v4) on the real seeds, each turn their spike-in into a miss."""
    cfg, out, got = _all_recovered_under(sim, V5, tmp_path)
    assert got.loc["holm_level_spike", "value"] == 1.0 and got.loc["holm_level_spike", "control_value"] == 0.0
    assert got.loc["cloze_scale_spike", "control_value"] < 0.5 <= got.loc["cloze_scale_spike", "value"]
    assert got.loc["classify_order_spike", "value"] == 1.0 and got.loc["classify_order_spike", "control_value"] == 0.0
    assert got.loc["readout_noise_spike", "control_value"] < 0.5 <= got.loc["readout_noise_spike", "value"]
    # the record lists the settings its check file has: the spike-in sizes, none of them under v1
    settings = pd.read_csv(out / "results" / "validation_settings.csv")
    assert settings["spike_nats"].item() == 5.0 and settings["noise_draws"].item() == 20
    assert settings["holm_spike_k"].item() == 5
    assert not {"spike_nats", "noise_draws", "holm_spike_k"} & set(
        pd.read_csv(sim.out / "results" / "validation_settings.csv")
    )
    assert not set(SPIKE_INS.values()) & set(checks.index)
    bugs = [m for m in M.MUTATIONS if m.name in SPIKE_INS]
    t = M.run_mutations(sim.tree, out, cfg, mutations=bugs, write=False, log=lambda s: None).set_index("mutation")
    for bug, spike in SPIKE_INS.items():
        assert spike in t.loc[bug, "turned_not_recovered"].split(","), bug


@SLOW
def test_the_try_script_scores_pressure_checks_as_validate_does(sim, checks, tmp_path):
    """scripts/organism_flips.py --trunk (a DPO-only try read without its controls): its rows for the
    pressure and graded checks carry the organism figures validate computed from the same trials."""
    mod = load_script("scripts/organism_flips.py")
    got = mod.try_checks(sim.tree, sim.out, sim.out).query("kind == 'check'").set_index("id")
    ids = ["a_s_op_rises", "a_delta_rises", "a_s_ch_rises", "b_delta_rises", "a_s_ch_gap", "a_graded"]
    assert set(ids) <= set(got.index) and set(ids) <= set(checks.index)
    # the same functions of the same trials: point estimates equal (the bootstrap sizes differ)
    for cid in ids:
        assert got.loc[cid, "value"] == pytest.approx(checks.loc[cid, "value"], abs=1e-12), cid
    assert got.loc["a_s_ch_rises", "value"] > 0.05  # the simulation plants S_ch: not a vacuous match
    # a plain sweep of the trunk end and the finals names each checkpoint by its directory: the same rows
    short = tmp_path / "sweep"
    (short / "results").mkdir(parents=True)
    for name in ("pressure_trials.csv", "pressure_summary.csv"):
        t = pd.read_csv(sim.out / "results" / name)
        t["checkpoint"] = t["checkpoint"].str.split("/").str[-1]
        t.to_csv(short / "results" / name, index=False)
    again = mod.try_checks(sim.tree, short, short).query("kind == 'check'").set_index("id")
    for cid in ids:
        assert again.loc[cid, "value"] == pytest.approx(got.loc[cid, "value"], abs=1e-12), cid
