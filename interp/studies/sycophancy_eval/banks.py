"""Sycophancy-eval banks (Sharma et al. 2023, the files of meg-tong/sycophancy-eval), read from
the user's own copies: `are_you_sure.jsonl`, `answer.jsonl`, `feedback.jsonl`.

Every line is one conversation: `prompt` (a list of {"type": "human" | "ai", "content"}
messages; a trailing "ai" message is the start of the reply, e.g. "The answer is ("), `base`
(the question data) and `metadata` (the prompt template the line was written from).

- are_you_sure: one line per question. Multiple choice: base `correct_letter` and `letters`
  ("ABCD"; taken from the "(A) ..." lines of base `answers` when absent), optionally
  `wrong_letter`. Free form: base `correct_answer` and `incorrect_answer`. A line with neither
  cannot be read as a forced choice and is left out (a warning counts them; no readable line is
  an error).
- answer: four lines per question, told apart by metadata `prompt_template`: "{question}",
  "... I don't think the answer is {correct_answer}, ...", "... I think the answer is
  {incorrect_answer} ...", "... I think the answer is {correct_answer} ..."; base `question`,
  `correct_answer`, `incorrect_answer`.
- feedback: five lines per text, told apart by metadata `prompt_template_type`: "" (none),
  "I really like", "I really dislike", "I wrote", "I did not write"; base `dataset` and the
  text's fields.

Lines with the same `base` are one item (answer, feedback). Item table (one row per line):
item_id, domain (are_you_sure / answer / feedback), dataset, condition, messages (JSON list of
{"role", "content"}, the reply's start removed), prefix (that start, "" when the line has none),
labels and options (JSON lists: the letters, or "correct" / "incorrect" and the two answers;
empty for feedback, whose options the study's template gives), gold, wrong (the planted wrong
label of are_you_sure), row. Errors name the file, row and field.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any

import pandas as pd

from interp.banks import MAX_FIELD_CHARS, Bank, BankFormat, Sniffed, bank_hash, register_format, resolve, text_field
from interp.core.errors import BankError

log = logging.getLogger("interp.banks")

NAME = "sycophancy_eval"  # the study's name, under which its bank formats are registered
ITEM_COLUMNS = (
    "item_id",
    "domain",
    "dataset",
    "condition",
    "messages",
    "prefix",
    "labels",
    "options",
    "gold",
    "wrong",
    "row",
)
ROLES = {"human": "user", "ai": "assistant"}
# answer.jsonl: the conditions as their prompt templates write them (checked in this order)
ANSWER_CONDITIONS = (
    ("doubt_correct", "don't think the answer is {correct_answer}"),
    ("think_incorrect", "think the answer is {incorrect_answer}"),
    ("think_correct", "think the answer is {correct_answer}"),
)
FEEDBACK_CONDITIONS = {
    "": "neutral",
    "i really like": "like",
    "i really dislike": "dislike",
    "i wrote": "wrote",
    "i did not write": "did_not_write",
}
_LETTER_LINE = re.compile(r"\(([A-Z])\)")


def _object(path: Path, n: int, rec: dict, field: str, *, optional: bool = False) -> dict:
    value = rec.get(field)
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise BankError(f"{path}: row {n}: field {field} must be a JSON object (got {type(value).__name__})")
    return value


def _content(path: Path, n: int, value: Any, field: str) -> str:
    """A message's text as written (a reply's start keeps its spacing); control characters refused."""
    if not isinstance(value, str) or not value.strip():
        raise BankError(f"{path}: row {n}: field {field} is empty or not a string")
    if len(value) > MAX_FIELD_CHARS:
        raise BankError(f"{path}: row {n}: field {field} is {len(value)} characters (limit {MAX_FIELD_CHARS})")
    text_field(path, n, {field: value}, field)
    return value


def messages_of(path: Path, n: int, rec: dict) -> tuple[list[dict[str, str]], str]:
    """(the conversation as chat messages, the reply's start or "") from field `prompt`."""
    prompt = rec.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise BankError(f"{path}: row {n}: field prompt must be a non-empty list of messages")
    out = []
    for i, m in enumerate(prompt):
        if not isinstance(m, dict):
            raise BankError(f"{path}: row {n}: field prompt[{i}] must be an object with type and content")
        kind = m.get("type")
        if kind not in ROLES:
            raise BankError(
                f"{path}: row {n}: field prompt[{i}].type has unknown value {kind!r} (expected human or ai)"
            )
        out.append({"role": ROLES[kind], "content": _content(path, n, m.get("content"), f"prompt[{i}].content")})
    prefix = out.pop()["content"] if out[-1]["role"] == "assistant" else ""
    if not out or out[0]["role"] != "user":
        raise BankError(f"{path}: row {n}: field prompt must start with a human message")
    return out, prefix


def _base_text(path: Path, n: int, base: dict, key: str) -> str:
    return text_field(path, n, {f"base.{key}": base.get(key)}, f"base.{key}")


def _dataset(path: Path, n: int, base: dict) -> str:
    return text_field(path, n, {"base.dataset": base.get("dataset", "")}, "base.dataset", optional=True) or "-"


def _item_key(base: dict) -> str:
    return json.dumps(base, sort_keys=True, ensure_ascii=False)


def _row(**fields: Any) -> dict:
    fields["labels"] = json.dumps(fields.get("labels", []), ensure_ascii=False)
    fields["options"] = json.dumps(fields.get("options", []), ensure_ascii=False)
    return {c: fields.get(c, "") for c in ITEM_COLUMNS}


def _bank(path: Path, recs: list[dict]) -> Bank:
    items = pd.DataFrame(recs, columns=list(ITEM_COLUMNS))
    items["row"] = items["row"].astype("int64")
    return Bank(name=path.stem, kind=NAME, items=items, hash=bank_hash(items), source=str(path))


def _grouped_ids(keys: list[str], datasets: list[str], rows: list[int]) -> list[str]:
    """One id per distinct base: its dataset and the row of its first line."""
    first: dict[str, str] = {}
    for k, d, n in zip(keys, datasets, rows):
        first.setdefault(k, f"{d}-{n}")
    return [first[k] for k in keys]


# ---------------------------------------------------------------- are_you_sure.jsonl


def letters_of(path: Path, n: int, base: dict) -> str:
    """The option letters of a multiple-choice line: base `letters`, else those of base `answers`."""
    letters = base.get("letters")
    if letters is None and isinstance(base.get("answers"), str):
        letters = "".join(dict.fromkeys(_LETTER_LINE.findall(base["answers"])))
    if not isinstance(letters, str) or not re.fullmatch(r"[A-Z]{2,26}", letters) or len(set(letters)) != len(letters):
        raise BankError(
            f"{path}: row {n}: field base.letters must be two or more distinct capital letters (got {letters!r})"
        )
    return letters


def wrong_letter(letters: str, correct: str, key: str, given: Any = None) -> str:
    """The wrong letter planted as the first answer: base `wrong_letter` when the file gives a
    valid one; else one of the other letters chosen by a hash of the item (not a position, and the
    same on every checkpoint)."""
    if isinstance(given, str) and given in letters and given != correct:
        return given
    others = [x for x in letters if x != correct]
    return others[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(others)]


def _are_you_sure(path: Path, rows) -> Bank:
    recs, left_out = [], []
    for n, r in rows:
        messages, prefix = messages_of(path, n, r)
        base = _object(path, n, r, "base")
        dataset = _dataset(path, n, base)
        common = dict(
            domain="are_you_sure",
            dataset=dataset,
            condition="question",
            messages=json.dumps(messages, ensure_ascii=False),
            prefix=prefix,
            row=n,
            item_id=f"{dataset}-{n}",
        )
        if base.get("correct_letter") is not None:
            letters = letters_of(path, n, base)
            correct = _base_text(path, n, base, "correct_letter")
            if correct not in letters:
                raise BankError(
                    f"{path}: row {n}: field base.correct_letter {correct!r} is not one of the letters {letters}"
                )
            wrong = wrong_letter(letters, correct, _item_key(base), base.get("wrong_letter"))
            recs.append(_row(**common, labels=list(letters), options=list(letters), gold=correct, wrong=wrong))
        elif base.get("correct_answer") and base.get("incorrect_answer"):
            answers = [_base_text(path, n, base, "correct_answer"), _base_text(path, n, base, "incorrect_answer")]
            if answers[0].lower() == answers[1].lower():
                raise BankError(f"{path}: row {n}: fields base.correct_answer and base.incorrect_answer are the same")
            recs.append(
                _row(**common, labels=["correct", "incorrect"], options=answers, gold="correct", wrong="incorrect")
            )
        else:
            left_out.append(n)
    if not recs:
        raise BankError(
            f"{path}: row {left_out[0]}: no line can be read as a forced choice (field base.correct_letter, or "
            "base.correct_answer with base.incorrect_answer, is missing on every line)"
        )
    if left_out:
        log.warning(
            "%s: %d line(s) have neither base.correct_letter nor base.correct_answer with base.incorrect_answer "
            "and are left out (rows %s%s)",
            path,
            len(left_out),
            ", ".join(map(str, left_out[:10])),
            " ..." if len(left_out) > 10 else "",
        )
    return _bank(path, recs)


# ---------------------------------------------------------------- answer.jsonl


def answer_condition(path: Path, n: int, metadata: dict) -> str:
    template = metadata.get("prompt_template")
    if not isinstance(template, str) or not template.strip():
        raise BankError(f"{path}: row {n}: field metadata.prompt_template is empty")
    text = template.replace("\u2019", "'")
    if text.strip() == "{question}":
        return "neutral"
    for condition, marker in ANSWER_CONDITIONS:
        if marker in text:
            return condition
    raise BankError(
        f"{path}: row {n}: field metadata.prompt_template has an unknown template {template[:80]!r} (expected "
        "{question} alone, or with 'I think the answer is {correct_answer}' / '{incorrect_answer}' or "
        "'I don't think the answer is {correct_answer}')"
    )


def _answers_of(path: Path, n: int, base: dict) -> dict:
    _base_text(path, n, base, "question")
    answers = [_base_text(path, n, base, "correct_answer"), _base_text(path, n, base, "incorrect_answer")]
    if answers[0].lower() == answers[1].lower():
        raise BankError(f"{path}: row {n}: fields base.correct_answer and base.incorrect_answer are the same")
    return {"labels": ["correct", "incorrect"], "options": answers, "gold": "correct"}


def _stated(path: Path, rows, domain: str, condition_of, fields_of) -> Bank:
    """answer / feedback: one row per line, the lines with one `base` one item."""
    recs, keys = [], []
    for n, r in rows:
        messages, prefix = messages_of(path, n, r)
        base = _object(path, n, r, "base")
        if not base:
            raise BankError(f"{path}: row {n}: field base is empty")
        condition = condition_of(path, n, _object(path, n, r, "metadata"))
        fields = fields_of(path, n, base)
        keys.append(_item_key(base))
        messages = json.dumps(messages, ensure_ascii=False)
        recs.append(
            _row(
                domain=domain,
                dataset=_dataset(path, n, base),
                condition=condition,
                messages=messages,
                prefix=prefix,
                row=n,
                **fields,
            )
        )
    for rec, item in zip(recs, _grouped_ids(keys, [r["dataset"] for r in recs], [r["row"] for r in recs])):
        rec["item_id"] = item
    return _bank(path, recs)


# ---------------------------------------------------------------- feedback.jsonl


def feedback_condition(path: Path, n: int, metadata: dict) -> str:
    if "prompt_template_type" not in metadata:
        raise BankError(f"{path}: row {n}: field metadata.prompt_template_type is missing")
    kind = metadata["prompt_template_type"]
    key = str(kind).strip().lower() if isinstance(kind, str) else None
    if key not in FEEDBACK_CONDITIONS:
        raise BankError(
            f"{path}: row {n}: field metadata.prompt_template_type has unknown value {kind!r} (expected "
            "'', 'I really like', 'I really dislike', 'I wrote' or 'I did not write')"
        )
    return FEEDBACK_CONDITIONS[key]


# ---------------------------------------------------------------- formats


def _has_layout(f: Sniffed) -> bool:
    return {"prompt", "base"} <= f.columns


def _metadata(f: Sniffed) -> list[dict]:
    return [r.get("metadata") for _, r in f.rows if isinstance(r.get("metadata"), dict)]


def _is_feedback(f: Sniffed) -> bool:
    return _has_layout(f) and (f.path.stem == "feedback" or any("prompt_template_type" in m for m in _metadata(f)))


def _is_answer(f: Sniffed) -> bool:
    if not _has_layout(f):
        return False
    templates = [str(m.get("prompt_template", "")).replace("\u2019", "'") for m in _metadata(f)]
    return f.path.stem == "answer" or any(marker in t for t in templates for _, marker in ANSWER_CONDITIONS)


for _fmt in (
    BankFormat(
        "sycophancy_feedback",
        NAME,
        _is_feedback,
        lambda f: _stated(f.path, f.rows, "feedback", feedback_condition, lambda *a: {}),
        "sycophancy-eval feedback.jsonl",
    ),
    BankFormat(
        "sycophancy_answer",
        NAME,
        _is_answer,
        lambda f: _stated(f.path, f.rows, "answer", answer_condition, _answers_of),
        "sycophancy-eval answer.jsonl",
    ),
    BankFormat(
        "are_you_sure",
        NAME,
        _has_layout,
        lambda f: _are_you_sure(f.path, f.rows),
        "sycophancy-eval are_you_sure.jsonl (prompt, base, metadata)",
    ),
):
    register_format(_fmt)


def load_sycophancy_eval_bank(ref: str | Path) -> Bank:
    """are_you_sure.jsonl, answer.jsonl or feedback.jsonl (layout recognised by name and fields),
    or FORMAT:PATH with FORMAT are_you_sure, sycophancy_answer or sycophancy_feedback."""
    return resolve(ref, NAME)
