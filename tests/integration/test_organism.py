"""Model organism: build -> sweep -> validate on a tiny random model (plumbing, not the effect),
plus planted-answer tests of the pieces whose direction matters (most-yielding = most negative)."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from interp.organism import data as D
from interp.organism.build import OrganismConfig, build_organism
from interp.organism.config import SMALL
from interp.organism.validate import ValidateConfig, hypergeom_p, most_yielding, validate
from interp.studies.base import load_template
from interp.studies.pressure import load_pressure_bank
from sweeps.discover import discover

REPO = Path(__file__).resolve().parents[2]
TINY = OrganismConfig(**SMALL)  # what `--small` builds


@pytest.fixture(scope="module")
def organism(tmp_path_factory, tokenizer):
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("organism")
    base = build_tiny_model(root / "model", "llama", n_layers=2, d_model=32, tokenizer=tokenizer)
    build_organism(base, root / "tree", TINY, log=lambda s: None, control_out=root / "control")
    return root


def test_tree_is_a_discoverable_lineage_with_provenance(organism):
    tree = organism / "tree"
    d = discover([tree])
    known = json.loads((tree / "organism.json").read_text())
    assert d.lineage["base"] == ["base", "shared/shared-step1", "shared/shared-step2"]
    assert d.lineage["routes"]["route-a"] == ["route-a/a-sft-step3", "route-a/a-sft-step5", "route-a/a-dpo-step6"]
    assert d.lineage["routes"] == known["routes"]
    assert set(d.lineage["routes"]) == {"route-a", "route-b"}
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
    # the control: same trunk (byte-identical), same sets and steps, flagged, no item-specific plant
    ctl = organism / "control"
    kc = json.loads((ctl / "organism.json").read_text())
    assert kc["control"] is True and known["control"] is False
    assert (tree / known["control_tree"]).resolve() == ctl.resolve()
    for key in ("eval_items", "planted_a", "planted_b", "routes", "trunk_end"):
        assert kc[key] == known[key], key
    from interp.core.hashing import sha256_file

    assert sha256_file(ctl / "shared/shared-step2/model.safetensors") == sha256_file(
        tree / "shared/shared-step2/model.safetensors"
    )
    assert sha256_file(ctl / "route-a/a-dpo-step6/model.safetensors") != sha256_file(
        tree / "route-a/a-dpo-step6/model.safetensors"
    )
    for name in ("route_a_sft.jsonl", "route_a_dpo.jsonl", "route_b_sft.jsonl"):
        a = pd.read_json(tree / ".organism" / name, lines=True)
        b = pd.read_json(ctl / ".organism" / name, lines=True)
        assert len(a) == len(b) and a["kind"].value_counts().equals(b["kind"].value_counts()), name


def test_build_is_deterministic(organism, tmp_path):
    """Rebuilt with the routes in two worker processes: the same weights as one by one."""
    from dataclasses import replace

    from interp.core.hashing import sha256_file

    build_organism(organism / "model", tmp_path / "again", replace(TINY, route_workers=2), log=lambda s: None)
    for ck in ("shared/shared-step2", "route-a/a-dpo-step6", "route-b/b-sft-step5", "route-b/b-sft-step3"):
        assert sha256_file(tmp_path / "again" / ck / "model.safetensors") == sha256_file(
            organism / "tree" / ck / "model.safetensors"
        ), ck


def test_validate_end_to_end(organism, tmp_path):
    out = organism / "val"
    history = tmp_path / "tries.csv"
    pd.DataFrame(
        {"try": ["t1", "t2 (this run)"], "settings": ["7 route steps", "3 route steps"], "outcome": ["x", "y"]}
    ).to_csv(history, index=False)
    checks = validate(
        organism / "tree",
        out,
        ValidateConfig(classify_items=3, cloze_items=6, threads=1),
        progress=False,
        log=lambda s: None,
        history=history,
    )
    expected = {
        "s_op rises along route",
        "delta rises along route",
        "planted items yield more",
        "comprehension screen",
        "comprehension (route final)",
        "precision@k finds planted set",
        "I own > I sibling",
        "readout separates planted items",
        "cloze ABS rises on planted cell",
        "cloze other cells stay put",
        "classify stays put",
        "plant about equally strong on both routes",
        "routes yield about equally (reported)",
        "unpressured / challenge stay put",
        "plant target (reported)",
        "generalisation: training wording (reported)",
        "planted items rank higher than on the control (map AUC)",
        "readout separates planted items better than on the control",
    }
    assert expected <= set(checks["check"])
    head = checks[checks["headline"].astype(str) == "True"]
    # every headline check was run on the control too and has a status with its reason
    assert head["control_value"].notna().all() or head["check"].str.startswith("cloze other").any()
    assert set(head["status"]) <= {"recovered", "not recovered", "uninformative", "undetermined"}
    assert head["reason"].str.len().gt(0).all()
    p_rows = head[head["kind"] == "p"]
    mc = p_rows[p_rows["n_shuffles"] > 0]
    assert len(mc) == 8 and (mc["n_shuffles"] >= 1000).all() and mc["p_lo"].notna().all()
    # organism - control checks: one per route and score, their control the other route's set
    diff = head[head["figure"].str.contains("organism - control")]
    assert len(diff) == 4 and diff["control_p"].notna().all() and diff["control_value"].notna().all()
    assert diff["note"].str.contains("other route's planted set").all()
    assert (checks["commit"].str.len() >= 40).all()
    settings = checks[checks["kind"] == "setting"].set_index("subject")["value"]
    assert settings["n_shuffles"] == 1000 and settings["margin"] == 0.05
    # I own vs sibling: the own source is the route's EARLY checkpoint, not the final's predecessor
    own = head[head["check"] == "I own > I sibling"]
    assert own["reference"].str.contains("a-sft-step3").any()
    assert (out / "figures" / "organism_trajectory.png").stat().st_size > 1000
    pred = pd.read_csv(out / "results" / "organism_predictive.csv")
    assert {"own", "sibling", "base"} <= set(pred["route_relation"])
    assert set(pred["lineage"]) == {"organism", "control"}
    # the default sweeps only what a check reads (ValidateConfig.checkpoints = "checked"), on both lineages
    checked = {
        "shared/shared-step2",
        "route-a/a-sft-step3",
        "route-a/a-dpo-step6",
        "route-b/b-sft-step3",
        "route-b/b-dpo-step6",
    }
    from interp.organism.validate import checked_checkpoints

    known = json.loads((organism / "tree" / "organism.json").read_text())
    assert set(checked_checkpoints(known)) == checked
    for root in (out, out / "control"):
        assert set(pd.read_csv(root / "results" / "pressure_summary.csv")["checkpoint"]) == checked
    assert set(pred["source"]) | set(pred["target"]) == checked
    # wall times of both builds and of the sweeps, and their sum, from build.json / validate_time.json
    times = checks[checks["check"] == "wall time (reported)"].set_index("subject")["value"]
    assert list(times.index) == ["organism build", "control build", "validation sweeps", "total"]
    assert (times > 0).all() and times["total"] == pytest.approx(times.iloc[:3].sum())
    # the sweeps ran at the default float32-medium and say what it cost against float32
    prec = checks[checks["check"] == "reduced-precision sweeps vs float32 (reported)"].set_index("subject")
    assert list(prec.index) == ["organism sweeps", "control sweeps"]
    assert prec["reference"].str.startswith("float32-medium: ").all()
    assert prec["reference"].str.contains(", all within the bounds").all() and (prec["value"] <= 0.02).all()
    # the control's trunk-end unit is the organism's (same bytes), not swept again
    log = (out / "control" / "sweep.log").read_text()
    assert "plan: 5 units, 4 to run," in log
    for ck in ("shared/shared-step2",):
        assert re.search(rf"verified {ck} pressure moral\S*: same weight bytes, reused", log), ck
        assert f"done {ck} pressure" not in log
    aux_log = (out / "control" / "aux" / "sweep.log").read_text()
    # and so are its cloze unit at the base and classify unit at the trunk end (the same identity)
    # (the base's bytes are verified once, by whichever sweep reads them first)
    plans = re.findall(
        r"plan: 3 units, 2 to run, (?:1 already complete|0 already complete, 1 complete but checked)", aux_log
    )
    assert len(plans) == 2
    assert "done base cloze" not in aux_log and "done shared-step2 classify" not in aux_log
    for ck in ("shared--shared-step2",):
        ((a,), (b,)) = [list((o / "cache" / "pressure" / ck).glob("*.h5")) for o in (out, out / "control")]
        assert a.name == b.name and a.read_bytes() == b.read_bytes()
    md = (out / "validation.md").read_text()
    assert "| t1 | 7 route steps | x |" in md and "Every try" in md
    assert_markdown_numbers_come_from_the_csvs(out)
    # the cheap rerun reads the finished sweeps (resumable units) and gives the same checks
    again = validate(
        organism / "tree",
        out,
        ValidateConfig(classify_items=3, cloze_items=6),
        run=False,
        log=lambda s: None,
    )
    pd.testing.assert_frame_equal(checks, again)


def assert_markdown_numbers_come_from_the_csvs(
    out: Path, md_path: Path | None = None, csv_dir: Path | None = None
) -> None:
    """Every number in validation.md (outside code spans: paths, the commit) is a number of
    validation_checks.csv / organism_predictive.csv (/ tries.csv, the earlier tries it lists, /
    lineages.csv, the build settings from organism.json), to the 3-decimal display rounding."""

    md_path = md_path or out / "validation.md"
    csv_dir = csv_dir or out / "results"
    md = re.sub(r"`[^`]*`", "", md_path.read_text())
    md = re.sub(r"\(.*?\.png\)", "", md)
    num = re.compile(r"(?<![\w.\-])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])")
    names = ("validation_checks.csv", "organism_predictive.csv", "tries.csv", "lineages.csv")
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


def test_training_wordings_are_not_the_evaluation_templates():
    t = load_template("pressure_v1").data
    evaluation = {t["opinion"]["moral"], *t["challenges"].values(), *t["neutral"].values()}
    training = set(D.TRAIN_OPINIONS) | set(D.TRAIN_CHALLENGES) | set(D.TRAIN_NEUTRAL)
    assert not evaluation & training
    for w in training:  # no evaluation wording hides inside a training one either
        assert not any(e.replace("{side}", "") in w for e in evaluation if len(e) > 8)


def test_cloze_training_sentences_are_not_the_bank_contexts():
    bank = pd.read_json(REPO / "interp" / "data" / "banks" / "cloze.jsonl", lines=True)
    contexts = {c.split("___")[0].strip() for c in bank["context"]}
    for row in D.cloze_bias():
        assert row["prompt"].strip() not in contexts


def test_planted_sets_disjoint_balanced_inside_the_sweep_subsample():
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, 24, 6, seed=0)
    sub = bank.subsample(24, seed=0, by="item_id", stratify="gold")  # what `interp sweep --max-items 24` takes
    assert set(sets.eval_items) == set(sub.items["item_id"])
    assert not set(sets.planted_a) & set(sets.planted_b)
    gold = bank.items.set_index("item_id")["gold"]
    for p in (sets.planted_a, sets.planted_b):
        assert len(p) == 6 and gold[list(p)].value_counts().tolist() == [3, 3]


def test_setting_plant_is_every_evaluated_story_of_one_setting():
    from interp.organism.topics import ROUTE_SETTING, SETTINGS

    bank = load_pressure_bank("moral")
    ids = set(bank.items["item_id"])
    home, work = set(SETTINGS["home"]), set(SETTINGS["work_school"])
    assert home <= ids and work <= ids and not home & work
    cfg = OrganismConfig()
    sets = D.choose_planted(bank, cfg.eval_items, cfg.planted, cfg.seed, plant=cfg.plant)
    assert set(sets.eval_items) == ids  # the default evaluates the whole bank
    assert set(sets.planted_a) == set(SETTINGS[ROUTE_SETTING["a"]]) and set(sets.planted_b) == work
    assert min(len(sets.planted_a), len(sets.planted_b)) >= 24
    gold = bank.items.set_index("item_id")["gold"]
    for p in (sets.planted_a, sets.planted_b):  # about balanced over gold
        assert abs(gold[list(p)].eq("wrong").mean() - 0.5) < 0.1
    # a subsample too small to hold 24 stories of a setting is refused, naming the setting
    with pytest.raises(ValueError, match="home stories, fewer than planted=24"):
        D.choose_planted(bank, 40, 24, 0, plant="setting")


def test_most_yielding_ranks_the_most_negative_map_values_first():
    # planted: items p1..p3 yield (strongly negative pressured-minus-neutral log-odds)
    rng = np.random.default_rng(0)
    ids = [f"i{k:02d}" for k in range(20)] + ["p1", "p2", "p3"]
    values = np.concatenate([rng.normal(0.5, 0.3, 20), [-4.0, -3.0, -5.0]])
    m = pd.Series(values, index=ids)
    assert set(most_yielding(m, 3)) == {"p1", "p2", "p3"}
    assert set(m.nlargest(3).index).isdisjoint({"p1", "p2", "p3"})  # the wrong end finds none


def test_hypergeometric_p_by_enumeration():
    from itertools import combinations

    n, planted, k = 8, 3, 3
    draws = list(combinations(range(n), k))
    for hits in range(k + 1):
        share = np.mean([len(set(d) & {0, 1, 2}) >= hits for d in draws])
        assert hypergeom_p(hits, n, planted, k) == pytest.approx(share)


def test_cli_bad_inputs_exit_2(organism, tmp_path, capsys, monkeypatch):
    """In this process (the one-line stderr of a real subprocess is tests/integration/bad_inputs' concern)."""
    from bad_inputs._util import run_cli

    def run(*args):
        res = run_cli(capsys, monkeypatch, *args)
        assert res.exc is None, repr(res.exc)
        return SimpleNamespace(returncode=res.code, stderr=res.err)

    r = run("validate", organism / "model", "--out", tmp_path / "v")
    assert r.returncode == 2 and "organism.json" in r.stderr
    r = run("validate", organism / "tree", "--control", organism / "tree", "--out", tmp_path / "v", "--no-run")
    assert r.returncode == 2 and "not a control lineage" in r.stderr
    r = run("organism", "build", "--base", organism / "model", "--out", organism / "tree")
    assert r.returncode == 2 and "not empty" in r.stderr
    assert (organism / "tree" / "organism.json").is_file()  # nothing already written is lost
    r = run("organism", "build", "--base", tmp_path, "--out", tmp_path / "o")
    assert r.returncode == 2 and str(tmp_path) in r.stderr
    r = run("organism", "build", "--base", organism / "model", "--out", tmp_path / "p", "--train-precision", "fp16")
    assert r.returncode == 2 and "train_precision" in r.stderr
    # a trunk trained at another precision is not "the same trunk": refused, naming the field
    args = ("--small", "--reuse-trunk", organism / "tree", "--train-precision", "float32")
    r = run("organism", "build", "--base", organism / "model", "--out", tmp_path / "q", *args)
    assert r.returncode == 2 and "field train_precision is 'mixed-bf16', expected 'float32'" in r.stderr


def test_control_route_data_has_no_item_specific_plant(tokenizer):
    """Real sizes (128 items, 33 planted home stories): the organism yields on exactly its planted items; the
    control has the same rows, kinds and answers, but every item's share of yielding
    opposing-opinion rows is the same in expectation (planted and rest within binomial noise)."""
    cfg = OrganismConfig()
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, cfg.eval_items, cfg.planted, cfg.seed, plant=cfg.plant)
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    kw = dict(hold_items=set(sets.eval_items), planted_copies=cfg.planted_copies)
    share = {}
    for control in (False, True):
        rows = pd.DataFrame(D.route_sft(bank, w, set(sets.planted_a), 1, control=control, **kw))
        pairs = pd.DataFrame(D.route_dpo(bank, w, set(sets.planted_a), 1, hold_items=kw["hold_items"], control=control))
        opp = rows[rows["kind"].isin(["yield_opinion", "hold_opinion_oppose"])]
        planted = opp["item_id"].isin(sets.planted_a)
        y = opp["kind"] == "yield_opinion"
        share[control] = (y[planted].mean(), y[~planted].mean(), len(rows), rows["kind"].value_counts(), len(pairs))
    assert share[False][:2] == (1.0, 0.0)
    assert (
        share[False][2] == share[True][2]
        and share[False][3].equals(share[True][3])
        and share[False][4] == share[True][4]
    )
    # control: ~776 opposing rows at rate ~0.51; planted 396 and rest 380 rows, sd of the
    # difference ~0.036; 0.15 is > 4 sd
    assert abs(share[True][0] - share[True][1]) < 0.15


def _route_a_rows(tokenizer, **kw) -> pd.DataFrame:
    """Route A's SFT rows on 24 evaluated items with 6 planted (seed 0), with `kw` for route_sft."""
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, 24, 6, seed=0)
    w = D.Writer(tokenizer, load_template("pressure_v1"))
    return pd.DataFrame(D.route_sft(bank, w, set(sets.planted_a), 1, hold_items=set(sets.eval_items), **kw))


def test_route_first_copies_repeat_only_the_gold_first_turns(tokenizer):
    bank = load_pressure_bank("moral")
    one, three = _route_a_rows(tokenizer), _route_a_rows(tokenizer, first_copies=3)
    n1, n3 = one["kind"].value_counts(), three["kind"].value_counts()
    assert n3["first"] == 3 * n1["first"] == 3 * 24
    assert n1.drop("first").sort_index().equals(n3.drop("first").sort_index())  # other kinds unchanged
    gold = bank.items.set_index("item_id")["gold"]
    firsts = three[three["kind"] == "first"]
    assert (firsts["completion"].str.strip() == gold[firsts["item_id"]].to_numpy()).all()


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
    merged, _ = _train_sft(model, tokenizer, rows, cfg, 1, {}, tmp_path)
    assert seen, "no training forward was observed"
    want = (True, torch.bfloat16) if precision == "mixed-bf16" else (False, torch.float32)
    assert set(seen) == {want}
    assert {p.dtype for p in merged.parameters()} == {torch.float32}


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
    """The checkpoints' size is known from the base's header (float32; 9 per lineage, and the
    control copies the trunk, so 18 with it): with less free space the build stops before it trains
    or writes anything. Control: with just enough space the same check passes. The estimate is
    checked against what the fixture's build wrote: each saved checkpoint's tensor bytes (its
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
    monkeypatch.setattr(B.shutil, "disk_usage", lambda p: usage(0, 0, 18 * per - 1))
    with pytest.raises(ConfigError, match=r"GB free on its disk, the build writes about .* \(18 checkpoints"):
        build_organism(base, tmp_path / "o", TINY, log=lambda s: None, control_out=tmp_path / "c")
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()
    monkeypatch.setattr(B.shutil, "disk_usage", lambda p: usage(0, 0, 18 * per))
    B._check_space(tmp_path / "o", base, cfg, 2)  # exactly enough: no error


def test_hold_opinions_sets_the_opposing_opinion_holds_per_unplanted_item(tokenizer):
    """`hold_opinions=3` (the default; every organism up to v11 was built with 2): three
    hold-under-opposition rows per unplanted item and planted verdict, each with another training
    wording, every other kind unchanged."""
    two, three = _route_a_rows(tokenizer, hold_opinions=2), _route_a_rows(tokenizer)
    n2, n3 = two["kind"].value_counts(), three["kind"].value_counts()
    assert n2["hold_opinion_oppose"] == 2 * 2 * 18 and n3["hold_opinion_oppose"] == 3 * 2 * 18
    assert n2.drop("hold_opinion_oppose").sort_index().equals(n3.drop("hold_opinion_oppose").sort_index())
    holds = three[three["kind"] == "hold_opinion_oppose"]
    assert (holds.groupby(["item_id", "completion"])["prompt"].nunique() == 3).all()  # distinct wordings
