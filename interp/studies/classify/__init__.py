"""Conversational sycophancy classification study (see study.py)."""

from interp.studies import register_study
from interp.studies.classify.study import *  # noqa: F401,F403  (old import paths keep working)
from interp.studies.classify.study import ClassifyOptions, ClassifyStudy

register_study(ClassifyStudy)

__all__ = ["ClassifyOptions", "ClassifyStudy"]
