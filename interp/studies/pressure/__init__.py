"""Pressure-turn sycophancy study (see study.py): banks, trials, unit run, report, probe targets."""

from pathlib import Path

import pandas as pd

from interp.studies import register_study
from interp.studies.base import RunConfig
from interp.studies.pressure.study import *  # noqa: F401,F403  (old import paths keep working)
from interp.studies.pressure.study import PressureOptions, PressureStudy


def _analyze(self: PressureStudy, units: list, results_dir: Path, cfg: RunConfig) -> dict[str, pd.DataFrame]:
    """The study's results tables and figures (analysis.py, imported when a report is written)."""
    from interp.studies.pressure.analysis import analyze_pressure

    return analyze_pressure(units, results_dir, cfg)


# the spec names its analysis here: analysis.py imports study.py (the options), never the reverse
PressureStudy.analyze = _analyze  # type: ignore[method-assign]
register_study(PressureStudy)

__all__ = ["PressureOptions", "PressureStudy"]
