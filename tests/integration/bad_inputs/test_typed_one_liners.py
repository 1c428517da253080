"""Every input a typed one-liner (issue 47). Before: JSONL fields of the wrong JSON type became the
prompts "{'k': 'v'}", "12345" and "True"; a chat template that raises or does not parse gave a
74-line traceback; a steering vector of 7 values was a traceback and one of shape 32x2 was
flattened into 64 numbers and used; `--layer` with `--layers` let one win silently and
`--comprehension-threshold 7` was accepted; fertility on a non-UTF-8 file did not name it and on
an empty file wrote NaN; `probe --layer 7` did not say which layers are cached. Each is one line,
exit 2, naming the file, row, field or option; the negative controls load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ._util import (
    CLASSIFY,
    CLOZE,
    PRESSURE,
    SWEEP,
    assert_intact,
    assert_one_line_error,
    edit,
    jsonl,
    log_bytes,
    snapshot,
)

pytestmark = pytest.mark.usefixtures("private_fingerprint_memo")

# ---------------------------------------------------------------- JSON types in JSON Lines banks

TYPE_CASES = [
    ("pressure-text-object", "pressure", edit(PRESSURE, 0, text={"k": "v"}), ["row 1", "text", "JSON object"]),
    ("pressure-text-number", "pressure", edit(PRESSURE, 1, text=12345), ["row 2", "text", "JSON number"]),
    ("pressure-text-boolean", "pressure", edit(PRESSURE, 2, text=True), ["row 3", "text", "JSON boolean"]),
    ("pressure-gold-array", "pressure", edit(PRESSURE, 1, gold=["wrong"]), ["row 2", "gold", "JSON array"]),
    ("pressure-id-boolean", "pressure", edit(PRESSURE, 0, item_id=False), ["row 1", "item_id", "JSON boolean"]),
    ("classify-comment-array", "classify", edit(CLASSIFY, 1, comment=["a", "b"]), ["row 2", "comment", "JSON array"]),
    ("classify-title-number", "classify", edit(CLASSIFY, 0, title=3.5), ["row 1", "title", "JSON number"]),
    ("classify-binary-boolean", "classify", edit(CLASSIFY, 2, binary_label=True), ["row 3", "binary_label", "boolean"]),
    ("cloze-context-number", "cloze", edit(CLOZE, 2, context=7), ["row 3", "context", "JSON number"]),
    ("cloze-stereotype-object", "cloze", edit(CLOZE, 0, stereotype={"w": 1}), ["row 1", "stereotype", "JSON object"]),
]


@pytest.mark.parametrize("study,rows,must", [pytest.param(s, r, m, id=i) for i, s, r, m in TYPE_CASES])
def test_wrong_json_type_is_refused_naming_row_and_field(study, rows, must, cli, bi_model, earlier_out, tmp_path):
    bank = tmp_path / "typed.jsonl"
    bank.write_bytes(jsonl(rows))
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", bi_model, "--study", study, "--bank", bank, "--out", earlier_out, "--quiet", "--dry-run")
    assert_one_line_error(res, bank, *must)
    assert_intact(earlier_out, before, log)


def test_numbers_where_ids_and_labels_may_be_numbers(tmp_path):
    """Negative control: integer ids and 0/1 labels in JSON Lines read as their text, with the hash of
    the same bank written with strings."""
    from interp.studies.classify import load_conversational_bank
    from interp.studies.pressure import load_pressure_bank

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    as_text = [dict(r, item_id=str(i)) for i, r in enumerate(PRESSURE)]
    as_number = [dict(r, item_id=i) for i, r in enumerate(PRESSURE)]
    (tmp_path / "a" / "p.jsonl").write_bytes(jsonl(as_text))
    (tmp_path / "b" / "p.jsonl").write_bytes(jsonl(as_number))
    assert load_pressure_bank(tmp_path / "b" / "p.jsonl").hash == load_pressure_bank(tmp_path / "a" / "p.jsonl").hash
    (tmp_path / "c.jsonl").write_bytes(jsonl(CLASSIFY))  # binary_label 1 / 0 as JSON numbers
    assert load_conversational_bank(tmp_path / "c.jsonl").items["binary_label"].tolist() == [1, 0, 1]


# ---------------------------------------------------------------- chat templates that raise or do not parse


@pytest.mark.parametrize(
    "template,must",
    [
        ("{{ raise_exception('Conversation roles must alternate') }}", ["TemplateError", "roles must alternate"]),
        ("{% for m in messages %}{{ m['content'] }", ["TemplateSyntaxError"]),
        ("{{ messages[0]['content'] | no_such_filter }}", ["no_such_filter"]),
    ],
    ids=["raise-exception", "syntax-error", "unknown-filter"],
)
def test_broken_chat_template_names_checkpoint_and_error(template, must, cli, bi_model, earlier_out, tmp_path):
    ck = Path(shutil.copytree(bi_model, tmp_path / "chat-broken"))
    cfg = json.loads((ck / "tokenizer_config.json").read_text())
    cfg["chat_template"] = template
    (ck / "tokenizer_config.json").write_text(json.dumps(cfg))
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", ck, *SWEEP, "--out", earlier_out)
    assert_one_line_error(res, ck, "chat template", *must)
    assert_intact(earlier_out, before, log)
    # the plain transcript needs no template: the same checkpoint sweeps with --no-chat-template
    res = cli("sweep", ck, *SWEEP, "--out", tmp_path / "plain", "--no-chat-template")
    assert res.code == 0, res.err[-2000:]


# ---------------------------------------------------------------- steering vectors of the wrong shape


@pytest.fixture(scope="module")
def steer_out(earlier_out, tmp_path_factory):
    return Path(shutil.copytree(earlier_out, tmp_path_factory.mktemp("steer") / "OUT"))


def _vector(tmp: Path, name: str, value) -> Path:
    path = tmp / name
    if value is None:
        np.savez(path, weights=np.ones(64))
    elif name.endswith(".npz"):
        np.savez(path, direction=value)
    else:
        np.save(path, value)
    return path


VECTORS = {
    "size-7.npy": (np.ones(7, dtype=np.float32), ["7 values", "64"]),
    "shape-32x2.npy": (np.ones((32, 2), dtype=np.float32), ["1-D", "(32, 2)"]),
    "shape-1x64.npy": (np.ones((1, 64), dtype=np.float32), ["1-D", "(1, 64)"]),
    "shape-32x2.npz": (np.ones((32, 2)), ["1-D", "(32, 2)"]),
    "nan.npy": (np.full(64, np.nan), ["non-finite norm"]),
    "zero.npy": (np.zeros(64), ["zero"]),
    "inf.npy": (np.r_[np.ones(63), np.inf], ["non-finite norm"]),
    "objects.npy": (np.array([{"a": 1}, "x"], dtype=object), ["not a .npy/.npz direction"]),
    "no-direction.npz": (None, ["has no array 'direction'"]),
}


@pytest.mark.parametrize("units", ["sd", "raw"])
@pytest.mark.parametrize("name", list(VECTORS))
def test_steering_vector_of_the_wrong_shape(name, units, cli, steer_out, tmp_path):
    value, must = VECTORS[name]
    path = _vector(tmp_path, name, value)
    before = snapshot(steer_out)
    res = cli("steer", steer_out, "--direction", path, "--layer", "3", "--alpha", "0,1", "--units", units, "--quiet")
    assert_one_line_error(res, path.name, *(m for m in must if units == "sd" or m != "64"))
    assert_intact(steer_out, before)


def test_steering_direction_that_is_a_directory(cli, steer_out, tmp_path):
    d = tmp_path / "direction.npy"
    d.mkdir()
    before = snapshot(steer_out)
    assert_one_line_error(cli("steer", steer_out, "--direction", d, "--layer", "3", "--alpha", "0", "--quiet"), d)
    assert_intact(steer_out, before)


def test_steering_vector_of_the_right_shape_is_accepted():
    """Negative control: a 1-D vector of d_model finite numbers passes the file check (unit norm)."""
    import tempfile

    from interp.runner.steering import direction_from_file

    with tempfile.TemporaryDirectory() as tmp:
        d = direction_from_file(_vector(Path(tmp), "ok.npy", np.arange(64, dtype=np.float32)))
    assert d.shape == (64,) and np.isclose(np.linalg.norm(d), 1.0)


# ---------------------------------------------------------------- contradictory or out-of-range options

OPTION_CASES = [
    (["--layer", "1", "--layers", "2"], ["--layer 1", "--layers 2", "exclude"]),
    (["--comprehension-threshold", "7"], ["--comprehension-threshold", "[0, 1]", "7"]),
    (["--comprehension-threshold", "-0.1"], ["--comprehension-threshold", "[0, 1]"]),
    (["--comprehension-threshold", "nan"], ["--comprehension-threshold", "nan"]),
    (["--temperature", "-1"], ["--temperature", "[0, inf)"]),
    (["--n-samples", "0"], ["--n-samples", "[1, inf)"]),
    (["--n-boot", "0"], ["--n-boot", "[1, inf)"]),
    (["--seed", "-1"], ["--seed", "[0, inf)"]),
    (["--threads", "0"], ["--threads", "[1, inf)"]),
    (["--worker-timeout", "0"], ["--worker-timeout", "(0, inf)"]),
    (["--tie-guard", "1.5"], ["--tie-guard", "[0, 1)"]),
]


@pytest.mark.parametrize("args,must", OPTION_CASES, ids=[" ".join(a) for a, _ in OPTION_CASES])
def test_contradictory_or_out_of_range_option(args, must, cli, bi_model, earlier_out):
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli("sweep", bi_model, *SWEEP, "--out", earlier_out, *args)
    assert_one_line_error(res, *must)
    assert_intact(earlier_out, before, log)


def test_out_of_range_option_in_a_config_file(cli, bi_model, tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text("[pressure]\ncomprehension_threshold = 1.5\n")
    res = cli("sweep", bi_model, *SWEEP, "--out", tmp_path / "OUT", "--config", cfg, "--dry-run")
    assert_one_line_error(res, "comprehension", "[0, 1]", "1.5")


@pytest.mark.parametrize(
    "args", [["--comprehension-threshold", "0"], ["--comprehension-threshold", "1"], ["--layers", "1,2"]]
)
def test_options_at_their_bounds_are_accepted(args, cli, bi_model, tmp_path):
    """Negative control: the ends of each interval, and --layers alone, plan normally."""
    res = cli("sweep", bi_model, *SWEEP, "--out", tmp_path / "OUT", "--dry-run", *args)
    assert res.code == 0 and res.exc is None, res.err[-2000:]


def test_in_bounds_reference():
    from interp.core.options import in_bounds

    assert in_bounds(0, "[0, 1]") and in_bounds(1, "[0, 1]") and not in_bounds(1, "[0, 1)")
    assert not in_bounds(0, "(0, inf)") and in_bounds(1e300, "(0, inf)") and not in_bounds(float("nan"), "[0, 1]")


# ---------------------------------------------------------------- fertility on bad text files


@pytest.mark.parametrize(
    "content,must",
    [
        (b"hello world\n\xff\xfe bad\n", ["line 2", "not UTF-8", "0xff"]),
        (b"", ["no text"]),
        (b"\n   \n\n", ["no text"]),
    ],
    ids=["not-utf8", "empty", "blank-lines"],
)
def test_fertility_on_a_bad_text_file(content, must, cli, bi_model, earlier_out, tmp_path):
    path = tmp_path / "hin_Deva.devtest"
    path.write_bytes(content)
    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    before = snapshot(out)
    res = cli("fertility", bi_model, "--parallel", path, "--out", out)
    assert_one_line_error(res, path, *must)
    assert_intact(out, before)  # no fertility.csv, nothing of the earlier sweep touched


def test_fertility_on_a_good_text_file(cli, bi_model, tmp_path):
    """Negative control: one sentence per line, UTF-8 (a BOM dropped), is counted."""
    for name, text in (
        ("eng_Latn.devtest", "The people say hello.\n"),
        ("hin_Deva.devtest", "\ufeffलोग नमस्ते कहते हैं।\n"),
    ):
        (tmp_path / name).write_text(text, encoding="utf-8")
    res = cli(
        "fertility", bi_model, "--out", tmp_path / "OUT",
        "--parallel", tmp_path / "eng_Latn.devtest", "--parallel", tmp_path / "hin_Deva.devtest",
    )  # fmt: skip
    assert res.code == 0, res.err[-2000:]
    import pandas as pd

    table = pd.read_csv(tmp_path / "OUT" / "results" / "fertility.csv")
    assert table["fertility"].notna().all() and set(table["language"]) == {"en", "hi"}


# ---------------------------------------------------------------- probe at a layer that is not cached


def test_probe_at_an_uncached_layer_lists_the_cached_ones(cli, earlier_out, tmp_path):
    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    before = snapshot(out)
    res = cli("probe", out, "--study", "pressure", "--target", "flipped", "--layer", "7", "--shuffles", "2")
    assert_one_line_error(res, "layer 7", "cached: layer(s) 3", "--layer 7")
    assert_intact(out, before)
    # control: the cached layer fits
    assert (
        cli(
            "probe",
            out,
            "--study",
            "pressure",
            "--target",
            "planted",
            "--layer",
            "3",
            "--folds",
            "2",
            "--shuffles",
            "2",
        ).code
        == 0
    )
