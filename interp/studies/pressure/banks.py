"""Pressure banks: the project's layout (item_id, text, gold), ETHICS commonsense CSV and
TruthfulQA CSV, registered as bank formats of the study; one bank holds one domain (moral or
factual). Errors name the file, row and field."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from interp.banks import (
    Bank,
    BankFormat,
    bank_hash,
    choice_field,
    register_format,
    require_columns,
    text_field,
    unique_ids,
)
from interp.core.errors import BankError

NAME = "pressure"  # the study's name, under which its bank formats are registered

MORAL = {"wrong": "wrong", "acceptable": "acceptable", "1": "wrong", "0": "acceptable"}
FACTUAL = {"true": "true", "false": "false"}


def _own_layout(path: Path, rows) -> Bank:
    require_columns(path, rows, ("item_id", "text", "gold"))
    golds = {text_field(path, n, r, "gold", number=True).lower() for n, r in rows}
    kind = "moral" if golds <= set(MORAL) else "factual" if golds <= set(FACTUAL) else None
    if kind is None:
        unknown = [(n, r) for n, r in rows if str(r["gold"]).strip().lower() not in MORAL.keys() | FACTUAL.keys()]
        if unknown:
            n, r = unknown[0]
            raise BankError(
                f"{path}: row {n}: field gold has unknown value {r['gold']!r} (expected wrong/acceptable or true/false)"
            )
        n = next(n for n, r in rows if str(r["gold"]).strip().lower() in FACTUAL)
        raise BankError(f"{path}: row {n}: field gold mixes moral (wrong/acceptable) and factual (true/false) values")
    allowed = MORAL if kind == "moral" else FACTUAL
    items = pd.DataFrame(
        {
            "item_id": [text_field(path, n, r, "item_id", number=True) for n, r in rows],
            "text": [text_field(path, n, r, "text") for n, r in rows],
            "gold": [choice_field(path, n, r, "gold", allowed) for n, r in rows],
        }
    )
    unique_ids(path, rows, items["item_id"].tolist())
    items["domain"] = kind
    return Bank(name=path.stem, kind=NAME, items=items, hash=bank_hash(items), source=str(path))


def _ethics_layout(path: Path, rows) -> Bank:
    """ETHICS commonsense CSV: label,input,is_short,edited (label 1 = wrong)."""
    require_columns(path, rows, ("label", "input"))
    items = pd.DataFrame(
        {
            "item_id": [f"ethics-{n}" for n, _ in rows],
            "text": [text_field(path, n, r, "input") for n, r in rows],
            "gold": [choice_field(path, n, r, "label", {"1": "wrong", "0": "acceptable"}) for n, r in rows],
        }
    )
    items["domain"] = "moral"
    return Bank(name=path.stem, kind=NAME, items=items, hash=bank_hash(items), source=str(path))


def _split_answers(value: str) -> list[str]:
    return [a.strip() for a in value.split(";") if a.strip()]


def _truthfulqa_layout(path: Path, rows) -> Bank:
    """TruthfulQA CSV -> balanced claims: for question i, the best answer (true) when i is even,
    the first incorrect answer (false) when i is odd, so each question appears once."""
    require_columns(path, rows, ("Question", "Best Answer", "Incorrect Answers"))
    ids, texts, golds = [], [], []
    for k, (n, r) in enumerate(rows):
        q = text_field(path, n, r, "Question")
        if k % 2 == 0:
            answer, gold = text_field(path, n, r, "Best Answer"), "true"
        else:
            wrong = _split_answers(text_field(path, n, r, "Incorrect Answers"))
            if not wrong:
                raise BankError(f"{path}: row {n}: field Incorrect Answers is empty")
            answer, gold = wrong[0], "false"
        ids.append(f"tqa-{n}")
        texts.append(f"Q: {q} A: {answer}")
        golds.append(gold)
    items = pd.DataFrame({"item_id": ids, "text": texts, "gold": golds, "domain": "factual"})
    return Bank(name=path.stem, kind=NAME, items=items, hash=bank_hash(items), source=str(path))


def _one_domain(bank: Bank) -> Bank:
    if bank.items["domain"].nunique() != 1:
        raise BankError(f"{bank.source}: mixes moral and factual items")
    return bank


for _fmt in (
    BankFormat(
        "pressure",
        NAME,
        lambda f: {"item_id", "text", "gold"} <= f.columns,
        lambda f: _one_domain(_own_layout(f.path, f.rows)),
        "item_id,text,gold",
    ),
    BankFormat(
        "ethics",
        NAME,
        lambda f: {"label", "input"} <= f.columns,
        lambda f: _one_domain(_ethics_layout(f.path, f.rows)),
        "ETHICS label,input",
    ),
    BankFormat(
        "truthfulqa",
        NAME,
        lambda f: {"Question", "Best Answer"} <= f.columns,
        lambda f: _one_domain(_truthfulqa_layout(f.path, f.rows)),
        "TruthfulQA Question,Best Answer,...",
    ),
):
    register_format(_fmt)


def load_pressure_bank(ref: str | Path) -> Bank:
    """`moral`, `factual`, or a path in the project's layout, ETHICS CSV or TruthfulQA CSV."""
    from interp.studies import resolve_bank

    return resolve_bank(ref, NAME)
