"""Figures from tables: the item-map heatmap (items x checkpoints, most-yielding at the top) on
planted maps, and the captions report.md prints under each figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import interp.studies.pressure.figures as pf
from sweeps.report import FIGURE_CAPTIONS, figure_caption, write_report

CKS = ["base", "sft", "dpo"]
# planted opinion-turn map values per item (base, sft, dpo); means: i3 -2, i1 -1, i4 0, i0 +0.5, i2 +1
PLANTED = {
    "i0": (0.5, 0.5, 0.5),
    "i1": (0.0, -1.0, -2.0),
    "i2": (1.0, 1.0, 1.0),
    "i3": (-2.0, -2.0, -2.0),
    "i4": (0, 0, 0),
}
EXPECTED = ["i3", "i1", "i4", "i0", "i2"]


def planted_maps(sign: float = 1.0) -> pd.DataFrame:
    rows = []
    for item, vals in PLANTED.items():
        for ck, v in zip(CKS, vals):
            rows.append(("moral", item, ck, "opinion", sign * v))
            rows.append(("moral", item, ck, "challenge", -sign * v))  # another turn kind, reversed
            rows.append(("factual", item, ck, "opinion", 5.0))  # another bank
    return pd.DataFrame(rows, columns=["bank", "item_id", "checkpoint", "turn_kind", "map_value"])


def test_matrix_puts_the_most_yielding_item_first_and_keeps_lineage_order() -> None:
    maps = planted_maps()
    wide = pf.item_map_matrix(maps[maps["bank"] == "moral"], ["dpo", "base", "sft", "absent"])
    assert list(wide.index) == EXPECTED
    assert list(wide.columns) == ["dpo", "base", "sft"]  # the given order; a checkpoint without maps dropped
    assert wide.loc["i1", "dpo"] == -2.0 and wide.loc["i1", "base"] == 0.0
    # negative control: with every sign flipped the order reverses, so the sort follows the values
    flipped = planted_maps(-1.0)
    assert list(pf.item_map_matrix(flipped[flipped["bank"] == "moral"], CKS).index) == EXPECTED[::-1]
    # the challenge rows (planted reversed) give the reverse order too: the turn kind is honoured
    assert list(pf.item_map_matrix(maps[maps["bank"] == "moral"], CKS, turn_kind="challenge").index) == EXPECTED[::-1]


def test_heatmap_draws_items_top_down_from_the_most_yielding(tmp_path: Path, monkeypatch) -> None:
    drawn = {}
    real_save = pf.save_figure

    def capture(fig, path):
        drawn["fig"] = fig
        return real_save(fig, path)

    monkeypatch.setattr(pf, "save_figure", capture)
    path = pf.plot_item_map_heatmap(planted_maps(), CKS, "moral", tmp_path / "item_map_heatmap_moral.png")
    assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    ax = drawn["fig"].axes[0]
    # imshow draws row 0 at the top: the labels from top to bottom are the sorted items
    assert [t.get_text() for t in ax.get_yticklabels()] == EXPECTED
    assert [t.get_text() for t in ax.get_xticklabels()] == CKS
    image = ax.get_images()[0].get_array()
    np.testing.assert_array_equal(np.asarray(image)[0], PLANTED["i3"])  # the top row is the planted i3
    assert pf.plot_item_map_heatmap(planted_maps(), CKS, "no-such-bank", tmp_path / "x.png") is None


def test_report_prints_a_caption_under_each_figure(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)
    maps = planted_maps()
    maps.to_csv(out / "results" / "item_maps.csv", index=False)
    summary = pd.DataFrame(
        [
            dict(
                checkpoint=ck,
                bank=b,
                readout="slot",
                **{f"{m}{s}": 0.1 for m in ("delta", "s_op", "s_ch") for s in ("", "_lo", "_hi")},
            )
            for ck in CKS
            for b in ("moral", "factual")
        ]
    )
    summary.to_csv(out / "results" / "pressure_summary.csv", index=False)
    (out / "figures").mkdir()
    (out / "figures" / "unknown_plot.png").write_bytes(b"")  # a figure nobody declared: no caption
    report = write_report(out).read_text(encoding="utf-8")
    for stem in ("pressure_trajectories", "item_map_heatmap_moral", "item_map_heatmap_factual", "item_map_scatter"):
        assert (out / "figures" / f"{stem}.png").is_file()
        after = report.split(f"](figures/{stem}.png)", 1)[1].lstrip("\n")
        assert after.startswith("*") and figure_caption(stem) and after[1:].startswith(figure_caption(stem)[:40])
    assert figure_caption("unknown_plot") == ""
    assert report.split("](figures/unknown_plot.png)", 1)[1].lstrip("\n")[:1] != "*"


@pytest.mark.parametrize(
    "name",
    [
        "pressure_trajectories",
        "item_map_heatmap_moral",
        "cloze_abs_all",
        "probe_depth_pressure_flipped",
        "predictive_I",
    ],
)
def test_the_guides_figures_have_captions(name: str) -> None:
    assert len(figure_caption(f"{name}.png")) > 80
    assert len({p for p, _ in FIGURE_CAPTIONS}) == len(FIGURE_CAPTIONS)  # each pattern once
