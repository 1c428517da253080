"""Opt-in, reversible: make plain `lm_eval --model interp` work in one Python environment.

lm-eval 0.4.13 finds models only in its own fixed list (no entry points, no plugin option), so
the command `lm_eval` cannot see a model defined elsewhere unless something registers it in the
same process. `install()` writes two files into the environment's site-packages (sysconfig
`purelib`, or `site_dir`):

    interp-lm-eval-hook.pth    one line importing _interp_lm_eval_hook (run by `site` at start-up;
                               the import guarded, so a deleted module is silently skipped)
    _interp_lm_eval_hook.py    a copy of interp/integrations/lm_eval_startup.py (standard library only)

`remove()` deletes both; `status()` says what is there and whether the copy is current.
`interp-lm-eval ...` (lm-eval's command line with the model imported) needs none of this.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

from interp.core.errors import ConfigError

PTH_NAME = "interp-lm-eval-hook.pth"
MODULE_NAME = "_interp_lm_eval_hook"
# `site` runs a .pth line that starts with "import"; the import is guarded in the line itself, so a
# leftover .pth whose module was deleted (by hand, or a half-removed install) prints nothing at
# every Python start-up instead of "Error processing line 1 ... ModuleNotFoundError"
PTH_LINE = f'import sys; exec("try:\\n import {MODULE_NAME}\\nexcept ImportError:\\n pass")\n'
SOURCE = Path(__file__).with_name("lm_eval_startup.py")


@dataclass(frozen=True)
class HookStatus:
    site_dir: Path
    pth: Path
    module: Path
    installed: bool  # both files present
    current: bool  # the installed module equals this interp's lm_eval_startup.py

    def describe(self) -> str:
        if not self.pth.exists() and not self.module.exists():
            return f"not installed in {self.site_dir} (plain `lm_eval --model interp` unavailable)"
        if not self.installed:
            return f"incomplete in {self.site_dir} (one of {PTH_NAME}, {MODULE_NAME}.py missing): --install or --remove"
        age = "current" if self.current else "out of date (run --install again)"
        return f"installed in {self.site_dir} ({self.pth.name}, {self.module.name}; {age})"


def default_site_dir() -> Path:
    """The running environment's site-packages (where `pip install` puts pure-Python packages)."""
    return Path(sysconfig.get_paths()["purelib"])


def _paths(site_dir: str | Path | None) -> tuple[Path, Path, Path]:
    site = Path(site_dir) if site_dir is not None else default_site_dir()
    return site, site / PTH_NAME, site / f"{MODULE_NAME}.py"


def status(site_dir: str | Path | None = None) -> HookStatus:
    site, pth, module = _paths(site_dir)
    installed = pth.is_file() and module.is_file()
    current = installed and module.read_bytes() == SOURCE.read_bytes() and pth.read_text() == PTH_LINE
    return HookStatus(site, pth, module, installed, current)


def install(site_dir: str | Path | None = None) -> HookStatus:
    """Write the hook module and its .pth into `site_dir` (default: this environment's)."""
    site, pth, module = _paths(site_dir)
    if not site.is_dir():
        raise ConfigError(f"lm-eval hook: site-packages directory {site} does not exist")
    try:
        module.write_bytes(SOURCE.read_bytes())  # the module first: a .pth must never import a missing one
        pth.write_text(PTH_LINE)
    except OSError as exc:
        raise ConfigError(f"lm-eval hook: cannot write into {site}: {exc.strerror or exc}") from exc
    return status(site)


def remove(site_dir: str | Path | None = None) -> HookStatus:
    """Delete the .pth and the hook module (whichever exist)."""
    site, pth, module = _paths(site_dir)
    try:
        for path in (pth, module):  # the .pth first, for the same reason
            path.unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(f"lm-eval hook: cannot delete from {site}: {exc.strerror or exc}") from exc
    return status(site)
