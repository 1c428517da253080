"""Broken checkpoint directories (built from a tiny model, then a file removed or altered): each is
one line on stderr naming the directory (or its config.json) and the field, exit code 2, and the
earlier sweep in OUT is untouched."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from ._util import SWEEP, Case, assert_intact, assert_one_line_error, log_bytes, run_cli, snapshot


def _copy(model: Path, tmp: Path, name: str) -> Path:
    dest = tmp / name
    shutil.copytree(model, dest)
    return dest


def _edit_config(d: Path, **changes) -> Path:
    cfg = json.loads((d / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d / "config.json"


def no_config(model, tmp):
    d = _copy(model, tmp, "no-config")
    (d / "config.json").unlink()
    return [d], [d, "config.json"]


def config_not_json(model, tmp):
    d = _copy(model, tmp, "config-not-json")
    (d / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 2,,}')
    return [d], [d / "config.json", "JSON"]


def config_not_object(model, tmp):
    d = _copy(model, tmp, "config-list")
    (d / "config.json").write_text("[1, 2, 3]")
    return [d], [d / "config.json", "JSON object"]


def no_weights(model, tmp):
    d = _copy(model, tmp, "no-weights")
    (d / "model.safetensors").unlink()
    return [d], [d, "weight"]


def _state_dict(d: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(d / "model.safetensors")


def pickle_only(model, tmp):
    import torch

    d = _copy(model, tmp, "pickle-only")
    torch.save(_state_dict(d), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    return [d], [d, "pytorch_model.bin", "pickle"]


def pickle_not_a_state_dict(model, tmp):
    """--allow-pickle loads with weights_only: a pickle holding arbitrary objects is refused."""
    import torch

    d = _copy(model, tmp, "pickle-objects")
    torch.save({"model": argparse.Namespace(payload="not tensors")}, d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    return [d, "--allow-pickle"], [d, "weights"]


def remote_code(model, tmp):
    d = _copy(model, tmp, "remote-code")
    cfg = _edit_config(d, auto_map={"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"})
    (d / "modeling_evil.py").write_text("raise SystemExit('remote code ran')\n")
    return [d], [cfg, "auto_map"]


def no_tokenizer(model, tmp):
    d = _copy(model, tmp, "no-tokenizer")
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (d / f).unlink(missing_ok=True)
    return [d], [d, "tokenizer"]


def tokenizer_corrupt(model, tmp):
    d = _copy(model, tmp, "tokenizer-corrupt")
    (d / "tokenizer.json").write_text('{"version": "1.0", "model": ')
    return [d], [d, "tokenizer"]


def tokenizer_added_tokens(model, tmp):
    """The tokenizer has more tokens (added ones) than the embedding matrix has rows."""
    from transformers import AutoTokenizer

    d = _copy(model, tmp, "tokenizer-added")
    tok = AutoTokenizer.from_pretrained(d)
    tok.add_tokens(["<extra_a>", "<extra_b>", "<extra_c>"])
    tok.save_pretrained(d)
    return [d], [d, "tokenizer", "embedding"]


def embeddings_shrunk(model, tmp):
    """config vocab_size and the embedding / unembedding weights cut to 500 rows; tokenizer has 512."""
    from safetensors.torch import save_file

    d = _copy(model, tmp, "embeddings-shrunk")
    sd = _state_dict(d)
    n = 500
    sd = {k: (v[:n].contiguous() if v.dim() == 2 and v.shape[0] == 512 else v) for k, v in sd.items()}
    save_file(sd, d / "model.safetensors", metadata={"format": "pt"})
    _edit_config(d, vocab_size=n)
    return [d], [d, "tokenizer", "embedding", "500"]


def unsupported_architecture(model, tmp):
    d = _copy(model, tmp, "unsupported")
    cfg = _edit_config(d, model_type="mamba", architectures=["MambaForCausalLM"])
    return [d], [cfg, "model_type", "mamba"]


def missing_layer_count(model, tmp):
    d = _copy(model, tmp, "no-layer-count")
    cfg = _edit_config(d, num_hidden_layers=None)
    return [d], [cfg, "num_hidden_layers"]


def truncated_weights(model, tmp):
    d = _copy(model, tmp, "weights-truncated")
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    return [d], [d, "weights"]


def path_missing(model, tmp):
    d = tmp / "no-such-checkpoint"
    return [d], [d, "does not exist"]


def path_is_a_file(model, tmp):
    f = tmp / "model.safetensors"
    shutil.copy(model / "model.safetensors", f)
    return [f], [f]


CASES = [
    Case("no-config", no_config, marks=(pytest.mark.filterwarnings("ignore:not checkpoints:UserWarning"),)),
    Case("config-not-json", config_not_json),
    Case("config-not-an-object", config_not_object),
    Case("no-weights", no_weights),
    Case("pickle-only-weights", pickle_only),
    Case("pickle-with-objects-allow-pickle", pickle_not_a_state_dict),
    Case("remote-code-auto-map", remote_code),
    Case("no-tokenizer", no_tokenizer),
    Case("tokenizer-corrupt", tokenizer_corrupt),
    Case("tokenizer-added-tokens-exceed-embeddings", tokenizer_added_tokens, noisy=True),
    Case("embeddings-smaller-than-tokenizer", embeddings_shrunk, noisy=True),
    Case("unsupported-architecture", unsupported_architecture),
    Case("config-missing-num-hidden-layers", missing_layer_count),
    Case("weights-truncated", truncated_weights),
    Case("checkpoint-path-missing", path_missing),
    Case("checkpoint-path-is-a-file", path_is_a_file),
]


@pytest.mark.parametrize("case", [c.param() for c in CASES])
def test_bad_checkpoint_is_one_line_error(case, cli, bi_model, earlier_out, tmp_path):
    args, must = case.make(bi_model, tmp_path)
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", args[0], *SWEEP, "--out", earlier_out, *args[1:])
    assert_one_line_error(res, *must, one_line=not case.noisy)
    assert_intact(earlier_out, before, log)
    assert "remote code ran" not in res.err + res.out


@pytest.mark.parametrize("case", [c for c in CASES if c.noisy], ids=lambda c: c.id)
def test_error_after_model_load_is_still_the_only_stderr_line(case, capsys, monkeypatch, bi_model, tmp_path):
    args, must = case.make(bi_model, tmp_path)
    res = run_cli(capsys, monkeypatch, "sweep", args[0], *SWEEP, "--out", tmp_path / "out", *args[1:])
    assert_one_line_error(res, *must, one_line=True)


def test_pickle_only_loads_with_allow_pickle(cli, bi_model, tmp_path):
    """The positive side of the pickle refusal: a plain state dict loads with --allow-pickle (weights_only)."""
    args, _ = pickle_only(bi_model, tmp_path)
    out = tmp_path / "out"
    res = cli("sweep", args[0], *SWEEP, "--out", out, "--allow-pickle")
    assert res.code == 0 and res.exc is None, res.err[-2000:]
    assert (out / "results" / "pressure_trials.csv").is_file()
