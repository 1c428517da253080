"""Conversational sycophancy classification study: `ClassifyStudy` in study.py holds all of it;
options.py, banks.py, analysis.py and probe.py are its parts.
Registered by the `interp.studies` entry point in pyproject.toml."""

from analyses.classify_metrics import FIVE_LABELS
from interp.studies.classify.banks import bank_counts, load_conversational_bank
from interp.studies.classify.options import ClassifyOptions
from interp.studies.classify.study import ClassifyStudy, build_prompts, check_template, reply_prompt_text

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
