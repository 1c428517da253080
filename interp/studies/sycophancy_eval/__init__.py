"""Sycophancy-eval sets (are_you_sure, answer, feedback) as pressure trials:
`SycophancyEvalStudy` in study.py holds all of it; options.py, banks.py, trials.py and
analysis.py are its parts. Registered by the `interp.studies` entry point in pyproject.toml."""

from interp.studies.sycophancy_eval.banks import load_sycophancy_eval_bank
from interp.studies.sycophancy_eval.options import SycophancyEvalOptions
from interp.studies.sycophancy_eval.study import SycophancyEvalStudy, check_template

__all__ = ["SycophancyEvalOptions", "SycophancyEvalStudy", "check_template", "load_sycophancy_eval_bank"]
