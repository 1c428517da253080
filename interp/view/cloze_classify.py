"""The cloze and classify pages: ABS by language x axis with its sentence triples; confusion
matrices with the examples of each cell."""

from __future__ import annotations

import pandas as pd

from cache.columns import read_columns
from interp.view.encode import records
from interp.view.sweep_files import SweepFiles

TEXT_COLUMNS = ("prompt_id", "language", "context", "stereotype", "anti_stereotype", "meaningless")
ABS_COLUMNS = ["checkpoint", "bank", "language", "axis", "abs", "loss", "odds", "abs_token_mean", "n"]
COMPLETIONS = ("stereo", "anti", "meaningless")
SCORE_COLUMNS = [
    "bank",
    "prompt_id",
    "language",
    "axis",
    "group",
    "loss",
    "delta",
    *(f"nll_{c}" for c in COMPLETIONS),
    *(f"nll_{c}_{loss}" for c in COMPLETIONS for loss in ("sum", "token_mean", "byte_mean")),
    *(f"n_tokens_{c}" for c in COMPLETIONS),
    *(f"n_bytes_{c}" for c in COMPLETIONS),
]
PREDICTION_TEXT = ("title", "body", "comment", "text")


def cloze_payload(sw: SweepFiles) -> dict:
    """cloze_abs.csv as written (ABS per checkpoint, language and axis, under the loss in use)."""
    return {"abs": records(sw.table("cloze_abs.csv"), ABS_COLUMNS)}


def cloze_rows(sw: SweepFiles, column: int) -> dict:
    """Every sentence triple of one checkpoint: cloze_scores.csv's row and the unit's texts."""
    ck = sw.columns[column]["name"]
    scores = sw.table("cloze_scores.csv")
    rows = scores[scores["checkpoint"].astype(str) == ck] if scores is not None else pd.DataFrame()
    texts = []
    units = sw.units("cloze")
    for path in units[units["checkpoint"] == ck]["path"] if not units.empty else []:
        cols, _ = read_columns(path, "texts", TEXT_COLUMNS)
        texts.append(pd.DataFrame(cols))
    if texts and not rows.empty:
        t = pd.concat(texts).drop_duplicates(["prompt_id", "language"])
        rows = rows.merge(t, on=["prompt_id", "language"], how="left")
    return {"checkpoint": ck, "rows": records(rows, [*SCORE_COLUMNS, *TEXT_COLUMNS[2:]])}


def classify_payload(sw: SweepFiles) -> dict:
    """classify_confusion.csv as written: counts and row shares per checkpoint, task and order."""
    return {"confusion": records(sw.table("classify_confusion.csv"))}


def classify_rows(sw: SweepFiles, column: int) -> dict:
    """One checkpoint's predictions (classify_predictions.csv) with each example's text from the bank."""
    ck = sw.columns[column]["name"]
    preds = sw.table("classify_predictions.csv")
    rows = preds[preds["checkpoint"].astype(str) == ck].copy() if preds is not None else pd.DataFrame()
    for bank in rows["bank"].astype(str).unique() if not rows.empty else []:
        items = sw.bank_items("classify", bank)
        if items is None:
            continue
        keep = [c for c in PREDICTION_TEXT if c in items.columns]
        t = items.drop_duplicates("item_id").set_index("item_id")[keep]
        mask = rows["bank"].astype(str) == bank
        for c in keep:
            rows.loc[mask, c] = rows.loc[mask, "item_id"].astype(str).map(t[c])
    return {"checkpoint": ck, "rows": records(rows)}
