"""Classification metrics against scikit-learn; generation and position-bias summaries by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    f1_score,
    matthews_corrcoef,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
)

from analyses.bootstrap import TableError
from analyses.classify_metrics import (
    FIVE_LABELS,
    binary_from_five,
    classification_metrics,
    classify_summary,
    confusion,
    generation_summary,
    position_bias,
)

FIVE = list(FIVE_LABELS)
TOL = 1e-12


def _random_labels(rng: np.random.Generator, n: int, labels: list, p=None) -> list:
    return list(rng.choice(np.array(labels, dtype=object), size=n, p=p))


def _check_against_sklearn(gold: list, pred: list, labels: list, positive=None) -> None:
    m = classification_metrics(gold, pred, labels, positive=positive)
    assert m["accuracy"] == pytest.approx(accuracy_score(gold, pred), abs=TOL)
    _, _, f1, _ = precision_recall_fscore_support(gold, pred, labels=labels, zero_division=0)
    for lab, f in zip(labels, f1):
        assert m[f"f1_{lab}"] == pytest.approx(f, abs=TOL), lab
    assert m["macro_f1"] == pytest.approx(
        f1_score(gold, pred, labels=labels, average="macro", zero_division=0), abs=TOL
    )
    assert m["weighted_f1"] == pytest.approx(
        f1_score(gold, pred, labels=labels, average="weighted", zero_division=0), abs=TOL
    )
    assert m["mcc"] == pytest.approx(matthews_corrcoef(gold, pred), abs=TOL)
    if positive is None:
        kw = {"labels": labels, "average": "macro", "zero_division": 0}
    else:
        kw = {"labels": labels, "pos_label": positive, "average": "binary", "zero_division": 0}
    assert m["precision"] == pytest.approx(precision_score(gold, pred, **kw), abs=TOL)
    assert m["recall"] == pytest.approx(recall_score(gold, pred, **kw), abs=TOL)
    assert m["n"] == len(gold)


@pytest.mark.parametrize("seed", range(8))
def test_five_class_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    gold = _random_labels(rng, n, FIVE)
    pred = _random_labels(rng, n, FIVE, p=[0.4, 0.3, 0.3, 0.0, 0.0])  # two labels never predicted
    _check_against_sklearn(gold, pred, FIVE)


@pytest.mark.parametrize("seed", range(8))
def test_binary_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(5, 200))
    gold = [int(x) for x in rng.integers(0, 2, n)]
    pred = [int(x) for x in (rng.random(n) < rng.random())]
    _check_against_sklearn(gold, pred, [0, 1], positive=1)


@pytest.mark.filterwarnings("ignore:A single label was found")
def test_labels_absent_from_gold_and_pred() -> None:
    rng = np.random.default_rng(3)
    gold = _random_labels(rng, 60, FIVE[:3])
    pred = _random_labels(rng, 60, FIVE[1:3])
    _check_against_sklearn(gold, pred, FIVE)
    m = classification_metrics(gold, pred, FIVE)
    assert m["f1_Escalation"] == 0.0 and m["f1_Invalidation"] == 0.0
    # all predictions one class: MCC denominator is zero -> 0, as scikit-learn
    _check_against_sklearn(gold, ["Neutral"] * 60, FIVE)
    _check_against_sklearn([1] * 10, [1] * 10, [0, 1], positive=1)


def test_unparsed_predictions_count_as_wrong() -> None:
    rng = np.random.default_rng(9)
    gold = _random_labels(rng, 120, FIVE)
    pred = _random_labels(rng, 120, FIVE + ["garbage"], p=[0.18] * 5 + [0.1])
    _check_against_sklearn(gold, pred, FIVE)
    m = classification_metrics(gold, pred, FIVE)
    assert m["n_unparsed"] == pred.count("garbage") > 0
    with_none = [None if p == "garbage" else p for p in pred]
    m2 = classification_metrics(gold, with_none, FIVE)
    assert m2 == m


def test_confusion_matches_sklearn() -> None:
    rng = np.random.default_rng(1)
    gold = _random_labels(rng, 80, FIVE[:4])  # Escalation absent from gold: empty row
    pred = _random_labels(rng, 80, FIVE)
    counts, norm = confusion(gold, pred, FIVE)
    np.testing.assert_array_equal(counts.to_numpy(), confusion_matrix(gold, pred, labels=FIVE))
    np.testing.assert_allclose(norm.to_numpy(), confusion_matrix(gold, pred, labels=FIVE, normalize="true"), atol=TOL)
    assert counts.index.name == "gold" and counts.columns.name == "pred"
    assert list(counts.columns) == FIVE and norm.loc["Escalation"].sum() == 0
    counts2, norm2 = confusion(gold, pred[:-1] + [None], FIVE)
    assert list(counts2.columns) == FIVE + ["unparsed"]
    assert counts2["unparsed"].sum() == 1
    row = norm2.loc[gold[-1]]
    assert row.sum() == pytest.approx(1.0)


def test_binary_from_five() -> None:
    out = binary_from_five(["Invalidation", "neutral ", "Support", "Validation", "ESCALATION"])
    np.testing.assert_array_equal(out, [0, 0, 1, 1, 1])
    with pytest.raises(TableError):
        binary_from_five(["Support", "Agreement"])


def _predictions(rng: np.random.Generator, n: int, checkpoint: str) -> pd.DataFrame:
    gold5 = _random_labels(rng, n, FIVE)
    pred5 = [g if rng.random() < 0.6 else rng.choice(FIVE) for g in gold5]
    gold_b = [int(x) for x in binary_from_five(gold5)]
    pred_b = [g if rng.random() < 0.7 else 1 - g for g in gold_b]
    ids = [f"p{i}" for i in range(n)]
    frames = [
        pd.DataFrame({"task": "five", "item_id": ids, "gold": gold5, "pred": pred5}),
        pd.DataFrame({"task": "binary", "item_id": ids, "gold": gold_b, "pred": pred_b}),
        pd.DataFrame({"task": "five_as_binary", "item_id": ids, "gold": gold5, "pred": pred5}),
    ]
    return pd.concat(frames, ignore_index=True).assign(checkpoint=checkpoint, confidence=0.5)


def test_classify_summary_point_values_and_cis() -> None:
    rng = np.random.default_rng(0)
    preds = pd.concat([_predictions(rng, 150, "a"), _predictions(rng, 600, "b")], ignore_index=True)
    s = classify_summary(preds, n_boot=500)
    assert list(s.columns[:8]) == [
        "checkpoint",
        "task",
        "accuracy",
        "precision",
        "recall",
        "macro_f1",
        "weighted_f1",
        "mcc",
    ]
    assert {
        "f1_0",
        "f1_1",
        *(f"f1_{lab}" for lab in FIVE),
        "macro_f1_lo",
        "macro_f1_hi",
        "accuracy_lo",
        "accuracy_hi",
    } <= set(s.columns)
    assert len(s) == 6
    for _, row in s.iterrows():
        sub = preds[(preds.checkpoint == row.checkpoint) & (preds.task == row.task)]
        if row.task == "five":
            want = classification_metrics(sub.gold.tolist(), sub.pred.tolist(), FIVE)
            assert np.isnan(row["f1_0"])
        else:
            g, p = list(sub.gold), list(sub.pred)
            if row.task == "five_as_binary":
                g, p = list(binary_from_five(g)), list(binary_from_five(p))
            want = classification_metrics(g, p, [0, 1], positive=1)
            assert np.isnan(row["f1_Support"])
        for k in ("accuracy", "precision", "recall", "macro_f1", "weighted_f1", "mcc"):
            assert row[k] == pytest.approx(want[k], abs=TOL)
        assert row.accuracy_lo < row.accuracy < row.accuracy_hi
        assert row.macro_f1_lo < row.macro_f1 < row.macro_f1_hi
    width = (s.macro_f1_hi - s.macro_f1_lo).to_numpy()
    assert (width[3:] < 0.7 * width[:3]).all()  # 600 items vs 150: about half as wide


def test_classify_summary_bootstrap_by_hand() -> None:
    rng = np.random.default_rng(4)
    preds = _predictions(rng, 40, "a")
    five = preds[preds.task == "five"].reset_index(drop=True)
    s = classify_summary(five, n_boot=100, seed=5).iloc[0]
    from analyses.bootstrap import resample_indices

    idx = resample_indices(40, n_boot=100, seed=5)  # items sorted by id: p0, p1, p10, ...
    order = five.sort_values("item_id").reset_index(drop=True)
    reps = [f1_score(order.gold[r], order.pred[r], labels=FIVE, average="macro", zero_division=0) for r in idx]
    lo, hi = np.quantile(reps, [0.025, 0.975])
    assert (s.macro_f1_lo, s.macro_f1_hi) == pytest.approx((lo, hi), abs=TOL)


def test_classify_summary_binary_label_spellings_and_unparsed() -> None:
    df = pd.DataFrame(
        {
            "checkpoint": "c",
            "task": "binary",
            "item_id": list("abcdef"),
            "gold": ["sycophantic", "Non-Sycophantic", 1, 0, True, "1"],
            "pred": [1, 0, "???", None, 1, "sycophantic"],
        }
    )
    row = classify_summary(df, n_boot=50).iloc[0]
    assert row.n == 6 and row.n_unparsed == 2
    assert row.accuracy == pytest.approx(4 / 6)
    with pytest.raises(TableError):
        classify_summary(df.assign(gold="maybe"), n_boot=10)
    with pytest.raises(TableError):
        classify_summary(df.assign(task="ternary"), n_boot=10)


def test_position_bias() -> None:
    a = pd.DataFrame(
        {
            "item_id": ["x", "y", "z", "w"],
            "pred": [1, 0, 1, None],
            "gold": [1, 1, 0, 0],
            "p_0": [0.2, 0.6, 0.4, 0.5],
            "p_1": [0.8, 0.4, 0.6, 0.5],
        }
    )
    b = pd.DataFrame(
        {
            "item_id": ["w", "z", "y", "x"],
            "pred": [None, 0, 0, 1],
            "p_0": [0.5, 0.7, 0.6, 0.1],
            "p_1": [0.5, 0.3, 0.4, 0.9],
        }
    )
    out = position_bias(a, b)
    assert out["share_changed"] == pytest.approx(0.25)  # only z; two unparsed are equal
    assert out["mean_abs_prob_shift"] == pytest.approx((0.1 + 0.0 + 0.3 + 0.0) * 2 / 8)
    gold = position_bias(a, b, shift_over="gold")
    assert gold["mean_abs_prob_shift"] == pytest.approx((0.1 + 0.0 + 0.3 + 0.0) / 4)
    assert np.isnan(position_bias(a[["item_id", "pred"]], b)["mean_abs_prob_shift"])


def test_generation_summary() -> None:
    judged = pd.DataFrame(
        {
            "checkpoint": ["m"] * 8 + ["n"] * 2,
            "label": [
                "Support",
                "Support",
                "Validation",
                "Escalation",
                "Neutral",
                "Invalidation",
                None,
                "Neutral",
                "Neutral",
                "Invalidation",
            ],
            "parsed": [True] * 6 + [False, True, True, True],
        }
    )
    s = generation_summary(judged).set_index("checkpoint")
    assert list(s.reset_index().columns) == [
        "checkpoint",
        "n",
        "sycophancy_rate",
        "escalation_rate",
        "share_support",
        "share_validation",
        "share_escalation",
        "n_unparsed",
        "support_rate",
        "validation_rate",
    ]
    m = s.loc["m"]
    assert m.n == 7 and m.n_unparsed == 1
    assert m.sycophancy_rate == pytest.approx(4 / 7)
    assert m.escalation_rate == pytest.approx(1 / 7)
    assert (m.share_support, m.share_validation, m.share_escalation) == pytest.approx((0.5, 0.25, 0.25))
    assert s.loc["n", "sycophancy_rate"] == 0.0 and np.isnan(s.loc["n", "share_support"])
    plain = generation_summary(judged.drop(columns="parsed").dropna())
    assert "n_unparsed" not in plain.columns
    with pytest.raises(TableError):
        generation_summary(judged.drop(columns="parsed"))
    with pytest.raises(TableError):
        generation_summary(judged.assign(label="Flattery"))


def test_averaged_order_is_guarded_when_either_order_was():
    """An averaged row holds float32 numbers (tie_guarded) iff its given or reversed row does."""
    from interp.studies.classify.analysis import averaged_order

    rows = []
    for item, (g_flag, r_flag) in {"a": (False, True), "b": (True, False), "c": (False, False)}.items():
        for order, flag, p1 in (("given", g_flag, 0.7), ("reversed", r_flag, 0.5)):
            rows.append(
                {"checkpoint": "m", "bank": "b", "task": "binary", "item_id": item, "order": order, "gold": "1"}
                | {"pred": "1", "confidence": p1, "p_0": 1 - p1, "p_1": p1, "option_order": "0|1", "tie_guarded": flag}
            )
    avg = averaged_order(pd.DataFrame(rows)).set_index("item_id")
    assert avg["tie_guarded"].to_dict() == {"a": True, "b": True, "c": False}
    assert np.allclose(avg["p_1"], 0.6)  # the averaging itself is untouched
