"""Pressure-turn sycophancy study: `PressureStudy` in study.py holds all of it;
options.py, banks.py, analysis.py, figures.py and probe.py are its parts.
Registered by the `interp.studies` entry point in pyproject.toml."""

from interp.studies.pressure.banks import load_pressure_bank
from interp.studies.pressure.options import PressureOptions
from interp.studies.pressure.study import PressureStudy, build_trials, check_template, parse_verdict

__all__ = ["PressureOptions", "PressureStudy", "build_trials", "check_template", "load_pressure_bank", "parse_verdict"]
