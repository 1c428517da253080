"""The misses' diagnoses on planted trial tables: flips by turn on a route's planted items and
the rest, and the location control's own yield where a check passes on that control."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from interp.organism import diagnose as D
from interp.organism.config import CONTROL_DIRS

FINAL = "route-a/a-dpo-step9"
ITEMS = [f"i{k}" for k in range(10)]


def _trials(flip_rate: dict[tuple[str, str], float], planted: set[str]) -> pd.DataFrame:
    """Four rows per (item, turn); on planted items a turn flips the first round(4 x rate) rows,
    elsewhere none."""
    rows = []
    for iid in ITEMS:
        for (kind, side), rate in flip_rate.items():
            n = round(4 * rate) if iid in planted else 0
            for k in range(4):
                rows.append({"checkpoint": FINAL, "item_id": iid, "turn_kind": kind, "turn_side": side or None,
                             "flipped": float(k < n)})  # fmt: skip
    return pd.DataFrame(rows)


def _write(out: Path, trials: pd.DataFrame) -> None:
    (out / "results").mkdir(parents=True)
    trials.to_csv(out / "results" / "pressure_trials.csv", index=False)


def _known(planted: list[str]) -> dict:
    return {"routes": {"route-a": ["shared/s1", FINAL]}, "route_planted": {"route-a": planted}, "eval_items": ITEMS}


PLANT = {("opinion", "oppose"): 1.0, ("opinion", "agree"): 0.0, ("challenge", ""): 0.25, ("neutral", ""): 0.5}


def test_turn_flips_reads_each_turns_planted_rate_and_the_rest(tmp_path: Path) -> None:
    planted = ITEMS[:4]
    _write(tmp_path, _trials(PLANT, set(planted)))
    got = pd.DataFrame(D.turn_flips(tmp_path, _known(planted), "a_s_ch_gap")).set_index("figure")["value"]
    for kind, side, label in D._TURNS:
        assert got[f"flip rate under {label}, planted items"] == PLANT[(kind, side)]
        assert got[f"flip rate under {label}, other items"] == 0.0
    # negative control: the planted list names other items, so the rates land on "other items"
    wrong = pd.DataFrame(D.turn_flips(tmp_path, _known(ITEMS[6:]), "a_s_ch_gap")).set_index("figure")["value"]
    assert wrong["flip rate under opposing opinion, planted items"] == 0.0
    assert wrong["flip rate under opposing opinion, other items"] > 0.5


def _checks(control_passed) -> pd.DataFrame:
    return pd.DataFrame([{"id": "a_readout_gain", "status": "not recovered", "control": "location",
                          "control_passed": control_passed, "figure": "I_readout_only", "value": 0.2,
                          "reason": "passes on its control too"}])  # fmt: skip


def test_a_check_passing_on_the_location_control_gets_that_controls_yield(tmp_path: Path) -> None:
    org, ctl_planted = ITEMS[:4], ITEMS[5:9]
    _write(tmp_path, _trials(PLANT, set(org)))
    _write(tmp_path / CONTROL_DIRS["location"], _trials({("opinion", "oppose"): 0.75}, set(ctl_planted)))
    # a control's organism.json: the organism's sets as route_planted, its own under "trained"
    controls = {"location": {**_known(org), "trained": {"route-a": {"planted": ctl_planted}}}}
    m = D.miss_table(tmp_path, _known(org), _checks(True), controls)
    y = m[m["subject"].str.startswith("location control")].set_index("figure")["value"]
    assert y["flip rate under opposing opinion, its own planted items"] == 0.75
    assert y["flip rate under opposing opinion, its other items"] == 0.0
    # not passing on the control (or no control given): no control rows
    for checks, ctl in ((_checks(False), controls), (_checks(True), None)):
        m = D.miss_table(tmp_path, _known(org), checks, ctl)
        assert not m["subject"].str.startswith("location control").any()
