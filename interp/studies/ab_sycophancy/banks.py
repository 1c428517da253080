"""A/B sycophancy banks: the model-written-evals layout (Perez et al. 2022, the files lm-eval
runs as `sycophancy_on_nlp_survey`, `sycophancy_on_philpapers2020`,
`sycophancy_on_political_typology_quiz`), read from the user's own copy.

One JSON object per line: `question` (a user biography that states a view, then the question
with its lettered choices, ending "Answer:"), `answer_matching_behavior` (the choice that
agrees with the user's view, e.g. " (A)") and `answer_not_matching_behavior` (the other, a
string, or a list of strings in some files). Other fields (e.g. `user_affiliation`) are kept
out of the item. The answer strings are scored as written, leading space included, as lm-eval
scores them (`target_delimiter: ""`).

Item table: item_id, set, question, answers (JSON list: the matching answer first), n_options,
question_reversed / answers_reversed (the choice lines listed in reverse order with the same
letters, so each letter's content moves: the position-bias reading; "" where the question's
choice lines do not match the answers' letters). `set` comes from the file name
(sycophancy_on_<set>.jsonl); it picks lm-eval's prompt wording for that set.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from interp.banks import Bank, BankFormat, MAX_FIELD_CHARS, bank_hash, register_format, require_columns, resolve
from interp.banks import text_field
from interp.core.errors import BankError

NAME = "ab_sycophancy"  # the study's name, under which its bank format is registered
FORMAT = "mwe_sycophancy"
FIELDS = ("question", "answer_matching_behavior", "answer_not_matching_behavior")
ITEM_COLUMNS = ("item_id", "set", "question", "answers", "n_options", "question_reversed", "answers_reversed")
SETS = ("nlp_survey", "philpapers2020", "political_typology_quiz")
_LETTER = re.compile(r"\(([A-Z])\)")
_CHOICE_LINE = re.compile(r"^(\s*)\(([A-Z])\)(.*)$")


def set_of(path: Path) -> str:
    """The set a file holds, from its name: sycophancy_on_nlp_survey.jsonl -> nlp_survey; any
    other name: "other" (the default prompt)."""
    stem = path.stem.lower().removeprefix("sycophancy_on_")
    return stem if stem in SETS else "other"


def _answer(path: Path, n: int, value, field: str) -> str:
    """One answer string as written (its leading space is part of what is scored)."""
    if not isinstance(value, str):
        raise BankError(f"{path}: row {n}: field {field} must be a string (got {type(value).__name__})")
    if not value.strip():
        raise BankError(f"{path}: row {n}: field {field} is empty")
    if len(value) > MAX_FIELD_CHARS:
        raise BankError(f"{path}: row {n}: field {field} is {len(value)} characters (limit {MAX_FIELD_CHARS})")
    text_field(path, n, {field: value}, field)  # control characters
    return value


def _answers(path: Path, n: int, rec: dict) -> list[str]:
    matching = _answer(path, n, rec.get("answer_matching_behavior"), "answer_matching_behavior")
    raw = rec.get("answer_not_matching_behavior")
    field = "answer_not_matching_behavior"
    if isinstance(raw, list):
        if not raw:
            raise BankError(f"{path}: row {n}: field {field} is an empty list")
        others = [_answer(path, n, v, f"{field}[{i}]") for i, v in enumerate(raw)]
    else:
        others = [_answer(path, n, raw, field)]
    answers = [matching, *others]
    if len({a.strip() for a in answers}) != len(answers):
        raise BankError(f"{path}: row {n}: field {field} repeats an answer ({', '.join(map(repr, answers))})")
    return answers


def reverse_choices(question: str, answers: list[str]) -> tuple[str, list[str]] | None:
    """The question with its choice lines' contents listed in reverse under the same letters,
    and the answers relabelled to follow their content; None when the answers' letters are not
    exactly the question's choice lines (one line per letter, each letter once)."""
    letters = []
    for a in answers:
        found = _LETTER.findall(a)
        if len(found) != 1:
            return None
        letters.append(found[0])
    lines = question.split("\n")
    at = {}
    for i, line in enumerate(lines):
        m = _CHOICE_LINE.match(line)
        if m and m.group(2) in letters:
            if m.group(2) in at:
                return None
            at[m.group(2)] = i
    if set(at) != set(letters):
        return None
    order = sorted(letters, key=lambda x: at[x])  # letters as listed
    contents = {x: _CHOICE_LINE.match(lines[at[x]]).group(3) for x in order}
    moved = dict(zip(order, reversed(order)))  # content listed under x now sits under moved[x]
    out = list(lines)
    for x in order:
        m = _CHOICE_LINE.match(lines[at[moved[x]]])
        out[at[moved[x]]] = f"{m.group(1)}({moved[x]}){contents[x]}"
    relabelled = [_LETTER.sub(f"({moved[x]})", a, count=1) for a, x in zip(answers, letters)]
    return "\n".join(out), relabelled


def _mwe_layout(path: Path, rows) -> Bank:
    require_columns(path, rows, FIELDS)
    which = set_of(path)
    recs = []
    for n, r in rows:
        question = text_field(path, n, r, "question")
        answers = _answers(path, n, r)
        rev = reverse_choices(question, answers)
        recs.append(
            {
                "item_id": f"{which}-{n}",
                "set": which,
                "question": question,
                "answers": json.dumps(answers, ensure_ascii=False),
                "n_options": len(answers),
                "question_reversed": rev[0] if rev else "",
                "answers_reversed": json.dumps(rev[1], ensure_ascii=False) if rev else "",
            }
        )
    items = pd.DataFrame(recs, columns=list(ITEM_COLUMNS))
    return Bank(name=path.stem, kind=NAME, items=items, hash=bank_hash(items), source=str(path))


register_format(
    BankFormat(
        FORMAT,
        NAME,
        lambda f: set(FIELDS) <= f.columns,
        lambda f: _mwe_layout(f.path, f.rows),
        "model-written-evals " + ",".join(FIELDS),
    )
)


def load_ab_bank(ref: str | Path) -> Bank:
    """A model-written-evals sycophancy file (JSONL), or `mwe_sycophancy:PATH`."""
    return resolve(ref, NAME)
