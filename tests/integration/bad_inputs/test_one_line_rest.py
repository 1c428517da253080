"""One line, exit 2, for the rest of what the issue-23 review hit (each was a traceback or a
silent choice): read-only OUT for probe and report, a full disk while writing current.json,
--max-items -3 / 0, predict with too few items or only the target cached, a CSV bank row
with a missing column."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from ._util import PRESSURE, SWEEP, assert_intact, assert_one_line_error, csv_bytes, snapshot


@contextmanager
def _read_only_copy(src: Path, where: Path):
    """`src` copied into a tmpfs that is then remounted read-only (needs root)."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        out = Path(shutil.copytree(src, where / "OUT"))
        proc = subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True)
        if proc.returncode:
            pytest.skip(f"cannot remount read-only: {proc.stderr.decode().strip()}")
        yield out
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.parametrize(
    "argv",
    [
        ["probe", "{out}", "--study", "pressure", "--target", "flipped", "--shuffles", "2", "--folds", "2"],
        ["report", "{out}"],
    ],
    ids=["probe", "report"],
)
def test_read_only_out(argv, earlier_out, tmp_path, cli):
    with _read_only_copy(earlier_out, tmp_path / "ro") as out:
        res = cli(*[a.format(out=out) for a in argv])
        assert_one_line_error(res, out, "not writable")


def test_disk_full_writing_current_json(bi_model, earlier_out, tmp_path, cli, monkeypatch):
    """current.json is written after the units: ENOSPC there is one line, the previous list kept."""
    import interp.core.atomic as atomic

    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    manifest = out / "cache" / "current.json"
    before = manifest.read_bytes()
    real = atomic.atomic_write_text

    def full(path, text, **kw):
        if Path(path).name == "current.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, text, **kw)

    monkeypatch.setattr(atomic, "atomic_write_text", full)
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "memo"))
    res = cli("sweep", bi_model, *SWEEP, "--out", out)
    assert_one_line_error(res, manifest, "No space left")
    assert manifest.read_bytes() == before
    assert not list(manifest.parent.glob(".current.json.tmp-*"))


@pytest.mark.parametrize("n", ["-3", "0"])
def test_max_items_must_be_positive(n, bi_model, earlier_out, cli):
    before = snapshot(earlier_out)
    res = cli("sweep", bi_model, "--study", "pressure", "--bank", "moral", "--max-items", n, "--out", earlier_out)
    assert_one_line_error(res, "--max-items", n)
    assert_intact(earlier_out, before)


def test_max_items_positive_is_accepted():
    """Negative control: the check refuses only what is not a positive count."""
    from interp.studies.base import RunConfig

    assert RunConfig(max_items=1).max_items == 1 and RunConfig().max_items is None


def test_predict_with_only_the_target_cached(earlier_out, tmp_path, cli):
    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    res = cli("predict", out, "--target", "llama", "--shuffles", "2")
    assert_one_line_error(res, "only the target", "llama")
    assert not (out / "results" / "predictive.csv").exists()


@pytest.fixture(scope="module")
def two_checkpoints_out(tiny_models, tmp_path_factory):
    """Two checkpoints, 3 items each: fewer than predict's 5 folds."""
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    out = tmp_path_factory.mktemp("two") / "OUT"
    run_sweep(
        [tiny_models["llama"], tiny_models["qwen2"]],
        studies=["pressure"],
        banks=["moral"],
        out=out,
        cfg=RunConfig(max_items=3, threads=1),
        progress=False,
        report=False,
    )
    return out


def test_predict_with_too_few_items(two_checkpoints_out, cli):
    before = snapshot(two_checkpoints_out)
    res = cli("predict", two_checkpoints_out, "--target", "qwen2", "--shuffles", "2")
    assert_one_line_error(res, "3 item(s)", "at least 5")
    assert_intact(two_checkpoints_out, before)


def test_csv_bank_row_with_a_missing_column(bi_model, earlier_out, tmp_path, cli):
    text = csv_bytes(PRESSURE).decode().rstrip("\n").split("\n")
    text[2] = text[2].rsplit(",", 1)[0]  # row 3 (second item) loses its last field (gold)
    bank = tmp_path / "short.csv"
    bank.write_text("\n".join(text) + "\n")
    before = snapshot(earlier_out)
    res = cli("sweep", bi_model, "--study", "pressure", "--bank", bank, "--out", earlier_out, "--quiet")
    assert_one_line_error(res, bank, "row 3", "gold")
    assert_intact(earlier_out, before)
    bank.write_bytes(csv_bytes(PRESSURE))  # negative control: the full rows read
    from interp.banks import read_rows

    assert [n for n, _ in read_rows(bank)] == [2, 3, 4]


def test_manifest_after_failed_current_json_is_unchanged_json(earlier_out):
    """The fixture's current.json is a JSON object naming the unit (what the disk-full test keeps)."""
    data = json.loads((earlier_out / "cache" / "current.json").read_text())
    assert len(data) == 1 and next(iter(data.values())).endswith(".h5")
