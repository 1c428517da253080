"""The extras named in interp.core.extras are the ones pyproject.toml declares, none of their
packages is a core dependency, and scripts/setup.sh installs every one of them with the test
tools (the README's set-up installs everything). Which distribution provides an import name is
read from the installed metadata (importlib.metadata.packages_distributions), not from this repo."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from interp.core.extras import EXTRAS

REPO = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def _setup_extras(text: str) -> set[str]:
    """The extras of every `-e ".[...]"` install in a setup script."""
    return {e.strip() for group in re.findall(r'-e\s+"\.\[([^\]]*)\]"', text) for e in group.split(",")}


def test_extras_match_pyproject_and_the_installed_distributions() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    core = {_name(r) for r in project["dependencies"]}
    provider = metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        declared = {_name(r) for r in optional[extra]}
        provided = {_name(d) for m in modules for d in provider[m]}
        assert provided == declared, (extra, provided, declared)
        assert not declared & core, f"[{extra}] packages are core dependencies too: {declared & core}"


def test_setup_installs_every_extra_and_the_test_tools() -> None:
    assert _setup_extras((REPO / "scripts" / "setup.sh").read_text()) == {*EXTRAS, "test"}


def test_setup_check_sees_a_dropped_extra() -> None:
    """Control: the parser reads the extras it is given, so a setup line without one fails the check."""
    text = (REPO / "scripts" / "setup.sh").read_text().replace("organism,", "")
    assert _setup_extras(text) == {*EXTRAS, "test"} - {"organism"}
