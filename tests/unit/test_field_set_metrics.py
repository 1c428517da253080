"""Metrics of the field's sycophancy sets, each on a planted answer and on a negative control on
which the same check must fail: the A/B matching rate, argmax rate, position bias and item maps
(analyses.ab_metrics), the pressure metrics over N options (comprehension by argmax,
condition_shifts) and the answer / feedback trials read as delta and S_op."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from analyses.ab_metrics import ab_item_maps, ab_position_bias, ab_summary, with_averaged
from analyses.pressure_metrics import capitulation, comprehension, condition_shifts, pressure_summary

N = 40


def _scores(logodds_given: np.ndarray, logodds_rev: np.ndarray | None = None, a_bias: float = 0.0) -> pd.DataFrame:
    """A/B scores of N items whose matching answer is "(A)" on even items in the given order; the
    reversed order moves every content to the other letter. `a_bias` adds log-odds to "(A)"."""
    rows = []
    for order, lo in (("given", logodds_given), ("reversed", logodds_rev)):
        if lo is None:
            continue
        for i, x in enumerate(lo):
            match_is_a = (i % 2 == 0) == (order == "given")
            x = x + (a_bias if match_is_a else -a_bias)
            lm, ln = -1.0, -1.0 - x
            rows.append(
                {
                    "checkpoint": "ck",
                    "bank": "b",
                    "set": "nlp_survey",
                    "item_id": f"i{i:02d}",
                    "order": order,
                    "n_options": 2,
                    "matching": " (A)" if match_is_a else " (B)",
                    "logp_match": lm,
                    "logp_not": ln,
                    "p_match": float(expit(x)),
                    "matching_top": bool(lm >= ln),
                    "p_first_letter": float(expit(x) if match_is_a else 1 - expit(x)),
                }
            )
    return pd.DataFrame(rows)


def test_matching_rate_planted_and_control():
    rng = np.random.default_rng(0)
    planted = rng.normal(1.5, 0.5, N)  # every item leans to the user's side
    s = ab_summary(_scores(planted), n_boot=500)
    (row,) = s.itertuples(index=False)
    assert row.matching_rate == pytest.approx(expit(planted).mean(), abs=1e-12)
    assert row.argmax_rate == pytest.approx((planted >= 0).mean(), abs=1e-12)
    assert row.matching_rate_lo > 0.5 and row.argmax_rate_lo > 0.5  # the CI excludes no preference
    control = rng.normal(0.0, 0.5, N) * np.where(np.arange(N) % 2, 1, -1)  # no side
    (c,) = ab_summary(_scores(control), n_boot=500).itertuples(index=False)
    assert c.matching_rate_lo < 0.5 < c.matching_rate_hi  # the same check fails on the control


def test_position_bias_planted_and_control():
    rng = np.random.default_rng(1)
    content = rng.normal(0.0, 1.0, N)
    reads_content = ab_position_bias(_scores(content, content), n_boot=500)
    (c,) = reads_content.itertuples(index=False)
    assert c.first_letter_bias == pytest.approx(0.0, abs=1e-12) and c.changed_share == 0.0  # control: no bias
    leans_a = ab_position_bias(_scores(content, content, a_bias=3.0), n_boot=500)
    (p,) = leans_a.itertuples(index=False)
    assert p.first_letter_bias > 0.2 and p.first_letter_bias_lo > 0  # planted: "(A)" whatever it says
    assert p.changed_share > 0.3
    # averaged order: a model reading the contents only keeps its rate; the letter bias moves the
    # given order's rate further from it than the averaged one
    fair = with_averaged(_scores(content, content))
    np.testing.assert_allclose(
        fair[fair["order"] == "averaged"]["p_match"].to_numpy(), fair[fair["order"] == "given"]["p_match"].to_numpy()
    )
    biased = with_averaged(_scores(content, content, a_bias=3.0))
    truth = fair[fair["order"] == "given"]["p_match"].to_numpy()
    off = {o: np.abs(biased[biased["order"] == o]["p_match"].to_numpy() - truth).mean() for o in ("given", "averaged")}
    assert off["averaged"] < off["given"]
    assert ab_position_bias(_scores(content)).empty  # one order: nothing to compare


def test_item_maps_are_the_log_odds():
    lo = np.linspace(-2, 2, N)
    maps = ab_item_maps(_scores(lo))
    np.testing.assert_allclose(maps.sort_values("item_id")["map_value"], lo, atol=1e-12)


def test_comprehension_by_argmax_over_letters():
    first = pd.DataFrame(
        {
            "checkpoint": "ck",
            "bank": "b",
            "item_id": ["a", "b", "c"],
            "p_gold": [0.4, 0.3, 0.6],
            "p_best_other": [0.3, 0.35, 0.2],  # four letters: 0.4 leads, 0.3 trails
        }
    )
    assert comprehension(first)["comprehension"].iloc[0] == pytest.approx(2 / 3)
    # the control: read as two options (p_gold > 0.5) only the last is right, which is not the argmax
    assert comprehension(first.drop(columns="p_best_other"))["comprehension"].iloc[0] == pytest.approx(1 / 3)
    two = first.assign(p_best_other=1 - first["p_gold"])  # two options: the same as before the column
    pd.testing.assert_frame_equal(
        comprehension(two), comprehension(first.drop(columns="p_best_other").assign(p_gold=first["p_gold"]))
    )


def _ays_trials(drop: float) -> pd.DataFrame:
    """are_you_sure trials: planted correct / wrong letter, one challenge, two neutral fillers; after
    the challenge p_planted falls by `drop`."""
    rows = []
    rng = np.random.default_rng(2)
    for i in range(N):
        base = rng.uniform(0.5, 0.9)
        for planted in ("B", "D"):
            for kind, variant, p in (
                ("neutral", "thanks", base),
                ("neutral", "noted", base),
                ("challenge", "are_you_sure", base - drop),
            ):
                rows.append(
                    {
                        "checkpoint": "ck",
                        "bank": "ays",
                        "item_id": f"q{i}",
                        "gold": "B",
                        "planted": planted,
                        "turn_kind": kind,
                        "turn_side": "",
                        "turn_variant": variant,
                        "p_planted": p,
                        "readout": "slot",
                    }
                )
    return pd.DataFrame(rows)


def test_condition_shifts_planted_and_control():
    planted = condition_shifts(_ays_trials(0.3), n_boot=300)
    (row,) = planted.itertuples(index=False)
    assert row.turn_kind == "challenge" and row.shift == pytest.approx(-0.3) and row.shift_hi < 0
    s_ch = capitulation(_ays_trials(0.3))
    s_ch = s_ch[(s_ch["metric"] == "s_ch") & (s_ch["turn_variant"] == "are_you_sure")]["value"].iloc[0]
    assert row.shift == pytest.approx(-s_ch)  # -S_ch of that challenge (soft flips)
    (c,) = condition_shifts(_ays_trials(0.0), n_boot=300).itertuples(index=False)
    assert c.shift == pytest.approx(0.0, abs=1e-12) and not (c.shift_hi < 0)  # the control fails the check


def test_answer_and_feedback_read_as_delta(tmp_path):
    """stated_trials on readings with a planted effect: P(correct) 0.9 when the user says the correct
    answer, 0.2 when they say the incorrect one or doubt the correct one, 0.6 on the plain line."""
    from interp.studies import get_study
    from interp.studies.sycophancy_eval.trials import stated_trials
    from interp.testing import write_sample_sets

    files = write_sample_sets(tmp_path)
    items = get_study("sycophancy_eval").load_bank(files["answer"]).items
    labels = [json.loads(x) for x in items["labels"]]

    def summary(p_correct):
        probs = [np.array([p_correct[c], 1 - p_correct[c]]) for c in items["condition"]]
        t = stated_trials(items, labels, probs).assign(checkpoint="ck", bank="answer", readout="slot")
        return pressure_summary(t, n_boot=200).iloc[0]

    planted = summary({"neutral": 0.6, "think_correct": 0.9, "think_incorrect": 0.2, "doubt_correct": 0.2})
    assert planted["delta"] == pytest.approx(0.7) and planted["delta_lo"] > 0
    assert planted["s_op"] == pytest.approx(0.4) and planted["neutral_flip"] == pytest.approx(0.4)
    control = summary({"neutral": 0.6, "think_correct": 0.6, "think_incorrect": 0.6, "doubt_correct": 0.6})
    assert control["delta"] == pytest.approx(0.0, abs=1e-12) and not control["delta_lo"] > 0
    # feedback: like / dislike are opinions (delta), wrote / did not write are authorship (conditions only)
    fb = get_study("sycophancy_eval").load_bank(files["feedback"]).items
    p_good = {"neutral": 0.5, "like": 0.8, "dislike": 0.3, "wrote": 0.7, "did_not_write": 0.4}
    t = stated_trials(
        fb, [["positive", "negative"]] * len(fb), [np.array([p_good[c], 1 - p_good[c]]) for c in fb["condition"]]
    )
    t = t.assign(checkpoint="ck", bank="feedback", readout="slot")
    assert pressure_summary(t, n_boot=200)["delta"].iloc[0] == pytest.approx(0.5)
    shifts = condition_shifts(t, n_boot=200).set_index("turn_variant")["shift"]
    assert shifts.to_dict() == pytest.approx({"did_not_write": -0.1, "dislike": -0.2, "like": 0.3, "wrote": 0.2})
