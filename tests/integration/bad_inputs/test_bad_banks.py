"""Bank files of all three studies (pressure, classify, cloze): each malformed file is one line
on stderr naming the file, row and field, exit code 2, and the earlier sweep in OUT is untouched.
A BOM and CRLF line ends are accepted and hash like the clean file."""

from __future__ import annotations

import pytest

from ._util import (
    CLASSIFY,
    CLOZE,
    HUGE,
    PRESSURE,
    assert_intact,
    assert_one_line_error,
    bytes_with_bad_byte,
    csv_bytes,
    edit,
    jsonl,
    log_bytes,
    snapshot,
)


# id, study, file name, content, what the error must name besides the path
BANK_CASES = [
    # pressure (project layout, ETHICS CSV)
    (
        "pressure-missing-column",
        "pressure",
        "bank.jsonl",
        jsonl([{k: v for k, v in r.items() if k != "gold"} for r in PRESSURE]),
        ["gold"],
    ),
    ("pressure-missing-field-row3", "pressure", "bank.jsonl", jsonl(edit(PRESSURE, 2, text=None)), ["row 3", "text"]),
    ("pressure-empty-text", "pressure", "bank.jsonl", jsonl(edit(PRESSURE, 1, text="   ")), ["row 2", "text"]),
    (
        "pressure-unknown-label",
        "pressure",
        "bank.csv",
        csv_bytes(edit(PRESSURE, 1, gold="maybe")),
        ["row 3", "gold", "maybe"],
    ),
    ("pressure-mixed-labels", "pressure", "bank.jsonl", jsonl(edit(PRESSURE, 2, gold="true")), ["row 3", "gold"]),
    (
        "pressure-duplicate-id",
        "pressure",
        "bank.jsonl",
        jsonl(edit(PRESSURE, 2, item_id="m1")),
        ["row 3", "item_id", "m1"],
    ),
    ("pressure-not-utf8", "pressure", "bank.jsonl", bytes_with_bad_byte(PRESSURE, 1, "text"), ["row 2", "UTF-8"]),
    ("pressure-huge-field", "pressure", "bank.jsonl", jsonl(edit(PRESSURE, 1, text=HUGE)), ["row 2", "text"]),
    (
        "pressure-invalid-json-row",
        "pressure",
        "bank.jsonl",
        jsonl(PRESSURE[:1]) + b'{"item_id": "m2", "text": "oops"\n' + jsonl(PRESSURE[2:]),
        ["row 2", "JSON"],
    ),
    (
        "pressure-csv-extra-field",
        "pressure",
        "bank.csv",
        csv_bytes(PRESSURE) + b"m4,A fourth account.,wrong,surplus\n",
        ["row 5"],
    ),
    ("pressure-empty-file", "pressure", "bank.jsonl", b"\n\n", ["no rows"]),
    (
        "pressure-ethics-unknown-label",
        "pressure",
        "ethics.csv",
        b"label,input\n1,I kicked a dog.\n2,I fed a cat.\n",
        ["row 3", "label"],
    ),
    # classify (conversational layout)
    (
        "classify-missing-field",
        "classify",
        "conv.jsonl",
        jsonl(edit(CLASSIFY, 0, five_label=None)),
        ["row 1", "five_label"],
    ),
    ("classify-empty-comment", "classify", "conv.jsonl", jsonl(edit(CLASSIFY, 1, comment="")), ["row 2", "comment"]),
    (
        "classify-unknown-label",
        "classify",
        "conv.jsonl",
        jsonl(edit(CLASSIFY, 1, five_label="Sarcasm")),
        ["row 2", "five_label", "Sarcasm"],
    ),
    # a binary_label that contradicts the collapsed five_label is accepted (BenSyc annotated them
    # separately; warned and counted, tests/unit/test_validity_classify.py); one that is not 0/1 is not
    (
        "classify-binary-not-0-1",
        "classify",
        "conv.jsonl",
        jsonl(edit(CLASSIFY, 1, binary_label=2)),
        ["row 2", "binary_label"],
    ),
    (
        "classify-unknown-field",
        "classify",
        "conv.csv",
        csv_bytes(edit(CLASSIFY, 0, notes="x"), list(CLASSIFY[0]) + ["notes"]),
        ["row 2", "notes"],
    ),
    (
        "classify-unknown-language",
        "classify",
        "conv.jsonl",
        jsonl(edit(CLASSIFY, 2, language_form="klingon")),
        ["row 3", "language_form", "klingon"],
    ),
    (
        "classify-duplicate-id",
        "classify",
        "conv.jsonl",
        jsonl(edit(CLASSIFY, 2, item_id="c1")),
        ["row 3", "item_id", "c1"],
    ),
    (
        "classify-not-utf8",
        "classify",
        "conv.csv",
        bytes_with_bad_byte(CLASSIFY, 1, "comment", as_csv=True),
        ["row 3", "UTF-8"],
    ),
    ("classify-huge-field", "classify", "conv.jsonl", jsonl(edit(CLASSIFY, 0, body=HUGE)), ["row 1", "body"]),
    # cloze (project layout)
    (
        "cloze-missing-column",
        "cloze",
        "cloze.jsonl",
        jsonl([{k: v for k, v in r.items() if k != "anti_stereotype"} for r in CLOZE]),
        ["anti_stereotype"],
    ),
    ("cloze-empty-context", "cloze", "cloze.jsonl", jsonl(edit(CLOZE, 1, context="")), ["row 2", "context"]),
    (
        "cloze-unknown-language",
        "cloze",
        "cloze.csv",
        csv_bytes(edit(CLOZE, 2, language="xx")),
        ["row 4", "language", "xx"],
    ),
    (
        "cloze-unknown-axis",
        "cloze",
        "cloze.jsonl",
        jsonl(edit(CLOZE, 2, axis="astrology")),
        ["row 3", "axis", "astrology"],
    ),
    ("cloze-duplicate-id", "cloze", "cloze.jsonl", jsonl(edit(CLOZE, 2, prompt_id="p1")), ["row 3", "prompt_id", "p1"]),
    (
        "cloze-two-blanks",
        "cloze",
        "cloze.jsonl",
        jsonl(edit(CLOZE, 0, context="The ___ are ___.")),
        ["row 1", "context"],
    ),
    (
        "cloze-identical-completions",
        "cloze",
        "cloze.jsonl",
        jsonl(edit(CLOZE, 2, anti_stereotype="violent")),
        ["row 3", "stereotype"],
    ),
    ("cloze-not-utf8", "cloze", "cloze.jsonl", bytes_with_bad_byte(CLOZE, 2, "context"), ["row 3", "UTF-8"]),
    ("cloze-huge-field", "cloze", "cloze.jsonl", jsonl(edit(CLOZE, 2, context=HUGE + " ___")), ["row 3", "context"]),
]


def _params():
    for cid, study, name, content, must in BANK_CASES:
        yield pytest.param(study, name, content, must, id=cid)


@pytest.mark.parametrize("study,name,content,must", list(_params()))
def test_bad_bank_is_one_line_error(study, name, content, must, cli, bi_model, earlier_out, tmp_path):
    path = tmp_path / name
    path.write_bytes(content)
    before, log = snapshot(earlier_out), log_bytes(earlier_out)
    res = cli(
        "sweep",
        bi_model,
        "--study",
        study,
        "--bank",
        path,
        "--out",
        earlier_out,
        "--max-items",
        "2",
        "--threads",
        "1",
        "--quiet",
    )
    assert_one_line_error(res, path, *must)
    assert_intact(earlier_out, before, log)


def test_numeric_gold_is_read_or_refused_in_one_line(cli, bi_model, tmp_path):
    """gold 1/0 is in pressure.MORAL (1 = wrong) but not in the moral/factual detection: it must load
    as a moral bank or be refused in one line, never a traceback."""
    path = tmp_path / "numeric.jsonl"
    path.write_bytes(jsonl([dict(r, gold="1" if r["gold"] == "wrong" else "0") for r in PRESSURE]))
    res = cli("sweep", bi_model, "--study", "pressure", "--bank", path, "--out", tmp_path / "out", "--dry-run")
    if res.code != 0 or res.exc is not None:
        assert_one_line_error(res, path, "gold")


def test_missing_bank_file(cli, bi_model, earlier_out, tmp_path):
    before = snapshot(earlier_out)
    missing = tmp_path / "nowhere" / "bank.jsonl"
    res = cli("sweep", bi_model, "--study", "pressure", "--bank", missing, "--out", earlier_out, "--quiet")
    assert_one_line_error(res, missing, "does not exist")
    assert_intact(earlier_out, before)


# ---------------------------------------------------------------- accepted: BOM and CRLF

LOADERS = {
    "pressure": ("interp.studies.pressure", "load_pressure_bank", PRESSURE),
    "classify": ("interp.studies.classify", "load_conversational_bank", CLASSIFY),
    "cloze": ("interp.studies.cloze", "load_cloze_bank", CLOZE),
}
VARIANTS = {
    "bom": lambda b: b"\xef\xbb\xbf" + b,
    "crlf": lambda b: b.replace(b"\n", b"\r\n"),
    "bom+crlf": lambda b: b"\xef\xbb\xbf" + b.replace(b"\n", b"\r\n"),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("study", list(LOADERS))
def test_bom_and_crlf_are_accepted_and_hash_like_the_clean_file(study, fmt, variant, tmp_path):
    import importlib

    import pandas as pd

    module, fn, rows = LOADERS[study]
    load = getattr(importlib.import_module(module), fn)
    clean = jsonl(rows) if fmt == "jsonl" else csv_bytes(rows)
    (tmp_path / "clean").mkdir()
    (tmp_path / variant).mkdir()
    a, b = tmp_path / "clean" / f"bank.{fmt}", tmp_path / variant / f"bank.{fmt}"
    a.write_bytes(clean)
    b.write_bytes(VARIANTS[variant](clean))
    ref, got = load(a), load(b)
    assert len(got) == len(rows)
    assert got.hash == ref.hash
    pd.testing.assert_frame_equal(got.items, ref.items)
    # no stray "\r" or BOM in any value or column name
    assert not any("\r" in str(v) or "\ufeff" in str(v) for v in got.items.to_numpy().ravel())
    assert not any("\ufeff" in str(c) for c in got.items.columns)


def test_bom_crlf_bank_plans_the_same_unit_as_the_clean_file(cli, bi_model, tmp_path):
    """End to end: the dry-run plan (unit identity hash) is the same for both files."""
    plans = []
    for variant, data in (("clean", jsonl(PRESSURE)), ("dirty", VARIANTS["bom+crlf"](jsonl(PRESSURE)))):
        (tmp_path / variant).mkdir()
        path = tmp_path / variant / "mine.jsonl"
        path.write_bytes(data)
        res = cli(
            "sweep",
            bi_model,
            "--study",
            "pressure",
            "--bank",
            path,
            "--out",
            tmp_path / f"out-{variant}",
            "--dry-run",
            "--quiet",
        )
        assert res.code == 0 and res.exc is None, res.err
        plans.append(res.out)
    assert plans[0] == plans[1] and "todo" in plans[0]
