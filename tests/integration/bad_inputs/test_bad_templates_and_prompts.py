"""User template files (empty verdict / label words, missing fields, not JSON) and prompts longer
than the model's context window: one line on stderr naming the file and field (or the item and the
limit), exit code 2, and the earlier sweep in OUT is untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ._util import (
    CLASSIFY,
    CLOZE,
    PRESSURE,
    Case,
    assert_intact,
    assert_one_line_error,
    build_gpt2,
    jsonl,
    log_bytes,
    shipped_template,
    snapshot,
)

SMALL = ("--max-items", "2", "--threads", "1", "--quiet")


def _template(tmp: Path, base: str, change, name: str = "mine.json") -> Path:
    data = shipped_template(base)
    change(data)
    path = tmp / name
    path.write_text(json.dumps(data, ensure_ascii=False))
    return path


def pressure_empty_verdict(model, tmp):
    def change(t):
        t["verdicts"]["moral"] = ["", "acceptable"]

    path = _template(tmp, "pressure_v1", change)
    return ["pressure", "--bank", "moral", "--template", path], [path, "verdicts"]


def pressure_blank_verdict(model, tmp):
    def change(t):
        t["verdicts"]["moral"] = ["wrong", "   "]

    path = _template(tmp, "pressure_v1", change)
    return ["pressure", "--bank", "moral", "--template", path], [path, "verdicts"]


def pressure_missing_marker(model, tmp):
    path = _template(tmp, "pressure_v1", lambda t: t.pop("marker"))
    return ["pressure", "--bank", "moral", "--template", path], [path, "marker"]


def classify_empty_label_name(model, tmp):
    def change(t):
        t["labels"][0]["name"] = ""

    path = _template(tmp, "classify_five_v1", change)
    return ["classify", "--bank", "conversational", "--template", path], [path, "labels", "name"]


def classify_binary_empty_label_name(model, tmp):
    def change(t):
        t["labels"][1]["name"] = " "

    path = _template(tmp, "classify_binary_v1", change)
    return ["classify", "--bank", "conversational", "--template", path], [path, "labels", "name"]


def cloze_unknown_scored_span(model, tmp):
    def change(t):
        t["scored_span"] = "everything"

    path = _template(tmp, "cloze_v1", change)
    return ["cloze", "--bank", "cloze", "--template", path], [path, "scored_span", "everything"]


def template_not_json(model, tmp):
    path = tmp / "broken.json"
    path.write_text('{"version": "x", "marker": "FINAL:",')
    return ["pressure", "--bank", "moral", "--template", path], [path, "JSON"]


def template_without_version(model, tmp):
    path = _template(tmp, "pressure_v1", lambda t: t.pop("version"))
    return ["pressure", "--bank", "moral", "--template", path], [path, "version"]


def template_missing_file(model, tmp):
    path = tmp / "absent.json"
    return ["pressure", "--bank", "moral", "--template", path], [path, "does not exist"]


TEMPLATE_CASES = [
    Case("pressure-empty-verdict-word", pressure_empty_verdict, noisy=True),
    Case("pressure-blank-verdict-word", pressure_blank_verdict, noisy=True),
    Case("pressure-template-missing-marker", pressure_missing_marker, noisy=True),
    Case("classify-five-empty-label-word", classify_empty_label_name, noisy=True),
    Case("classify-binary-blank-label-word", classify_binary_empty_label_name, noisy=True),
    Case("cloze-template-unknown-scored-span", cloze_unknown_scored_span, noisy=True),
    Case("template-not-json", template_not_json),
    Case("template-without-version", template_without_version),
    Case("template-file-missing", template_missing_file),
]


@pytest.mark.parametrize("case", [c.param() for c in TEMPLATE_CASES])
def test_bad_template_is_one_line_error(case, cli, bi_model, earlier_out, tmp_path):
    (study, *args), must = case.make(bi_model, tmp_path)
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", bi_model, "--study", study, *args, "--out", earlier_out, *SMALL)
    assert_one_line_error(res, *must, one_line=not case.noisy)
    assert_intact(earlier_out, before, log)


# ---------------------------------------------------------------- prompts longer than the context window

LONG_CLOZE = dict(
    CLOZE[2],
    prompt_id="p-long",
    context="My neighbour told me a very long story about the town. " * 12 + "People say they are ___.",
)
LONG_PRESSURE = dict(PRESSURE[0], item_id="m-long", text="I did a long list of things that day. " * 40)
LONG_CLASSIFY = dict(CLASSIFY[0], item_id="c-long", comment="I agree with you so much, honestly. " * 60)


def _short_llama(model: Path, tmp: Path, limit: int) -> Path:
    d = tmp / f"llama-ctx{limit}"
    shutil.copytree(model, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["max_position_embeddings"] = limit  # rotary: nothing in the weights stops a longer input
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def cloze_gpt2_window(model, tmp, tokenizer):
    bank = tmp / "long.jsonl"
    bank.write_bytes(jsonl([CLOZE[0], LONG_CLOZE]))
    ck = build_gpt2(tmp / "gpt2-ctx64", tokenizer, n_positions=64)
    return [ck, "--study", "cloze", "--bank", bank], ["p-long", "64"]


def cloze_llama_window(model, tmp, tokenizer):
    bank = tmp / "long.jsonl"
    bank.write_bytes(jsonl([CLOZE[0], LONG_CLOZE]))
    return [_short_llama(model, tmp, 64), "--study", "cloze", "--bank", bank], ["p-long", "64"]


def pressure_llama_window(model, tmp, tokenizer):
    bank = tmp / "long.jsonl"
    bank.write_bytes(jsonl(PRESSURE + [LONG_PRESSURE]))  # ordinary items fit in 400 tokens, m-long does not
    return [_short_llama(model, tmp, 400), "--study", "pressure", "--bank", bank], ["m-long", "400", bank]


def classify_window(model, tmp, tokenizer):
    bank = tmp / "long.jsonl"
    bank.write_bytes(jsonl(CLASSIFY + [LONG_CLASSIFY]))  # ordinary prompts about 750 tokens, c-long about 1800
    return [model, "--study", "classify", "--bank", bank], ["c-long", "1024"]


PROMPT_CASES = [
    Case("cloze-gpt2-n_positions-64", cloze_gpt2_window, noisy=True),
    Case("cloze-llama-max_position_embeddings-64", cloze_llama_window, noisy=True),
    Case("pressure-llama-max_position_embeddings-400", pressure_llama_window, noisy=True),
    Case("classify-llama-max_position_embeddings-1024", classify_window, noisy=True),
]


@pytest.mark.parametrize("case", [c.param() for c in PROMPT_CASES])
def test_prompt_longer_than_context_window(case, cli, bi_model, tokenizer, earlier_out, tmp_path):
    args, must = case.make(bi_model, tmp_path, tokenizer)
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", *args, "--out", earlier_out, "--threads", "1", "--quiet")
    line = assert_one_line_error(res, *must, one_line=not case.noisy)
    assert "context window" in line
    assert_intact(earlier_out, before, log)
