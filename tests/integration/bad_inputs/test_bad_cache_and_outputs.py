"""Cache units that are truncated, unfinished or of another provenance, and output paths that cannot
be written: one line on stderr naming the file, exit code 2, earlier results untouched; a sweep
never serves such a unit (it recomputes it and ends with the same tables)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import pytest

from ._util import SWEEP, Case, assert_intact, assert_one_line_error, log_bytes, run_cli, snapshot

PROBE = ("--study", "pressure", "--target", "planted", "--folds", "2", "--shuffles", "2")


@pytest.fixture
def out_copy(earlier_out, tmp_path):
    """A private copy of the earlier sweep's OUT (for cases that damage the cache on purpose)."""
    dest = tmp_path / "OUT"
    shutil.copytree(earlier_out, dest)
    return dest


def _unit(out: Path) -> Path:
    (unit,) = sorted((out / "cache").rglob("*.h5"))
    return unit


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _set_attr(path: Path, key: str, value) -> None:
    with h5py.File(path, "r+") as f:
        if value is None:
            del f.attrs[key]
        else:
            f.attrs[key] = value


# ---------------------------------------------------------------- damaged cache, read by probe / predict


def test_probe_on_an_intact_copy_works(cli, out_copy):
    """Control for the cases below: the same probe succeeds on an undamaged cache."""
    res = cli("probe", out_copy, *PROBE)
    assert res.code == 0 and res.exc is None, res.err[-2000:]
    assert (out_copy / "results" / "probes.csv").is_file()


@pytest.mark.parametrize("command", ["probe", "predict"])
def test_truncated_unit_is_one_line_error(command, cli, out_copy):
    unit = _unit(out_copy)
    _truncate(unit)
    before = snapshot(out_copy)
    args = PROBE if command == "probe" else ("--target", "llama", "--shuffles", "2")
    res = cli(command, out_copy, *args)
    assert_one_line_error(res, unit, "truncated")
    assert_intact(out_copy, before)


def test_unfinished_unit_is_one_line_error(cli, out_copy):
    unit = _unit(out_copy)
    _set_attr(unit, "complete", None)  # what a writer killed before its last step would leave
    before = snapshot(out_copy)
    res = cli("probe", out_copy, *PROBE)
    assert_one_line_error(res, unit, "incomplete")
    assert_intact(out_copy, before)


def test_unit_with_foreign_provenance_is_refused_by_probe(cli, out_copy):
    unit = _unit(out_copy)
    _set_attr(unit, "bank_hash", "0" * 64)
    before = snapshot(out_copy)
    res = cli("probe", out_copy, *PROBE)
    assert_one_line_error(res, unit, "provenance")
    assert_intact(out_copy, before)


@pytest.mark.parametrize("damage", ["truncated", "foreign-provenance", "unfinished"])
def test_sweep_recomputes_a_damaged_unit_and_ends_with_the_same_tables(damage, cli, bi_model, earlier_out, out_copy):
    unit = _unit(out_copy)
    if damage == "truncated":
        _truncate(unit)
    elif damage == "foreign-provenance":
        _set_attr(unit, "bank_hash", "0" * 64)
    else:
        _set_attr(unit, "complete", None)
    res = cli("sweep", bi_model, *SWEEP, "--out", out_copy)
    assert res.code == 0 and res.exc is None, res.err[-2000:]
    from cache.store import read_unit

    fresh = read_unit(unit)  # rewritten in place, complete and with the planned identity
    assert fresh.attrs["bank_hash"] != "0" * 64
    for f in sorted((earlier_out / "results").glob("*.csv")):
        assert (out_copy / "results" / f.name).read_bytes() == f.read_bytes(), f.name
    assert not list((out_copy / "cache").rglob(".*.tmp-*"))


# ---------------------------------------------------------------- output paths that cannot be written


def out_below_regular_file(earlier_out, tmp):
    out = earlier_out / "report.md" / "nested"  # report.md is a regular file of the earlier sweep
    return out, [out]


def out_is_regular_file(earlier_out, tmp):
    out = tmp / "taken"
    out.write_text("not a directory\n")
    return out, [out]


def results_is_regular_file(earlier_out, tmp):
    out = tmp / "OUT"
    out.mkdir()
    (out / "results").write_text("not a directory\n")
    return out, [out / "results"]


def cache_is_regular_file(earlier_out, tmp):
    out = tmp / "OUT"
    out.mkdir()
    (out / "cache").write_text("not a directory\n")
    return out, [out / "cache"]


OUT_CASES = [
    Case("out-below-a-regular-file", out_below_regular_file),
    Case("out-is-a-regular-file", out_is_regular_file),
    Case("results-dir-is-a-regular-file", results_is_regular_file),
    Case("cache-dir-is-a-regular-file", cache_is_regular_file, noisy=True),
]


@pytest.mark.parametrize("case", [c.param() for c in OUT_CASES])
def test_unwritable_output_is_one_line_error(case, cli, bi_model, earlier_out, tmp_path):
    out, must = case.make(earlier_out, tmp_path)
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    blocker = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    res = cli("sweep", bi_model, *SWEEP, "--out", out)
    assert_one_line_error(res, *must, one_line=not case.noisy)
    assert_intact(earlier_out, before, log)
    for p, data in blocker.items():  # the regular file in the way is left alone
        assert p.read_bytes() == data


def test_failed_sweep_leaves_lineage_json_intact(capsys, monkeypatch, bi_model, earlier_out, tmp_path):
    from transformers import AutoTokenizer

    lineage = (earlier_out / "lineage.json").read_bytes()
    bad = tmp_path / "tokenizer-added"
    shutil.copytree(bi_model, bad)
    tok = AutoTokenizer.from_pretrained(bad)
    tok.add_tokens(["<extra_a>"])
    tok.save_pretrained(bad)
    res = run_cli(capsys, monkeypatch, "sweep", bad, *SWEEP, "--out", earlier_out)
    assert res.code == 2
    assert json.loads(lineage)["checkpoints"][0]["name"] == "llama"
    assert (earlier_out / "lineage.json").read_bytes() == lineage


def test_unwritable_cache_error_is_the_only_stderr_line(capsys, monkeypatch, bi_model, tmp_path):
    out, must = cache_is_regular_file(None, tmp_path)
    res = run_cli(capsys, monkeypatch, "sweep", bi_model, *SWEEP, "--out", out)
    assert_one_line_error(res, *must, one_line=True)
