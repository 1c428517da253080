"""The unit's identity is the bytes that ran (issue 23): edits the sampled weight fingerprint
cannot see are caught by the content hash taken while loading, and recomputed.

Each edit is made so that the sampled fingerprint is unchanged (asserted: otherwise the test
would pass through the old check and prove nothing), and the rerun into the same OUT must
give exactly the tables a fresh OUT gives. The negative controls (untouched file, dropped
memo) must reuse the unit: its file is not rewritten.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import warnings
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

SMALL = dict(studies=["pressure"], banks=["moral"])


@pytest.fixture(autouse=True)
def _private_fingerprint_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "fp-memo"))


@pytest.fixture
def ckpt(bi_model, tmp_path):
    return Path(shutil.copytree(bi_model, tmp_path / "ck"))


def _cfg(**kw):
    from interp.studies.base import RunConfig

    return RunConfig(max_items=2, threads=1, **kw)


def _sweep(ck, out, **kw):
    from sweeps.api import run_sweep

    return run_sweep([ck], out=out, cfg=kw.pop("cfg", _cfg()), progress=False, report=False, **{**SMALL, **kw})


def _sweep_recorded(ck, out, **kw) -> tuple[dict, list[str]]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        tables = _sweep(ck, out, **kw)
    return tables, [str(w.message) for w in got if "recomputing" in str(w.message)]


def _assert_same_tables(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for name in a:
        pd.testing.assert_frame_equal(a[name].reset_index(drop=True), b[name].reset_index(drop=True), obj=name)


def _tables_differ(a: dict, b: dict) -> bool:
    try:
        _assert_same_tables(a, b)
    except AssertionError:
        return True
    return False


def _layout(path: Path) -> tuple[int, dict]:
    """(data start, header) of a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return 8 + n, json.loads(f.read(n))


def _sampled_ranges(path: Path) -> list[tuple[int, int]]:
    from interp.model.fingerprint import SAMPLE_BYTES, sample_offsets

    start, _ = _layout(path)
    return [(o, o + SAMPLE_BYTES) for o in sample_offsets(start, path.stat().st_size)]


def _unsampled(path: Path, lo: int, hi: int) -> bool:
    return all(hi <= a or lo >= b for a, b in _sampled_ranges(path))


def _tensor(path: Path, name: str) -> tuple[int, list[int]]:
    start, header = _layout(path)
    meta = header[name]
    assert meta["dtype"] == "F32"
    return start + meta["data_offsets"][0], meta["shape"]


def _write_in_place(path: Path, offset: int, data: bytes, *, keep_mtime: bool = True) -> None:
    """Overwrite bytes without changing the size; restore atime/mtime (`touch -r`)."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def edit_one_float(ck: Path, value: float = 500.0) -> None:
    """One float32 of layer 0's down_proj set to `value`, at an offset no sampled block covers."""
    f = ck / "model.safetensors"
    off, shape = _tensor(f, "model.layers.0.mlp.down_proj.weight")
    n = int(np.prod(shape))
    i = next(i for i in range(n // 2, n) if _unsampled(f, off + 4 * i, off + 4 * i + 4))
    _write_in_place(f, off + 4 * i, struct.pack("<f", value))


def edit_rank4(ck: Path, layers=(1, 2), rank: int = 4) -> None:
    """A rank-4 update U V^T added in place to q_proj and v_proj of two layers (a LoRA merged
    into the file), only on rows whose bytes no sampled block covers."""
    f = ck / "model.safetensors"
    rng = np.random.default_rng(0)
    for layer in layers:
        for proj in ("q_proj", "v_proj"):
            off, (rows, cols) = _tensor(f, f"model.layers.{layer}.self_attn.{proj}.weight")
            free = [r for r in range(rows) if _unsampled(f, off + 4 * r * cols, off + 4 * (r + 1) * cols)]
            assert len(free) >= rank, f"{proj} of layer {layer}: too few unsampled rows"
            with open(f, "rb") as fh:
                fh.seek(off)
                w = np.frombuffer(fh.read(4 * rows * cols), dtype="<f4").reshape(rows, cols).copy()
            u = np.zeros((rows, rank), dtype=np.float32)
            u[free] = rng.normal(size=(len(free), rank)).astype(np.float32)
            delta = u @ rng.normal(size=(rank, cols)).astype(np.float32) * 0.5
            assert np.linalg.matrix_rank(delta) == rank
            w += delta
            for r in free:  # only the free rows change (the others get delta 0)
                _write_in_place(f, off + 4 * r * cols, w[r].tobytes())


def _fingerprints(ck: Path) -> tuple[str, str]:
    from interp.model.checkpoint import content_fingerprint, fingerprint, inspect_checkpoint

    info = inspect_checkpoint(ck)
    return fingerprint(info), content_fingerprint(info, fresh=True)


def _unit_files(out: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(out)): (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "cache").rglob("*.h5")}


@pytest.mark.parametrize("edit", [edit_one_float, edit_rank4], ids=["one-float-500", "rank4-qv-two-layers"])
@pytest.mark.parametrize("memo", ["caught-at-load", "known-from-memo"])
def test_edit_outside_the_samples_is_recomputed(ckpt, tmp_path, edit, memo):
    out = tmp_path / "OUT"
    before = _sweep(ckpt, out)
    fp0, content0 = _fingerprints(ckpt)
    edit(ckpt)
    fp1, content1 = (None, None) if memo == "caught-at-load" else _fingerprints(ckpt)
    if memo == "caught-at-load":  # the memo has not seen the edited file: only the load can tell
        from interp.model.checkpoint import fingerprint, inspect_checkpoint

        fp1 = fingerprint(inspect_checkpoint(ckpt))
    assert fp1 == fp0, "precondition: the edit must be invisible to the sampled fingerprint"
    assert content1 != content0 if content1 else True
    rerun, lines = _sweep_recorded(ckpt, out)
    assert len(lines) == 1 and "recomputing" in lines[0] and "\n" not in lines[0], lines
    fresh = _sweep(ckpt, tmp_path / "FRESH")
    _assert_same_tables(rerun, fresh)
    assert _tables_differ(before, rerun), "the edit did not change the numbers: a weak plant"
    unit = next((out / "cache").rglob("*.h5"))
    with h5py.File(unit, "r") as f:
        assert f.attrs["content_fingerprint"] == _fingerprints(ckpt)[1]


def test_untouched_checkpoint_is_reused_not_recomputed(ckpt, tmp_path, monkeypatch):
    """Negative control: nothing changed, so nothing is recomputed, with the memo and without it
    (then the load re-verifies the bytes and reuses the unit)."""
    out = tmp_path / "OUT"
    _sweep(ckpt, out)
    files = _unit_files(out)
    _, lines = _sweep_recorded(ckpt, out)
    assert lines == [] and _unit_files(out) == files
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "other-memo"))
    plan = _sweep(ckpt, out, dry_run=True)["plan"]
    assert plan["status"].tolist() == ["verify"]
    _, lines = _sweep_recorded(ckpt, out)
    assert lines == [] and _unit_files(out) == files
    assert "verified" in (out / "sweep.log").read_text()
    assert _sweep(ckpt, out, dry_run=True)["plan"]["status"].tolist() == ["done"]


def test_full_hash_unit_is_not_displaced_by_a_stale_sampled_one(ckpt, tmp_path):
    """sampled sweep; edit outside the samples; --full-hash sweep (correct); sampled sweep again:
    the old sampled unit must be recomputed, and the --full-hash unit stay current."""
    from cache.store import Store

    out = tmp_path / "OUT"
    _sweep(ckpt, out)
    edit_one_float(ckpt, -500.0)
    full = _sweep(ckpt, out, cfg=_cfg(full_hash=True))
    manifest = json.loads((out / "cache" / "current.json").read_text())
    (slot, full_rel), *_ = manifest.items()
    again, lines = _sweep_recorded(ckpt, out)
    assert len(lines) == 1 and "recomputing" in lines[0], lines
    _assert_same_tables(again, full)
    assert json.loads((out / "cache" / "current.json").read_text())[slot] == full_rel
    current, stale = Store(out / "cache").current_units(warn=False)
    assert [str(p.relative_to(out / "cache")) for p in current] == [full_rel] and len(stale) == 1
    # a sampled unit does displace a full-hash one of other bytes (the full one is then stale)
    edit_one_float(ckpt, 7.0)
    _, lines = _sweep_recorded(ckpt, out)
    assert len(lines) == 1, lines
    assert json.loads((out / "cache" / "current.json").read_text())[slot] != full_rel


def test_unit_without_content_hash_is_recomputed_once(ckpt, tmp_path):
    """A unit written before units recorded the content hash is still read, and recomputed once."""
    from cache.store import read_unit

    out = tmp_path / "OUT"
    first = _sweep(ckpt, out)
    unit = next((out / "cache").rglob("*.h5"))
    with h5py.File(unit, "a") as f:
        del f.attrs["content_fingerprint"]
        del f.attrs["fingerprint_mode"]
    assert read_unit(unit).tables  # still readable
    again, lines = _sweep_recorded(ckpt, out)
    assert len(lines) == 1 and "recomputing it once" in lines[0], lines
    _assert_same_tables(first, again)
    files = _unit_files(out)
    _, lines = _sweep_recorded(ckpt, out)
    assert lines == [] and _unit_files(out) == files


def test_load_hashes_every_weight_byte(ckpt):
    """The content fingerprint covers every byte: flipping any one byte changes it (first, middle,
    last byte of the data region), and the memo never serves a digest over a fresh load."""
    import interp

    f = ckpt / "model.safetensors"
    start, _ = _layout(f)
    size = f.stat().st_size
    seen = {interp.load(ckpt).content}
    for off in (start, (start + size) // 2, size - 1):
        with open(f, "rb") as fh:
            fh.seek(off)
            b = fh.read(1)
        _write_in_place(f, off, bytes([b[0] ^ 0x01]))
        seen.add(interp.load(ckpt).content)
        _write_in_place(f, off, b)
    assert len(seen) == 4
    assert interp.load(ckpt).content in seen
