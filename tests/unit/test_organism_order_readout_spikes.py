"""Check file version 4's spike-ins (`interp.organism.checks.order_readout_spike_rows`): a planted
listing-position preference that the order-averaged binary classify reading cancels exactly, and
noise targets in which a held-out readout finds no gain; each missed by its control and by the
metric bug it was added for (`interp.organism.mutations`: one option order, a readout that sees its
held-out items)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import sweeps.probe
from interp.organism import checks as C
from interp.organism import mutations as M
from interp.organism.frozen import CHECK_FILE, listed_settings, load_check_file, with_seed

V4 = CHECK_FILE.with_name("known_answers_v4.toml")
ST = with_seed(load_check_file(V4).settings, 0)
KNOWN = {
    "classify": {"route": "route-a", "task": "five"},
    "routes": {"route-a": ["route-a/a-early", "route-a/a-final"], "route-b": ["route-b/b-final"]},
    "trunk_end": "shared/trunk",
}
N_ITEMS, N_DIMS = 60, 120


def _classify(out, seed: int = 0) -> pd.DataFrame:
    """Binary readings of both label orders with log-odds of either sign, some items split between
    the orders, one pair summing to almost 0 (the averaged reading's closest call)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 3.0, size=(N_ITEMS, 2))  # log-odds of label 1: given, reversed
    x[0] = [4.0, -3.999]
    rows = []
    for j, (order, listed) in enumerate((("given", "0|1"), ("reversed", "1|0"))):
        p1 = 1.0 / (1.0 + np.exp(-x[:, j]))
        for i in range(N_ITEMS):
            rows.append(
                {"checkpoint": "a-final", "bank": "conv", "task": "binary", "order": order, "item_id": f"c{i:03d}",
                 "gold": str(i % 2), "pred": "1" if p1[i] > 0.5 else "0", "confidence": max(p1[i], 1 - p1[i]),
                 "p_0": 1 - p1[i], "p_1": p1[i], "option_order": listed, "tie_guarded": False}
            )  # fmt: skip
    (out / "aux" / "results").mkdir(parents=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / "aux" / "results" / "classify_predictions.csv", index=False)
    return df


def _readout_inputs(seed: int = 0):
    """Per-item trunk-end inputs for the readout: a profile, a map and N_DIMS residual features
    with a few strong directions, as residuals have."""
    rng = np.random.default_rng(seed)
    items = [f"m{i:03d}" for i in range(N_ITEMS)]
    R = rng.normal(size=(N_ITEMS, 8)) @ rng.normal(size=(8, N_DIMS)) + rng.normal(size=(N_ITEMS, N_DIMS))
    maps = {
        "shared/trunk": pd.Series(rng.normal(size=N_ITEMS), index=items),
        "route-a/a-final": pd.Series(0.0, index=items),
    }
    profiles = {k: pd.DataFrame(rng.normal(size=(N_ITEMS, 2)), index=items) for k in maps}
    return maps, profiles, {"shared/trunk": pd.DataFrame(R, index=items)}, "moral"


@pytest.fixture
def out(tmp_path, monkeypatch):
    _classify(tmp_path)
    inputs = _readout_inputs()
    monkeypatch.setattr(sweeps.probe, "predict_inputs", lambda out, **k: inputs)
    return tmp_path


def _rows(out, control: bool = False) -> dict[str, dict]:
    return {r["id"]: r for r in C.order_readout_spike_rows(out, KNOWN, ST, control=control)}


def test_the_order_averaged_reading_cancels_a_position_preference_exactly(out):
    r = _rows(out)["classify_order_spike"]
    assert r["value"] == r["lo"] == r["hi"] == 1.0 and r["passed"] is True  # every item, the closest call too
    c = _rows(out, control=True)["classify_order_spike"]  # the same nats on a label: every item turns
    assert c["value"] == 0.0 and c["passed"] is False


def test_a_reading_at_probability_zero_keeps_the_plant_finite_and_the_answer(out):
    path = out / "aux" / "results" / "classify_predictions.csv"
    df = pd.read_csv(path)
    df.loc[(df["order"] == "given") & (df["item_id"] == "c001"), ["p_0", "p_1", "pred"]] = [1.0, 0.0, 0]
    df.to_csv(path, index=False)
    r = _rows(out)["classify_order_spike"]
    assert r["value"] == 1.0 and "nan" not in r["reference"] and "inf" not in r["reference"], r["reference"]


def test_a_held_out_readout_finds_no_gain_in_noise_and_finds_a_readable_target(out):
    r = _rows(out)["readout_noise_spike"]
    assert r["value"] >= 0.9 and r["passed"] is True, r["reference"]
    c = _rows(out, control=True)["readout_noise_spike"]
    assert c["value"] <= 0.1 and c["passed"] is False, c["reference"]


@pytest.mark.parametrize(
    "bug, broken",
    [("classify_one_order", "classify_order_spike"), ("readout_ungrouped", "readout_noise_spike")],
)
def test_each_spike_in_fails_under_the_metric_bug_it_was_added_for(out, bug, broken):
    m = {x.name: x for x in M.MUTATIONS}[bug]
    with M.applied(m):
        got = _rows(out)
    assert got[broken]["passed"] is False and got[broken]["value"] < ST.min_spike_share, got[broken]["reference"]
    other = ({"classify_order_spike", "readout_noise_spike"} - {broken}).pop()
    assert got[other]["passed"] is True  # each bug breaks its own spike-in only


def test_check_files_1_to_3_compute_neither_and_version_4_counts_both(out):
    for name in ("known_answers.toml", "known_answers_v2.toml", "known_answers_v3.toml"):
        st = load_check_file(CHECK_FILE.with_name(name)).settings
        assert st.noise_draws == 0 and "noise_draws" not in listed_settings(st)
        assert C.order_readout_spike_rows(out, KNOWN, with_seed(st, 0)) == []
    v4, v3 = load_check_file(V4), load_check_file(CHECK_FILE.with_name("known_answers_v3.toml"))
    assert [c.id for c in v4.checks][:20] == [c.id for c in v3.checks] and v4.settings.noise_draws == 20
    assert replace(v4.settings, noise_draws=0) == v3.settings  # nothing else of version 3 changed
    assert len(v4.checks) == 22 and len(v4.groups()) == 12
    assert {c.control for c in v4.checks[20:]} == {"spike-in"}
