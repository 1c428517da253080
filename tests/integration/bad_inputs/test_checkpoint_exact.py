"""The loaded model is exactly the checkpoint (issue 47): every parameter the architecture expects
comes from the weights with the config's shape and layer count, every tensor in the weights is
used (or allowed: tied weights, rotary buffers), shard indexes name only files inside the folder,
and every floating tensor is checked for NaN/Inf while the content hash reads it. Before, a
missing tensor was started from random values (two runs, two tables), layers beyond the config's
count and extra tensors were dropped, an index could load `../outside.safetensors` unhashed, and a
NaN in an MLP weight surfaced as "p_gold must be a probability". Each is now one line naming the
tensor (and file), exit 2, OUT untouched; the negative controls load."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ._util import SWEEP, assert_intact, assert_one_line_error, log_bytes, snapshot


pytestmark = pytest.mark.usefixtures("private_fingerprint_memo")


def _copy(model: Path, tmp: Path, name: str) -> Path:
    return Path(shutil.copytree(model, tmp / name))


def _tensors(d: Path, name: str = "model.safetensors") -> dict:
    from safetensors.torch import load_file

    return load_file(d / name)


def _save(d: Path, tensors: dict, name: str = "model.safetensors") -> None:
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in tensors.items()}, d / name, metadata={"format": "pt"})


def _config(d: Path, **changes) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


V_PROJ = "model.layers.3.self_attn.v_proj.weight"
UP = "model.layers.1.mlp.up_proj.weight"


def missing_tensor(model, tmp):
    d = _copy(model, tmp, "missing-tensor")
    t = _tensors(d)
    del t[V_PROJ]
    _save(d, t)
    return d, [d, V_PROJ, "missing", "random"]


def config_fewer_layers(model, tmp):
    d = _copy(model, tmp, "fewer-layers")
    _config(d, num_hidden_layers=2)  # the weights hold 4
    return d, [d / "model.safetensors", "model.layers.2.", "num_hidden_layers=2", "layer 3"]


def config_more_layers(model, tmp):
    d = _copy(model, tmp, "more-layers")
    _config(d, num_hidden_layers=6)
    return d, [d, "model.layers.4.", "missing"]


def extra_tensor(model, tmp):
    d = _copy(model, tmp, "extra-tensor")
    t = _tensors(d)
    t["model.layers.0.mlp.extra.weight"] = t["model.norm.weight"].clone()
    _save(d, t)
    return d, [d / "model.safetensors", "model.layers.0.mlp.extra.weight", "not used"]


def _shard(d: Path, *, outside: Path | None = None, name: str = "model-00002-of-00002.safetensors") -> dict:
    """model.safetensors split in two shards plus an index; the up_proj tensors go to `name`
    (or to `outside`, a folder beside the checkpoint)."""
    t = _tensors(d)
    (d / "model.safetensors").unlink()
    up = {k: v for k, v in t.items() if "up_proj" in k}
    rest = {k: v for k, v in t.items() if k not in up}
    _save(d, rest, "model-00001-of-00002.safetensors")
    if outside is not None:
        outside.mkdir(parents=True, exist_ok=True)
        _save(outside, up, "up.safetensors")
        target = f"../{outside.name}/up.safetensors"
    else:
        _save(d, up, name)
        target = name
    wmap = {k: "model-00001-of-00002.safetensors" for k in rest} | {k: target for k in up}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    return wmap


def index_outside_folder(model, tmp):
    d = _copy(model, tmp, "index-outside")
    _shard(d, outside=tmp / "outside")
    return d, [d / "model.safetensors.index.json", "up_proj", "../outside/up.safetensors", "outside the checkpoint"]


def index_in_subfolder(model, tmp):
    d = _copy(model, tmp, "index-subfolder")
    (d / "sub").mkdir()
    wmap = _shard(d)
    shutil.move(d / "model-00002-of-00002.safetensors", d / "sub" / "up.safetensors")
    wmap = {k: ("sub/up.safetensors" if "up_proj" in k else v) for k, v in wmap.items()}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    return d, [d / "model.safetensors.index.json", "sub/up.safetensors", "outside the checkpoint"]


def index_names_absent_file(model, tmp):
    d = _copy(model, tmp, "index-absent-file")
    wmap = _shard(d)
    wmap = {k: ("model-00009.safetensors" if "up_proj" in k else v) for k, v in wmap.items()}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    return d, [d / "model.safetensors.index.json", "model-00009.safetensors", "not one of the weight files"]


def tensor_in_two_shards(model, tmp):
    d = _copy(model, tmp, "tensor-twice")
    _shard(d)
    second = _tensors(d, "model-00002-of-00002.safetensors")
    second["model.norm.weight"] = _tensors(d, "model-00001-of-00002.safetensors")["model.norm.weight"] * 2
    _save(d, second, "model-00002-of-00002.safetensors")
    return d, ["model.norm.weight", "also in", "undefined"]


def shard_tensor_mapped_elsewhere(model, tmp):
    """Both shards hashed, but the index maps one tensor to the shard that does not hold it."""
    d = _copy(model, tmp, "index-remapped")
    wmap = _shard(d)
    wmap[UP] = "model-00001-of-00002.safetensors"
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    return d, [UP, "maps it to model-00001-of-00002.safetensors"]


def _poison(name: str, value: float, index: int = 5):
    def make(model, tmp):
        d = _copy(model, tmp, f"poison-{name.split('.')[-2]}-{value}")
        t = _tensors(d)
        t[name] = t[name].clone()
        t[name].view(-1)[index] = value
        _save(d, t)
        return d, [d / "model.safetensors", name, "NaN or infinite", f"element {index}"]

    return make


def _index(name: str, text: str):
    def make(model, tmp):
        d = _copy(model, tmp, f"index-{name}")
        _shard(d)
        (d / "model.safetensors.index.json").write_text(text)
        return d, [d / "model.safetensors.index.json", *(["JSON"] if name == "not-json" else ["weight_map"])]

    return make


def index_absolute_path(model, tmp):
    d = _copy(model, tmp, "index-absolute")
    wmap = _shard(d)
    wmap = {k: (str(d / v) if "up_proj" in k else v) for k, v in wmap.items()}  # the right file, named absolutely
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    return d, [d / "model.safetensors.index.json", "outside the checkpoint"]


CASES = {
    "missing-v-proj": missing_tensor,
    "config-fewer-layers-than-weights": config_fewer_layers,
    "config-more-layers-than-weights": config_more_layers,
    "unused-extra-tensor": extra_tensor,
    "shard-index-outside-folder": index_outside_folder,
    "shard-index-in-subfolder": index_in_subfolder,
    "shard-index-names-absent-file": index_names_absent_file,
    "shard-index-absolute-path": index_absolute_path,
    "shard-index-not-json": _index("not-json", '{"weight_map": {'),
    "shard-index-weight-map-a-list": _index(
        "list", '{"metadata": {}, "weight_map": ["model-00001-of-00002.safetensors"]}'
    ),
    "tensor-in-two-shards": tensor_in_two_shards,
    "shard-tensor-mapped-elsewhere": shard_tensor_mapped_elsewhere,
    "nan-in-mlp-up-proj": _poison(UP, math.nan),
    "inf-in-attention-v-proj": _poison(V_PROJ, -math.inf, index=77),
}


@pytest.mark.parametrize("make", list(CASES.values()), ids=list(CASES))
def test_checkpoint_not_what_its_config_says(make, cli, bi_model, earlier_out, tmp_path):
    ck, must = make(bi_model, tmp_path)
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", ck, *SWEEP, "--out", earlier_out)
    assert_one_line_error(res, *must)
    assert_intact(earlier_out, before, log)


def test_outside_shard_is_refused_before_planning(cli, bi_model, tmp_path):
    """--dry-run already refuses it: the planner never fingerprints a checkpoint whose bytes lie elsewhere."""
    ck, must = index_outside_folder(bi_model, tmp_path)
    assert_one_line_error(cli("sweep", ck, *SWEEP, "--out", tmp_path / "OUT", "--dry-run"), *must)


def test_sharded_and_rotary_buffer_checkpoints_load(bi_model, tmp_path):
    """Negative controls: a correctly sharded copy and a copy whose weights also store the rotary
    frequencies (allowed: the model computes them from its config) load, and score exactly as the
    single-file checkpoint does."""
    import interp
    import torch

    sharded = _copy(bi_model, tmp_path, "sharded")
    _shard(sharded)
    rotary = _copy(bi_model, tmp_path, "rotary")
    t = _tensors(rotary)
    t["model.rotary_emb.inv_freq"] = torch.ones(8)
    _save(rotary, t)
    ids = torch.arange(3, 19).reshape(1, 16)
    logits = []
    for ck in (bi_model, sharded, rotary):
        lm = interp.load(ck, threads=1)
        assert lm.content
        with torch.no_grad():
            logits.append(lm.backend.model(input_ids=ids).logits)
    torch.testing.assert_close(logits[1], logits[0], rtol=0, atol=0)
    torch.testing.assert_close(logits[2], logits[0], rtol=0, atol=0)


def test_every_byte_of_every_shard_is_in_the_content_hash(bi_model, tmp_path):
    """A one-byte edit to the last byte of the second shard, its mtime kept (`touch -r`), changes
    the loaded model's content fingerprint; undone, the fingerprint is the first one again (control)."""
    import interp

    ck = _copy(bi_model, tmp_path, "sharded-edit")
    _shard(ck)
    shard = ck / "model-00002-of-00002.safetensors"
    first = interp.load(ck, threads=1).content
    st, data = shard.stat(), shard.read_bytes()
    for payload in (data[:-1] + bytes([data[-1] ^ 0x01]), data):
        shard.write_bytes(payload)
        os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
        seen = interp.load(ck, threads=1).content
        assert (seen == first) == (payload == data), "a shard byte is outside the content hash"


def test_missing_tensor_message_comes_from_transformers_loading_info(bi_model, tmp_path):
    """The check reads what transformers reports; the same directory loaded by plain transformers
    reports the key missing (and would have started it from random values)."""
    from transformers import AutoModelForCausalLM

    ck, _ = missing_tensor(bi_model, tmp_path)
    _, info = AutoModelForCausalLM.from_pretrained(ck, output_loading_info=True)
    assert V_PROJ in info["missing_keys"]
    _, clean = AutoModelForCausalLM.from_pretrained(bi_model, output_loading_info=True)
    assert not clean["missing_keys"] and not clean["unexpected_keys"]


# ---------------------------------------------------------------- NaN/Inf while hashing: every dtype


def _reference_digest(path: Path) -> str:
    """xxh3-128 of the size prefix and every byte, written here without the project's code."""
    import xxhash

    h = xxhash.xxh3_128()
    h.update(f"{path.stat().st_size}|".encode())
    h.update(path.read_bytes())
    return h.hexdigest()


DTYPES = ["float32", "float16", "bfloat16", "float64", "float8_e5m2", "float8_e4m3fn"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_finite_check_names_tensor_and_element_in_every_dtype(dtype, tmp_path):
    import torch

    from interp.core.errors import CheckpointError
    from interp.model.fingerprint import content_digest

    dt = getattr(torch, dtype)
    big = torch.linspace(-2, 2, 3 * 1024 * 1024 // dt.itemsize).to(dt)  # spans chunks of the 4 MiB buffer
    tensors = {"a.weight": torch.ones(17, dtype=dt), "b.weight": big, "ids": torch.arange(9)}
    clean = tmp_path / "clean.safetensors"
    _save(tmp_path, tensors, clean.name)
    # negative control: every value finite -> no error, and the digest is the one without the check
    assert content_digest(clean, finite=True) == content_digest(clean) == _reference_digest(clean)
    for value, index in ((math.nan, len(big) - 1), (math.inf, 1_500_000 // dt.itemsize)):
        if dtype == "float8_e4m3fn" and math.isinf(value):
            continue  # e4m3fn has no infinity (it saturates)
        bad = dict(tensors, **{"b.weight": big.clone()})
        bad["b.weight"][index] = value
        path = tmp_path / "bad.safetensors"
        _save(tmp_path, bad, path.name)
        assert content_digest(path) == _reference_digest(path)  # unchecked: a digest like any other
        with pytest.raises(CheckpointError, match=rf"tensor b\.weight holds NaN or infinite .*element {index}\)"):
            content_digest(path, finite=True)


def test_float32_sum_overflow_is_not_a_false_alarm(tmp_path):
    """The fast path sums each chunk; a sum that overflows from finite values alone is looked at
    value by value (negative control for the shortcut)."""
    from interp.model.fingerprint import content_digest

    tensors = {"w": np.full(4096, 3.0e38, dtype=np.float32)}
    from safetensors.numpy import save_file

    path = tmp_path / "huge.safetensors"
    save_file(tensors, str(path))
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.add.reduce(tensors["w"]))  # precondition: the shortcut's sum overflows
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a RuntimeWarning about the overflow for the user
        assert content_digest(path, finite=True) == _reference_digest(path)


def test_nan_in_unused_stray_file_is_not_checked(bi_model, tmp_path):
    """Only the files transformers loads are checked for NaN (a stray file is hashed, never loaded)."""
    import interp

    ck = _copy(bi_model, tmp_path, "stray")
    t = _tensors(ck)
    t[UP] = t[UP].clone()
    t[UP][0, 0] = math.nan
    _save(ck, t, "consolidated.safetensors")
    assert interp.load(ck, threads=1).content


# ---------------------------------------------------------------- unreadable files name the file


@pytest.mark.parametrize("victim", ["model.safetensors", "tokenizer.json"])
def test_unreadable_file_is_named(victim, cli, bi_model, earlier_out, tmp_path, monkeypatch):
    ck = _copy(bi_model, tmp_path, "unreadable")
    target = ck / victim
    if os.geteuid() != 0:
        target.chmod(0)
    else:  # root reads any file: refuse this one the way the kernel would for another user
        import builtins

        real_open = builtins.open

        def deny(file, *a, **k):
            if str(file) == str(target):
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *a, **k)

        monkeypatch.setattr(builtins, "open", deny)
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", ck, *SWEEP, "--out", earlier_out)
    assert_one_line_error(res, target, "Permission denied")
    assert_intact(earlier_out, before, log)


def test_fifo_config_json_is_named_not_called_missing(cli, bi_model, earlier_out, tmp_path):
    ck = _copy(bi_model, tmp_path, "fifo-config")
    (ck / "config.json").unlink()
    os.mkfifo(ck / "config.json")
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", ck, *SWEEP, "--out", earlier_out)
    line = assert_one_line_error(res, ck / "config.json", "FIFO")
    assert "no config.json" not in line
    assert_intact(earlier_out, before, log)
