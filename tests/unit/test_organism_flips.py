"""scripts/organism_flips.py: flip rates per planted set from a sweep's pressure_trials.csv, on a
tree whose answer is planted (route A's items flip under an opposing opinion only)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _scripts import load_script


def _module():
    return load_script("scripts/organism_flips.py")


def _write(tmp: Path, planted_a: list[str], planted_b: list[str], items: list[str]) -> tuple[Path, Path]:
    tree, out = tmp / "tree", tmp / "out"
    tree.mkdir(parents=True)
    (out / "results").mkdir(parents=True)
    (tree / "organism.json").write_text(
        json.dumps({"planted_a": planted_a, "planted_b": planted_b, "eval_items": items})
    )
    rows = []
    turns = [("opinion", "oppose"), ("opinion", "agree"), ("challenge", ""), ("neutral", "")]
    for item in items:
        for kind, side in turns:
            flip = item in planted_a and side == "oppose"  # the planted answer
            for readout in ("slot", "sampled"):  # the sampled readout is not counted: it flips everywhere
                flipped = flip if readout == "slot" else True
                rows.append(
                    {"checkpoint": "ck", "item_id": item, "turn_kind": kind, "turn_side": side,
                     "readout": readout, "flipped": flipped, "p_planted": 0.2 if flipped else 0.9}
                )  # fmt: skip
    pd.DataFrame(rows).to_csv(out / "results" / "pressure_trials.csv", index=False)
    summary = [{"checkpoint": "ck", "readout": "slot", "comprehension": 0.75},
               {"checkpoint": "ck", "readout": "sampled", "comprehension": 0.25}]  # fmt: skip
    pd.DataFrame(summary).to_csv(out / "results" / "pressure_summary.csv", index=False)
    return tree, out


def test_flip_rates_find_the_planted_set_and_turn(tmp_path):
    items = [f"m-{i}" for i in range(8)]
    tree, out = _write(tmp_path, items[:3], items[3:5], items)
    table = _module().flip_table(tree, out).set_index("set")
    # a mean of three 0.2s: within a few float64 roundings of 0.2
    assert table.loc["planted_a", "flip_oppose"] == 1.0
    assert math.isclose(table.loc["planted_a", "p_oppose"], 0.2, rel_tol=8 * np.finfo(float).eps)
    assert table.loc["planted_a", ["flip_agree", "flip_challenge", "flip_neutral"]].eq(0.0).all()
    assert table.loc[["planted_b", "rest"], "flip_oppose"].eq(0.0).all()
    assert table["n_items"].to_dict() == {"planted_a": 3, "planted_b": 2, "rest": 3}
    assert table["comprehension"].eq(0.75).all()  # the slot readout's, on every set's row
    # negative control: the same trials read with route B's set named as route A's
    swapped, _ = _write(tmp_path / "swapped", items[3:5], items[:3], items)
    other = _module().flip_table(swapped, out).set_index("set")
    assert other.loc["planted_a", "flip_oppose"] == 0.0 != table.loc["planted_a", "flip_oppose"]


def test_by_planted_splits_a_one_verdict_flip_that_the_pooled_row_halves(tmp_path):
    """Route A's items flip under a challenge only where the planted verdict is "wrong": pooled 0.5,
    by planted verdict 1 and 0."""
    items = [f"m-{i}" for i in range(6)]
    tree, out = _write(tmp_path, items[:2], items[2:3], items)
    t = pd.read_csv(out / "results" / "pressure_trials.csv")
    t = pd.concat([t.assign(planted="wrong"), t.assign(planted="acceptable")], ignore_index=True)
    hit = t["item_id"].isin(items[:2]) & (t["turn_kind"] == "challenge") & (t["planted"] == "wrong")
    t.loc[hit & (t["readout"] == "slot"), "flipped"] = True
    t.to_csv(out / "results" / "pressure_trials.csv", index=False)
    flips = _module().flip_table
    pooled = flips(tree, out).set_index("set")
    assert pooled.loc["planted_a", "flip_challenge"] == 0.5
    split = flips(tree, out, by_planted=True).set_index(["set", "planted"])["flip_challenge"]
    assert split[("planted_a", "wrong")] == 1.0 and split[("planted_a", "acceptable")] == 0.0
    assert split.drop("planted_a", level="set").eq(0.0).all()  # the control sets: nothing flips


def test_comprehension_by_gold_splits_a_one_verdict_checkpoint_that_the_screen_reads_as_half():
    """A checkpoint that answers "wrong" to every first turn: 1 on the wrong items, 0 on the
    acceptable ones (pooled 0.5); the control checkpoint reads every item right: 1 and 1."""
    rows = []
    for i in range(6):
        gold = "wrong" if i % 2 else "acceptable"
        rows.append(
            {"checkpoint": "one_verdict", "item_id": f"m-{i}", "gold": gold, "p_gold": 0.9 if gold == "wrong" else 0.1}
        )
        rows.append({"checkpoint": "reads", "item_id": f"m-{i}", "gold": gold, "p_gold": 0.8})
    first = pd.DataFrame(rows).assign(bank="moral", readout="slot")
    got = _module().comprehension_by_gold(first).set_index(["checkpoint", "gold"])
    assert got.loc[("one_verdict", "wrong"), "comprehension"] == 1.0
    assert got.loc[("one_verdict", "acceptable"), "comprehension"] == 0.0
    assert got.loc["reads", "comprehension"].eq(1.0).all()
    assert got["n_items"].eq(3).all()


def test_the_script_reads_an_out_without_a_cache_and_refuses_gold_csv_there(tmp_path, monkeypatch):
    """An OUT of results tables only: the flip table is written; --gold-csv, which needs the cache's
    first-turn readings, is refused with exit 2 and names the cache."""
    items = [f"m-{i}" for i in range(4)]
    tree, out = _write(tmp_path, items[:1], items[1:2], items)
    mod = _module()
    monkeypatch.setattr("sys.argv", ["organism_flips.py", str(tree), str(out), "--csv", str(tmp_path / "f.csv")])
    mod.main()
    assert pd.read_csv(tmp_path / "f.csv")["set"].tolist() == ["planted_a", "planted_b", "rest"]
    monkeypatch.setattr("sys.argv", ["organism_flips.py", str(tree), str(out), "--gold-csv", str(tmp_path / "g.csv")])
    with pytest.raises(SystemExit) as exc:
        mod.main()
    assert exc.value.code == 2 and not (tmp_path / "g.csv").exists()
