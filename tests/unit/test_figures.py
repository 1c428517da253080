"""Figures from tables: the item-map heatmap (items x checkpoints, most-yielding at the top) on
planted maps, the captions report.md prints under each figure, and figures redrawn only when
what they are drawn from changed."""

from __future__ import annotations

import shutil
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


def pressure_out(root: Path) -> Path:
    """An OUT with the two tables the pressure figures read (planted maps, a flat summary)."""
    out = root / "out"
    (out / "results").mkdir(parents=True)
    planted_maps().to_csv(out / "results" / "item_maps.csv", index=False)
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
    return out


def test_report_prints_a_caption_under_each_figure(tmp_path: Path) -> None:
    out = pressure_out(tmp_path)
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


def _count_draws(monkeypatch) -> list[str]:
    from matplotlib.figure import Figure

    drawn: list[str] = []
    real = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        drawn.append(str(fname))
        return real(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return drawn


def test_a_second_report_draws_nothing_and_its_figures_equal_a_fresh_draw(tmp_path: Path, monkeypatch) -> None:
    from analyses.figures import KEY_CHUNK, png_text

    drawn = _count_draws(monkeypatch)
    out = pressure_out(tmp_path)
    write_report(out)
    pngs = sorted((out / "figures").glob("*.png"))
    assert len(pngs) == len(drawn) == 4 and all(KEY_CHUNK in png_text(p) for p in pngs)
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in pngs}
    write_report(out)
    assert len(drawn) == 4, "an unchanged OUT was drawn again"
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted((out / "figures").glob("*.png"))} == before
    # what was kept is what a fresh draw of the same tables writes, byte for byte
    fresh = tmp_path / "fresh"
    (fresh / "out").mkdir(parents=True)
    shutil.copytree(out / "results", fresh / "out" / "results")
    write_report(fresh / "out")
    assert {p.name: p.read_bytes() for p in (fresh / "out" / "figures").glob("*.png")} == {
        k: v[1] for k, v in before.items()
    }


def test_changed_inputs_code_or_files_are_drawn_again(tmp_path: Path, monkeypatch) -> None:
    """Negative controls: one changed map value redraws the figures that read the maps (not the
    trajectories); a deleted PNG, one drawn without a key (an older version) and a changed plot
    module are drawn again."""
    import analyses.figures as figs

    drawn = _count_draws(monkeypatch)
    out = pressure_out(tmp_path)
    write_report(out)
    drawn.clear()
    maps = pd.read_csv(out / "results" / "item_maps.csv")
    maps.loc[0, "map_value"] += 1e-9  # below any printed digit, still another figure input
    maps.to_csv(out / "results" / "item_maps.csv", index=False)
    write_report(out)
    assert sorted(Path(d).name.split(".tmp")[0].lstrip(".") for d in drawn) == [
        "item_map_heatmap_factual.png",
        "item_map_heatmap_moral.png",
        "item_map_scatter.png",
    ], drawn
    drawn.clear()
    (out / "figures" / "item_map_scatter.png").unlink()
    write_report(out)
    assert len(drawn) == 1 and (out / "figures" / "item_map_scatter.png").is_file()
    drawn.clear()
    # the same figure saved without its key, as a version before this one wrote it
    from matplotlib.figure import Figure

    Figure().savefig(out / "figures" / "pressure_trajectories.png")
    drawn.clear()
    write_report(out)
    assert len(drawn) == 1 and figs.KEY_CHUNK in figs.png_text(out / "figures" / "pressure_trajectories.png")
    drawn.clear()
    monkeypatch.setattr(figs, "_source_digest", lambda filename: "another version of " + filename)
    write_report(out)
    assert len(drawn) == 4


def test_png_text_reads_what_matplotlib_writes_and_nothing_else(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    from analyses.figures import png_text

    Figure().savefig(tmp_path / "a.png", metadata={"interp-figure-key": "abc", "Title": "t"})
    assert png_text(tmp_path / "a.png")["interp-figure-key"] == "abc"
    assert png_text(tmp_path / "missing.png") == {}
    (tmp_path / "b.png").write_bytes(b"not a png")
    assert png_text(tmp_path / "b.png") == {}
    data = (tmp_path / "a.png").read_bytes()
    (tmp_path / "c.png").write_bytes(data[:20])  # truncated inside the first chunk
    assert "interp-figure-key" not in png_text(tmp_path / "c.png")
