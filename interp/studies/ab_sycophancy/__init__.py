"""A/B sycophancy study (model-written-evals sets): `AbSycophancyStudy` in study.py holds all
of it; options.py, banks.py, analysis.py and probe.py are its parts. Registered by the
`interp.studies` entry point in pyproject.toml."""

from interp.studies.ab_sycophancy.banks import load_ab_bank, reverse_choices
from interp.studies.ab_sycophancy.options import AbOptions
from interp.studies.ab_sycophancy.study import AbSycophancyStudy, build_rows, check_template, render_prompt

__all__ = [
    "AbOptions",
    "AbSycophancyStudy",
    "build_rows",
    "check_template",
    "load_ab_bank",
    "render_prompt",
    "reverse_choices",
]
