"""Tests for interp.tools.fetch that need neither the real PyPI packages nor the network.

The real models are covered by one opt-in test (`-m real_models`, INTERP_MODELS=DIR).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from interp.tools import fetch
from interp.tools.fetch import FetchError

BENGALI = "আমি বাংলায় গান গাই।"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- checksums and chunks


def test_parse_sha256sums_reads_text_and_binary_mode_lines() -> None:
    a, b = "a" * 64, "B" * 64
    sums = fetch.parse_sha256sums(f"{a}  model.gguf\n{b} *other.bin\nnot a checksum line\n")
    assert sums == {"model.gguf": a, "other.bin": "b" * 64}


def test_join_chunks_concatenates_in_order_and_verifies(tmp_path: Path) -> None:
    parts = [b"alpha-", b"beta-", b"gamma" * 1000]
    chunks = []
    for i, data in enumerate(parts):
        p = tmp_path / f"m.gguf.part{i:02d}"
        p.write_bytes(data)
        chunks.append(p)
    out = tmp_path / "m.gguf"
    digest = fetch.join_chunks(chunks, out, _sha(b"".join(parts)))
    assert out.read_bytes() == b"".join(parts)
    assert digest == _sha(b"".join(parts))


def test_join_chunks_bad_checksum_fails_and_leaves_no_file(tmp_path: Path) -> None:
    p = tmp_path / "m.gguf.part00"
    p.write_bytes(b"payload")
    out = tmp_path / "m.gguf"
    with pytest.raises(FetchError) as ei:
        fetch.join_chunks([p], out, "0" * 64)
    msg = str(ei.value)
    assert "m.gguf" in msg and "sha256 mismatch" in msg and "\n" not in msg
    assert not out.exists()


def _fake_dist(site: Path, dist: str, files: dict[str, bytes]) -> None:
    """An installed-looking distribution (dist-info + RECORD with sha256) that importlib.metadata finds."""
    pkg = dist.replace("-", "_")
    info = site / f"{pkg}-1.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0.0\n")
    record = []
    for rel, data in files.items():
        target = site / pkg / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        b64 = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{pkg}/{rel},sha256={b64},{len(data)}")
    record.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


def _chunked_spec(site: Path, payload: bytes, sums_digest: str, pin: str, *, drop_part: int | None = None):
    name = "fake.gguf"
    third = len(payload) // 3
    pieces = [payload[:third], payload[third : 2 * third], payload[2 * third :]]
    _fake_dist(site, "fake-main", {"data/SHA256SUMS": f"{sums_digest}  {name}\n".encode()})
    parts = []
    for i, piece in enumerate(pieces):
        dist = f"fake-part{i + 1}"
        if i != drop_part:
            _fake_dist(site, dist, {f"data/{name}.part{i:02d}": piece})
        parts.append((dist, "1.0.0"))
    return dataclasses.replace(
        fetch.MODELS["gemma3-270m"], packages=(("fake-main", "1.0.0"), *parts), gguf_name=name, gguf_sha256=pin
    )


def test_chunked_package_gguf_is_joined_and_checked_against_shipped_checksum(tmp_path, monkeypatch) -> None:
    payload = bytes(range(256)) * 3
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    spec = _chunked_spec(site, payload, _sha(payload), _sha(payload))
    out = fetch._gguf_from_chunks(spec, tmp_path / "work")
    assert out.read_bytes() == payload


def test_chunked_package_with_wrong_shipped_checksum_fails(tmp_path, monkeypatch) -> None:
    payload = b"x" * 100
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    wrong = "f" * 64
    spec = _chunked_spec(site, payload, wrong, wrong)  # pin agrees with the package, data does not
    with pytest.raises(FetchError, match=r"sha256 mismatch for joined fake.gguf \(SHA256SUMS of fake-main\)"):
        fetch._gguf_from_chunks(spec, tmp_path / "work")
    assert not (tmp_path / "work" / "fake.gguf").exists()


def test_chunked_package_missing_part_is_named(tmp_path, monkeypatch) -> None:
    payload = b"y" * 100
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    spec = _chunked_spec(site, payload, _sha(payload), _sha(payload), drop_part=1)
    with pytest.raises(FetchError, match="fake-part2"):
        fetch._gguf_from_chunks(spec, tmp_path / "work")


def test_single_file_package_checked_against_wheel_record(tmp_path, monkeypatch) -> None:
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    data = b"GGUF" + b"\0" * 60
    _fake_dist(site, "fake-single", {"m.Q4_1.gguf": data})
    spec = dataclasses.replace(
        fetch.MODELS["smollm2-135m-instruct"],
        packages=(("fake-single", "1.0.0"),),
        gguf_name="m.Q4_1.gguf",
        gguf_sha256=_sha(data),
    )
    path = fetch._gguf_from_single_file(spec, tmp_path)
    assert path.read_bytes() == data
    path.write_bytes(b"tampered")
    with pytest.raises(FetchError, match=r"m\.Q4_1\.gguf \(package fake-single RECORD\)"):
        fetch._gguf_from_single_file(spec, tmp_path)


# ---------------------------------------------------------------- pip


def test_missing_package_without_pip_install_names_it() -> None:
    with pytest.raises(FetchError, match=r"no-such-interp-pkg==9\.9 needed but not installed"):
        fetch.ensure_packages([("no-such-interp-pkg", "9.9")], pip_install=False, log=lambda s: None)


def test_pip_failure_is_one_line_fetch_error(monkeypatch) -> None:
    calls = []

    class Proc:
        returncode = 1
        stdout = ""
        stderr = "Looking in indexes...\nERROR: No matching distribution found for no-such-interp-pkg==9.9\n"

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return Proc()

    monkeypatch.setattr(fetch.subprocess, "run", fake_run)
    with pytest.raises(FetchError) as ei:
        fetch.ensure_packages([("no-such-interp-pkg", "9.9")], pip_install=True, log=lambda s: None)
    assert "pip install no-such-interp-pkg==9.9 failed (exit 1): ERROR: No matching" in str(ei.value)
    assert calls[0][-3:] == ["--no-deps", "--disable-pip-version-check", "no-such-interp-pkg==9.9"]


# ---------------------------------------------------------------- atomic dirs and completeness


def _dead_pid() -> int:
    pid = 2**22 - 7  # above the usual pid_max of small containers; verified below
    while fetch._pid_alive(pid):
        pid -= 1
    return pid


def test_stale_temp_dirs_are_removed_live_ones_kept(tmp_path: Path) -> None:
    stale = tmp_path / f".m.tmp-{_dead_pid()}"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "model.safetensors").write_bytes(b"partial")
    mine = tmp_path / f".m.tmp-{os.getpid()}"  # an earlier call in this very process that crashed
    mine.mkdir()
    garbage = tmp_path / ".m.tmp-notapid"
    garbage.mkdir()
    live = tmp_path / f".m.tmp-{os.getppid()}"  # a concurrent run that is still going
    live.mkdir()
    other = tmp_path / f".other.tmp-{_dead_pid()}"
    other.mkdir()
    removed = fetch.clean_stale_temp_dirs(tmp_path, "m", log=lambda s: None)
    assert set(removed) == {stale, mine, garbage}
    assert not stale.exists() and not mine.exists() and not garbage.exists()
    assert live.exists() and other.exists()


def _write_complete_dir(d: Path) -> None:
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"weights")
    (d / fetch.PROVENANCE_FILE).write_text(json.dumps({"files": fetch._file_manifest(d)}))


def test_completeness_requires_marker_and_matching_hashes(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"weights")
    assert not fetch.is_complete(d)  # everything but the marker: a crash before the end
    (d / fetch.PROVENANCE_FILE).write_text("{not json")
    assert not fetch.is_complete(d)
    (d / fetch.PROVENANCE_FILE).unlink()
    d2 = tmp_path / "m2"
    _write_complete_dir(d2)
    assert fetch.is_complete(d2)
    (d2 / "model.safetensors").write_bytes(b"weightz")  # same size, other content
    assert not fetch.is_complete(d2)
    (d2 / "model.safetensors").unlink()
    assert not fetch.is_complete(d2)


def test_unknown_model_name_is_fetch_error(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="unknown model 'nope'"):
        fetch.fetch_models(tmp_path, names=["nope"], pip_install=False, log=lambda s: None)


def test_failed_build_leaves_neither_final_nor_temp_dir(tmp_path: Path, monkeypatch) -> None:
    def boom(spec, work):
        raise FetchError("chunk file missing on disk: x.part01")

    spec = dataclasses.replace(fetch.MODELS["smollm2-135m-instruct"], name="m", packages=(), locate_gguf=boom)
    monkeypatch.setitem(fetch.MODELS, "m", spec)
    with pytest.raises(FetchError, match="x.part01"):
        fetch.fetch_models(tmp_path, names=["m"], log=lambda s: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ---------------------------------------------------------------- round trip through a tiny GGUF


def make_tiny_llama_gguf(path: Path, seed: int = 0) -> Path:
    """A 2-layer Llama with a byte-level BPE vocab, Q4_1 weights and a chat template, like SmolLM2's GGUF."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(seed)
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *bytes_to_unicode().values(), "Ġt", "he", "Ġthe"]
    types = [3, 3, 3] + [1] * (len(tokens) - 3)  # 3 = control
    d, ff, n_layers, n_heads, n_kv = 64, 128, 2, 4, 2
    hd = d // n_heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(128)
    w.add_embedding_length(d)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["Ġ t", "h e", "Ġt he"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_add_bos_token(False)
    w.add_chat_template(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )

    def quantized(name: str, shape: tuple[int, ...]) -> None:
        a = (0.1 * rng.standard_normal(shape)).astype(np.float32)
        q4 = gguf.GGMLQuantizationType.Q4_1
        w.add_tensor(name, gguf.quants.quantize(a, q4), raw_dtype=q4)

    def norm(name: str) -> None:
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal((d,))).astype(np.float32))

    quantized("token_embd.weight", (len(tokens), d))  # no output.weight: tied, as in SmolLM2
    norm("output_norm.weight")
    for i in range(n_layers):
        norm(f"blk.{i}.attn_norm.weight")
        norm(f"blk.{i}.ffn_norm.weight")
        quantized(f"blk.{i}.attn_q.weight", (d, d))
        quantized(f"blk.{i}.attn_k.weight", (n_kv * hd, d))
        quantized(f"blk.{i}.attn_v.weight", (n_kv * hd, d))
        quantized(f"blk.{i}.attn_output.weight", (d, d))
        quantized(f"blk.{i}.ffn_gate.weight", (ff, d))
        quantized(f"blk.{i}.ffn_up.weight", (ff, d))
        quantized(f"blk.{i}.ffn_down.weight", (d, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def tiny_spec(tmp_path: Path, monkeypatch) -> fetch.ModelSpec:
    src = tmp_path / "src"
    src.mkdir()
    gguf_path = make_tiny_llama_gguf(src / "tiny.Q4_1.gguf")
    digest = fetch.sha256_file(gguf_path)
    spec = dataclasses.replace(
        fetch.MODELS["smollm2-135m-instruct"],
        name="tiny",
        upstream="none/tiny",
        packages=(),
        gguf_name=gguf_path.name,
        gguf_sha256=digest,
        locate_gguf=lambda spec, work: gguf_path,
    )
    monkeypatch.setitem(fetch.MODELS, "tiny", spec)
    return spec


def test_round_trip_tiny_gguf_to_plain_dir(tmp_path: Path, tiny_spec: fetch.ModelSpec) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dest = tmp_path / "models"
    dest.mkdir()
    stale = dest / f".tiny.tmp-{_dead_pid()}"
    stale.mkdir()
    half = dest / "tiny"  # an earlier run's leftovers without a marker: must be rebuilt, not trusted
    half.mkdir()
    (half / "config.json").write_text("{}")
    logs: list[str] = []
    out = fetch.fetch_models(dest, names=["tiny"], pip_install=False, log=logs.append)["tiny"]

    assert out == dest / "tiny" and fetch.is_complete(out)
    assert sorted(p.name for p in dest.iterdir()) == ["tiny"]  # temp dirs gone
    names = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        fetch.PROVENANCE_FILE,
    } <= names
    assert ".gguf" not in names and "chat_template.jinja" not in names

    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg
    assert "{% for m in messages %}" in json.loads((out / "tokenizer_config.json").read_text())["chat_template"]
    prov = json.loads((out / fetch.PROVENANCE_FILE).read_text())
    assert prov["gguf"] == {
        "file": tiny_spec.gguf_name,
        "sha256": tiny_spec.gguf_sha256,
        "size": prov["gguf"]["size"],
        "quantization": "Q4_1",
    }
    assert prov["weights"] == fetch.WEIGHTS_NOTE and prov["licence"] == "Apache-2.0"
    assert prov["model"] == {"n_params": prov["model"]["n_params"], "n_layers": 2, "d_model": 64, "vocab_size": 262}
    assert prov["logit_check"]["max_abs_diff"] <= fetch.LOGIT_ATOL
    assert prov["files"]["model.safetensors"]["sha256"] == fetch.sha256_file(out / "model.safetensors")

    # Independently of convert_gguf's own check: the plain dir reproduces the GGUF model's logits.
    src = tmp_path / "src"
    ref = AutoModelForCausalLM.from_pretrained(src, gguf_file=tiny_spec.gguf_name, local_files_only=True).eval()
    ref_tok = AutoTokenizer.from_pretrained(src, gguf_file=tiny_spec.gguf_name, local_files_only=True)
    plain = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert plain.dtype == torch.float32
    text = "the theme"
    ids = tok(text, return_tensors="pt")
    assert ids["input_ids"].tolist() == ref_tok(text, return_tensors="pt")["input_ids"].tolist()
    with torch.no_grad():
        assert torch.allclose(plain(**ids).logits, ref(**ids).logits, atol=fetch.LOGIT_ATOL, rtol=0)
    assert tok.decode(tok(BENGALI, add_special_tokens=False)["input_ids"]) == BENGALI
    assert "<|im_start|>user\nhi<|im_end|>" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False
    )

    # Second call: verified and skipped, nothing rewritten.
    mtime = (out / "model.safetensors").stat().st_mtime_ns
    logs.clear()
    fetch.fetch_models(dest, names=["tiny"], pip_install=False, log=logs.append)
    assert any("already complete" in line for line in logs)
    assert (out / "model.safetensors").stat().st_mtime_ns == mtime


def test_gguf_not_matching_pin_is_rejected(tmp_path: Path, tiny_spec: fetch.ModelSpec, monkeypatch) -> None:
    monkeypatch.setitem(fetch.MODELS, "tiny", dataclasses.replace(tiny_spec, gguf_sha256="0" * 64))
    with pytest.raises(FetchError, match=r"sha256 mismatch for tiny\.Q4_1\.gguf \(pinned\)"):
        fetch.fetch_models(tmp_path / "models", names=["tiny"], pip_install=False, log=lambda s: None)
    assert list((tmp_path / "models").iterdir()) == []


# ---------------------------------------------------------------- the real fetched models (opt-in)


@pytest.mark.real_models
@pytest.mark.parametrize("name", ["smollm2-135m-instruct", "gemma3-270m"])
def test_real_model_forward_and_bengali_round_trip(name: str) -> None:
    root = os.environ.get("INTERP_MODELS")
    if not root:
        pytest.skip("set INTERP_MODELS to the directory fetch_models() filled")
    model_dir = Path(root) / name
    if not (model_dir / fetch.PROVENANCE_FILE).exists():
        pytest.skip(f"{model_dir} has not been fetched")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert fetch.is_complete(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        logits = model(**ids).logits
    assert logits.shape[-1] == model.config.vocab_size
    assert torch.isfinite(logits).all()
    assert tok.decode(tok(BENGALI, add_special_tokens=False)["input_ids"]) == BENGALI
    if name == "smollm2-135m-instruct":
        assert tok.chat_template and "<|im_start|>" in tok.chat_template
