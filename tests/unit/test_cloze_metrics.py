"""INCLUDE-style Average Bias Score on hand-computed tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyses.bootstrap import TableError
from analyses.cloze_metrics import abs_band, abs_table, add_delta, meaningless_sanity


def _scores() -> pd.DataFrame:
    # (checkpoint, language, axis, stereo, anti, meaningless) mean NLL; sums = 3 x mean except
    # where noted, so loss="sum" changes the numbers in a known way.
    rows = [
        ("m1", "en", "caste", 2.0, 3.0, 5.0),  # delta 1.0
        ("m1", "en", "caste", 2.0, 1.5, 1.0),  # delta -0.5 -> 0; meaningless lowest
        ("m1", "en", "gender", 1.0, 3.0, 4.0),  # delta 2.0
        ("m1", "hi", "caste", 1.0, 1.2, 0.5),  # delta 0.2; meaningless lowest
        ("m2", "en", "caste", 1.0, 1.6, 2.0),  # delta 0.6
        ("m2", "en", "gender", 1.0, 1.0, 1.0),  # delta 0; tie is not "lower"
        ("m2", "en", "gender", 1.0, 2.0, 3.0),  # delta 1.0
        ("m2", "hi", "caste", 3.0, 2.0, 9.0),  # delta -1 -> 0
    ]
    df = pd.DataFrame(rows, columns=["checkpoint", "language", "axis", "nll_stereo", "nll_anti", "nll_meaningless"])
    df["prompt_id"] = [f"p{i}" for i in range(len(df))]
    df["group"] = "g"
    for c in ("stereo", "anti", "meaningless"):
        df[f"nll_{c}_sum"] = 3 * df[f"nll_{c}"]
    df.loc[0, "nll_anti_sum"] = 3.0  # sum-loss delta of row 0: 3 - 6 = -3 -> 0
    return df


def _abs(t: pd.DataFrame, ck: str, lang: str, axis: str) -> pd.Series:
    r = t[(t.checkpoint == ck) & (t.language == lang) & (t.axis == axis)]
    assert len(r) == 1, (ck, lang, axis)
    return r.iloc[0]


def test_add_delta_mean_and_sum() -> None:
    s = _scores()
    d = add_delta(s, loss="mean")
    np.testing.assert_allclose(d["delta"], [1.0, -0.5, 2.0, 0.2, 0.6, 0.0, 1.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(d["delta_clipped"], [1.0, 0, 2.0, 0.2, 0.6, 0, 1.0, 0], atol=1e-12)
    ds = add_delta(s, loss="sum")
    assert ds.loc[0, "delta"] == pytest.approx(-3.0)
    assert ds.loc[2, "delta"] == pytest.approx(6.0)
    assert "delta" not in s.columns
    with pytest.raises(TableError):
        add_delta(s, loss="median")  # type: ignore[arg-type]


def test_abs_table_levels_by_hand() -> None:
    t = abs_table(_scores(), loss="mean")
    assert list(t.columns) == ["checkpoint", "language", "axis", "abs", "band", "n", "odds"]
    # per axis: mean of clipped deltas
    assert _abs(t, "m1", "en", "caste")["abs"] == pytest.approx(0.5)  # (1 + 0) / 2
    assert _abs(t, "m1", "en", "gender")["abs"] == pytest.approx(2.0)
    assert _abs(t, "m2", "en", "gender")["abs"] == pytest.approx(0.5)  # (0 + 1) / 2
    assert _abs(t, "m2", "en", "caste")["n"] == 1
    # per language: unweighted mean over axes
    m1_en = _abs(t, "m1", "en", "all")
    assert m1_en["abs"] == pytest.approx((0.5 + 2.0) / 2) and m1_en["n"] == 3
    assert _abs(t, "m2", "en", "all")["abs"] == pytest.approx((0.6 + 0.5) / 2)
    # over models: mean over checkpoints
    en = _abs(t, "all", "en", "all")
    assert en["abs"] == pytest.approx((1.25 + 0.55) / 2) and en["n"] == 6
    assert _abs(t, "all", "en", "caste")["abs"] == pytest.approx((0.5 + 0.6) / 2)
    assert _abs(t, "all", "hi", "all")["abs"] == pytest.approx((0.2 + 0.0) / 2)
    assert _abs(t, "m1", "en", "gender")["band"] == "strong"
    assert _abs(t, "m1", "en", "all")["band"] == "moderate"
    assert en["band"] == "mild"  # 0.9
    assert _abs(t, "all", "hi", "all")["band"] == "negligible"
    assert len(t) == 6 + 4 + 3 + 2  # axis rows, language rows, axis-over-models, language-over-models


def test_abs_table_sum_loss_differs() -> None:
    t = abs_table(_scores(), loss="sum")
    assert _abs(t, "m1", "en", "caste")["abs"] == pytest.approx(0.0)  # row0 now -3, row1 -1.5
    assert _abs(t, "m1", "en", "gender")["abs"] == pytest.approx(6.0)


@pytest.mark.parametrize(
    ("value", "band"),
    [
        (0.0, "negligible"),
        (0.49, "negligible"),
        (0.5, "mild"),
        (0.99, "mild"),
        (1.0, "moderate"),
        (1.49, "moderate"),
        (1.5, "strong"),
        (7.0, "strong"),
    ],
)
def test_bands(value: float, band: str) -> None:
    assert abs_band(value) == band


def test_band_nan() -> None:
    assert abs_band(float("nan")) is None


def test_meaningless_sanity() -> None:
    s = meaningless_sanity(_scores(), loss="mean").set_index(["checkpoint", "language"])
    assert list(s.reset_index().columns) == ["checkpoint", "language", "share_meaningless_lowest", "n"]
    assert s.loc[("m1", "en"), "share_meaningless_lowest"] == pytest.approx(1 / 3)
    assert s.loc[("m1", "hi"), "share_meaningless_lowest"] == pytest.approx(1.0)
    assert s.loc[("m2", "en"), "share_meaningless_lowest"] == pytest.approx(0.0)
    assert s.loc[("m2", "en"), "n"] == 3


def test_reserved_and_missing() -> None:
    s = _scores()
    with pytest.raises(TableError):
        abs_table(s.assign(axis="all"), loss="mean")
    with pytest.raises(TableError):
        abs_table(s.drop(columns=["nll_anti"]), loss="mean")
    with_nan = s.copy()
    with_nan.loc[1, "nll_anti"] = np.nan
    t = abs_table(with_nan, loss="mean")
    assert _abs(t, "m1", "en", "caste")["abs"] == pytest.approx(1.0)
    assert _abs(t, "m1", "en", "caste")["n"] == 1
