"""Cross-lingual cloze bias study: `ClozeStudy` in study.py holds all of it;
options.py, banks.py, analysis.py, probe.py and unit_loss.py are its parts.
Registered by the `interp.studies` entry point in pyproject.toml."""

from interp.studies.cloze.banks import (
    COMPLETIONS,
    ITEM_COLUMNS,
    load_cloze_bank,
    load_crows_pairs,
    load_indian_bhed,
    load_stereoset,
)
from interp.studies.cloze.options import ClozeOptions
from interp.studies.cloze.study import (
    ClozeStudy,
    check_template,
    continuation_texts,
    fertility_text,
    resolve_span,
    score_items,
)

__all__ = [
    "COMPLETIONS",
    "ITEM_COLUMNS",
    "ClozeOptions",
    "ClozeStudy",
    "check_template",
    "continuation_texts",
    "fertility_text",
    "load_cloze_bank",
    "load_crows_pairs",
    "load_indian_bhed",
    "load_stereoset",
    "resolve_span",
    "score_items",
]
