"""Sampled checkpoint fingerprints (issue 15): what they see, what they miss, the memo's key,
and the refusal of files that are not regular files."""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from interp.model import fingerprint as fpm


@pytest.fixture(autouse=True)
def _private_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "memo"))


def _safetensors(path: Path, n_floats: int = 1 << 20) -> Path:
    """A 4 MiB safetensors file: one float32 tensor with values 0, 1, 2, ..."""
    from safetensors.numpy import save_file

    save_file({"w": np.arange(n_floats, dtype=np.float32)}, str(path), metadata={"format": "pt"})
    return path


def _data_start(path: Path) -> int:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return 8 + n


def _poke(path: Path, offset: int, value: bytes = b"\x00\x00\x80\x7f") -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(value)


def test_one_weight_in_a_sampled_block_changes_the_digest(tmp_path):
    f = _safetensors(tmp_path / "model.safetensors")
    before = fpm.sampled_digest(f)
    offsets = fpm.sample_offsets(_data_start(f), f.stat().st_size)
    assert len(offsets) == fpm.SAMPLE_BLOCKS
    _poke(f, offsets[7] + 12)  # one float32 inside the 8th sampled block
    assert fpm.sampled_digest(f) != before


def test_a_header_change_changes_the_digest(tmp_path):
    f = _safetensors(tmp_path / "model.safetensors")
    before = fpm.sampled_digest(f)
    data = f.read_bytes()
    assert b'"F32"' in data[:200]
    f.write_bytes(data.replace(b'"F32"', b'"I32"', 1))  # same length: only the dtype differs
    assert fpm.sampled_digest(f) != before


def test_what_sampling_misses_and_full_hash_catches(tmp_path):
    """Documented limit: an in-place edit between sampled blocks keeps the sampled digest."""
    f = _safetensors(tmp_path / "model.safetensors")
    start, size = _data_start(f), f.stat().st_size
    offsets = fpm.sample_offsets(start, size)
    gap = offsets[3] + fpm.SAMPLE_BYTES + 4096
    assert gap + 4 < offsets[4]
    sampled, full = fpm.sampled_digest(f), fpm.full_digest(f)
    _poke(f, gap)
    assert fpm.sampled_digest(f) == sampled
    assert fpm.full_digest(f) != full


def _checkpoint(tiny_models, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_models["llama"], tmp_path / "ck"))


def test_memo_is_used_and_not_fooled_by_touch_r(tiny_models, tmp_path, monkeypatch):
    from interp.model.checkpoint import fingerprint, inspect_checkpoint

    ck = _checkpoint(tiny_models, tmp_path)
    info = inspect_checkpoint(ck)
    first = fingerprint(info)
    calls = []
    real = fpm.sampled_digest
    monkeypatch.setattr(fpm, "sampled_digest", lambda p: calls.append(p) or real(p))
    assert fingerprint(info) == first and calls == [], "unchanged files were read again"
    (w,) = ck.glob("*.safetensors")
    st = w.stat()
    _poke(w, _data_start(w) + 64)  # first sampled block
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `touch -r` does: mtime restored
    time.sleep(0.01)
    assert w.stat().st_mtime_ns == st.st_mtime_ns and w.stat().st_size == st.st_size
    assert fingerprint(info) != first, "a (size, mtime) memo served the old digest"


def test_full_hash_is_another_identity(tiny_models, tmp_path):
    from interp.model.checkpoint import fingerprint, inspect_checkpoint

    info = inspect_checkpoint(_checkpoint(tiny_models, tmp_path))
    assert fingerprint(info, full_hash=True) != fingerprint(info)
    assert fingerprint(info, full_hash=True) == fingerprint(info, full_hash=True)


def test_sparse_70b_shard_is_fingerprinted_without_reading_it(tmp_path):
    """A 5 GB shard (sparse) is sampled in milliseconds: 256 KiB are read."""
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2_500_000_000], "data_offsets": [0, 5_000_000_000]}}).encode()
    f = tmp_path / "model-00001-of-00030.safetensors"
    with open(f, "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        fh.truncate(8 + len(header) + 5_000_000_000)
    t0 = time.perf_counter()
    fpm.sampled_digest(f)
    assert time.perf_counter() - t0 < 2.0


# ---------------------------------------------------------------- not regular files: refused, never read


def test_fifo_weight_file_is_refused_not_read(tiny_models, tmp_path):
    from interp.model.checkpoint import inspect_checkpoint
    from interp.core.errors import CheckpointError

    ck = _checkpoint(tiny_models, tmp_path)
    os.mkfifo(ck / "model-extra.safetensors")
    with pytest.raises(CheckpointError, match="a FIFO, not a regular file"):
        inspect_checkpoint(ck)


def test_weight_link_to_dev_zero_is_refused(tiny_models, tmp_path):
    from interp.model.checkpoint import inspect_checkpoint
    from interp.core.errors import CheckpointError

    ck = _checkpoint(tiny_models, tmp_path)
    (w,) = ck.glob("*.safetensors")
    w.unlink()
    w.symlink_to("/dev/zero")
    with pytest.raises(CheckpointError, match="a device"):
        inspect_checkpoint(ck)


def test_config_claiming_a_billion_layers_is_refused_before_building(tiny_models, tmp_path):
    from interp.model.checkpoint import inspect_checkpoint
    from interp.core.errors import CheckpointError

    ck = _checkpoint(tiny_models, tmp_path)
    cfg = json.loads((ck / "config.json").read_text())
    cfg["num_hidden_layers"] = 10**9
    (ck / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="num_hidden_layers=1000000000"):
        inspect_checkpoint(ck)


def test_real_configs_pass_the_size_check(tiny_models):
    from interp.model.checkpoint import inspect_checkpoint

    for ck in tiny_models.values():
        inspect_checkpoint(ck)
    for name in ("smollm2-135m-instruct", "gemma3-270m"):
        path = Path(__file__).resolve().parents[2] / "models" / name
        if (path / "config.json").is_file():
            inspect_checkpoint(path)
