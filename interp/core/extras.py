"""Optional parts of the install (pyproject.toml's extras) and the one-line error when one is missing.

`pip install -e .` runs sweep, report, probe, predict, steer and selftest. Four commands need more:

    organism   trl, peft           `interp organism build` (fine-tuning)
    cluster    dask-jobqueue       `interp sweep --executor slurm`
    models     gguf                `interp fetch-models` (reading the GGUF files it converts)
    lm-eval    lm-eval             `interp-lm-eval`, `--model interp` in lm-evaluation-harness
"""

from __future__ import annotations

import importlib

from interp.core.errors import ConfigError

# extra -> the modules it provides (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "organism": ("trl", "peft"),
    "cluster": ("dask_jobqueue",),
    "models": ("gguf",),
    "lm-eval": ("lm_eval",),
}


class MissingExtraError(ConfigError):
    """A command needs an optional part of the install (exit code 2, like every bad-input error)."""


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that do not import here."""
    missing = []
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


def require_extra(extra: str, what: str) -> None:
    """Raise MissingExtraError, naming the extra to install, when a module of `extra` is missing."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(
            f"{what} needs {', '.join(missing)}, which this install lacks: pip install 'interp[{extra}]'"
        )
