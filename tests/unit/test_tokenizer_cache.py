"""One tokenizer load per checkpoint in a sweep (issue 16): planning and loading share it,
keyed by the tokenizer's content identity, so an edited tokenizer is still loaded afresh."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture
def counted(monkeypatch):
    import interp.model.loading as loading

    loading.clear_tokenizer_cache()
    calls: list[Path] = []
    real = loading.load_tokenizer

    def counting(path):
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(loading, "load_tokenizer", counting)
    yield calls
    loading.clear_tokenizer_cache()


def test_plan_and_load_share_one_tokenizer(tiny_models, tmp_path, counted, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "memo"))
    from interp.model.loading import load
    from interp.studies.base import RunConfig
    from sweeps.plan import plan_units

    a = Path(shutil.copytree(tiny_models["llama"], tmp_path / "a"))
    b = Path(shutil.copytree(tiny_models["llama"], tmp_path / "b"))  # same tokenizer files
    plan_units([a, b], ["pressure"], banks=["moral"], cfg=RunConfig(max_items=1))
    lm_a, lm_b = load(a, threads=1), load(b, threads=1)
    assert len(counted) == 1, counted
    assert lm_a.tokenizer is lm_b.tokenizer


def test_edited_tokenizer_is_loaded_afresh(tiny_models, tmp_path, counted, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "memo"))
    from interp.model.loading import load

    ck = Path(shutil.copytree(tiny_models["llama"], tmp_path / "ck"))
    text = "the quick brown fox jumps over the lazy dog"
    before = load(ck, threads=1).tokenizer(text)["input_ids"]
    tok = json.loads((ck / "tokenizer.json").read_text())
    tok["model"]["merges"] = tok["model"]["merges"][: len(tok["model"]["merges"]) // 2]
    (ck / "tokenizer.json").write_text(json.dumps(tok))
    after = load(ck, threads=1).tokenizer(text)["input_ids"]
    assert len(counted) == 2
    assert before != after, "the edit (half the merges) must change the encoding"
