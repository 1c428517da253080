"""A hostile environment (issue 13): files that are not files, absurd configs, huge or NUL
fields, garbage results, read-only and full disks, link loops, formula cells, wrong tensor
shapes. Each gives one line naming the file and field, exit 2, before any compute, and loses
nothing already written; none hangs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from ._util import PRESSURE, SWEEP, assert_intact, assert_one_line_error, csv_bytes, edit, jsonl, snapshot

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _private_fingerprint_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "fp-memo"))


@pytest.fixture
def ckpt(bi_model, tmp_path):
    return Path(shutil.copytree(bi_model, tmp_path / "ck"))


def _no_compute(monkeypatch):
    """Fail the test if any model is loaded (the error must come before compute)."""
    import interp.model.loading

    def refuse(*a, **k):
        raise AssertionError("a model was loaded before the bad input was reported")

    monkeypatch.setattr(interp.model.loading, "load_hf_model", refuse)


# ---------------------------------------------------------------- files that are not regular files


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_weight_file_that_is_not_a_file_is_refused_in_dry_run(kind, ckpt, tmp_path, cli):
    (w,) = ckpt.glob("*.safetensors")
    w.unlink()
    if kind == "fifo":
        os.mkfifo(w)
    else:
        w.symlink_to("/dev/zero")
    res = cli("sweep", ckpt, *SWEEP, "--out", tmp_path / "OUT", "--dry-run")
    assert_one_line_error(res, w.name, "not a regular file")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_bank_that_is_not_a_file_is_refused(kind, bi_model, tmp_path, cli):
    bank = tmp_path / "bank.jsonl"
    if kind == "fifo":
        os.mkfifo(bank)
    else:
        bank.symlink_to("/dev/zero")
    res = cli("sweep", bi_model, "--study", "pressure", "--bank", bank, "--out", tmp_path / "OUT", "--dry-run")
    assert_one_line_error(res, bank, "not a regular file")


def test_config_claiming_a_billion_layers_is_refused_before_building(ckpt, tmp_path, cli, monkeypatch):
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["num_hidden_layers"] = 10**9
    (ckpt / "config.json").write_text(json.dumps(cfg))
    _no_compute(monkeypatch)
    res = cli("sweep", ckpt, *SWEEP, "--out", tmp_path / "OUT")
    assert_one_line_error(res, "config.json", "num_hidden_layers")


# ---------------------------------------------------------------- bank fields


def test_csv_field_over_the_csv_module_limit(bi_model, tmp_path, cli, monkeypatch):
    bank = tmp_path / "huge.csv"
    bank.write_bytes(csv_bytes(edit(PRESSURE, 1, text="x" * 140_000)))
    _no_compute(monkeypatch)
    res = cli("sweep", bi_model, "--study", "pressure", "--bank", bank, "--out", tmp_path / "OUT")
    assert_one_line_error(res, bank, "row 3")


def test_nul_in_item_id_is_refused_before_compute(bi_model, tmp_path, cli, monkeypatch):
    bank = tmp_path / "nul.jsonl"
    bank.write_bytes(jsonl(edit(PRESSURE, 2, item_id="m\x003")))
    _no_compute(monkeypatch)
    res = cli("sweep", bi_model, "--study", "pressure", "--bank", bank, "--out", tmp_path / "OUT")
    assert_one_line_error(res, bank, "row 3", "item_id", "U+0000")


# ---------------------------------------------------------------- results and outputs


@pytest.mark.parametrize(
    "garbage", [b"\x00\xff\xfe garbage \x01\n\x02", b'checkpoint,bank\n"unterminated\n', b"a,b\n1,2\n"]
)
def test_garbage_results_csv_in_report(garbage, earlier_out, tmp_path, cli):
    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    (out / "results" / "pressure_summary.csv").write_bytes(garbage)
    res = cli("report", out)
    assert_one_line_error(res, "pressure_summary.csv")


@contextmanager
def _mounted_tmpfs(where: Path, options: str):
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_read_only_output_directory(bi_model, tmp_path, cli, monkeypatch):
    with _mounted_tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        _no_compute(monkeypatch)
        res = cli("sweep", bi_model, *SWEEP, "--out", ro / "OUT")
        assert_one_line_error(res, ro / "OUT")


@pytest.mark.parametrize("when", ["before-write", "during-write"])
def test_disk_full_loses_nothing(when, bi_model, earlier_out, tmp_path, cli, monkeypatch):
    """A full disk, seen by the free-space check before writing or hit while h5py writes:
    one line, exit 2, the earlier sweep's files intact, no temporary left."""
    size = "256k" if when == "before-write" else "4m"
    with _mounted_tmpfs(tmp_path / "small", f"size={size}") as small:
        out = small / "OUT"
        shutil.copytree(earlier_out, out, ignore=shutil.ignore_patterns("*.png", "report.md"))
        filler = small / "filler"
        if when == "during-write":
            import cache.store

            real_put = cache.store._put

            def fill_then_put(group, name, data, **kw):  # the disk fills after the check
                if not filler.exists():
                    with open(filler, "wb") as f:
                        try:
                            while True:
                                f.write(b"\0" * 65536)
                        except OSError:
                            pass
                return real_put(group, name, data, **kw)

            monkeypatch.setattr(cache.store, "_put", fill_then_put)
        before = snapshot(out)
        res = cli(
            "sweep",
            bi_model,
            "--study",
            "pressure",
            "--bank",
            "moral",
            "--max-items",
            "3",
            "--threads",
            "1",
            "--quiet",
            "--out",
            out,
        )
        assert_one_line_error(res, "cannot write cache unit")
        assert (when == "during-write") == filler.exists()
        filler.unlink(missing_ok=True)
        assert_intact(out, before)
        assert not list(out.rglob(".*.tmp-*")), "temporary unit file left behind"


def test_results_tables_are_written_as_a_set(earlier_out, tmp_path, monkeypatch):
    """A failure while writing the second table leaves every earlier table as it was."""
    import analyses.io
    from interp.core.errors import CacheError
    from sweeps.api import run_sweep
    from interp.studies.base import RunConfig

    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    before = {p.name: p.read_bytes() for p in (out / "results").iterdir()}
    real = analyses.io.write_table
    calls = []

    def fail_second(df, path, **kw):
        calls.append(path)
        if len(calls) == 2:
            raise CacheError(f"{path}: cannot write results table (No space left on device)")
        return real(df, path, **kw)

    monkeypatch.setattr(analyses.io, "write_table", fail_second)
    import interp.studies.pressure.analysis as pr

    monkeypatch.setattr(pr, "write_table", fail_second)
    model = Path(json.loads((out / "lineage.json").read_text())["checkpoints"][0]["path"])
    with pytest.raises(CacheError):
        run_sweep(
            [model],
            studies=["pressure"],
            banks=["moral"],
            out=out,
            cfg=RunConfig(max_items=3, threads=1),
            progress=False,
        )
    assert len(calls) == 2
    after = {p.name: p.read_bytes() for p in (out / "results").iterdir()}
    assert after == before, "a partial set of new tables replaced the old ones"
    assert not list(out.glob(".results*")), "staging directory left behind"


# ---------------------------------------------------------------- spreadsheets and links


def test_formula_cells_are_defused(tmp_path):
    from analyses.io import write_table

    df = pd.DataFrame(
        {
            "item_id": ['=HYPERLINK("http://x")', "+1+1", "-2", "@SUM(A1)", "plain", "-cmd|x"],
            "value": [1.0, -2.0, 3.0, 4.0, 5.0, -6.0],
        }
    )
    path = write_table(df, tmp_path / "t.csv")
    got = pd.read_csv(path, dtype={"item_id": str})
    assert got["item_id"].tolist() == ['\'=HYPERLINK("http://x")', "'+1+1", "-2", "'@SUM(A1)", "plain", "'-cmd|x"]
    assert got["value"].tolist() == df["value"].tolist(), "numbers stay numbers"


def test_link_loop_and_link_out_of_tree(bi_model, tmp_path):
    from sweeps.discover import discover

    tree = tmp_path / "tree"
    shutil.copytree(bi_model, tree / "base" / "step1")
    (tree / "base" / "loop").symlink_to(tree)  # a loop back to the root
    (tree / "base" / "again").symlink_to(tree / "base" / "step1")  # the same checkpoint twice
    elsewhere = Path(shutil.copytree(bi_model, tmp_path / "unrelated" / "step9"))
    (tree / "outside").symlink_to(elsewhere.parent)
    with pytest.warns(UserWarning, match="links out of"):
        found = discover([tree])
    assert [p.resolve() for p in found.checkpoints] == [(tree / "base" / "step1").resolve()]


def test_wrong_tensor_shape_names_the_tensor(ckpt, tmp_path, cli):
    from safetensors.torch import load_file, save_file

    (f,) = ckpt.glob("*.safetensors")
    t = load_file(f)
    k = next(k for k in t if k.endswith("layers.1.self_attn.q_proj.weight"))
    t[k] = t[k][:, :32].contiguous()
    save_file(t, f, metadata={"format": "pt"})
    res = cli("sweep", ckpt, *SWEEP, "--out", tmp_path / "OUT")
    assert_one_line_error(res, f.name, k, "[64, 32]", "[64, 64]")
