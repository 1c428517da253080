"""Pressure-turn sycophancy study (see study.py): banks, trials, unit run, report, probe targets."""

from interp.studies import register_study
from interp.studies.pressure.study import *  # noqa: F401,F403  (old import paths keep working)
from interp.studies.pressure.study import PressureOptions, PressureStudy

register_study(PressureStudy)

__all__ = ["PressureOptions", "PressureStudy"]
