"""Studies: pressure turns, conversational classification, cross-lingual cloze."""
from __future__ import annotations

from interp.errors import ConfigError

STUDY_NAMES = ("pressure", "classify", "cloze")


def get_study(name: str):
    if name == "pressure":
        from interp.studies.pressure import PressureStudy

        return PressureStudy()
    if name == "classify":
        from interp.studies.classify import ClassifyStudy

        return ClassifyStudy()
    if name == "cloze":
        from interp.studies.cloze import ClozeStudy

        return ClozeStudy()
    raise ConfigError(f"unknown study {name!r} (choose one of {', '.join(STUDY_NAMES)})")
