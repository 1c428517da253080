"""Tensors must be what the config says (issue 23): an integer dtype for a floating parameter, a
shape the config does not imply, NaN/Inf in a norm or embedding -> one line naming the tensor,
exit 2, OUT untouched. transformers itself casts an I32 norm to float without a word (P = 1
everywhere) and reads NaN weights as numbers."""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

import pytest

from ._util import SWEEP, assert_intact, assert_one_line_error, snapshot


@pytest.fixture(autouse=True)
def _private_fingerprint_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "fp-memo"))


def _header(path: Path) -> tuple[int, dict]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return n, json.loads(f.read(n))


def _rewrite_header(path: Path, edit) -> None:
    """Edit the header in place, keeping its length (padded with spaces, as the format allows)."""
    n, header = _header(path)
    edit(header)
    raw = json.dumps(header, separators=(",", ":")).encode()
    assert len(raw) <= n
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(raw.ljust(n, b" "))


def _set_float(path: Path, tensor: str, index: int, value: float) -> None:
    n, header = _header(path)
    off = 8 + n + header[tensor]["data_offsets"][0] + 4 * index
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(struct.pack("<f", value))


def _as_i32(name):
    def edit(ck: Path) -> None:
        def change(h):
            h[name]["dtype"] = "I32"

        _rewrite_header(ck / "model.safetensors", change)

    return edit


def _reshape(name, shape):
    def edit(ck: Path) -> None:
        def change(h):
            h[name]["shape"] = shape

        _rewrite_header(ck / "model.safetensors", change)

    return edit


def _poison(name, value):
    return lambda ck: _set_float(ck / "model.safetensors", name, 3, value)


CASES = [
    ("norm-stored-as-I32", _as_i32("model.norm.weight"), ("model.norm.weight", "I32")),
    ("layer-norm-stored-as-I32", _as_i32("model.layers.1.input_layernorm.weight"), ("input_layernorm", "I32")),
    ("q-proj-reshaped", _reshape("model.layers.0.self_attn.q_proj.weight", [32, 128]), ("q_proj", "[32, 128]")),
    ("nan-in-final-norm", _poison("model.norm.weight", math.nan), ("model.norm.weight", "NaN")),
    ("inf-in-embedding", _poison("model.embed_tokens.weight", math.inf), ("model.embed_tokens.weight", "infinite")),
]


@pytest.mark.parametrize("edit,must", [pytest.param(e, m, id=i) for i, e, m in CASES])
def test_unexpected_tensor_is_one_line_error(edit, must, cli, bi_model, earlier_out, tmp_path):
    ck = Path(shutil.copytree(bi_model, tmp_path / "ck"))
    edit(ck)
    before = snapshot(earlier_out)
    res = cli("sweep", ck, *SWEEP, "--out", earlier_out)
    assert_one_line_error(res, *must)
    assert_intact(earlier_out, before)


def test_clean_tensors_pass(bi_model):
    """Negative control: the untouched checkpoint passes the same check (nothing raised), and a
    NaN outside the checked tensors (an MLP weight) is not reported by it."""
    import interp
    from interp.model.checkpoint import check_tensors

    lm = interp.load(bi_model)
    state = lm.backend.model.state_dict()
    check_tensors(lm.info, state)
    state = dict(state)
    w = state["model.layers.0.mlp.up_proj.weight"].clone()
    w[0, 0] = math.nan
    state["model.layers.0.mlp.up_proj.weight"] = w
    check_tensors(lm.info, state)  # only norms and embeddings are checked (cheap)
    state["model.norm.weight"] = state["model.norm.weight"].clone().fill_(math.inf)
    with pytest.raises(Exception, match="model.norm.weight"):
        check_tensors(lm.info, state)
