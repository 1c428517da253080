"""The conversational bank (BenSyc's layout): one file format, read and validated; errors name
the file, row and field. `bank_counts` gives the item counts the report shows."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses.classify_metrics import FIVE_LABELS, SYCOPHANTIC
from interp.banks import (
    Bank,
    BankFormat,
    bank_hash,
    choice_field,
    read_rows,
    register_format,
    text_field,
    unique_ids,
)
from interp.core.errors import BankError

log = logging.getLogger("interp.banks")

NAME = "classify"  # the study's name, under which its bank format is registered

BANK_FIELDS = (
    "item_id",
    "title",
    "body",
    "comment",
    "binary_label",
    "five_label",
    "community",
    "language_form",
    "split",
)
OPTIONAL_FIELDS = ("community",)
LANGUAGE_FORMS = ("bengali", "banglish", "english", "code_mixed")
_FIVE_ALLOWED = {lab.lower(): lab for lab in FIVE_LABELS}
_LANG_ALLOWED = {
    **{f: f for f in LANGUAGE_FORMS},
    "code-mixed": "code_mixed",
    "code mixed": "code_mixed",
    "codemixed": "code_mixed",
    "bangla": "bengali",
}


def _binary_value(path: Path, n: int, rec: dict) -> int:
    raw = rec.get("binary_label")
    value = text_field(path, n, rec, "binary_label", number=True)  # raises on a missing or empty value
    if isinstance(raw, bool):  # JSON true/false is not 0/1: refuse rather than guess
        value = repr(raw)
    elif isinstance(raw, (int, float)) and float(raw) in (0.0, 1.0):
        return int(raw)
    if value in ("0", "1"):
        return int(value)
    raise BankError(f"{path}: row {n}: field binary_label has unknown value {raw!r} (expected 0 or 1)")


def _conversational_layout(path: Path, rows: list[tuple[int, dict]] | None = None) -> Bank:
    rows = read_rows(path) if rows is None else rows
    cols: dict[str, list[Any]] = {f: [] for f in BANK_FIELDS}
    disagree: list[int] = []
    for n, rec in rows:
        extra = [k for k in rec if k not in BANK_FIELDS]
        if extra:
            raise BankError(
                f"{path}: row {n}: unknown field(s) {', '.join(map(str, extra))} "
                f"(a conversational bank has exactly {', '.join(BANK_FIELDS)})"
            )
        missing = [f for f in BANK_FIELDS if f not in rec and f not in OPTIONAL_FIELDS]
        if missing:
            raise BankError(f"{path}: row {n}: missing field(s) {', '.join(missing)}")
        for f in ("item_id", "title", "body", "comment", "split"):
            cols[f].append(text_field(path, n, rec, f, number=f == "item_id"))
        cols["community"].append(text_field(path, n, rec, "community", optional=True))
        five = choice_field(path, n, rec, "five_label", _FIVE_ALLOWED)
        binary = _binary_value(path, n, rec)
        if binary != int(five in SYCOPHANTIC):
            # BenSyc annotated the binary label in its own stage (Sec. 3.2.1, App. C.4), so it may
            # differ from the collapsed five-level label: keep both, warn, count (bank_counts)
            disagree.append(n)
        cols["five_label"].append(five)
        cols["binary_label"].append(binary)
        cols["language_form"].append(choice_field(path, n, rec, "language_form", _LANG_ALLOWED))
    unique_ids(path, rows, cols["item_id"])
    if disagree:
        shown = ", ".join(map(str, disagree[:10])) + (" ..." if len(disagree) > 10 else "")
        log.warning(
            "%s: %d row(s) have a binary_label that differs from the collapsed five_label "
            "(Support, Validation, Escalation = 1), kept as annotated: rows %s",
            path,
            len(disagree),
            shown,
        )
    items = pd.DataFrame(cols, columns=list(BANK_FIELDS))
    items["binary_label"] = items["binary_label"].astype(np.int64)
    bank = Bank(name=path.stem, kind="conversational", items=items, hash=bank_hash(items), source=str(path))
    log.info(
        "conversational bank %s: %d items; %s",
        path,
        len(bank),
        "; ".join(f"{f}: {bank.counts(f)}" for f in ("five_label", "binary_label", "language_form", "split")),
    )
    return bank


def load_conversational_bank(ref: str | Path) -> Bank:
    """The shipped bank ("conversational") or a user's JSONL/CSV with exactly the fields
    item_id, title, body, comment, binary_label, five_label, community (optional), language_form,
    split. five_label is one of the five taxonomy names (any case); binary_label is 0/1. BenSyc
    annotated the binary label separately from the five levels, so a binary_label that differs
    from the collapsed five_label (Support, Validation, Escalation = 1) is kept as given, with a
    warning, and counted by :func:`bank_counts` (field binary_vs_five); the binary task's gold and
    the ``sycophantic`` probe target use binary_label, five_as_binary the collapsed five_label.
    language_form is one of bengali, banglish, english, code_mixed. Errors name the file, row
    and field."""
    from interp.studies import resolve_bank

    return resolve_bank(ref, "classify")


# the only conversational layout: every file is read with it (errors name the missing fields)
register_format(
    BankFormat(
        "conversational", NAME, lambda f: True, lambda f: _conversational_layout(f.path, f.rows), ",".join(BANK_FIELDS)
    )
)


def bank_counts(bank: Bank) -> pd.DataFrame:
    """Item counts per value of five_label, binary_label, language_form, split and community,
    and field binary_vs_five (agree / disagree: binary_label against the collapsed five_label):
    columns field, value, count (long form)."""
    rows = []
    for f in ("five_label", "binary_label", "language_form", "split", "community"):
        for value, count in bank.counts(f).items():
            rows.append({"field": f, "value": value, "count": count})
    collapsed = bank.items["five_label"].isin(SYCOPHANTIC).astype(int)
    n_dis = int((bank.items["binary_label"].astype(int) != collapsed).sum())
    rows += [
        {"field": "binary_vs_five", "value": "agree", "count": len(bank.items) - n_dis},
        {"field": "binary_vs_five", "value": "disagree", "count": n_dis},
    ]
    return pd.DataFrame(rows, columns=["field", "value", "count"])
