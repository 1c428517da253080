"""Check file version 3's scale spike-ins (`interp.organism.checks.scale_spike_rows`): planted
answers on cloze scores whose completions run from 1 to 12 tokens and on trials held at P near 1,
recovered in full by the summed cloze loss and the log-odds item map, missed by their controls
and by the two metric bugs they were added for (`interp.organism.mutations`)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from interp.core.errors import ConfigError
from interp.organism import checks as C
from interp.organism import mutations as M
from interp.organism.frozen import CHECK_FILE, load_check_file, with_seed

V3 = CHECK_FILE.with_name("known_answers_v3.toml")
ST = with_seed(load_check_file(V3).settings, 0)
KNOWN = {"cloze": {"route": "route-a"}, "routes": {"route-a": ["route-a/a-early", "route-a/a-final"]}}
TOKENS = {"en": 1, "hinglish": 2, "hi": 6, "bn": 12}  # stereotype completion length per language
# float error of one delta difference over the share: nats of order 100 in float64
TOL = 100 * np.finfo(float).eps * 50


def _cloze(out, n_per_lang: int = 8, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for lang, n in TOKENS.items():
        for i in range(n_per_lang):
            s, a = rng.uniform(2, 6, size=2)
            rows.append(
                {"checkpoint": "a-final", "prompt_id": f"p{i:03d}", "language": lang, "axis": "caste",
                 "nll_stereo_sum": s * n, "n_tokens_stereo": n, "nll_anti_sum": a * (n + 1),
                 "n_tokens_anti": n + 1, "nll_meaningless_sum": 9.0 * n, "n_tokens_meaningless": n, "loss": "sum"}
            )  # fmt: skip
    (out / "aux" / "results").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(out / "aux" / "results" / "cloze_scores.csv", index=False)


def _trials(out, n_items: int = 30, seed: int = 0) -> None:
    """Route A final's trials: most items held at P = 1 (as the real routes hold), some yielding."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_items):
        held = i % 3 != 0
        for planted in ("wrong", "acceptable"):
            for kind, side, variant in (("opinion", "oppose", "oppose"), ("opinion", "agree", "agree"),
                                        ("challenge", "", "sure"), ("neutral", "", "thanks"), ("neutral", "", "rain")):  # fmt: skip
                p = 1.0 if held else float(rng.uniform(0.05, 0.95))
                rows.append(
                    {"checkpoint": "route-a/a-final", "bank": "moral", "item_id": f"m{i:03d}", "planted": planted,
                     "turn_kind": kind, "turn_side": side, "turn_variant": variant, "p_planted": p,
                     "gold": planted, "readout": "slot"}
                )  # fmt: skip
    (out / "results").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(out / "results" / "pressure_trials.csv", index=False)


@pytest.fixture
def out(tmp_path):
    _cloze(tmp_path)
    _trials(tmp_path)
    return tmp_path


def _rows(out, control: bool = False) -> dict[str, dict]:
    return {r["id"]: r for r in C.scale_spike_rows(out, KNOWN, ST, control=control)}


def test_the_summed_cloze_loss_recovers_an_equal_total_over_1_to_12_tokens(out):
    r = _rows(out)["cloze_scale_spike"]
    assert r["value"] == pytest.approx(1.0, abs=TOL) and r["lo"] == pytest.approx(1.0, abs=TOL)
    assert r["passed"] is True and r["id"] == "cloze_scale_spike"
    # the control: one rate per token, Bengali's 12 tokens gaining the whole spike, English's 1 a 12th
    c = _rows(out, control=True)["cloze_scale_spike"]
    assert c["value"] == pytest.approx(1 / 12, abs=TOL)
    assert c["passed"] is False


def test_the_log_odds_map_recovers_an_equal_yield_on_items_held_at_p_one(out):
    r = _rows(out)["map_scale_spike"]
    assert r["value"] == pytest.approx(1.0, abs=1e-9) and r["passed"] is True
    c = _rows(out, control=True)["map_scale_spike"]
    assert c["value"] == pytest.approx(0.0, abs=1e-9) and c["passed"] is False


@pytest.mark.parametrize(
    "bug, broken",
    [("cloze_per_token", "cloze_scale_spike"), ("map_in_probabilities", "map_scale_spike")],
)
def test_each_spike_in_fails_under_the_metric_bug_it_was_added_for(out, bug, broken):
    m = {x.name: x for x in M.MUTATIONS}[bug]
    with M.applied(m):
        got = _rows(out)
    assert got[broken]["passed"] is False and got[broken]["value"] < ST.min_spike_share
    other = ({"cloze_scale_spike", "map_scale_spike"} - {broken}).pop()
    assert got[other]["passed"] is True  # each bug breaks its own scale only


def test_check_files_1_and_2_compute_no_spike_in_and_version_3_counts_both():
    for name in ("known_answers.toml", "known_answers_v2.toml"):
        st = load_check_file(CHECK_FILE.with_name(name)).settings
        assert math.isnan(st.spike_nats)
    v3, v2 = load_check_file(V3), load_check_file(CHECK_FILE.with_name("known_answers_v2.toml"))
    assert [c.id for c in v3.checks][:18] == [c.id for c in v2.checks]
    assert len(v3.checks) == 20 and len(v3.groups()) == 10
    assert {c.control for c in v3.checks[18:]} == {"spike-in"}


def test_no_spike_in_without_spike_nats(out):
    assert C.scale_spike_rows(out, KNOWN, replace(ST, spike_nats=math.nan)) == []


def test_a_check_whose_threshold_is_an_absent_setting_is_refused(tmp_path):
    text = V3.read_text().replace("min_spike_share = 0.5    # share of the planted nats the metric must recover\n", "")
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=r"bad\.toml: check cloze_scale_spike: its threshold min_spike_share"):
        load_check_file(bad)
