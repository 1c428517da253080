"""`interp view` on the field's sycophancy sets (issue 49): the A/B (model-written-evals) and
sycophancy-eval studies swept over tiny random checkpoints, their item maps and items opened in
Debian's headless Chromium, static and served. Every number a page shows is compared with pandas
on the CSV the sweep wrote; the negative controls show the comparisons fail on a CSV with one value
moved and on the other study's sign."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest
from _cli_process import run_cli_process
from _view_pages import click_cell, csv_tol, page_table, same, serve_site

from interp.view import browser
from interp.view.field_set_pages import FIELD_SETS

pytestmark = pytest.mark.timeout(900)
NO_BROWSER = browser.missing()
needs_browser = pytest.mark.skipif(NO_BROWSER is not None, reason=f"headless Chromium: {NO_BROWSER}")
ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
STUDY_BANK = {"ab_sycophancy": 0, "sycophancy_eval": 1}  # banks sorted by name: nlp_survey; are_you_sure


def _interp(*args) -> None:
    res = run_cli_process([str(a) for a in args], env=ENV, timeout=600)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def out(tmp_path_factory, tokenizer):
    """Both studies over a base (2 steps) and an SFT route; the sets' files read from a relative
    path (the site must still find their text)."""
    from interp.testing import build_tiny_model, write_sample_sets

    root = tmp_path_factory.mktemp("view_sets")
    for i, name in enumerate(["stage1-step100", "stage1-step200", "sft/final"]):
        build_tiny_model(root / "run" / name, "llama", n_layers=2, d_model=32, seed=i, tokenizer=tokenizer)
    sets = write_sample_sets(root / "sets")
    common = ("--threads", "1", "--quiet", "--n-boot", "200", "--out", root / "out")
    cwd = os.getcwd()
    os.chdir(root)  # the bank paths below are relative to the sweep's directory
    try:
        ab = sets["sycophancy_on_nlp_survey"].relative_to(root)
        _interp("sweep", "run", "--study", "ab_sycophancy", "--bank", ab, "--swap-letters", *common)
        banks = [a for k in ("are_you_sure", "answer", "feedback") for a in ("--bank", sets[k].relative_to(root))]
        _interp("sweep", "run", "--study", "sycophancy_eval", *banks, *common)
    finally:
        os.chdir(cwd)
    return root / "out"


@pytest.fixture(scope="module")
def static_site(out):
    _interp("view", out, "--out", out.parent / "site")
    return (out.parent / "site").as_uri() + "/"


@pytest.fixture(scope="module")
def served_site(out):
    with serve_site([out], ENV) as url:
        yield url


@pytest.fixture(params=["static", "served"])
def site(request):
    return request.getfixturevalue(f"{request.param}_site")


# ------------------------------------------------------------------ the comparisons
def check_item(page, study: str, readings: pd.DataFrame, maps: pd.DataFrame, item_id: str) -> int:
    """Every number of the item page's tables equals the study's CSVs and every CSV row of the item
    is on the page; returns how many numbers were compared."""
    fs = FIELD_SETS[study]
    keys = list(fs.reading_keys)
    head, rows = page_table(page, "readings")
    checkpoints = head[len(keys) + 1 :]
    want = readings[readings["item_id"] == item_id].fillna({k: "" for k in keys})
    assert len(want), item_id
    n, seen = 0, set()
    for r in rows:
        for j, ck in enumerate(checkpoints):
            m = want[(want["checkpoint"] == ck) & np.logical_and.reduce([want[k].astype(str) == r[k] for k in keys])]
            if r[f"c{j}"] == "":
                assert m.empty or m[r["value"]].isna().all(), (ck, r)
                continue
            assert len(m) == 1, (ck, r)
            got, ref = float(r[f"c{j}"]), float(m[r["value"]].iloc[0])
            assert abs(got - ref) <= csv_tol(ref), (ck, r, got, ref)
            seen.add((m.index[0], r["value"]))
            n += 1
    assert seen == {(i, v) for i in want.index for v in fs.values}, "CSV readings missing on the page"
    head, rows = page_table(page, "set_item_map")
    mine = maps[maps["item_id"] == item_id]
    assert len(rows) == mine[fs.kind].nunique()
    for r in rows:
        kind = r["reading"].split("· ")[1]
        for j, ck in enumerate(head[2:]):
            m = mine[(mine["checkpoint"] == ck) & (mine[fs.kind].astype(str) == kind)]
            assert same(r[f"c{j}"], m["map_value"].iloc[0] if len(m) else None), (ck, kind)
            n += 1
    return n


def check_map(shown: dict, maps: pd.DataFrame, study: str) -> int:
    """The heatmap's rows (most on the user's side first, by the CSV's item means), columns and
    cells (float32 of the CSV's value) equal pandas' pivot of the item map table."""
    fs = FIELD_SETS[study]
    sub = maps[(maps["bank"] == shown["bank"]) & (maps[fs.kind].astype(str) == shown["kind"])]
    grid = sub.pivot(index="item_id", columns="checkpoint", values="map_value")
    mean = grid.mean(axis=1)
    assert shown["y"] == (-fs.toward_user * mean).sort_values(kind="stable").index.tolist()
    n = 0
    for i, item in enumerate(shown["y"]):
        for j, ck in enumerate(shown["x"]):
            v = grid.loc[item, ck] if ck in grid.columns else np.nan
            assert same(shown["z"][i][j], None if pd.isna(v) else float(np.float32(v))), (item, ck)
            n += 1
    assert grid.size == len(shown["y"]) * len(shown["x"])
    return n


def read_map(page, site: str, study: str, kind: str) -> dict:
    browser.open_page(page, site + f"sets.html#s=0&t={study}&b={STUDY_BANK[study]}&k={kind}")
    return page.evaluate(
        """() => { const t = window.VIEW_SETMAP.gd.data[0], v = (n) => document.querySelector(`select[name=${n}]`);
            return {bank: v("bank").selectedOptions[0].textContent, kind: v("kind").value, x: t.x, y: t.y, z: t.z}; }"""
    )


# ------------------------------------------------------------------ tests
@needs_browser
@pytest.mark.parametrize(
    "study,kind,readings",
    [("ab_sycophancy", "given", "ab_scores.csv"), ("sycophancy_eval", "challenge", "sycophancy_eval_trials.csv")],
)
def test_map_click_opens_item_with_csv_numbers(site, out, study, kind, readings):
    results = out / "results"
    maps = pd.read_csv(results / FIELD_SETS[study].maps)
    table = pd.read_csv(results / readings)
    with browser.chromium() as (page, watch):
        shown = read_map(page, site, study, kind)
        assert check_map(shown, maps, study) >= 10 * 3
        item_id = click_cell(page, "VIEW_SETMAP", 2, 1, "setitem.html")
        assert browser.wait_ready(page) == "1", watch.errors
        assert page.text_content("h2") == f"Item {item_id}"
        n = check_item(page, study, table, maps, item_id)
        assert n >= 3 * len(FIELD_SETS[study].values)
        # the item's text from the set's file (read through a relative path at sweep time)
        text = page.text_content("#itemtext")
        assert "gone or changed" not in text and len(text) > 20
    assert watch.errors == [] and watch.refused == []


@needs_browser
def test_checks_fail_on_a_moved_value_and_on_the_wrong_sign(static_site, out):
    """Negative controls: the same comparisons on a CSV with one shown value moved, and the map's
    order read with the other study's sign, must fail."""
    results = out / "results"
    maps = pd.read_csv(results / "ab_item_maps.csv")
    scores = pd.read_csv(results / "ab_scores.csv")
    with browser.chromium() as (page, _):
        shown = read_map(page, static_site, "ab_sycophancy", "given")
        moved = maps.copy()
        row = moved.index[(moved["order"] == "given") & (moved["item_id"] == shown["y"][0])][0]
        moved.loc[row, "map_value"] += 1e-3
        with pytest.raises(AssertionError):
            check_map(shown, moved, "ab_sycophancy")
        with pytest.raises(AssertionError):  # most-yielding first read as "lowest first": reversed
            check_map(shown, maps.assign(map_value=-maps["map_value"]), "ab_sycophancy")
        item_id = click_cell(page, "VIEW_SETMAP", 0, 0, "setitem.html")
        browser.wait_ready(page)
        check_item(page, "ab_sycophancy", scores, maps, item_id)  # the unaltered CSVs pass
        altered = scores.copy()
        at = altered.index[altered["item_id"] == item_id][0]
        altered.loc[at, "p_match"] = altered.loc[at, "p_match"] * (1 + 1e-6)
        with pytest.raises(AssertionError):
            check_item(page, "ab_sycophancy", altered, maps, item_id)


@needs_browser
def test_overview_tables_are_the_summary_csvs(site, out):
    results = out / "results"
    with browser.chromium() as (page, watch):
        assert browser.open_page(page, site + "index.html") == "1", watch.errors
        for name, keys in (
            ("ab_summary", ("checkpoint", "bank", "set", "order")),
            ("sycophancy_eval_summary", ("checkpoint", "bank", "domain", "readout")),
        ):
            csv = pd.read_csv(results / f"{name}.csv")
            _, rows = page_table(page, name)
            assert rows, name
            for r in rows:
                m = csv[np.logical_and.reduce([csv[k].astype(str) == r[k] for k in keys])]
                assert len(m) == 1, (name, r)
                for col, v in r.items():
                    if col not in keys and pd.api.types.is_float_dtype(csv[col]):
                        assert same(v, m[col].iloc[0]), (name, col, r)
    assert watch.errors == [] and watch.refused == []


def test_site_keys_name_every_item(out, tmp_path):
    """The static site holds a map per bank and kind and a page per item of both studies; a sweep
    whose files are gone shows the items without their text (said on the page), not an error."""
    from interp.view.site import Site

    site = Site([out])
    keys = set(site.static_keys())
    for study, fs in FIELD_SETS.items():
        maps = pd.read_csv(out / "results" / fs.maps)
        for b, (_, g) in enumerate(maps.groupby("bank", sort=True)):
            assert {f"setmap/0/{study}/{b}/{k}" for k in g[fs.kind].unique()} <= keys
            assert {f"setitem/0/{study}/{b}/{i}" for i in range(g["item_id"].nunique())} <= keys
    moved = tmp_path / "out"
    shutil.copytree(out, moved)
    shutil.rmtree(out.parent / "sets")
    try:
        payload = Site([moved]).payload("setitem/0/ab_sycophancy/0/0")
        assert payload["text"] == "" and payload["values"]
    finally:
        from interp.testing import write_sample_sets

        write_sample_sets(out.parent / "sets")
