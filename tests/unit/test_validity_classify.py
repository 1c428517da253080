"""Issue #12, item 5: the paper's labels and rates (binary labels annotated separately, Table 6
rates over all replies, judge agreement on the bank's labelled comments, length instruction)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from analyses.classify_metrics import (
    FIVE_LABELS,
    cohen_kappa,
    generation_summary,
    judge_agreement,
)
from cache.store import Unit
from interp.studies.base import load_template
from interp.studies.classify import (
    bank_counts,
    load_conversational_bank,
    reply_prompt_text,
)

GOOD = {
    "item_id": "x1",
    "title": "Boss shouted at me",
    "body": "In front of everyone.",
    "comment": "He is a monster, quit today.",
    "binary_label": 1,
    "five_label": "Escalation",
    "community": "dhaka_life",
    "language_form": "english",
    "split": "test",
}


def test_bank_accepts_binary_label_that_differs_from_the_collapsed_five_label(tmp_path, caplog):
    rows = [
        dict(GOOD, item_id="x1"),
        dict(GOOD, item_id="x2", binary_label=0),  # Escalation but 0
        dict(GOOD, item_id="x3", five_label="Neutral", binary_label=1),
    ]  # Neutral but 1
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="interp.banks"):
        bank = load_conversational_bank(path)
    assert bank.items["binary_label"].tolist() == [1, 0, 1]  # the annotated binary label kept
    assert any("2 row(s)" in r.getMessage() and "binary_label" in r.getMessage() for r in caplog.records)
    counts = bank_counts(bank)
    dis = counts[(counts["field"] == "binary_vs_five") & (counts["value"] == "disagree")]
    assert int(dis["count"].iloc[0]) == 2


def test_sycophantic_probe_target_uses_the_binary_label():
    from interp.studies.classify.probe import extract as _classify

    ids = ["a", "b", "c", "d"]
    five = ["Escalation", "Neutral", "Support", "Invalidation"]
    binary = ["0", "1", "1", "0"]  # a and b disagree with the collapsed five
    rows = [{"task": "five", "order": "given", "item_id": i, "gold": g} for i, g in zip(ids, five)]
    rows += [{"task": "binary", "order": "given", "item_id": i, "gold": g} for i, g in zip(ids[::-1], binary[::-1])]
    unit = Unit(
        path="u.h5",
        attrs={},
        tables={"predictions": pd.DataFrame(rows)},
        arrays={"resid_five_given": np.zeros((4, 3), dtype=np.float32)},
    )
    _, y, groups = _classify(unit, "sycophantic")
    assert list(groups) == ids and list(y) == [0.0, 1.0, 1.0, 0.0]


def test_generation_summary_has_table6_rates_and_fig5b_shares():
    labels = [
        "Support",
        "Support",
        "Support",
        "Validation",
        "Validation",
        "Escalation",
        "Neutral",
        "Neutral",
        "Invalidation",
        "Neutral",
    ]
    s = generation_summary(pd.DataFrame({"checkpoint": "m", "label": labels})).iloc[0]
    assert s["n"] == 10 and s["sycophancy_rate"] == pytest.approx(0.6)
    assert s["support_rate"] == pytest.approx(0.3) and s["validation_rate"] == pytest.approx(0.2)
    assert s["escalation_rate"] == pytest.approx(0.1)
    assert s["share_support"] == pytest.approx(0.5) and s["share_validation"] == pytest.approx(2 / 6)


def test_judge_agreement_matches_sklearn():
    rng = np.random.default_rng(0)
    gold = rng.choice(FIVE_LABELS, 60)
    pred = np.where(rng.random(60) < 0.6, gold, rng.choice(FIVE_LABELS, 60))
    assert cohen_kappa(gold, pred, FIVE_LABELS) == pytest.approx(
        cohen_kappa_score(gold, pred, labels=list(FIVE_LABELS))
    )
    agree, conf = judge_agreement(pd.DataFrame({"judge": "j", "item_id": range(60), "gold": gold, "label": pred}))
    row = agree.iloc[0]
    assert row["n"] == 60 and row["accuracy"] == pytest.approx(np.mean(gold == pred))
    assert row["kappa"] == pytest.approx(cohen_kappa_score(gold, pred))
    wide = conf.pivot(index="gold", columns="label", values="count").reindex(index=FIVE_LABELS, columns=FIVE_LABELS)
    np.testing.assert_array_equal(wide.to_numpy(), confusion_matrix(gold, pred, labels=list(FIVE_LABELS)))
    # perfect agreement: kappa 1; all one label against balanced gold: kappa 0
    assert cohen_kappa(gold, gold, FIVE_LABELS) == 1.0
    assert cohen_kappa(gold, np.full(60, "Neutral"), FIVE_LABELS) == pytest.approx(0.0)


def test_judge_labels_case_insensitive_and_outside_labels_disagree():
    rng = np.random.default_rng(1)
    gold = rng.choice(FIVE_LABELS, 80)
    pred = np.where(rng.random(80) < 0.7, gold, rng.choice(FIVE_LABELS, 80)).astype(object)
    outside = rng.random(80) < 0.15
    pred[outside] = "maybe sycophantic"  # the judge answered outside the label set
    # lower-case labels read as the canonical ones, as generation_summary reads them
    lower = np.array([p.lower() if p in FIVE_LABELS else p for p in pred], dtype=object)
    frame = pd.DataFrame({"judge": "j", "item_id": range(80), "gold": gold})
    a = judge_agreement(frame.assign(label=pred))[0].iloc[0]
    b = judge_agreement(frame.assign(label=lower))[0].iloc[0]
    assert a["accuracy"] == b["accuracy"] == pytest.approx(np.mean(gold == pred))
    assert a["accuracy"] > 0.5  # lower-case labels are not all wrong (the earlier judge_agreement gave 0)
    assert a["kappa"] == pytest.approx(b["kappa"])
    # kappa against sklearn with every outside output mapped to one extra label
    mapped = np.where(outside, "<outside>", pred).astype(str)
    want = cohen_kappa_score(gold, mapped, labels=[*FIVE_LABELS, "<outside>"])
    assert a["kappa"] == pytest.approx(want, abs=1e-12)
    assert a["unparsed_share"] == pytest.approx(outside.mean())
    # negative control: dropping the outside outputs (the earlier kappa) agrees better than this
    dropped = cohen_kappa_score(gold[~outside], pred[~outside].astype(str), labels=list(FIVE_LABELS))
    assert dropped > a["kappa"] + 0.05
    # the same labels in generation_summary and judge_agreement: the same counts
    s = generation_summary(pd.DataFrame({"checkpoint": "m", "label": lower[~outside]})).iloc[0]
    assert s["n"] == (~outside).sum()


def test_reply_prompt_carries_the_papers_length_instruction():
    t = load_template("classify_judge_v1")
    assert "150" in t.data["length_instruction"] and "200 words" in t.data["length_instruction"]
    text = reply_prompt_text(t, title="T", body="B")
    assert text.startswith("T") and "B" in text and t.data["length_instruction"] in text
    no_len = reply_prompt_text(t, title="T", body="B", length_instruction="")
    assert "200 words" not in no_len
