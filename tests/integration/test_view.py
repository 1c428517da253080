"""`interp view`: the static site and the 127.0.0.1 server over a real sweep of tiny random models,
opened in Debian's headless Chromium (Playwright). Each number checked on a page is compared with
pandas on the CSV the sweep wrote; the negative controls show those comparisons fail on a CSV with
one value altered."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _cli_process import run_cli_process
from _view_pages import click_cell, csv_tol, page_table, same, serve_site

from analyses.bootstrap import bootstrap_mean_ci
from interp.view import browser
from interp.view.pages import PAGES as SITE_PAGES

# the module builds three sweeps before its first test: on a loaded shared machine, minutes
pytestmark = pytest.mark.timeout(1500)
NO_BROWSER = browser.missing()
needs_browser = pytest.mark.skipif(NO_BROWSER is not None, reason=f"headless Chromium: {NO_BROWSER}")
ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
PAGES = tuple(p[0] for p in SITE_PAGES)  # the field-set pages too: on a sweep without them they say so
CONDITION = ["readout", "planted", "turn_kind", "turn_side", "turn_variant"]


def _interp(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_cli_process([str(a) for a in args], env=ENV, timeout=timeout)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory, tokenizer):
    """OUT: all three studies over a base (2 steps) and an SFT route, the pressure study with its
    sampled readout too (replies kept); OUT2: the pressure study on two other models of the same
    names (a second sweep to compare against)."""
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("view")
    names = ["stage1-step100", "stage1-step200", "sft/final"]
    for i, name in enumerate(names):
        build_tiny_model(root / "run" / name, "llama", n_layers=2, d_model=32, seed=i, tokenizer=tokenizer)
        if i < 2:
            build_tiny_model(root / "run2" / name, "llama", n_layers=2, d_model=32, seed=10 + i, tokenizer=tokenizer)
    common = ("--max-items", "6", "--threads", "1", "--quiet", "--n-boot", "200")
    out, out2 = root / "out", root / "out2"
    first = _interp("sweep", root / "run", "--study", "classify", "--study", "cloze", *common, "--out", out)
    assert first.returncode == 0, first.stderr
    pressure = _interp(
        "sweep", root / "run", "--study", "pressure", *common, "--readout", "sampled", "--n-samples", "2",
        "--max-new-tokens", "2", "--out", out,
    )  # fmt: skip
    assert pressure.returncode == 0, pressure.stderr
    second = _interp("sweep", root / "run2", "--study", "pressure", *common, "--out", out2)
    assert second.returncode == 0, second.stderr
    return {"out": out, "out2": out2, "stdout": pressure.stdout, "root": root}


@pytest.fixture(scope="module")
def static_site(sweeps):
    dest = sweeps["root"] / "site"
    res = _interp("view", sweeps["out"], sweeps["out2"], "--out", dest)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(dest / "index.html")
    return (dest / "index.html").parent.as_uri() + "/"


@pytest.fixture(scope="module")
def served_site(sweeps):
    with serve_site([sweeps["out"], sweeps["out2"]], ENV) as url:
        yield url


@pytest.fixture(params=["static", "served"])
def site(request):
    return request.getfixturevalue(f"{request.param}_site")


# ------------------------------------------------------------------ the comparisons (and their controls)
def check_item_page(page, trials: pd.DataFrame, maps: pd.DataFrame, item_id: str) -> int:
    """Every P(planted verdict) and item-map value the item page shows equals the CSV's; every CSV
    row of the item is on the page. Returns how many numbers were compared."""
    head, rows = page_table(page, "p_planted")
    checkpoints = head[len(CONDITION) :]
    want = trials[trials["item_id"] == item_id].fillna({"turn_side": "", "turn_variant": ""})
    assert len(want), item_id
    n = 0
    seen = set()
    for r in rows:
        for j, ck in enumerate(checkpoints):
            v = r[f"c{j}"]
            m = want[
                (want["checkpoint"] == ck) & np.logical_and.reduce([want[c].astype(str) == r[c] for c in CONDITION])
            ]
            if v == "":
                assert m.empty or m["p_planted"].isna().all(), (ck, r)
                continue
            assert len(m) == 1, (ck, r)
            got, ref = float(v), float(m["p_planted"].iloc[0])
            assert abs(got - ref) <= csv_tol(ref), (ck, r, got, ref)
            seen.add(m.index[0])
            n += 1
    assert seen == set(want[want["p_planted"].notna()].index), "CSV rows missing on the page"
    head, rows = page_table(page, "item_map")
    for r in rows:
        if not r["reading"].startswith("map_value"):
            continue
        kind = r["reading"].split("· ")[1]
        for j, ck in enumerate(head[2:]):
            m = maps[(maps["item_id"] == item_id) & (maps["checkpoint"] == ck) & (maps["turn_kind"] == kind)]
            if r[f"c{j}"] == "":
                assert m.empty, (ck, kind)
                continue
            assert float(r[f"c{j}"]) == float(m["map_value"].iloc[0]), (ck, kind)  # the CSV's own value
            n += 1
    return n


def changed_count(maps_a: pd.DataFrame, maps_b: pd.DataFrame, ck_a: str, ck_b: str, kind: str, t: float) -> tuple:
    """(changed items, n, mean B - A, diffs) by pandas: items in both with |B - A| >= t."""
    a = maps_a[(maps_a["checkpoint"] == ck_a) & (maps_a["turn_kind"] == kind)].set_index("item_id")["map_value"]
    b = maps_b[(maps_b["checkpoint"] == ck_b) & (maps_b["turn_kind"] == kind)].set_index("item_id")["map_value"]
    d = (b - a).dropna()
    return int((d.abs() >= t).sum()), len(d), float(d.mean()), d.sort_index().to_numpy()


SHOWN_TABLES = {  # the overview's tables: the columns that say which row it is
    "pressure_summary": ("checkpoint", "bank", "readout"),
    "classify_summary": ("checkpoint", "bank", "task", "order"),
    "cloze_abs_by_loss": ("checkpoint", "bank", "language"),
}


def shown_numbers(page, site: str) -> dict:
    """What the pages show of sweep 0, read from the pages: the overview's tables and the points of
    its charts, the item map's cells and row order, the cloze ABS grid and a confusion matrix."""
    out = {}
    browser.open_page(page, site + "index.html")
    for name in SHOWN_TABLES:
        out[name] = page_table(page, name)[1]  # the first sweep's table comes first
    out["charts"] = page.evaluate(
        """() => [...document.querySelector("[data-sweep]").querySelectorAll(".chart[data-metric]")].map((d) =>
            [d.dataset.metric, d.data.flatMap((t) => t.x.map((x, j) => [x, t.y[j]]))])"""
    )
    browser.open_page(page, site + "map.html#s=0&b=1&k=opinion")
    out["map"] = page.evaluate(
        """() => VIEW.load("site").then((m) => { const t = window.VIEW_MAP.gd.data[0];
            return {bank: m.sweeps[0].pressure_banks[1], x: t.x, y: t.y, z: t.z}; })"""
    )
    browser.open_page(page, site + "cloze.html#s=0")
    out["cloze"] = page.evaluate(
        """() => { const t = window.VIEW_CLOZE.gd.data[0], v = (n) => document.querySelector(`select[name=${n}]`).value;
            return {checkpoint: v("checkpoint"), loss: v("loss"), x: t.x, y: t.y, z: t.z}; }"""
    )
    browser.open_page(page, site + "classify.html#s=0&c=1")
    out["confusion"] = page.evaluate(
        """() => { const t = window.VIEW_CONFUSION.gd.data[0], v = (n) => document.querySelector(`select[name=${n}]`);
            return {checkpoint: v("checkpoint").selectedOptions[0].textContent, bank: v("bank").value,
                    task: v("task").value, order: v("order").value, x: t.x, y: t.y, z: t.z}; }"""
    )
    return out


def check_shown(shown: dict, results: dict[str, pd.DataFrame]) -> int:
    """Every number of `shown_numbers` equals pandas on the CSVs in `results`; returns how many."""
    n = 0
    for name, keys in SHOWN_TABLES.items():
        table = results[f"{name}.csv"]
        assert shown[name], name
        for r in shown[name]:
            m = table[np.logical_and.reduce([table[k].astype(str) == r[k] for k in keys])]
            assert len(m) == 1, (name, r)
            for col, v in r.items():
                if col in keys:
                    continue
                want = m[col].iloc[0]
                if pd.api.types.is_bool_dtype(table[col]):
                    assert v == str(want).lower(), (name, col, r)
                elif pd.api.types.is_numeric_dtype(table[col]):
                    assert same(v, want), (name, col, r)
                else:  # a label column (pandas 3 reads text as str, not object)
                    assert v == ("" if pd.isna(want) else str(want)), (name, col, r)
                n += 1
        # every CSV row of the selection shown (the selection: the shown rows' bank, readout, task ...)
        sel = {k: {r[k] for r in shown[name]} for k in keys if k != "checkpoint"}
        want = table[np.logical_and.reduce([table[k].astype(str).isin(v) for k, v in sel.items()])]
        assert len(want) == len(shown[name]), name
    for metric, points in shown["charts"]:  # the overview's charts: the points of the same rows
        name = next(t for t in ("pressure_summary", "classify_summary") if metric in results[f"{t}.csv"].columns)
        table, keys = results[f"{name}.csv"], SHOWN_TABLES[name][1:]
        first = shown[name][0]
        rows = table[np.logical_and.reduce([table[k].astype(str) == first[k] for k in keys])].set_index("checkpoint")
        assert {x for x, _ in points} == set(rows.index), metric  # a route's line repeats its branch point
        for x, y in points:
            assert same(y, rows.loc[x, metric]), (metric, x)
            n += 1
    mp = shown["map"]
    maps = results["item_maps.csv"]
    maps = maps[(maps["bank"] == mp["bank"]) & (maps["turn_kind"] == "opinion")]
    grid = maps.pivot(index="item_id", columns="checkpoint", values="map_value")
    assert mp["y"] == grid.mean(axis=1).sort_values(kind="stable").index.tolist()  # most-yielding first
    for i, item in enumerate(mp["y"]):
        for j, ck in enumerate(mp["x"]):
            # the heatmap's cells are float32 (interp.view.encode.f32): the CSV's value rounded to it
            v = grid.loc[item, ck]
            assert same(mp["z"][i][j], None if pd.isna(v) else float(np.float32(v))), (item, ck)
            n += 1
    assert grid.size == len(mp["y"]) * len(mp["x"])
    cz = shown["cloze"]
    cloze = results["cloze_abs.csv"]
    cloze = cloze[(cloze["checkpoint"] == cz["checkpoint"]) & (cloze["loss"] == cz["loss"])]
    assert cz["z"] and len(cloze) == sum(v is not None for row in cz["z"] for v in row)
    for i, lang in enumerate(cz["y"]):
        for j, axis in enumerate(cz["x"]):
            m = cloze[(cloze["language"] == lang) & (cloze["axis"] == axis)]["abs"]
            assert same(cz["z"][i][j], m.iloc[0] if len(m) else None), (lang, axis)
            n += 1
    cf = shown["confusion"]
    conf = results["classify_confusion.csv"]
    conf = conf[
        (conf["checkpoint"] == cf["checkpoint"]) & (conf["bank"] == cf["bank"]) & (conf["task"] == cf["task"])
        & (conf["order"] == cf["order"])
    ]  # fmt: skip
    assert len(conf) == len(cf["y"]) * len(cf["x"]) > 0
    for i, gold in enumerate(cf["y"]):
        for j, pred in enumerate(cf["x"]):
            m = conf[(conf["gold"].astype(str) == gold) & (conf["pred"].astype(str) == pred)]["count"]
            assert same(cf["z"][i][j], m.iloc[0]), (gold, pred)
            n += 1
    return n


def read_stat(page, name: str) -> float:
    return float(page.get_attribute(f"#{name}", "data-v"))


# ------------------------------------------------------------------ tests
def test_sweep_prints_the_view_command(sweeps):
    """The sweep's last line is the command that views its OUT, quoted for a shell."""
    last = sweeps["stdout"].strip().splitlines()[-1]
    assert shlex.split(last.removeprefix("browse them: ")) == ["interp", "view", str(sweeps["out"])]


@needs_browser
def test_pages_open_without_errors_or_outside_requests(site):
    with browser.chromium() as (page, watch):
        for name in PAGES:
            assert browser.open_page(page, site + name) == "1", (name, watch.errors)
            assert page.locator("#next").count() == 1  # each page links to the next
    assert watch.errors == []
    assert watch.refused == []
    assert watch.requests and all(u.startswith(site) for u in watch.requests), set(watch.requests) - {site}


@needs_browser
def test_click_in_map_opens_item_with_csv_numbers(site, sweeps):
    trials = pd.read_csv(sweeps["out"] / "results" / "pressure_trials.csv")
    maps = pd.read_csv(sweeps["out"] / "results" / "item_maps.csv")
    with browser.chromium() as (page, watch):
        browser.open_page(page, site + "map.html#s=0&b=1&k=opinion")
        row, col = 2, 1  # a cell: the third item shown, the second checkpoint
        item_id = click_cell(page, "VIEW_MAP", row, col, "item.html")
        assert browser.wait_ready(page) == "1", watch.errors
        assert page.text_content("h2") == f"Item {item_id}"
        assert page.text_content("#gold") == trials.loc[trials["item_id"] == item_id, "gold"].astype(str).iloc[0]
        n = check_item_page(page, trials, maps, item_id)
        # both readouts, 30 conditions each, on 3 checkpoints; the item map's 2 kinds on 3
        assert n >= 30 * 3 + 2 * 3
        assert page.locator("table[data-name=replies] tbody tr").count() == 2 * 30 * 3  # every sampled reply
        assert page.locator("details pre").count() == 31  # 1 + 30 prompts, shared by the 3 checkpoints
        bank_text = pd.read_json(Path(__file__).parents[2] / "interp" / "data" / "banks" / "moral.jsonl", lines=True)
        assert page.text_content("#itemtext") == bank_text.set_index("item_id").loc[item_id, "text"]
    assert watch.errors == [] and watch.refused == []


@needs_browser
def test_item_check_fails_on_an_altered_csv(static_site, sweeps, tmp_path):
    """Negative control: the same page against a copy of pressure_trials.csv with one of this item's
    values moved by 1e-6 (far above the CSV's rounding) fails the comparison."""
    trials = pd.read_csv(sweeps["out"] / "results" / "pressure_trials.csv")
    maps = pd.read_csv(sweeps["out"] / "results" / "item_maps.csv")
    item_id = sorted(maps[maps["bank"].str.startswith("moral")]["item_id"].unique())[0]
    altered = tmp_path / "pressure_trials.csv"
    text = (sweeps["out"] / "results" / "pressure_trials.csv").read_text().splitlines()
    k = next(i for i, line in enumerate(text) if f",{item_id}," in line and ",slot," in line)
    cols = text[0].split(",")
    parts = text[k].split(",")
    j = cols.index("p_planted") + (len(parts) - len(cols))  # the bank name holds commas: count from the right
    parts[j] = repr(float(parts[j]) + 1e-6)
    text[k] = ",".join(parts)
    altered.write_text("\n".join(text) + "\n")
    with browser.chromium() as (page, _):
        browser.open_page(page, static_site + "item.html#s=0&b=1&i=0")
        assert check_item_page(page, trials, maps, item_id) > 0
        with pytest.raises(AssertionError):
            check_item_page(page, pd.read_csv(altered), maps, item_id)


@needs_browser
def test_every_number_shown_equals_pandas(site, sweeps):
    """The overview's tables and charts, the item map, the cloze grid and a confusion matrix show
    the CSVs' values; negative control: a copy of each CSV with one shown value moved fails."""
    names = [f"{t}.csv" for t in SHOWN_TABLES] + ["item_maps.csv", "cloze_abs.csv", "classify_confusion.csv"]
    results = {f: pd.read_csv(sweeps["out"] / "results" / f) for f in names}
    with browser.chromium() as (page, watch):
        shown = shown_numbers(page, site)
    assert watch.errors == [] and watch.refused == []
    assert check_shown(shown, results) > 100
    key = {t: {k: shown[t][i][k] for k in SHOWN_TABLES[t]} for t, i in (("pressure_summary", 0),
           ("classify_summary", -1), ("cloze_abs_by_loss", 0))}  # fmt: skip
    rows = {  # one value each page shows, per table: the row it is in and its column
        "pressure_summary.csv": (key["pressure_summary"], "s_op"),
        "classify_summary.csv": (key["classify_summary"], "macro_f1"),
        "cloze_abs_by_loss.csv": (key["cloze_abs_by_loss"], "abs_byte_mean"),
        "item_maps.csv": ({"item_id": shown["map"]["y"][-1], "checkpoint": shown["map"]["x"][0], "bank": shown["map"]["bank"],
                           "turn_kind": "opinion"}, "map_value"),
        "cloze_abs.csv": ({"checkpoint": shown["cloze"]["checkpoint"], "loss": shown["cloze"]["loss"],
                           "language": shown["cloze"]["y"][0], "axis": shown["cloze"]["x"][-1]}, "abs"),
        "classify_confusion.csv": ({k: shown["confusion"][k] for k in ("checkpoint", "bank", "task", "order")}
                                   | {"gold": shown["confusion"]["y"][0], "pred": shown["confusion"]["x"][0]}, "count"),
    }  # fmt: skip
    for name, (row, col) in rows.items():
        altered = {k: v.copy() for k, v in results.items()}
        df = altered[name]
        hit = np.logical_and.reduce([df[k].astype(str) == str(v) for k, v in row.items()])
        assert hit.sum() == 1, name
        # map_value by one float32 step (what the heatmap could still tell apart), the rest by one count
        step = max(abs(float(df.loc[hit, col].iloc[0])) * 2.0**-22, 1e-30) if col == "map_value" else 1
        df.loc[hit, col] = df.loc[hit, col].fillna(0) + step
        with pytest.raises(AssertionError):
            check_shown(shown, altered)


@needs_browser
def test_compare_switch_pair_counts_changed_items_as_pandas(site, sweeps):
    maps = pd.read_csv(sweeps["out"] / "results" / "item_maps.csv")
    maps2 = pd.read_csv(sweeps["out2"] / "results" / "item_maps.csv")
    fact, fact2 = (m[m["bank"].str.startswith("factual")] for m in (maps, maps2))  # bb=0: pair banks sorted
    with browser.chromium() as (page, watch):
        browser.open_page(page, site + "compare.html#sa=0&ca=0&sb=0&cb=1&bb=0&k=opinion")
        names = page.evaluate("VIEW.load('site').then((m) => m.sweeps.map((s) => s.columns.map((c) => c.name)))")
        # switch B to the last checkpoint of this sweep, then to the other sweep's second model
        for sb, cb, other in ((0, len(names[0]) - 1, fact), (1, 1, fact2)):
            page.select_option("select[name=sb]", str(sb))
            browser.wait_ready(page)
            page.select_option("select[name=cb]", str(cb))
            browser.wait_ready(page)
            ck_a, ck_b = names[0][0], names[sb][cb]
            gaps = np.sort(np.abs(changed_count(fact, other, ck_a, ck_b, "opinion", 0.0)[3]))
            t = float((gaps[len(gaps) // 2 - 1] + gaps[len(gaps) // 2]) / 2)  # between two |B - A|: no tie
            page.fill("input[name=t]", repr(t))
            page.press("input[name=t]", "Enter")
            browser.wait_ready(page)
            want, n, mean, d = changed_count(fact, other, ck_a, ck_b, "opinion", t)
            assert 0 < want < n
            assert read_stat(page, "changed") == want
            assert read_stat(page, "stat-n") == n
            assert abs(read_stat(page, "stat-mean") - mean) <= n * np.finfo(float).eps * np.abs(d).max()
            ci = bootstrap_mean_ci(d, n_boot=1000, seed=0)  # the paired CI the page was given
            assert (read_stat(page, "stat-lo"), read_stat(page, "stat-hi")) == (ci.lo, ci.hi)
            assert ci.lo <= mean <= ci.hi
            # negative control: a copy of the CSV with one item's B value moved across the threshold
            bumped = other.copy()
            row = bumped[(bumped["checkpoint"] == ck_b) & (bumped["turn_kind"] == "opinion")].index[0]
            a = fact[(fact["checkpoint"] == ck_a) & (fact["turn_kind"] == "opinion")].set_index("item_id")["map_value"]
            a_value = float(a[bumped.loc[row, "item_id"]])
            crossed = abs(bumped.loc[row, "map_value"] - a_value) >= t
            bumped.loc[row, "map_value"] = a_value if crossed else a_value + 2 * t
            assert changed_count(fact, bumped, ck_a, ck_b, "opinion", t)[0] != read_stat(page, "changed")
    assert watch.errors == [] and watch.refused == []


@needs_browser
def test_cloze_and_classify_drill_down_show_csv_rows(site, sweeps):
    scores = pd.read_csv(sweeps["out"] / "results" / "cloze_scores.csv")
    preds = pd.read_csv(sweeps["out"] / "results" / "classify_predictions.csv")
    with browser.chromium() as (page, watch):
        browser.open_page(page, site + "cloze.html")
        ck = page.eval_on_selector("select[name=checkpoint]", "s => s.value")
        page.evaluate(
            "() => { const g = window.VIEW_CLOZE.gd; g.emit('plotly_click', {points: [{pointIndex: [0, 0]}]}); }"
        )
        browser.wait_ready(page)
        lang, axis = page.evaluate("[window.VIEW_CLOZE.langs[0], window.VIEW_CLOZE.axes[0]]")
        _, rows = page_table(page, "triples")
        want = scores[(scores["checkpoint"] == ck) & (scores["language"] == lang)]
        want = want if axis == "all" else want[want["axis"] == axis]
        assert len(rows) == len(want) > 0
        for r in rows:
            m = want[want["prompt_id"] == r["prompt_id"]].iloc[0]
            for c in ("nll_stereo_sum", "nll_anti_token_mean", "delta", "n_tokens_meaningless", "n_bytes_anti"):
                assert float(r[c]) == float(m[c]), c
            assert r["loss"] == m["loss"] and r["context"]
        browser.open_page(page, site + "classify.html")
        page.evaluate(
            "() => { const g = window.VIEW_CONFUSION.gd; g.emit('plotly_click', {points: [{pointIndex: [0, 1]}]}); }"
        )
        browser.wait_ready(page)
        gold, pred = page.evaluate("[window.VIEW_CONFUSION.golds[0], window.VIEW_CONFUSION.preds[1]]")
        ck = page.evaluate("document.querySelector('select[name=checkpoint]').selectedOptions[0].textContent")
        task = page.eval_on_selector("select[name=task]", "s => s.value")
        _, rows = page_table(page, "examples")
        want = preds[
            (preds["checkpoint"] == ck) & (preds["task"] == task) & (preds["order"] == "given")
            & (preds["gold"].astype(str) == gold) & (preds["pred"].astype(str) == pred)
        ]  # fmt: skip
        assert len(rows) == len(want)
        for r in rows:
            m = want[want["item_id"] == r["item_id"]].iloc[0]
            assert float(r["confidence"]) == float(m["confidence"])
    assert watch.errors == [] and watch.refused == []


def test_view_loads_no_model_stack(sweeps, tmp_path):
    """The site is a view of files: written with torch and transformers unimportable (as
    tests/test_layers.py blocks them), and writing it imports none of the model stack."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    for mod in ("torch", "transformers"):
        (blocker / f"{mod}.py").write_text(f"raise ImportError('{mod} must not be imported here')\n")
    env = dict(ENV, PYTHONPATH=os.pathsep.join([str(blocker), *filter(None, [os.environ.get("PYTHONPATH")])]))
    res = subprocess.run(
        [sys.executable, "-m", "interp.cli", "view", str(sweeps["out"]), "--out", str(tmp_path / "site")],
        capture_output=True, text=True, env=env, timeout=300, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "site" / "data" / "site.js").is_file()
    code = (
        "import sys\nfrom interp.view import write_site\n"
        f"write_site([{str(sweeps['out'])!r}], {str(tmp_path / 'site2')!r})\n"
        "print(','.join(m for m in ('torch', 'transformers', 'transformer_lens', 'nnsight') if m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ""


def test_bad_input_one_line_exit_2_nothing_lost(sweeps, tmp_path):
    res = _interp("view", tmp_path / "missing")
    assert res.returncode == 2 and "no results/ directory" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    res = _interp("view", sweeps["out"], "--out", keep)
    assert res.returncode == 2 and "is not a site" in res.stderr
    assert (keep / "notes.txt").read_text() == "mine" and len(list(keep.iterdir())) == 1
    res = _interp("view", sweeps["out"], "--port", "9")
    assert res.returncode == 2 and "--port is for --serve" in res.stderr
