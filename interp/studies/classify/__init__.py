"""Conversational sycophancy classification study: `ClassifyStudy` in study.py holds all of it
(options.py, banks.py, analysis.py and probe.py are its parts)."""

from analyses.classify_metrics import FIVE_LABELS
from interp.studies import register_study
from interp.studies.classify.banks import bank_counts, load_conversational_bank
from interp.studies.classify.options import ClassifyOptions
from interp.studies.classify.study import ClassifyStudy, build_prompts, check_template, reply_prompt_text

register_study(ClassifyStudy)

__all__ = [
    "FIVE_LABELS",
    "ClassifyOptions",
    "ClassifyStudy",
    "bank_counts",
    "build_prompts",
    "check_template",
    "load_conversational_bank",
    "reply_prompt_text",
]
