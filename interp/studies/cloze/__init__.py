"""Cross-lingual cloze bias study (see study.py)."""

from pathlib import Path

import pandas as pd

from interp.studies import register_study
from interp.studies.base import RunConfig
from interp.studies.cloze.study import *  # noqa: F401,F403  (old import paths keep working)
from interp.studies.cloze.study import ClozeOptions, ClozeStudy


def _analyze(self: ClozeStudy, units: list, results_dir: Path, cfg: RunConfig) -> dict[str, pd.DataFrame]:
    """The study's results tables and figures (analysis.py, imported when a report is written)."""
    from interp.studies.cloze.analysis import analyze_cloze

    return analyze_cloze(units, results_dir, cfg)


# the spec names its analysis here: analysis.py imports study.py (the options), never the reverse
ClozeStudy.analyze = _analyze  # type: ignore[method-assign]
register_study(ClozeStudy)

__all__ = ["ClozeOptions", "ClozeStudy"]
