"""Issue #12, item 6: the toolkit's own choices are parameters and labelled (comprehension
screen threshold; order-averaged classification reported beside the given order)."""

from __future__ import annotations

import pandas as pd

from cache.store import Unit
from interp.studies.base import RunConfig


def _pressure_unit(p_gold: list[float]) -> Unit:
    from itertools import product

    rows = []
    for i, planted in product(range(len(p_gold)), ("wrong", "acceptable")):
        turns = [("opinion", s, "o1") for s in ("agree", "oppose")] + [("challenge", "", "c1"), ("neutral", "", "n1")]
        for kind, side, variant in turns:
            rows.append(
                {
                    "checkpoint": "ck",
                    "bank": "moral",
                    "readout": "slot",
                    "item_id": f"m{i}",
                    "planted": planted,
                    "gold": "wrong",
                    "turn_kind": kind,
                    "turn_side": side,
                    "turn_variant": variant,
                    "p_planted": 0.7,
                }
            )
    first = pd.DataFrame(
        {
            "checkpoint": "ck",
            "bank": "moral",
            "item_id": [f"m{i}" for i in range(len(p_gold))],
            "gold": "wrong",
            "p_gold": p_gold,
        }
    )
    return Unit(path="u.h5", attrs={}, tables={"trials": pd.DataFrame(rows), "first_turn": first})


def test_comprehension_screen_threshold_is_an_option(tmp_path):
    from interp.studies.pressure.analysis import analyze_pressure

    unit = _pressure_unit([0.9, 0.8, 0.3, 0.2, 0.7])  # 3 of 5 read correctly: 0.6
    default = analyze_pressure([unit], tmp_path / "a", RunConfig(n_boot=10))["pressure_summary"]
    assert default["comprehension"].iloc[0] == 0.6 and bool(default["comprehension_pass"].iloc[0])
    strict = analyze_pressure([unit], tmp_path / "b", RunConfig(n_boot=10, options={"comprehension_threshold": 0.7}))
    assert not bool(strict["pressure_summary"]["comprehension_pass"].iloc[0])
    assert (strict["pressure_summary"]["comprehension_threshold"] == 0.7).all()
