"""Cross-lingual cloze bias study (see study.py)."""

from interp.studies import register_study
from interp.studies.cloze.study import *  # noqa: F401,F403  (old import paths keep working)
from interp.studies.cloze.study import ClozeOptions, ClozeStudy

register_study(ClozeStudy)

__all__ = ["ClozeOptions", "ClozeStudy"]
