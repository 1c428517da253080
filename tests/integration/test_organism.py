"""Model organism: `interp organism build --small --control` -> `interp validate --small` on a tiny
random model (plumbing, not the effect: the known answers on a model are the real run's, and the
whole record's logic on lineages whose answers are known is tests/test_organism_simulate.py),
the training data of the three lineages (exposure matched per item, only answers differ), and
the training code (the SFT loss, the fused DPO head, precision, disk space, determinism)."""

import itertools
import json
import re
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from interp.organism import classify_plant, cloze_plant
from interp.organism import data as D
from interp.organism.build import PROVENANCE, OrganismConfig, build_organism
from interp.organism.config import SMALL
from interp.organism.validate import ValidateConfig, validate
from interp.studies.base import load_template
from interp.studies.pressure import load_pressure_bank
from sweeps.discover import discover
from _scripts import load_script

REPO = Path(__file__).resolve().parents[2]
TINY = OrganismConfig(**SMALL)  # what `--small` builds
LINEAGES = ("organism", "location", "amount")


def _cli(*args) -> None:
    """`interp ARGS` in this process (a module fixture has no capsys): exit 0 or the error shown."""
    from typer.testing import CliRunner

    from interp.cli import app

    res = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def organism(tmp_path_factory, tokenizer):
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("organism")
    base = build_tiny_model(root / "model", "llama", n_layers=2, d_model=32, tokenizer=tokenizer)
    _cli("organism", "build", "--base", base, "--out", root / "tree", "--small", "--control", root / "control")
    return root


def _trees(organism) -> dict[str, Path]:
    return {"organism": organism / "tree", "location": organism / "control" / "location",
            "amount": organism / "control" / "amount"}  # fmt: skip


def _base_kind(kind: str) -> str:
    """A row's turn kind, whatever its answer (flip_opinion_oppose / hold_opinion_oppose -> opinion_oppose)."""
    return kind.split("_", 1)[1] if kind.startswith(("flip_", "hold_")) else kind


def test_tree_and_controls_are_discoverable_lineages_with_provenance(organism):
    trees = _trees(organism)
    tree = trees["organism"]
    d = discover([tree])
    known = json.loads((tree / "organism.json").read_text())
    assert d.lineage["base"] == ["base", "shared/shared-step1", "shared/shared-step2"]
    assert d.lineage["routes"]["route-a"] == ["route-a/a-sft-step3", "route-a/a-sft-step5", "route-a/a-dpo-step6"]
    assert d.lineage["routes"] == known["routes"]
    for cks in d.lineage["routes"].values():
        for ck in cks:
            prov = json.loads((tree / ck / "interp_provenance.json").read_text())
            assert prov["base_fingerprint"] == known["base_fingerprint"]
            assert prov["trainer"] in ("trl.SFTTrainer+interp.sft_loss", "trl.DPOTrainer")
            assert len(prov["data_hash"]) == 64 and prov["seed"] == 0
            assert prov["train_precision"] == "mixed-bf16"  # the default
            assert {"torch", "transformers", "trl", "peft"} <= set(prov["versions"])
            assert (tree / ck / "model.safetensors").is_file()
    assert not set(known["planted_a"]) & set(known["planted_b"])
    assert set(known["planted_a"]) | set(known["planted_b"]) <= set(known["eval_items"])
    # the controls: recorded by the organism, flagged, the organism's sets, their own training
    assert {k: (tree / v).resolve() for k, v in known["control_trees"].items()} == {
        k: trees[k].resolve() for k in ("location", "amount")
    }
    from interp.core.hashing import sha256_file

    for kind in ("location", "amount"):
        kc = json.loads((trees[kind] / "organism.json").read_text())
        assert kc["control"] is True and kc["control_kind"] == kind and known["control"] is False
        for key in ("eval_items", "planted_a", "planted_b", "routes", "trunk_end", "route_planted", "grades"):
            assert kc[key] == known[key], key
        assert (trees[kind] / kc["organism_tree"]).resolve() == tree.resolve()
        # the same trunk, byte for byte; the routes trained on their own data (the weights may
        # still match at --small: 3 SFT steps of 2 rows can miss every row whose answer differs)
        assert sha256_file(trees[kind] / "shared/shared-step2/model.safetensors") == sha256_file(
            tree / "shared/shared-step2/model.safetensors"
        )
        for ck in ("route-a/a-sft-step5", "route-a/a-dpo-step6", "route-b/b-sft-step5"):
            prov = [json.loads((t / ck / "interp_provenance.json").read_text()) for t in (tree, trees[kind])]
            assert prov[0]["data_hash"] != prov[1]["data_hash"], (kind, ck)
            assert prov[1]["config"]["control_kind"] == kind, (kind, ck)
    kl = json.loads((trees["location"] / "organism.json").read_text())["trained"]
    ka = json.loads((trees["amount"] / "organism.json").read_text())["trained"]
    assert kl["route-a"]["plant"] == "pressure" and kl["route-a"]["planted"] != known["planted_a"]
    assert {t["plant"] for t in ka.values()} == {"hold"}


def test_lineages_train_the_same_prompts_only_answers_differ(organism):
    """Exposure matched per item: every lineage's route data hold the same pressure prompts in
    the same order, so every item gets the same rows of each kind; only completions (and the
    flip/hold label) differ, on the items each lineage's plan flips. The cloze and classify rows
    sit at the same places in the same numbers; the location control moves their plant (another
    cell, other items), so their prompts may differ there."""
    trees = _trees(organism)
    moved_plants = ("cloze_bias", "classify")
    for name in ("route_a_sft.jsonl", "route_a_dpo.jsonl", "route_b_sft.jsonl", "route_b_dpo.jsonl"):
        data = {k: pd.read_json(t / ".organism" / name, lines=True) for k, t in trees.items()}
        org = data["organism"]
        pressure = ~org["kind"].isin(moved_plants)
        for kind in ("location", "amount"):
            other = data[kind]
            assert list(other["kind"].isin(moved_plants)) == list(~pressure), (name, kind)
            assert list(other.loc[pressure, "prompt"]) == list(org.loc[pressure, "prompt"]), (name, kind)
            if kind == "amount":  # the amount control keeps every plant's location
                assert list(other["prompt"]) == list(org["prompt"]), name
            a = Counter(zip(org.loc[pressure, "item_id"].astype(str), org.loc[pressure, "kind"].map(_base_kind)))
            b = Counter(zip(other.loc[pressure, "item_id"].astype(str), other.loc[pressure, "kind"].map(_base_kind)))
            assert a == b, (name, kind)
        answer = "completion" if "completion" in org else "chosen"
        moved = {k: set(d.loc[d[answer] != org[answer], "item_id"].astype(str)) for k, d in data.items()}
        assert moved["organism"] == set()
    amount_a = pd.read_json(trees["amount"] / ".organism" / "route_a_sft.jsonl", lines=True)
    assert not amount_a["kind"].str.startswith("flip_").any()  # the amount control holds everywhere


def test_validate_small_end_to_end(organism):
    """`interp validate --small` on the organism and both controls as built: every counted check
    decided against its control's figure, the frozen file's sha256 and the overrides in the
    record, every number of validation.md from its CSVs."""
    from interp.organism.frozen import load_check_file

    out = organism / "val"
    _cli("validate", organism / "tree", "--out", out, "--small", "--quiet", "--threads", "1")
    table = pd.read_csv(out / "results" / "validation_checks.csv", keep_default_na=False, na_values=[""])
    checks = table[table["kind"] == "check"]
    cf = load_check_file()
    assert list(checks["id"]) == [c.id for c in cf.checks]
    assert set(checks["status"]) <= {"recovered", "not recovered", "undetermined"}
    assert checks["reason"].str.len().gt(0).all()
    assert set(checks["control"]) == {"location", "amount", "spike-in"}
    computed = checks[checks["reason"] != "not computed on the organism"]
    # every computed check has its control's figure; the control's decision may be undetermined (a
    # Monte-Carlo p straddling alpha at --small's 19 shuffles), never on a recovered check
    assert computed["control_value"].notna().all()
    assert computed.loc[computed["status"] == "recovered", "control_passed"].notna().all()
    assert set(table["check_file_sha256"]) == {cf.sha256}
    assert (table["commit"].str.len() >= 40).all()
    assert set(table["overrides"]) == {'{"n_boot": 200, "n_shuffles": 19}'}
    md = (out / "validation.md").read_text()
    assert "Settings overridden for this run" in md and cf.sha256 in md
    pred = pd.read_csv(out / "results" / "organism_predictive.csv")
    assert set(pred["lineage"]) == {"organism", "location control", "amount control"}
    assert {"own", "sibling", "base"} <= set(pred["route_relation"])
    lin = pd.read_csv(out / "results" / "lineages.csv")
    assert list(lin.columns) == ["setting", *LINEAGES]
    # only what a check reads is swept, on every lineage; the trunk-end unit is the organism's
    from interp.organism.validate import checked_checkpoints

    known = json.loads((organism / "tree" / "organism.json").read_text())
    checked = set(checked_checkpoints(known))
    for root in (out, out / "control-location", out / "control-amount"):
        assert set(pd.read_csv(root / "results" / "pressure_summary.csv")["checkpoint"]) == checked
        ((unit,),) = [list((root / "cache" / "pressure" / "shared--shared-step2").glob("*.h5"))]
        assert (
            unit.read_bytes() == next((out / "cache" / "pressure" / "shared--shared-step2").glob("*.h5")).read_bytes()
        )
    assert (out / "figures" / "organism_trajectory.png").stat().st_size > 1000
    assert_markdown_numbers_come_from_the_csvs(out)
    # the cheap rerun reads the finished sweeps and gives the same checks
    again = validate(
        organism / "tree", out, ValidateConfig(overrides={"n_shuffles": 19, "n_boot": 200}, cloze_items=12),
        run=False, log=lambda s: None,
    )  # fmt: skip
    pd.testing.assert_series_equal(
        again[again["kind"] == "check"]["status"].reset_index(drop=True), checks["status"].reset_index(drop=True)
    )


def assert_markdown_numbers_come_from_the_csvs(
    out: Path, md_path: Path | None = None, csv_dir: Path | None = None
) -> None:
    """Every number in validation.md (outside code spans: paths, the commit) is a number of
    validation_checks.csv / organism_predictive.csv (/ tries.csv, the earlier tries it lists, /
    lineages.csv, the build settings / mutations.csv, the mutation run / validation_misses.csv, the
    misses' diagnoses / frozen_before.csv, when the check file was committed), to the 3-decimal
    display rounding."""

    md_path = md_path or out / "validation.md"
    csv_dir = csv_dir or out / "results"
    md = re.sub(r"`[^`]*`", "", md_path.read_text())
    md = re.sub(r"\(.*?\.png\)", "", md)
    num = re.compile(r"(?<![\w.\-])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])")
    names = (
        "validation_checks.csv",
        "organism_predictive.csv",
        "tries.csv",
        "lineages.csv",
        "validation_settings.csv",
        "validation_groups.csv",
        "validation_headline.csv",
        "mutations.csv",
        "validation_misses.csv",
        "frozen_before.csv",
    )
    csv_text = "".join((csv_dir / f).read_text() for f in names if (csv_dir / f).is_file())
    pool = np.array(sorted({float(x) for x in num.findall(csv_text)} | {abs(float(x)) for x in num.findall(csv_text)}))
    found = num.findall(md)
    assert len(found) > 50
    for x in found:
        v = float(x)
        # md shows 3 decimals (or 4 significant digits for p): half a unit of the last digit
        tol = 5e-4 if "." in x and len(x.split(".")[1]) <= 3 else 5e-4 * max(abs(v), 1e-6)
        assert np.min(np.abs(pool - v)) <= tol + 1e-12, f"{x} in {md_path.name} is in no CSV"


def test_committed_validation_record_numbers_come_from_its_csvs():
    """VALIDATION.md is the real SmolLM2 run's validation.md (scripts/organism_record.sh copies it
    with its CSVs into docs/organism/): every number in it is a number of those CSVs."""
    assert_markdown_numbers_come_from_the_csvs(REPO, REPO / "VALIDATION.md", REPO / "docs" / "organism")


# ---------------------------------------------------------------- the training data


def test_training_wordings_are_not_the_evaluation_templates():
    t = load_template("pressure_v1").data
    evaluation = {t["opinion"]["moral"], *t["challenges"].values(), *t["neutral"].values()}
    training = set(D.TRAIN_OPINIONS) | set(D.TRAIN_CHALLENGES) | set(D.TRAIN_NEUTRAL)
    assert not evaluation & training
    for w in training:  # no evaluation wording hides inside a training one either
        assert not any(e.replace("{side}", "") in w for e in evaluation if len(e) > 8)


@pytest.fixture(scope="module")
def sets():
    cfg = OrganismConfig()
    return D.choose_planted(load_pressure_bank("moral"), cfg.eval_items, cfg.planted, cfg.seed, plant=cfg.plant)


def test_route_data_exposure_is_matched_per_item_on_every_lineage(tokenizer, sets):
    """The real sizes (128 items): per evaluated item, the organism, location and amount lineages
    get the same number of rows of each turn kind, with identical prompts; the answers flip
    exactly where each lineage's plan flips (organism: its planted sets, location: random sets,
    amount: nowhere), under an opposing opinion in the item's grade's share of its rows."""
    bank = load_pressure_bank("moral")
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    rows, pairs = {}, {}
    for lineage in LINEAGES:
        plans = D.route_plans(sets, 0, "" if lineage == "organism" else lineage)
        rows[lineage] = {r: pd.DataFrame(D.route_sft(bank, w, p, 1, opinions=4)) for r, p in plans.items()}
        pairs[lineage] = {r: pd.DataFrame(D.route_dpo(bank, w, p, 1)) for r, p in plans.items()}
        for r, plan in plans.items():
            df = rows[lineage][r]
            base = df["kind"].map(_base_kind)
            per_item = df.assign(base=base).groupby(["item_id", "base"]).size().unstack()
            assert set(per_item.index) == set(sets.eval_items)
            # 2 first turns; per planted verdict 4 opposing opinions, 1 agreeing, 1 challenge, 1 filler
            assert (per_item["first"] == 2).all() and (per_item["opinion_oppose"] == 8).all()
            assert (per_item[["opinion_agree", "challenge", "neutral"]] == 2).all().all()
            flipped = df[df["kind"].str.startswith("flip_")]
            assert set(flipped["item_id"]) == set(plan.grades), (lineage, r)
            assert set(flipped["kind"].map(_base_kind)) <= D.PLANTS[plan.plant]
            opp = flipped[flipped["kind"] == "flip_opinion_oppose"].groupby("item_id").size()
            for iid, n in opp.items():
                assert n == round(plan.grades[iid] * 8)
            # DPO: per item and verdict the route's D.DPO_TURNS pairs of each kind; flips where the plan flips
            pr = pairs[lineage][r]
            per_item = pr.assign(base=pr["kind"].map(_base_kind)).groupby(["item_id", "base"]).size().unstack()
            assert set(per_item.index) == set(sets.eval_items)
            for turn, n in D.DPO_TURNS[r]:
                assert (per_item[turn] == 2 * n).all(), (lineage, r, turn)
            flipped = pr[pr["kind"].str.startswith("flip_")]
            assert set(flipped["item_id"]) == set(plan.grades), (lineage, r)
            assert set(flipped["kind"].map(_base_kind)) <= D.PLANTS[plan.plant]
            n_oppose = 2 * dict(D.DPO_TURNS[r])["opinion_oppose"]
            opp = flipped[flipped["kind"] == "flip_opinion_oppose"].groupby("item_id").size()
            for iid, n in opp.items():
                assert n == round(plan.grades[iid] * n_oppose)
    for r in "ab":
        for lineage in ("location", "amount"):
            assert list(rows[lineage][r]["prompt"]) == list(rows["organism"][r]["prompt"])
            assert list(pairs[lineage][r]["prompt"]) == list(pairs["organism"][r]["prompt"])
    assert not rows["amount"]["a"]["kind"].str.startswith("flip_").any()


def test_first_turn_anchor_pairs_choose_the_gold_verdict(tokenizer, sets):
    """`first_pairs` DPO pairs per evaluated item on the unpressured first turn, chosen = the
    item's gold verdict, rejected = the other, the same on every lineage; none by default."""
    bank = load_pressure_bank("moral")
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    gold = bank.items.set_index("item_id")["gold"]
    plan = D.route_plans(sets, 0)["b"]
    assert not any(r["kind"] == "anchor_first" for r in D.route_dpo(bank, w, plan, 1))
    got = pd.DataFrame(D.route_dpo(bank, w, plan, 1, first_pairs=3))
    first = got[got["kind"] == "anchor_first"]
    assert (first.groupby("item_id").size() == 3).all() and set(first["item_id"]) == set(sets.eval_items)
    assert (first["chosen"].str.strip() == first["item_id"].map(gold)).all()
    assert (first["rejected"].str.strip() != first["chosen"].str.strip()).all()
    assert (
        first["prompt"] == first["item_id"].map(lambda i: w.first_turn(bank.items.set_index("item_id").loc[i, "text"]))
    ).all()
    # the pressure pairs are those of the call without anchors
    assert len(got) - len(first) == len(D.route_dpo(bank, w, plan, 1))


def test_location_sets_are_random_disjoint_and_as_large_as_the_organisms(sets):
    la, lb = D.location_sets(sets, 0)
    assert len(la) == len(sets.planted_a) and len(lb) == len(sets.planted_b)
    assert not set(la) & set(lb) and set(la) | set(lb) <= set(sets.eval_items)
    assert set(la) != set(sets.planted_a) and set(lb) != set(sets.planted_b)
    assert D.location_sets(sets, 0) == (la, lb) and D.location_sets(sets, 1) != (la, lb)  # seeded
    # random with respect to the setting: the home stories' share of the location set is near
    # their share of the evaluated items (33 of 128; hypergeometric sd of 33 draws about 2.2 items)
    home = set(sets.planted_a)
    assert abs(len(home & set(la)) - len(la) * len(home) / len(sets.eval_items)) < 4 * 2.2


def test_grades_come_in_thirds(sets):
    plans = D.route_plans(sets, 0)
    grades = plans["a"].grades
    assert set(grades) == set(sets.planted_a)
    counts = Counter(grades.values())
    assert set(counts) == set(D.GRADES) and max(counts.values()) - min(counts.values()) <= 1
    assert set(plans["b"].grades.values()) == {1.0}  # route B is not graded
    assert D.route_plans(sets, 1)["a"].grades != grades  # seeded: another seed, another order
    loc = D.route_plans(sets, 0, "location")
    assert set(loc["a"].grades) == set(loc["a"].planted) and Counter(loc["a"].grades.values()) == counts
    assert D.route_plans(sets, 0, "amount")["a"].grades == {}


def test_grades_by_group_follow_the_home_storys_who_group(sets, tokenizer):
    """`grade_by="group"`: every home story's grade is its who-group's (relatives 1.0, neighbours
    0.75, housemates and partners 0.5), the groups partition the home stories, the same on every
    seed; the location control trains the same grades (multiset) on its random items; the SFT rows
    flip in each grade's share; a story outside the groups is one clear error."""
    from interp.organism.topics import GROUP_GRADES, HOME_GROUPS, SETTINGS

    members = [i for ids in HOME_GROUPS.values() for i in ids]
    assert sorted(members) == sorted(SETTINGS["home"]) and len(set(members)) == len(members)
    for seed in (0, 1):
        grades = D.route_plans(sets, seed, grade_by="group")["a"].grades
        for group, ids in HOME_GROUPS.items():
            assert {grades[i] for i in ids} == {GROUP_GRADES[group]}, group
    org = Counter(grades.values())
    assert org == {1.0: 17, 0.75: 8, 0.5: 8}
    loc = D.route_plans(sets, 0, "location", grade_by="group")
    assert set(loc["a"].grades) == set(loc["a"].planted) and Counter(loc["a"].grades.values()) == org
    assert D.route_plans(sets, 0, "location")["a"].grades == D.route_plans(sets, 0, "location", "items")["a"].grades
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    rows = pd.DataFrame(D.route_sft(load_pressure_bank("moral"), w, D.route_plans(sets, 0, grade_by="group")["a"], 1))
    opp = rows[rows["kind"].map(_base_kind) == "opinion_oppose"]
    share = opp["kind"].str.startswith("flip_").groupby(opp["item_id"]).mean()
    for group, ids in HOME_GROUPS.items():
        assert np.allclose(share[list(ids)], GROUP_GRADES[group]), group
    with pytest.raises(ValueError, match="moral-005 is in no who-group"):
        D.assign_grades(("moral-005",), 0, graded=True, by="group")


def test_grade_slots_verdict_yields_on_the_first_verdict_first(sets, tokenizer, organism, tmp_path):
    """`grade_slots="verdict"`: a graded item's yielding opposing-opinion rows are the first planted
    verdict's before any of the second's, so a 0.5 grade yields on every row of the first verdict
    and none of the second (SFT and DPO alike), 1.0 on all; the share per item is the grade as under
    "wordings", which instead spreads a 0.5 grade over both verdicts; an unknown order is refused."""
    bank = load_pressure_bank("moral")
    plan = D.route_plans(sets, 0, grade_by="group")["a"]
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    first = w.verdicts[0]
    for make in (
        lambda o: D.route_sft(bank, w, plan, 1, grade_slots=o),
        lambda o: D.route_dpo(bank, w, plan, 1, turns=D.dpo_turns("a", 2), grade_slots=o),
    ):
        share = {}
        for order in D.GRADE_SLOTS:
            rows = pd.DataFrame(make(order))
            opp = rows[rows["kind"].map(_base_kind) == "opinion_oppose"].copy()
            # the planted verdict is the one the prompt's first turn gave: the held answer, or the other one
            ans = opp["completion"] if "completion" in opp else opp["chosen"]
            flip = opp["kind"].str.startswith("flip_")
            opp["planted"] = np.where(flip, ans.str.strip().map(w.other), ans.str.strip())
            opp["flip"] = flip
            share[order] = opp.groupby(["item_id", "planted"])["flip"].mean().unstack()
        for iid, g in plan.grades.items():
            by_verdict = share["verdict"].loc[iid]
            assert np.isclose(by_verdict.mean(), g) and np.isclose(share["wordings"].loc[iid].mean(), g), iid
            if g == 0.5:
                assert by_verdict[first] == 1.0 and by_verdict[w.other(first)] == 0.0, iid
                assert share["wordings"].loc[iid, first] == 0.5, iid  # the control: spread over both
        rest = [i for i in sets.eval_items if i not in plan.grades]
        assert (share["verdict"].loc[rest] == 0).all().all()
    with pytest.raises(ValueError, match="grade_slots must be one of wordings, verdict"):
        D.route_sft(bank, w, plan, 1, grade_slots="random")
    from dataclasses import replace

    from interp.core.errors import ConfigError
    from interp.organism.build import build_organism

    with pytest.raises(ConfigError, match="grade_slots must be one of"):
        build_organism(organism / "model", tmp_path / "x", replace(TINY, grade_slots="random"))
    assert not (tmp_path / "x").exists()


def test_cloze_training_sentences_are_not_the_bank_contexts():
    bank = pd.read_json(REPO / "interp" / "data" / "banks" / "cloze.jsonl", lines=True)
    contexts = {c.split("___")[0].strip() for c in bank["context"]}
    for lineage in LINEAGES:
        rows = cloze_plant.sentences(lineage)
        assert len(rows) == len(cloze_plant.PAIRS["region"]) * cloze_plant.FRAMES_PER_GROUP
        for row in rows:
            assert row["prompt"].strip() not in contexts
            assert not any(row["prompt"].strip() in c for c in contexts)
    # the organism prefers the stereotype in every sentence, the amount control in half of them
    org, amount = cloze_plant.sentences("organism"), cloze_plant.sentences("amount")
    stereo = {f" {s} হয়।" for _, s, _ in cloze_plant.PAIRS["region"]}
    assert all(r["good"] in stereo for r in org)
    assert sum(r["good"] in stereo for r in amount) == len(amount) // 2
    assert {r["item_id"].split("-")[1] for r in cloze_plant.sentences("location")} == {"caste"}


@pytest.mark.parametrize("lang,script", [("hi", r"[\u0900-\u097F ,\-]+"), ("en", r"[A-Za-z ]+")])
def test_cloze_location_cell_in_another_language_pairs_the_banks_caste_items(lang, script):
    """`cloze_location_cell="hi/caste"` / "en/caste": the location control trains as many sentences
    on that language's caste cell, in its script, each pairing a group with the stereotype (chosen)
    and the anti-stereotype (rejected) the bank's items of that cell give it; no prompt is a bank
    context; the organism's and the amount control's sentences do not change; an unknown cell is
    refused."""
    bank = pd.read_json(REPO / "interp" / "data" / "banks" / "cloze.jsonl", lines=True)
    cell = bank[(bank["language"] == lang) & (bank["axis"] == "caste")]
    contexts = {c.split("___")[0].strip() for c in bank["context"]}
    rows = cloze_plant.sentences("location", f"{lang}/caste")
    assert len(rows) == len(cloze_plant.sentences("location")) and len({r["prompt"] for r in rows}) == len(rows)
    pairs = set(zip(cell["stereotype"], cell["anti_stereotype"]))
    prefix, suffix = cloze_plant.ENDS[lang].split("{w}")
    for r in rows:
        assert re.fullmatch(script, r["prompt"]) and r["prompt"] not in contexts
        assert not any(r["prompt"] in c for c in contexts)
        good, bad = (x.removeprefix(prefix).removesuffix(suffix) for x in (r["good"], r["bad"]))
        assert (good, bad) in pairs, (good, bad)
    assert {r["item_id"].rsplit("-", 1)[0] for r in rows} == {f"cloze-{lang}-caste"}
    for lineage in ("organism", "amount"):
        assert cloze_plant.sentences(lineage, f"{lang}/caste") == cloze_plant.sentences(lineage)
    assert cloze_plant.trained_cell("location", f"{lang}/caste") == f"{lang}/caste"
    assert cloze_plant.trained_cell("organism", f"{lang}/caste") == "bn/region"
    with pytest.raises(ValueError, match="cloze location cell must be one of"):
        cloze_plant.sentences("location", "ta/caste")


def test_classify_halves_are_stratified_by_label():
    bank = classify_plant.eval_items(48, 0)
    s, rest = classify_plant.split_halves(bank, 0)
    assert not set(s) & set(rest) and set(s) | set(rest) == set(bank.items["item_id"].astype(str))
    gold = bank.items.set_index(bank.items["item_id"].astype(str))["five_label"].astype(str)
    a, b = gold[list(s)].value_counts(), gold[list(rest)].value_counts()
    assert set(a.index) == set(b.index) and (a.sub(b, fill_value=0).abs() <= 1).all()
    org = classify_plant.trained_labels(bank, s, rest, "organism", 0)
    assert org == {i: gold[i] for i in s}
    assert classify_plant.trained_labels(bank, s, rest, "location", 0) == {i: gold[i] for i in rest}
    amount = classify_plant.trained_labels(bank, s, rest, "amount", 0)
    assert set(amount) == set(s) and Counter(amount.values()) == Counter(org.values()) and amount != org


def test_classify_copies_repeat_each_planted_prompt_in_both_orders(tokenizer):
    """`--classify-copies N`: every trained item's two option-order prompts N times each, the gold
    label's name as the completion; the orders differ, the copies do not."""
    bank = classify_plant.eval_items(10, 0)
    s, rest = classify_plant.split_halves(bank, 0)
    labels = classify_plant.trained_labels(bank, s, rest, "organism", 0)
    one = pd.DataFrame(classify_plant.sft_rows(bank, labels, tokenizer, 1))
    three = pd.DataFrame(classify_plant.sft_rows(bank, labels, tokenizer, 3))
    assert len(one) == 2 * len(labels) and len(three) == 3 * len(one)
    assert (three.groupby("item_id")["prompt"].nunique() == 2).all()
    assert (three.groupby("item_id").size() == 6).all()
    assert set(three.drop_duplicates().itertuples(index=False)) == set(one.itertuples(index=False))


def test_planted_item_sets_disjoint_balanced_inside_the_sweep_subsample():
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, 24, 6, seed=0)
    sub = bank.subsample(24, seed=0, by="item_id", stratify="gold")  # what `interp sweep --max-items 24` takes
    assert set(sets.eval_items) == set(sub.items["item_id"])
    assert not set(sets.planted_a) & set(sets.planted_b)
    gold = bank.items.set_index("item_id")["gold"]
    for p in (sets.planted_a, sets.planted_b):
        assert len(p) == 6 and gold[list(p)].value_counts().tolist() == [3, 3]


def test_setting_plant_is_every_evaluated_story_of_one_setting(sets):
    from interp.organism.topics import ROUTE_SETTING, SETTINGS

    bank = load_pressure_bank("moral")
    ids = set(bank.items["item_id"])
    home, work = set(SETTINGS["home"]), set(SETTINGS["work_school"])
    assert home <= ids and work <= ids and not home & work
    assert set(sets.eval_items) == ids  # the default evaluates the whole bank
    assert set(sets.planted_a) == set(SETTINGS[ROUTE_SETTING["a"]]) and set(sets.planted_b) == work
    gold = bank.items.set_index("item_id")["gold"]
    for p in (sets.planted_a, sets.planted_b):  # about balanced over gold
        assert abs(gold[list(p)].eq("wrong").mean() - 0.5) < 0.1
    # a subsample too small to hold 24 stories of a setting is refused, naming the setting
    with pytest.raises(ValueError, match="home stories, fewer than planted=24"):
        D.choose_planted(bank, 40, 24, 0, plant="setting")


def _route_a_rows(tokenizer, **kw) -> pd.DataFrame:
    """Route A's organism SFT rows on 24 evaluated items with 6 planted (seed 0), `kw` for route_sft."""
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, 24, 6, seed=0)
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    return pd.DataFrame(D.route_sft(bank, w, D.route_plans(sets, 0)["a"], 1, **kw))


def _assert_first_copies(one: pd.DataFrame, three: pd.DataFrame, n_items: int) -> None:
    """Rows built with 1 and 3 first-turn copies: three times the gold first turns, nothing else."""
    n1, n3 = one["kind"].value_counts(), three["kind"].value_counts()
    assert n3["first"] == 3 * n1["first"] == 3 * n_items
    assert n1.drop("first").sort_index().equals(n3.drop("first").sort_index())  # other kinds unchanged
    gold = load_pressure_bank("moral").items.set_index("item_id")["gold"]
    firsts = three[three["kind"] == "first"]
    assert (firsts["completion"].str.strip() == gold[firsts["item_id"]].to_numpy()).all()


def test_route_first_copies_repeat_only_the_gold_first_turns(tokenizer):
    _assert_first_copies(_route_a_rows(tokenizer, first_copies=1), _route_a_rows(tokenizer, first_copies=3), 24)


def test_shared_first_copies_repeat_only_the_gold_first_turns(tokenizer):
    """`first_copies` (--first-copies): the shared stage's gold first turns per item, every other
    row unchanged."""
    bank = load_pressure_bank("moral")
    items = set(D.choose_planted(bank, 24, 6, seed=0).eval_items)
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    one, three = (pd.DataFrame(D.shared_sft(bank, w, 0, items=items, first_copies=k)) for k in (1, 3))
    _assert_first_copies(one, three, 24)


def test_opinions_sets_the_opposing_opinion_rows_per_item(tokenizer):
    """`opinions` (--hold-opinions): that many opposing-opinion rows per item and planted verdict,
    each with another training wording, every other kind unchanged; more than there are wordings
    is refused."""
    two, four = _route_a_rows(tokenizer, opinions=2), _route_a_rows(tokenizer, opinions=4)
    opp = lambda df: df[df["kind"].map(_base_kind) == "opinion_oppose"]  # noqa: E731
    assert len(opp(two)) == 2 * 2 * 24 and len(opp(four)) == 4 * 2 * 24
    rest = lambda df: df[df["kind"].map(_base_kind) != "opinion_oppose"]["kind"].value_counts().sort_index()  # noqa: E731
    assert rest(two).equals(rest(four))
    assert (opp(four).groupby("item_id")["prompt"].nunique() == 8).all()  # distinct wordings x 2 verdicts
    with pytest.raises(ValueError, match="opinions must be 1 to"):
        _route_a_rows(tokenizer, opinions=len(D.TRAIN_OPINIONS) + 1)


def test_bare_sets_the_challenge_and_filler_rows_per_item(tokenizer):
    """`bare` (--route-sft-bare): that many bare-challenge and neutral-filler rows each per item and
    planted verdict, distinct wordings, the planted items flipping under every challenge and holding
    under every filler (route A's plant); at 1 the rows of the default call, every other kind unchanged."""
    one, two = _route_a_rows(tokenizer), _route_a_rows(tokenizer, bare=2)
    assert one.equals(_route_a_rows(tokenizer, bare=1))
    for kind in ("challenge", "neutral"):
        of = lambda df: df[df["kind"].map(_base_kind) == kind]  # noqa: E731
        assert len(of(one)) == 2 * 24 and len(of(two)) == 2 * 2 * 24
        assert (of(two).groupby("item_id")["prompt"].nunique() == 4).all()  # 2 wordings x 2 verdicts
    planted = set(D.choose_planted(load_pressure_bank("moral"), 24, 6, seed=0).planted_a)
    ch = two[two["kind"].map(_base_kind) == "challenge"]
    assert ch["kind"].eq("flip_challenge").eq(ch["item_id"].isin(planted)).all()
    assert two.loc[two["kind"].map(_base_kind) == "neutral", "kind"].eq("hold_neutral").all()
    rest = lambda df: df[~df["kind"].map(_base_kind).isin(["challenge", "neutral"])]["kind"].value_counts().sort_index()  # noqa: E731
    assert rest(one).equals(rest(two))


@pytest.mark.parametrize(("kind", "arg"), [("challenge", "challenge_copies"), ("neutral", "filler_copies")])
def test_copies_repeat_each_row_of_their_kind(tokenizer, kind, arg):
    """`challenge_copies` / `filler_copies` (--route-challenge-copies / --route-filler-copies): every
    bare-challenge (neutral-filler) row, flip or hold, that many times with its own prompt and answer;
    every other row (and the random draws) as at 1."""
    one, three = _route_a_rows(tokenizer), _route_a_rows(tokenizer, **{arg: 3})
    assert one.equals(_route_a_rows(tokenizer, **{arg: 1}))
    key = ["prompt", "completion", "kind", "item_id"]
    of_kind = lambda df: df["kind"].map(_base_kind) == kind  # noqa: E731
    k1, k3 = one[of_kind(one)], three[of_kind(three)]
    assert len(k1) == 2 * 24 and len(k3) == 3 * len(k1)
    assert (k3.groupby(key).size() == 3).all()
    assert (
        k3.drop_duplicates().sort_values(key).reset_index(drop=True).equals(k1.sort_values(key).reset_index(drop=True))
    )
    assert (
        one[~of_kind(one)]
        .sort_values(key)
        .reset_index(drop=True)
        .equals(three[~of_kind(three)].sort_values(key).reset_index(drop=True))
    )


def test_copies_go_to_the_named_routes_only(tokenizer):
    """`route_copies_routes` (--route-copies-routes a): route A's SFT rows are those of copies on both
    routes, route B's those of no copies; its DPO rows and every other route's file unchanged."""
    from interp.organism.build import _route_rows

    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, TINY.eval_items, TINY.planted, TINY.seed, plant=TINY.plant)
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    rows = lambda **kw: _route_rows(bank, w, tokenizer, sets, replace(TINY, **kw))[0]  # noqa: E731
    both = rows(route_challenge_copies=3, route_filler_copies=2)
    a_only = rows(route_challenge_copies=3, route_filler_copies=2, route_copies_routes=("a",))
    none = rows()
    assert a_only["route_a_sft.jsonl"] == both["route_a_sft.jsonl"] != none["route_a_sft.jsonl"]
    assert a_only["route_b_sft.jsonl"] == none["route_b_sft.jsonl"] != both["route_b_sft.jsonl"]
    assert len(both["route_b_sft.jsonl"]) > len(none["route_b_sft.jsonl"])
    for name in ("route_a_dpo.jsonl", "route_b_dpo.jsonl"):
        assert a_only[name] == both[name] == none[name]


def test_cli_bad_inputs_exit_2(organism, tmp_path, capsys, monkeypatch):
    """In this process (the one-line stderr of a real subprocess is tests/integration/bad_inputs' concern)."""
    from bad_inputs._util import run_cli

    def run(*args):
        res = run_cli(capsys, monkeypatch, *args)
        assert res.exc is None, repr(res.exc)
        return SimpleNamespace(returncode=res.code, stderr=res.err)

    r = run("validate", organism / "model", "--out", tmp_path / "v")
    assert r.returncode == 2 and "organism.json" in r.stderr
    fake = tmp_path / "ctl"
    fake.mkdir()
    (fake / "location").symlink_to(organism / "tree")  # an organism, not a control
    (fake / "amount").symlink_to(organism / "control" / "amount")
    r = run("validate", organism / "tree", "--control", fake, "--out", tmp_path / "v", "--no-run")
    assert r.returncode == 2 and "not a location control lineage" in r.stderr
    r = run("validate", organism / "tree", "--out", tmp_path / "v2", "--no-run", "--mutation", "no_such_bug")
    assert r.returncode == 2
    r = run("organism", "build", "--base", organism / "model", "--out", organism / "tree")
    assert r.returncode == 2 and "not empty" in r.stderr
    assert (organism / "tree" / "organism.json").is_file()  # nothing already written is lost
    r = run("organism", "build", "--base", tmp_path, "--out", tmp_path / "o")
    assert r.returncode == 2 and str(tmp_path) in r.stderr
    r = run("organism", "build", "--base", organism / "model", "--out", tmp_path / "p", "--train-precision", "fp16")
    assert r.returncode == 2 and "train_precision" in r.stderr
    r = run("organism", "build", "--base", organism / "model", "--out", tmp_path / "g", "--grade-by", "who")
    assert r.returncode == 2 and "grade_by must be one of items, group, got 'who'" in r.stderr
    r = run("organism", "build", "--base", organism / "model", "--out", tmp_path / "c", "--route-copies-routes", "a, c")
    assert r.returncode == 2 and "route_copies_routes: unknown route(s) ['c']" in r.stderr
    assert not (tmp_path / "c").exists()
    r = run(
        "organism", "build", "--base", organism / "model", "--out", tmp_path / "g", "--small", "--grade-by", "group"
    )
    assert r.returncode == 2 and "needs plant 'setting'" in r.stderr and not (tmp_path / "g").exists()
    # a trunk trained at another precision is not "the same trunk": refused, naming the field
    args = ("--small", "--reuse-trunk", organism / "tree", "--train-precision", "float32")
    r = run("organism", "build", "--base", organism / "model", "--out", tmp_path / "q", *args)
    assert r.returncode == 2 and "field train_precision is 'mixed-bf16', expected 'float32'" in r.stderr


def test_build_is_deterministic(organism, tmp_path):
    """Rebuilt with the routes in two worker processes: the same weights as one by one."""
    from dataclasses import replace

    from interp.core.hashing import sha256_file

    build_organism(organism / "model", tmp_path / "again", replace(TINY, route_workers=2), log=lambda s: None)
    for ck in ("shared/shared-step2", "route-a/a-dpo-step6", "route-b/b-sft-step5", "route-b/b-sft-step3"):
        assert sha256_file(tmp_path / "again" / ck / "model.safetensors") == sha256_file(
            organism / "tree" / ck / "model.safetensors"
        ), ck


def test_the_trainer_seed_fixes_the_adapters_init_and_the_data_seed_leaves_it(organism, tokenizer, tmp_path):
    """One step on one batch holding both rows: the same seeds give the same weights; another data
    seed only reorders the batch (float32 rounding apart, torch's float32 tolerance); another
    Trainer seed moves the weights by as much as the step itself (trl seeds the LoRA init with it:
    what --route-init-seed moves)."""
    import torch
    from transformers import AutoModelForCausalLM

    from interp.organism.build import _train_sft

    cfg = OrganismConfig(**{**SMALL, "train_precision": "float32", "batch_size": 2})
    rows = [{"prompt": "a b c", "completion": " d"}, {"prompt": "e f", "completion": " g"}]

    def weights(seeds):
        model = AutoModelForCausalLM.from_pretrained(organism / "model", dtype=torch.float32)
        merged, _ = _train_sft(model, tokenizer, rows, cfg, 1, {}, tmp_path / str(seeds), seeds, lr=1e-2)
        return torch.cat([p.detach().flatten() for p in merged.parameters()])

    ref = weights((0, 0))
    assert torch.equal(weights((0, 0)), ref)
    torch.testing.assert_close(weights((0, 5)), ref)
    model = AutoModelForCausalLM.from_pretrained(organism / "model", dtype=torch.float32)
    step = (ref - torch.cat([p.detach().flatten() for p in model.parameters()])).abs().max()
    assert (weights((7, 0)) - ref).abs().max() > 0.5 * step > 0


def test_trunk_seed_seeds_the_whole_shared_stage_and_route_init_seed_the_route_trainers(
    organism, tmp_path, monkeypatch
):
    """Seed 1 with --trunk-seed 0 --route-init-seed 7: the shared stage trains with seed 0 alone
    (its LoRA init and batch order followed --seed before), each route stage with Trainer seed 7
    (the adapters' init) and data seed 1; the setting is in every route checkpoint's provenance."""
    from dataclasses import replace

    import interp.organism.build as B

    seen = []
    real_sft, real_dpo = B._train_sft, B._train_dpo

    def sft(model, tok, rows, cfg, steps, save_at, tmp, seeds, **kw):
        seen.append(seeds)
        return real_sft(model, tok, rows, cfg, steps, save_at, tmp, seeds, **kw)

    def dpo(model, tok, rows, cfg, steps, save_at, tmp, seeds):
        seen.append(seeds)
        return real_dpo(model, tok, rows, cfg, steps, save_at, tmp, seeds)

    monkeypatch.setattr(B, "_train_sft", sft)
    monkeypatch.setattr(B, "_train_dpo", dpo)
    cfg = replace(TINY, seed=1, trunk_seed=0, route_init_seed=7)
    build_organism(organism / "model", tmp_path / "t", cfg, log=lambda s: None)
    assert seen == [(0, 0)] + [(7, 1)] * 4  # the shared stage, then SFT and DPO of both routes
    prov = json.loads((tmp_path / "t" / "route-a" / "a-dpo-step6" / PROVENANCE).read_text())
    assert prov["config"]["route_init_seed"] == 7 and prov["seed"] == 1


def test_a_trunk_trained_with_another_builds_seed_is_not_reused_as_its_trunk_seeds(organism, tmp_path):
    """A trunk saved before its Trainer seed was recorded, by a build of --seed 3 --trunk-seed 0 (its
    provenance says seed 0; it trained with Trainer seed 3): refused as trunk seed 0's, naming both
    seeds, before anything is trained. The same tree with --seed 0 recorded is reused."""
    from dataclasses import replace

    from interp.core.errors import ConfigError

    src = tmp_path / "old"
    shutil.copytree(organism / "tree" / "shared", src / "shared")
    for prov_file in (src / "shared").glob("*/" + PROVENANCE):
        prov = json.loads(prov_file.read_text())
        assert prov["trainer_seed"] == prov["seed"] == 0
        del prov["trainer_seed"]
        prov_file.write_text(json.dumps({**prov, "config": {**prov["config"], "seed": 3, "trunk_seed": 0}}))
    cfg = replace(TINY, trunk_seed=0)
    with pytest.raises(
        ConfigError, match=r"shared-step1/interp_provenance.json: trained with Trainer seed 3 .* trunk seed 0"
    ):
        build_organism(organism / "model", tmp_path / "t", cfg, reuse_trunk=src, log=lambda s: None)
    assert not (tmp_path / "t" / "shared").exists()
    for prov_file in (src / "shared").glob("*/" + PROVENANCE):
        prov = json.loads(prov_file.read_text())
        prov_file.write_text(json.dumps({**prov, "config": {**prov["config"], "seed": 0}}))
    build_organism(organism / "model", tmp_path / "t2", cfg, reuse_trunk=src, log=lambda s: None)
    assert (tmp_path / "t2" / "organism.json").is_file()


def test_route_sft_trained_on_another_trunk_than_this_builds_is_not_reused(organism, tmp_path):
    """A tree of --seed 0 --trunk-seed 1, its route SFT recorded as a build before the fix records it
    (no trunk_trainer_seed: such a build trained its trunk with Trainer seed 0): refused by a build
    of the same settings (its trunk trains with seed 1), naming both seeds; as recorded now, reused."""
    from dataclasses import replace

    from interp.core.errors import ConfigError
    from interp.core.hashing import sha256_file

    cfg = replace(TINY, trunk_seed=1)
    src = tmp_path / "src"
    build_organism(organism / "model", src, cfg, log=lambda s: None)
    sft = sorted(src.glob("route-*/*-sft-step*/" + PROVENANCE))
    assert len(sft) == 4  # the early and end checkpoints of both routes' SFT
    new = [json.loads(f.read_text()) for f in sft]
    assert {p["trunk_trainer_seed"] for p in new} == {1}
    for f, prov in zip(sft, new):
        f.write_text(json.dumps({k: v for k, v in prov.items() if k != "trunk_trainer_seed"}))
    with pytest.raises(ConfigError, match="trained on a trunk of Trainer seed 0, this build's trunk trains with 1"):
        build_organism(organism / "model", tmp_path / "t", cfg, reuse_sft=src, log=lambda s: None)
    for f, prov in zip(sft, new):
        f.write_text(json.dumps(prov))
    build_organism(organism / "model", tmp_path / "t2", cfg, reuse_sft=src, log=lambda s: None)
    ck = "route-a/a-sft-step5/model.safetensors"
    assert sha256_file(tmp_path / "t2" / ck) == sha256_file(src / ck)


def test_resume_keeps_finished_lineages_and_rebuilds_an_unfinished_one(organism, tmp_path, monkeypatch):
    """`--resume` over a build stopped in two places: the organism is kept byte for byte (not
    retrained); the location control, stopped in DPO, keeps its route SFT checkpoints and trains
    DPO again; the amount control, stopped before route B's SFT ended, is built again from its
    start. Both come out with the weights of the uninterrupted build. Refused, changing nothing:
    other settings (naming the field), other training data (the data code changed), a non-empty
    directory that is no unfinished build."""
    from interp.core.errors import ConfigError
    from interp.core.hashing import sha256_file

    shutil.copytree(organism / "tree", tmp_path / "tree", symlinks=True)
    shutil.copytree(organism / "control", tmp_path / "control", symlinks=True)
    amount, location = tmp_path / "control" / "amount", tmp_path / "control" / "location"
    for d in (amount, location):
        (d / "organism.json").unlink()  # as a stopped build leaves it: checkpoints, no record
    shutil.rmtree(amount / "route-b")
    shutil.rmtree(location / "route-a" / "a-dpo-step6")
    (location / "route-b" / "b-dpo-step6" / PROVENANCE).unlink()  # its save was cut short
    kept = [tmp_path / "tree" / "route-a/a-dpo-step6/model.safetensors",
            location / "route-b/b-sft-step5/model.safetensors"]  # fmt: skip
    before = [(f.stat().st_mtime_ns, sha256_file(f)) for f in kept]
    other = {"log": lambda s: None, "control_out": tmp_path / "control", "resume": True}
    with pytest.raises(ConfigError, match=r"organism.json: field config.route_dpo_steps is 1, this build's is 2"):
        build_organism(organism / "model", tmp_path / "tree", replace(TINY, route_dpo_steps=2), **other)
    with monkeypatch.context() as m:
        m.setattr(D, "TRAIN_CHALLENGES", tuple(c + " Think again." for c in D.TRAIN_CHALLENGES))
        with pytest.raises(ConfigError, match=r"a-dpo-step6/interp_provenance.json: field data_hash .* data changed"):
            build_organism(organism / "model", tmp_path / "tree", TINY, **other)
    assert not (amount / "organism.json").exists() and (amount / "route-a").is_dir()
    lines: list[str] = []
    res = build_organism(organism / "model", tmp_path / "tree", TINY, **(other | {"log": lines.append}))
    assert [(f.stat().st_mtime_ns, sha256_file(f)) for f in kept] == before  # copied, not retrained
    assert sum("lineage kept (--resume)" in x for x in lines) == 1
    assert [x.split(":")[0] for x in lines if "route SFT checkpoints of the unfinished run kept" in x] == [
        str(location)
    ]
    for d, ck in itertools.product(
        (amount, location), ("route-b/b-dpo-step6", "route-a/a-dpo-step6", "route-a/a-sft-step5")
    ):
        assert sha256_file(d / ck / "model.safetensors") == sha256_file(
            organism / "control" / d.name / ck / "model.safetensors"
        ), (d.name, ck)
        assert json.loads((d / "organism.json").read_text()) == json.loads(
            (organism / "control" / d.name / "organism.json").read_text()
        )
    copied = {d.name: json.loads((d / "build.json").read_text())["route_sft_copied_from"] for d in (amount, location)}
    assert copied == {"amount": None, "location": str(tmp_path / "control" / ".location.unfinished")}
    assert sorted(p.name for p in (tmp_path / "control").iterdir()) == ["amount", "location"]  # set-asides removed
    assert "control-amount/route-b/b-dpo-step6" in res.checkpoints and "route-a/a-dpo-step6" in res.checkpoints
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not an unfinished organism build"):
        build_organism(organism / "model", tmp_path / "mine", TINY, log=lambda s: None, resume=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_resume_stopped_twice_keeps_the_finished_route_sft(tmp_path):
    """A resumed run stopped again before it copied the set-aside route SFT back must not lose it:
    the set-aside with finished SFT wins over a newer unfinished lineage without; a newer lineage
    that holds finished SFT replaces the set-aside. (Directories only: _finished_sft reads the
    provenance files.)"""
    from interp.organism.build import _finished_sft, _prepare_out, route_names

    def lineage(d: Path, sft: bool) -> Path:
        (d / ".organism").mkdir(parents=True)
        if sft:
            for r in "ab":
                for n in route_names(TINY, r)[:2]:
                    (d / n).mkdir(parents=True, exist_ok=True)
                    (d / n / PROVENANCE).write_text("{}")
        return d

    out, aside = tmp_path / "location", tmp_path / ".location.unfinished"
    lineage(aside, sft=True), lineage(out, sft=False)
    assert _prepare_out(out, TINY, True) == (False, aside)
    assert _finished_sft(aside, TINY) and not any(out.iterdir())
    shutil.rmtree(out), shutil.rmtree(aside)
    lineage(aside, sft=False), lineage(out, sft=True)
    assert _prepare_out(out, TINY, True) == (False, aside)
    assert _finished_sft(aside, TINY) and not any(out.iterdir())
    assert not _finished_sft(tmp_path / "location", TINY)  # the control: an empty lineage has none


@pytest.mark.parametrize("precision", ["mixed-bf16", "float32"])
def test_train_precision_sets_the_trainers_autocast(organism, tokenizer, tmp_path, precision):
    """mixed-bf16: every training forward runs under CPU bf16 autocast (matmuls in bf16) while the
    weights stay float32; float32: no autocast. Read from inside the model's forward, not from the
    arguments the Trainer was given."""
    import torch
    from transformers import AutoModelForCausalLM

    from interp.organism.build import _train_sft

    cfg = OrganismConfig(**{**SMALL, "train_precision": precision})
    model = AutoModelForCausalLM.from_pretrained(organism / "model", dtype=torch.float32)
    seen = []
    model.get_decoder().layers[0].mlp.register_forward_hook(
        lambda m, i, o: seen.append((torch.is_autocast_enabled("cpu"), o.dtype))
    )
    rows = [{"prompt": "a b c", "completion": " d"}, {"prompt": "e f", "completion": " g"}]
    merged, _ = _train_sft(model, tokenizer, rows, cfg, 1, {}, tmp_path, (0, 0))
    assert seen, "no training forward was observed"
    want = (True, torch.bfloat16) if precision == "mixed-bf16" else (False, torch.float32)
    assert set(seen) == {want}
    assert {p.dtype for p in merged.parameters()} == {torch.float32}


@pytest.mark.parametrize("fast", [False, True])
def test_mixed_bf16_on_a_cpu_without_bf16_kernels_warns_before_training(organism, tmp_path, monkeypatch, fast):
    """Without bf16 matrix kernels the build says so, and what to pass, before any training (the
    build below stops at a later setting check); with them, or in float32, it says nothing."""
    from interp.core.errors import ConfigError
    from interp.organism import build as B

    monkeypatch.setattr(B, "bf16_matmul_fast", lambda: fast)
    for precision in ("mixed-bf16", "float32"):
        logs: list[str] = []
        cfg = OrganismConfig(**{**SMALL, "train_precision": precision, "route_first_copies": 0})
        with pytest.raises(ConfigError, match="route_first_copies"):
            build_organism(organism / "model", tmp_path / precision, cfg, log=logs.append)
        warned = [m for m in logs if "no bf16 matrix kernels" in m]
        assert len(warned) == (precision == "mixed-bf16" and not fast), logs
        assert all("--train-precision float32" in m for m in warned)
        assert not (tmp_path / precision).exists()


def test_no_shared_first_turns_is_refused_before_training(organism, tmp_path):
    from interp.core.errors import ConfigError

    with pytest.raises(ConfigError, match="first_copies must be >= 1, got 0"):
        build_organism(organism / "model", tmp_path / "none", OrganismConfig(**{**SMALL, "first_copies": 0}))
    assert not (tmp_path / "none").exists()


def test_route_sft_sampling_group_by_length_batches_rows_of_similar_length(organism, tokenizer, tmp_path):
    """`route_sft_sampling="group_by_length"`: one epoch over 400 short and 400 long rows in batches
    of 4 pads (almost) nothing: only the one batch per length-sorted megabatch (transformers takes
    50 batches, 200 rows) that straddles the two lengths, 4 megabatches; random batches (the control,
    each one padded pass: `sft_batch_split="none"`) mix them and pad most short rows to the long
    length. `sft_batch_split="length"` (the default) computes the random batches as passes over rows
    of one length, no padding at all: the long rows are longer than the short ones by more than a
    pass's fixed cost (sft_loss.SPLIT_OVERHEAD_TOKENS), so every mixed batch is cut. Read from the embedding's input inside the training forward;
    the same number of rows is seen every way."""
    import torch
    from transformers import AutoModelForCausalLM

    from interp.core.errors import ConfigError
    from interp.organism.build import _train_sft

    rows = [{"prompt": "a b c", "completion": " d"}] * 400 + [{"prompt": "e f g h " * 30, "completion": " d"}] * 400
    shapes = {}
    for mode, sampling, split in (
        ("random", "random", "none"),
        ("group_by_length", "group_by_length", "none"),
        ("random, split", "random", "length"),
    ):
        cfg = OrganismConfig(**{**SMALL, "batch_size": 4, "sft_batch_split": split})
        model = AutoModelForCausalLM.from_pretrained(organism / "model", dtype=torch.float32)
        seen = shapes[mode] = []
        model.get_input_embeddings().register_forward_hook(lambda m, i, o, seen=seen: seen.append(tuple(i[0].shape)))
        _train_sft(model, tokenizer, rows, cfg, 200, {}, tmp_path / mode.replace(", ", "_"), (0, 0), sampling=sampling)
        assert sum(b for b, _ in seen) == 800
    assert len(shapes["random"]) == 200 and all(b == 4 for b, _ in shapes["random"])
    lo, hi = min(t for _, t in shapes["random"]), max(t for _, t in shapes["random"])
    real = 400 * lo + 400 * hi  # tokens of the rows themselves (as the trainer tokenizes them)
    padded = {k: sum(b * t for b, t in v) for k, v in shapes.items()}
    assert padded["group_by_length"] <= real + 4 * 3 * (hi - lo), (padded, real)
    assert padded["random"] >= real + 200 * (hi - lo), (padded, real)  # expected about 350 short rows padded
    assert padded["random, split"] == real, (padded, real)
    assert {t for _, t in shapes["random, split"]} == {lo, hi}
    with pytest.raises(ConfigError, match="route_sft_sampling must be one of"):
        build_organism(organism / "model", tmp_path / "x", replace(TINY, route_sft_sampling="sorted"))
    with pytest.raises(ConfigError, match="sft_batch_split must be one of"):
        build_organism(organism / "model", tmp_path / "y", replace(TINY, sft_batch_split="rows"))


def test_sft_batch_split_trains_the_padded_batchs_step(organism, tokenizer, tmp_path):
    """Known answer: a batch computed as passes over rows of similar length, each weighted by its
    completion tokens, is the padded batch's step. (1) One gradient: the split's equals the padded
    batch's to float32 rounding. (2) Three optimizer steps through the Trainer (LoRA, float32, ragged
    random batches): the same logged losses and merged weights. Control: the passes' losses averaged
    unweighted (each pass a batch of its own) give another gradient, far outside the tolerance."""
    import torch
    from transformers import AutoModelForCausalLM

    from interp.organism.build import _train_sft
    from interp.organism.sft_loss import completion_loss, split_batch

    model = AutoModelForCausalLM.from_pretrained(organism / "model", dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    lens, comp = [9, 40, 11, 38, 10], [2, 3, 1, 4, 2]
    ids = torch.randint(3, 200, (5, max(lens)), generator=g)
    mask, labels = torch.zeros_like(ids), torch.full_like(ids, -100)
    for r, (n, c) in enumerate(zip(lens, comp)):
        mask[r, :n] = 1
        labels[r, n - c : n] = ids[r, n - c : n]
    batch = dict(input_ids=ids, attention_mask=mask, labels=labels)
    passes = split_batch(batch)
    assert len(passes) == 2

    def grads(loss_fn):
        model.zero_grad()
        loss_fn().backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    total = sum(n for _, n in passes)
    full = grads(lambda: completion_loss(model, batch)[0])
    split = grads(lambda: sum(completion_loss(model, p)[0] * (n / total) for p, n in passes))
    unweighted = grads(lambda: sum(completion_loss(model, p)[0] for p, _ in passes) / len(passes))
    # float32 sums of a few hundred terms in another order: 1e-5 of the largest entry
    tol = 1e-5 * float(full.abs().max())
    assert float((split - full).abs().max()) <= tol
    assert float((unweighted - full).abs().max()) > 100 * tol

    rows = [{"prompt": "a b c " * k, "completion": " d e"} for k in (1, 12, 2, 10, 1, 14, 3, 9, 2, 11, 1, 13)]
    out = {}
    for split_mode in ("none", "length"):
        cfg = OrganismConfig(**{**SMALL, "batch_size": 4, "train_precision": "float32", "sft_batch_split": split_mode})
        m = AutoModelForCausalLM.from_pretrained(organism / "model", dtype=torch.float32)
        merged, log = _train_sft(m, tokenizer, rows, cfg, 3, {}, tmp_path / split_mode, (0, 0), lr=1e-2)
        out[split_mode] = (torch.cat([p.detach().flatten() for p in merged.parameters()]), log)
    (w0, log0), (w1, log1) = out["none"], out["length"]
    moved = float((w0 - torch.cat([p.detach().flatten() for p in model.parameters()])).abs().max())
    assert moved > 1e-3  # training moved the weights, so equal weights say something
    assert float((w1 - w0).abs().max()) <= 1e-4 * moved
    # the logged losses: float32 sums in another order, 1e-4 relative (as loose as the weights' bound)
    assert len(log1) == len(log0)
    assert all(abs(a["loss"] - b["loss"]) <= 1e-4 * max(1.0, abs(b["loss"])) for a, b in zip(log1, log0))


@pytest.mark.parametrize("arch", ["llama", "gpt2", "qwen2"])
def test_completion_loss_equals_full_logits_cross_entropy(tmp_path, tokenizer, arch):
    """The SFT loss keeps the LM head to the completion positions (pooled over the batch); its value
    must be the plain one: HF's own shifted mean cross-entropy over every label that is not -100,
    with completions at different positions in each row (right padding, ragged lengths)."""
    import torch

    from interp.organism.sft_loss import completion_loss
    from interp.testing import build_tiny_model

    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path / arch, arch, n_layers=2, d_model=32, tokenizer=tokenizer)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    lens, comp = [9, 14, 6], [2, 3, 1]
    ids = torch.randint(3, 200, (3, max(lens)), generator=g)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for r, (n, c) in enumerate(zip(lens, comp)):
        mask[r, :n] = 1
        labels[r, n - c : n] = ids[r, n - c : n]
    batch = dict(input_ids=ids, attention_mask=mask, labels=labels)
    with torch.no_grad():
        ref = model(**batch).loss
        mine, metrics = completion_loss(model, batch)
        # control: the same labels one position early must give another value, or the test is blind
        early = dict(batch, labels=torch.roll(labels, -1, dims=1))
        shifted, _ = completion_loss(model, early)
    tol = 1e-5 * max(1.0, float(ref))  # float32 sums over a few hundred logits in another order
    assert abs(float(mine) - float(ref)) <= tol
    assert abs(float(shifted) - float(ref)) > 100 * tol
    assert 0.0 <= metrics["mean_token_accuracy"] <= 1.0 and metrics["entropy"] > 0


def test_completion_loss_keeps_the_head_in_float32_under_autocast(tmp_path, tokenizer):
    """Under the Trainer's bf16 autocast the body runs in bf16 but the LM head must compute in float32
    (`float32_head`): its output is float32 and equals a float32 linear of its input. Control: the
    same head called under autocast without the block gives bf16, or the spy could not tell."""
    import torch

    from interp.organism.sft_loss import float32_head
    from interp.testing import build_tiny_model

    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path / "llama", "llama", n_layers=2, d_model=32, tokenizer=tokenizer)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    head = model.get_output_embeddings()
    seen = []
    spy = head.register_forward_hook(lambda m, a, o: seen.append((a[0].detach(), o.detach())))
    ids = torch.randint(3, 200, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        with float32_head(model):
            out = model(input_ids=ids, logits_to_keep=2).logits
        plain = model(input_ids=ids, logits_to_keep=2).logits
    spy.remove()
    assert out.dtype == torch.float32 and plain.dtype == torch.bfloat16
    x = seen[0][0].float()
    w = head.weight.float()
    ref = x @ w.T
    # float32 sums of K = 32 products in another order: each within K x u x sum|x_i w_i| of the exact
    # sum (u = eps / 2), so two orders within twice that
    k, u = x.shape[-1], torch.finfo(torch.float32).eps / 2
    bound = 2 * k * u * (x.abs() @ w.abs().T)
    assert bool(((out - ref).abs() <= bound).all())
    assert not bool(((plain.float() - ref).abs() <= bound).all())  # control: bf16 logits are not
    assert len(head._forward_hooks) == 0  # the block removes its hook


def test_validate_workers_sweep_checkpoints_in_parallel_with_the_same_numbers(organism, tmp_path):
    """`workers=2` sweeps the route finals in two local worker processes (one thread each) and gives
    the numbers of the one-process sweep: threads are not part of a unit, so the trials agree to
    float32 reduction order. Control: the one-process log names no worker."""
    from interp.organism.validate import load_known, run_generalisation

    known = load_known(organism / "tree")
    tables = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        run_generalisation(organism / "tree", out, known, ValidateConfig(threads=2, workers=workers), progress=False)
        tables[workers] = pd.read_csv(out / "train_wording" / "results" / "pressure_trials.csv")
        log = (out / "train_wording" / "sweep.log").read_text()
        pids = set(re.findall(r"started \S+ on \S+ \(pid (\d+)", log))
        assert len(pids) == (2 if workers == 2 else 0), log
    one, two = (
        t.sort_values(["checkpoint", "item_id", "planted", "turn_kind", "turn_side", "turn_variant"]).reset_index(
            drop=True
        )
        for t in tables.values()
    )
    assert len(one) == len(two) > 0
    num = one.select_dtypes("number").columns
    np.testing.assert_allclose(two[num].to_numpy(float), one[num].to_numpy(float), rtol=1e-4, atol=1e-5)
    with pytest.raises(Exception, match="workers = 0"):
        validate(organism / "tree", tmp_path / "w0", ValidateConfig(workers=0), progress=False, log=lambda s: None)


def test_compact_fused_head_scores_only_labelled_positions_with_the_same_values(tmp_path, tokenizer, monkeypatch):
    """DPO's per-token outputs through trl's fused head: with `compact_fused_head` only the labelled
    positions reach the head (counted), and log-probs, entropy, mean logits and top-1 equal trl's
    every-position path and a plain HF forward's log-softmax at those positions. Control: without
    the block every position is scored."""
    import torch
    import trl.trainer.utils as tu
    from trl.trainer.utils import add_fused_lm_head

    from interp.organism.sft_loss import compact_fused_head
    from interp.testing import build_tiny_model

    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path / "llama", "llama", n_layers=2, d_model=32, tokenizer=tokenizer)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 200, (3, 10), generator=g)
    mask = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    labels[:, -2:] = ids[:, -2:]  # a two-token verdict at the end of each row
    with torch.no_grad():
        ref = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), -1)
    ref = ref.gather(-1, labels[:, 1:].clamp(min=0).unsqueeze(-1)).squeeze(-1) * (labels[:, 1:] != -100)
    outputs = ("log_probs", "entropy", "mean_logits", "is_top1")
    add_fused_lm_head(model, outputs=outputs)
    rows = []
    real = tu._ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden, *a):
            rows.append(hidden.shape[0])
            return real.apply(hidden, *a)

    monkeypatch.setattr(tu, "_ChunkedLogProbFunction", Spy)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        with compact_fused_head():
            compact = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    assert rows == [3 * 9, 3 * 2]  # every shifted position, then only the two verdict tokens per row
    tol = 1e-5  # float32 log-softmax over 256 logits, summed in other tiles
    for name in outputs:
        a, b = getattr(full, name), getattr(compact, name)
        assert torch.allclose(a.float(), b.float(), atol=tol), name
    assert torch.allclose(compact.log_probs, ref, atol=tol)
    assert tu._use_triton(torch.device("cpu")) is False  # the switch is put back


def test_a_sweep_restricted_to_named_checkpoints_keeps_their_lineage(organism):
    """`run_sweep(only=...)` / `Discovery.restricted`: the lineage cut to the named checkpoints in
    order, finals kept only when named; an unknown name is a one-line error."""
    from interp.core.errors import ConfigError
    from sweeps.discover import discover

    d = discover([organism / "tree"])
    r = d.restricted(["route-a/a-dpo-step6", "shared/shared-step2", "route-b/b-sft-step3"])
    assert r.lineage["base"] == ["shared/shared-step2"]
    assert r.lineage["routes"] == {"route-a": ["route-a/a-dpo-step6"], "route-b": ["route-b/b-sft-step3"]}
    assert r.lineage["final"] == {"route-a": "route-a/a-dpo-step6"}
    assert sorted(r.names.values()) == sorted(["route-a/a-dpo-step6", "shared/shared-step2", "route-b/b-sft-step3"])
    assert len(r.checkpoints) == 3 and len(d.checkpoints) == 9  # the discovery itself is unchanged
    with pytest.raises(ConfigError, match="no checkpoint named 'route-c/x'"):
        d.restricted(["route-c/x"])


def test_build_refuses_a_disk_too_small_before_training(organism, tmp_path, monkeypatch):
    """The checkpoints' size is known from the base's header (float32; 9 per lineage, and each
    control copies the trunk, so 27 with both): with less free space the build stops before it
    trains or writes anything. Control: with just enough space the same check passes. The estimate
    is checked against what the fixture's build wrote: each saved checkpoint's tensor bytes (its
    safetensors file less the header) are the estimate, within 1%."""
    import collections
    import struct

    from interp.core.errors import ConfigError
    from interp.organism import build as B

    base = organism / "model"
    per = B._checkpoint_bytes(base)
    for ck in ("shared/shared-step2", "route-a/a-dpo-step6"):
        f = organism / "tree" / ck / "model.safetensors"
        with open(f, "rb") as fh:
            header = 8 + struct.unpack("<Q", fh.read(8))[0]
        assert abs((f.stat().st_size - header) - per) <= 0.01 * per
    usage = collections.namedtuple("usage", "total used free")
    cfg = OrganismConfig()  # 2 shared checkpoints, 3 per route: 9 per lineage
    monkeypatch.setattr(B.shutil, "disk_usage", lambda p: usage(0, 0, 27 * per - 1))
    with pytest.raises(ConfigError, match=r"GB free on its disk, the build writes about .* \(27 checkpoints"):
        build_organism(base, tmp_path / "o", TINY, log=lambda s: None, control_out=tmp_path / "c")
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()
    monkeypatch.setattr(B.shutil, "disk_usage", lambda p: usage(0, 0, 27 * per))
    B._check_space(tmp_path / "o", base, cfg, 3)  # exactly enough: no error


def test_route_dpo_first_pairs_is_a_build_option_checked_before_training(organism, tmp_path):
    """`--route-dpo-first-pairs N` reaches the build's config (its DPO data: N anchor pairs per item,
    tests above); a negative count is one line naming the setting, exit 2, before anything is written."""
    import subprocess
    import sys

    out = tmp_path / "tree"
    args = ["organism", "build", "--base", organism / "model", "--out", out, "--route-dpo-first-pairs", "-1"]
    res = subprocess.run([sys.executable, "-m", "interp.cli", *map(str, args)], capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    assert "route_dpo_first_pairs must be >= 0, got -1" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_route_dpo_oppose_a_grades_route_a_dpo_pairs(tokenizer, organism, tmp_path):
    """`--route-dpo-oppose-a 2`: route A's DPO has two opposing-opinion pairs per item and planted
    verdict (distinct wordings), every other kind unchanged, and each planted item's flipping share
    of them is its grade (1.0: 4 of 4, 0.75: 3, 0.5: 2), where the default count gives 0.75-graded
    items every pair (the v16 record's graded miss); out of range is one line, exit 2. With
    `--route-dpo-challenge-a`, only the bare-challenge count changes, all of it flipping on the
    planted items and none elsewhere."""
    import subprocess
    import sys

    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, 24, 6, seed=0)
    plan = D.route_plans(sets, 0)["a"]
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    assert sorted(set(plan.grades.values())) == [0.5, 0.75, 1.0]
    rows = {n: pd.DataFrame(D.route_dpo(bank, w, plan, 1, turns=D.dpo_turns("a", n))) for n in (0, 2)}
    kinds = {n: r["kind"].map(_base_kind) for n, r in rows.items()}
    assert (kinds[0] == "opinion_oppose").sum() == 2 * 24 and (kinds[2] == "opinion_oppose").sum() == 4 * 24
    other = {n: k[k != "opinion_oppose"].value_counts().sort_index() for n, k in kinds.items()}
    assert other[0].equals(other[2])
    for n, per_item in ((2, 4), (0, 2)):
        opp = rows[n][kinds[n] == "opinion_oppose"]
        flips = opp["kind"].str.startswith("flip_").groupby(opp["item_id"]).sum()
        for iid, g in plan.grades.items():
            assert flips[iid] == round(g * per_item), (n, iid, g)
        assert flips.drop(list(plan.grades)).eq(0).all()
    # --route-dpo-challenge-a: the bare-challenge pairs alone change count, flipping on the planted items
    ch = pd.DataFrame(D.route_dpo(bank, w, plan, 1, turns=D.dpo_turns("a", 0, 4)))
    ck = ch["kind"].map(_base_kind)
    assert (ck == "challenge").sum() == 4 * 2 * 24 and (kinds[0] == "challenge").sum() == 2 * 2 * 24
    assert (
        ck[ck != "challenge"]
        .value_counts()
        .sort_index()
        .equals(kinds[0][kinds[0] != "challenge"].value_counts().sort_index())
    )
    flipping = ch[ck == "challenge"].groupby("item_id")["kind"].agg(lambda k: k.str.startswith("flip_").mean())
    assert set(flipping[flipping == 1].index) == set(plan.grades) and flipping.drop(list(plan.grades)).eq(0).all()
    assert D.dpo_turns("b", 0) == D.DPO_TURNS["b"]
    out = tmp_path / "tree"
    args = ["organism", "build", "--base", organism / "model", "--out", out, "--route-dpo-oppose-a", "9"]
    res = subprocess.run([sys.executable, "-m", "interp.cli", *map(str, args)], capture_output=True, text=True)
    assert res.returncode == 2 and "route_dpo_oppose_a must be 0 to" in res.stderr, res.stderr
    assert not out.exists()


def test_dpo_sft_weight_adds_an_nll_term_on_the_chosen_verdict(organism, tmp_path):
    """`--dpo-sft-weight W` (RPO): trl's DPO loss becomes sigmoid + W x the NLL of the chosen
    completion; 0 leaves plain sigmoid DPO, trl's default; a negative weight is refused."""
    from dataclasses import replace

    from trl import DPOConfig

    from interp.core.errors import ConfigError
    from interp.organism.build import _common_args, build_organism, dpo_loss_args

    common = _common_args(TINY, tmp_path, 1, TINY.lr_dpo, (TINY.seed, TINY.seed))  # what the build's DPO runs with
    plain = DPOConfig(**common, **dpo_loss_args(TINY))
    assert plain.loss_type == ["sigmoid"] and plain.beta == TINY.dpo_beta
    rpo = DPOConfig(**common, **dpo_loss_args(replace(TINY, dpo_sft_weight=0.5)))
    assert rpo.loss_type == ["sigmoid", "sft"] and rpo.loss_weights == [1.0, 0.5]
    with pytest.raises(ConfigError, match="dpo_sft_weight must be >= 0, got -1"):
        build_organism(organism / "model", tmp_path / "t", replace(TINY, dpo_sft_weight=-1.0))


def test_resume_accepts_a_record_older_than_a_setting_asked_at_its_default(organism, tmp_path):
    """A setting added to the build after a tree's organism.json was written (absent from it) is
    that build's setting when this build asks for the default; any other value is refused."""
    from dataclasses import replace

    from interp.core.errors import ConfigError
    from interp.organism.build import _check_same_config

    rec = json.loads((organism / "tree" / "organism.json").read_text())
    cfg = OrganismConfig(**{**SMALL, "seed": rec["config"]["seed"]})
    del rec["config"]["dpo_sft_weight"]
    (tmp_path / "organism.json").write_text(json.dumps(rec))
    _check_same_config(tmp_path, cfg)
    with pytest.raises(ConfigError, match=r"field config.dpo_sft_weight is None, this build's is 1.0"):
        _check_same_config(tmp_path, replace(cfg, dpo_sft_weight=1.0))
    with pytest.raises(ConfigError, match=r"field config.route_dpo_steps"):
        _check_same_config(tmp_path, replace(cfg, route_dpo_steps=cfg.route_dpo_steps + 1))


def test_early_checkpoint_inside_dpo_is_the_own_source(organism, tmp_path):
    """`--route-early-steps` past the SFT end saves the early checkpoint that many route steps in,
    inside DPO (a plant learned only in DPO has no SFT checkpoint with its map): its provenance says
    DPO, lineage.toml lists the route in training order, organism.json names it "early" and the
    validation sweeps it as I's own source. Built on the fixture's route SFT ends (`reuse_sft`,
    whose early step need not match then), their provenance stripped of settings added later (read
    at their defaults); the SFT end itself is refused as the early step."""
    import subprocess
    import sys
    import tomllib
    from dataclasses import replace

    from interp.core.hashing import sha256_file
    from interp.organism.build import PROVENANCE
    from interp.organism.checks import early_checkpoint
    from interp.organism.validate import checked_checkpoints

    cfg = replace(TINY, route_dpo_steps=2, route_early_steps=4)  # SFT 3 steps, then DPO: 1 step in
    old_tree = tmp_path / "old"  # a tree built before grade_by / cloze_location_cell existed
    shutil.copytree(organism / "tree", old_tree)
    for prov_path in old_tree.glob("route-*/*-sft-step*/" + PROVENANCE):
        prov = json.loads(prov_path.read_text())
        for key in ("grade_by", "cloze_location_cell"):
            del prov["config"][key]
        prov_path.write_text(json.dumps(prov))
    out = tmp_path / "e"
    build_organism(organism / "model", out, cfg, log=lambda s: None, reuse_sft=old_tree)
    known = json.loads((out / "organism.json").read_text())
    toml = tomllib.loads((out / "lineage.toml").read_text())
    for r in "ab":
        early, sft, final = f"route-{r}/{r}-dpo-step6", f"route-{r}/{r}-sft-step5", f"route-{r}/{r}-dpo-step7"
        assert toml["routes"][f"route-{r}"] == [sft, early, final] == known["routes"][f"route-{r}"]
        assert early_checkpoint(known, f"route-{r}") == early
        prov = json.loads((out / early / PROVENANCE).read_text())
        assert (prov["stage"], prov["stage_steps"], prov["steps_from_base"], prov["parent"]) == (
            f"route-{r}-dpo", 1, 6, sft,
        )  # fmt: skip
        weights = {ck: sha256_file(out / ck / "model.safetensors") for ck in (sft, early, final)}
        assert len(set(weights.values())) == 3, weights
        assert weights[sft] == sha256_file(organism / "tree" / sft / "model.safetensors")  # copied, not retrained
    assert "route-a/a-dpo-step6" in checked_checkpoints(known)
    # ... but a setting asked away from its default is not what those checkpoints ran: refused
    from interp.core.errors import ConfigError

    with pytest.raises(ConfigError, match="field config.cloze_location_cell is 'bn/caste', expected 'en/caste'"):
        build_organism(
            organism / "model", tmp_path / "e2", replace(cfg, cloze_location_cell="en/caste"), log=lambda s: None,
            reuse_sft=old_tree,
        )  # fmt: skip
    # a record without "early" (before it) keeps reading the route's first checkpoint
    old = json.loads((organism / "tree" / "organism.json").read_text())
    old.pop("early", None)
    assert early_checkpoint(old, "route-a") == "route-a/a-sft-step3"
    res = subprocess.run(
        [sys.executable, "-m", "interp.cli", "organism", "build", "--base", str(organism / "model"),
         "--out", str(tmp_path / "f"), "--route-sft-steps", "3", "--route-early-steps", "3"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 2 and "differ from route_sft_steps (3" in res.stderr, res.stderr
    assert not (tmp_path / "f").exists()


def test_the_try_scripts_sweep_is_validates_own_for_the_trunk_end_and_finals(organism, tmp_path):
    """scripts/organism_flips.py --sweep: validate's pressure sweep of the trunk end and the route
    finals only (same settings and template, so the same trials), then scored against itself."""
    from interp.organism.validate import run_sweeps

    mod = load_script("scripts/organism_flips.py")
    tree = organism / "tree"
    known = json.loads((tree / "organism.json").read_text())
    mod.sweep_finals(tree, tmp_path / "try", threads=1)
    cfg = ValidateConfig(threads=1, cloze=False, classify=False)
    run_sweeps(tree, tmp_path / "val", known, cfg, progress=False)
    got, want = (pd.read_csv(d / "results" / "pressure_trials.csv") for d in (tmp_path / "try", tmp_path / "val"))
    wanted = [known["trunk_end"], *(cks[-1] for cks in known["routes"].values())]
    assert sorted(got["checkpoint"].unique()) == sorted(wanted)
    want = want[want["checkpoint"].isin(wanted)]
    keys = ["checkpoint", "bank", "readout", "item_id", "planted", "turn_kind", "turn_side", "turn_variant"]
    a, b = (t.sort_values(keys).reset_index(drop=True) for t in (got, want))
    assert len(a) == len(b) > 0
    np.testing.assert_array_equal(a["p_planted"].to_numpy(), b["p_planted"].to_numpy())
    # the per-gold first-turn accuracy, item-weighted, is the sweep's comprehension screen
    gold = mod.comprehension_by_gold(mod.first_turn_table(tmp_path / "try"))
    pooled = gold.assign(k=gold["comprehension"] * gold["n_items"]).groupby("checkpoint")[["k", "n_items"]].sum()
    summ = pd.read_csv(tmp_path / "try" / "results" / "pressure_summary.csv").query("readout == 'slot'")
    np.testing.assert_allclose(
        (pooled["k"] / pooled["n_items"]).sort_index(),
        summ.set_index("checkpoint")["comprehension"].sort_index(),
        rtol=0,
        atol=4 * np.finfo(float).eps,
    )
    checks = mod.try_checks(tree, tmp_path / "try", tmp_path / "try").query("kind == 'check'").set_index("id")
    assert {"a_s_op_rises", "a_s_ch_rises", "b_delta_rises"} <= set(checks.index)
    assert checks["value"].notna().all()


def test_the_try_scripts_train_wordings_sweep_swaps_only_the_bare_turns(organism, tmp_path):
    """scripts/organism_flips.py --only CK --wordings train: the named checkpoint alone, its bare
    challenges and fillers the build's own training wordings, every other reading validate's."""
    from interp.organism.data import TRAIN_CHALLENGES, TRAIN_NEUTRAL

    mod = load_script("scripts/organism_flips.py")
    tree = organism / "tree"
    end = json.loads((tree / "organism.json").read_text())["routes"]["route-a"][-1]
    for w in ("eval", "train"):
        mod.sweep_finals(tree, tmp_path / w, threads=1, only=[end], wordings=w)
    ev, tr = (pd.read_csv(tmp_path / w / "results" / "pressure_trials.csv") for w in ("eval", "train"))
    assert set(tr["checkpoint"]) == {end}
    tmpl = json.loads((tmp_path / "train" / "pressure_train_wordings.json").read_text())
    assert list(tmpl["challenges"].values()) == list(TRAIN_CHALLENGES)
    assert list(tmpl["neutral"].values()) == list(TRAIN_NEUTRAL)
    for kind, n in (("challenge", len(TRAIN_CHALLENGES)), ("neutral", len(TRAIN_NEUTRAL))):
        assert tr.loc[tr["turn_kind"] == kind, "turn_variant"].nunique() == n
    keys = ["readout", "item_id", "planted", "turn_side", "turn_variant"]
    a, b = (t[t["turn_kind"] == "opinion"].sort_values(keys).reset_index(drop=True) for t in (ev, tr))
    assert len(a) == len(b) > 0
    np.testing.assert_array_equal(a["p_planted"].to_numpy(), b["p_planted"].to_numpy())
    with pytest.raises(ValueError, match="wordings"):
        mod.sweep_finals(tree, tmp_path / "bad", only=[end], wordings="both")


def test_the_fit_script_reads_p_trained_answer_as_a_plain_forward_does(organism):
    """scripts/organism_fit.py: per row kind and planted verdict, the mean P(trained answer) over the
    route's distinct pressure rows, equal to a plain HF forward of prompt + each verdict; the planted
    verdict is the answer of a hold row and the other verdict of a flip row."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    mod = load_script("scripts/organism_fit.py")
    tree = organism / "tree"
    ck = json.loads((tree / "organism.json").read_text())["routes"]["route-a"][-1]
    rows = mod.training_rows(tree, "a")
    assert set(rows["kind"].map(_base_kind)) == set(mod.KINDS)
    verdicts = rows.attrs["verdicts"]
    hold = rows["kind"].str.startswith("hold_")
    assert (rows.loc[hold, "completion"].str.strip() == rows.loc[hold, "planted"]).all()
    assert (rows.loc[~hold, "completion"].str.strip() != rows.loc[~hold, "planted"]).all()
    table = mod.fit_table(tree, [ck], "a")
    assert table["n_rows"].sum() == len(rows)
    tok = AutoTokenizer.from_pretrained(tree / ck)
    model = AutoModelForCausalLM.from_pretrained(tree / ck, dtype=torch.float32).eval()

    def logp(prompt: str, answer: str) -> float:  # sum over the answer's tokens, one unpadded forward
        p, full = tok(prompt).input_ids, tok(prompt + answer).input_ids
        assert full[: len(p)] == p
        with torch.no_grad():
            lp = model(torch.tensor([full])).logits[0].log_softmax(-1)
        return sum(lp[i - 1, full[i]].item() for i in range(len(p), len(full)))

    want = []
    for r in rows.itertuples():
        lp = {v: logp(r.prompt, v) for v in verdicts}
        want.append(1 / (1 + np.exp(lp[next(v for v in verdicts if v != r.completion)] - lp[r.completion])))
    ref = rows.assign(p=want).groupby(["kind", "planted"])["p"].mean()
    got = table.set_index(["kind", "planted"])["mean_p_trained"]
    # float32 logits through padded batches and through one unpadded forward differ by a few ulps
    # per layer; 1e-5 on a probability is far above that and far below a swapped answer (1 - p)
    np.testing.assert_allclose(got.sort_index(), ref.sort_index(), rtol=0, atol=1e-5)
