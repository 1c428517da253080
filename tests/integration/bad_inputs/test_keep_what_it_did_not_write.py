"""A sweep never deletes what it did not write (issue 47). Before: a sweep with nothing to run
removed results/probe_weights/ (so `interp steer --direction probe:T` failed), a later sweep with
another bank, or of another directory with the same name, made the earlier rows vanish from
results/, a damaged current.json served a stale unit, `interp report` left out a missing table and
read a truncated one as numbers, a full disk while drawing named no file, and a killed results
write left `.results.tmp-PID` behind. Each now keeps the earlier output, or refuses in one line
that says why and how to keep it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ._util import SWEEP, assert_intact, assert_one_line_error, log_bytes, mounted_tmpfs, snapshot

PROBE = ("--study", "pressure", "--target", "planted", "--folds", "2", "--shuffles", "2")


pytestmark = pytest.mark.usefixtures("private_fingerprint_memo")


@pytest.fixture
def out_copy(earlier_out, tmp_path):
    return Path(shutil.copytree(earlier_out, tmp_path / "OUT"))


def _sweep(ck, out, banks=("moral",), **kw):
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    cfg = RunConfig(max_items=kw.pop("max_items", 2), threads=1, **kw)
    return run_sweep([ck], studies=["pressure"], banks=list(banks), out=out, cfg=cfg, progress=False, report=False)


def _table(out: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(out / "results" / f"{name}.csv")


# ---------------------------------------------------------------- what other commands wrote


def test_probe_weights_and_other_outputs_survive_a_sweep_and_a_report(cli, bi_model, out_copy):
    from interp.runner.steering import direction_from_probe

    assert cli("probe", out_copy, *PROBE).code == 0
    weights = sorted((out_copy / "results" / "probe_weights").glob("*.npz"))
    assert weights, "precondition: interp probe wrote its weights"
    steer = ("--direction", "probe:planted", "--layer", "3", "--alpha", "0,1", "--n-boot", "20", "--quiet")
    assert cli("steer", out_copy, *steer).code == 0
    steered = [out_copy / "results" / "steer_pressure.csv", out_copy / "figures" / "steer_pressure.png"]
    # `interp predict` needs two checkpoints: its table stands in as a file of the same name
    predicted = out_copy / "results" / "predictive.csv"
    predicted.write_text("target,source,partial_r2\nllama,llama,0.5\n")
    mine = out_copy / "results" / "notes" / "deep" / "mine.txt"  # a user's own folder in results/
    mine.parent.mkdir(parents=True)
    mine.write_text("keep me\n")
    before = {p: p.read_bytes() for p in [*weights, *steered, predicted, mine, out_copy / "results" / "probes.csv"]}
    res = cli("sweep", bi_model, *SWEEP, "--out", out_copy)  # nothing to run: every unit complete
    assert res.code == 0, res.err[-2000:]
    assert cli("report", out_copy).code == 0
    for p, data in before.items():
        assert p.read_bytes() == data, f"{p.relative_to(out_copy)} changed or vanished"
    d, path = direction_from_probe(out_copy, study="pressure", target="planted", layer=3, checkpoint="llama")
    assert path in weights and d.shape == (64,)


def test_leftover_results_staging_is_cleaned_at_the_next_start(bi_model, out_copy):
    """A sweep killed while writing results/ leaves its staging folder (and, killed between the two
    renames, the previous set aside); the next sweep removes both and the tables are whole."""
    stale = out_copy / ".results.tmp-999999"
    shutil.copytree(out_copy / "results", stale)
    (stale / "pressure_summary.csv").write_text("half a tab")
    aside = out_copy / ".results.old-999998"
    shutil.copytree(out_copy / "results", aside)
    tables = {p.name: p.read_bytes() for p in (out_copy / "results").glob("*.csv")}
    _sweep(bi_model, out_copy)
    assert not list(out_copy.glob(".results*"))
    assert {p.name: p.read_bytes() for p in (out_copy / "results").glob("*.csv")} == tables


# ---------------------------------------------------------------- rows of earlier sweeps


def test_rows_of_an_earlier_bank_stay_and_match_one_sweep_of_both(bi_model, tmp_path):
    """moral, then factual into the same OUT: the tables equal those of one sweep of both banks."""
    out = tmp_path / "OUT"
    _sweep(bi_model, out, ["moral"])
    _sweep(bi_model, out, ["factual"])
    both = tmp_path / "BOTH"
    _sweep(bi_model, both, ["moral", "factual"])
    for name in ("pressure_summary", "pressure_trials", "item_maps", "pressure_profile"):
        pd.testing.assert_frame_equal(_table(out, name), _table(both, name), obj=name)
    assert _table(out, "pressure_summary")["bank"].str.startswith(("moral", "factual")).all()
    assert set(_table(out, "pressure_summary")["bank"].str.split("[").str[0]) == {"moral", "factual"}


@pytest.mark.parametrize("second", ["same-tokenizer", "own-chat-template", "first-directory-gone"])
def test_rows_of_an_earlier_checkpoint_stay_and_it_stays_listed(second, bi_model, tiny_models, tmp_path, cli):
    """llama, then qwen2 into the same OUT: the tables equal one sweep of both, whether qwen2 has a
    chat template of its own (its settings differ from llama's as in any one sweep of the two) or
    llama's directory is gone by then (its unit's settings are then compared with the plan's)."""
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    first = Path(shutil.copytree(bi_model, tmp_path / "models" / "llama"))
    other = Path(shutil.copytree(tiny_models["qwen2"], tmp_path / "models" / "qwen2"))
    if second == "own-chat-template":
        cfg = json.loads((other / "tokenizer_config.json").read_text())
        cfg["chat_template"] = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
        (other / "tokenizer_config.json").write_text(json.dumps(cfg))
    out, both = tmp_path / "OUT", tmp_path / "BOTH"
    run_sweep([first, other], studies=["pressure"], banks=["moral"], out=both, cfg=RunConfig(max_items=2, threads=1))
    _sweep(first, out)
    if second == "first-directory-gone":
        shutil.rmtree(first)
    _sweep(other, out)
    pd.testing.assert_frame_equal(_table(out, "pressure_trials"), _table(both, "pressure_trials"))
    pd.testing.assert_frame_equal(_table(out, "pressure_summary"), _table(both, "pressure_summary"))
    names = [c["name"] for c in json.loads((out / "lineage.json").read_text())["checkpoints"]]
    assert sorted(names) == ["llama", "qwen2"]
    assert cli("report", out).code == 0
    report = (out / "report.md").read_text()
    assert "| llama |" in report and "| qwen2 |" in report


def test_earlier_rows_with_other_settings_are_refused_not_dropped(cli, bi_model, out_copy):
    """The earlier sweep is moral at float32; factual at float32-medium would either mix precisions
    in one table or drop the moral rows: refused, OUT untouched."""
    before, log = snapshot(out_copy), log_bytes(out_copy)
    res = cli(
        "sweep", bi_model, *SWEEP[:2], "--bank", "factual", *SWEEP[4:], "--dtype", "float32-medium", "--out", out_copy
    )
    assert_one_line_error(res, out_copy / "results", "llama / moral", "other settings", "another --out")
    assert_intact(out_copy, before, log)


def test_same_name_from_another_directory_is_refused(cli, tiny_models, out_copy, tmp_path):
    """`llama` in OUT is the tiny Llama; another directory named llama holding other weights is
    refused (it would replace that one's units and rows)."""
    other = Path(shutil.copytree(tiny_models["qwen2"], tmp_path / "elsewhere" / "llama"))
    before, log = snapshot(out_copy), log_bytes(out_copy)
    res = cli("sweep", other, *SWEEP, "--out", out_copy)
    assert_one_line_error(res, other, "'llama'", "other weights", "another --out")
    assert_intact(out_copy, before, log)


def test_a_moved_checkpoint_is_the_same_checkpoint(cli, bi_model, out_copy, tmp_path):
    """Negative control: the same weights under the same name in another directory (a moved run)
    are accepted and their unit reused, not recomputed."""
    moved = Path(shutil.copytree(bi_model, tmp_path / "moved" / "llama"))
    units = {p: p.read_bytes() for p in (out_copy / "cache").rglob("*.h5")}
    res = cli("sweep", moved, *SWEEP, "--out", out_copy)
    assert res.code == 0, res.err[-2000:]
    assert {p: p.read_bytes() for p in (out_copy / "cache").rglob("*.h5")} == units


# ---------------------------------------------------------------- current.json damaged beside a stale unit


def test_damaged_current_json_serves_no_unit_it_cannot_confirm(cli, bi_model, out_copy):
    from cache.store import Store

    _sweep(bi_model, out_copy, max_items=3)  # the 2-item unit is now stale, the 3-item one current
    store = Store(out_copy / "cache")
    current, stale = store.current_units(warn=False)
    assert len(current) == 1 and len(stale) == 1
    manifest = store.manifest_path
    manifest.write_text(manifest.read_text()[:20])  # cut off mid-write
    before = snapshot(out_copy)
    res = cli("probe", out_copy, *PROBE)
    assert_one_line_error(res, manifest, "not valid JSON", "cannot confirm")
    assert_intact(out_copy, before)
    # a sweep of another bank rebuilds it: its own slot confirmed, the moral slot's units left out
    with pytest.warns(UserWarning, match="moved aside"):
        _sweep(bi_model, out_copy, ["factual"], max_items=3)
    assert json.loads(manifest.read_text())["pressure|llama|moral|hf|3"] is None
    with pytest.warns(UserWarning, match="no confirmed current unit"):
        current, stale = store.current_units()
    assert [str(store.unit_attrs(p)["bank"]) for p in current] == ["factual[n=3,seed=0]"]
    assert stale == [], "unconfirmed units are never stale (--prune would delete them)"
    assert not store.prune()
    _sweep(bi_model, out_copy, ["moral"], max_items=3)  # sweeping the slot again confirms it
    current, stale = store.current_units(warn=False)
    assert len(current) == 2 and len(stale) == 1
    assert list(out_copy.glob("cache/.current.json.damaged-*"))


# ---------------------------------------------------------------- interp report on missing or cut tables


def test_report_names_a_missing_table(cli, out_copy):
    (out_copy / "results" / "pressure_summary.csv").unlink()
    before = snapshot(out_copy)
    res = cli("report", out_copy)
    assert_one_line_error(res, out_copy / "results" / "pressure_summary.csv", "missing", "pressure_trials.csv")
    assert_intact(out_copy, before)  # the earlier report.md and figures stay


def test_report_names_a_truncated_table(cli, out_copy):
    path = out_copy / "results" / "pressure_summary.csv"
    data = path.read_bytes()
    cut = data.index(b"\n", data.index(b"\n") + 1) - 5  # five bytes short of the end of the first row
    path.write_bytes(data[:cut])
    before = snapshot(out_copy)
    res = cli("report", out_copy)
    assert_one_line_error(res, path, "truncated", "row 2")
    assert_intact(out_copy, before)


def test_report_on_whole_tables_works(cli, out_copy):
    """Negative controls for the two above: the same OUT untouched reports fine, and so does one
    whose pressure tables were all taken out (a study removed from the report, not a lost table)."""
    assert cli("report", out_copy).code == 0
    assert "pressure_summary.csv" in (out_copy / "report.md").read_text()
    for f in json.loads((out_copy / "results" / ".tables.json").read_text())["pressure"]:
        (out_copy / "results" / f).unlink()
    assert cli("report", out_copy).code == 0
    assert "pressure_summary.csv" not in (out_copy / "report.md").read_text()


def test_report_names_a_damaged_table_record(cli, out_copy):
    record = out_copy / "results" / ".tables.json"
    record.write_text('["pressure_summary.csv"')
    before = snapshot(out_copy)
    assert_one_line_error(cli("report", out_copy), record, "rerun the sweep")
    assert_intact(out_copy, before)


def test_disk_full_while_drawing_names_the_figure(cli, earlier_out, tmp_path):
    with mounted_tmpfs(tmp_path / "small", "size=1m") as small:
        out = Path(shutil.copytree(earlier_out, small / "OUT", ignore=shutil.ignore_patterns("*.png", "cache")))
        with open(small / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        res = cli("report", out)
        line = assert_one_line_error(res, out / "figures", ".png", "No space left")
        assert ".tmp-" not in line, "the message names the figure, not its temporary"
        assert not list(out.rglob(".*.tmp-*"))


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb", buffering=0) as f:  # unbuffered: nothing left to flush at close
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


@pytest.mark.parametrize("when", ["before-the-lock", "after-the-lock"])
def test_disk_full_in_a_sweep_names_the_file(when, cli, bi_model, earlier_out, tmp_path, monkeypatch):
    """Every unit complete, the disk full from the start (the lock file cannot be written) or from
    just after the lock is taken (the log, lineage or results writes fail): one line naming the file
    under OUT (never a temporary), and the earlier tables, units and report stay."""
    from contextlib import contextmanager

    import sweeps.api

    with mounted_tmpfs(tmp_path / "small", "size=16m") as small:
        out = Path(shutil.copytree(earlier_out, small / "OUT", ignore=shutil.ignore_patterns("*.png")))
        if when == "before-the-lock":
            _fill(small)
        else:
            real_lock = sweeps.api.sweep_lock

            @contextmanager
            def lock_then_fill(*a, **kw):
                with real_lock(*a, **kw) as path:
                    _fill(small)
                    yield path

            monkeypatch.setattr(sweeps.api, "sweep_lock", lock_then_fill)
        before, log = snapshot(out), log_bytes(out)
        res = cli("sweep", bi_model, *SWEEP, "--out", out)
        line = assert_one_line_error(res, out, "No space left")
        assert ".tmp-" not in line, "the message names the file, not its temporary"
        if when == "before-the-lock":
            assert str(out / ".interp-sweep.lock") in line
        (small / "filler").unlink()
        assert_intact(out, before, log)
        assert not list(out.rglob(".*.tmp-*")) and not list(out.glob(".results*"))
