"""The no-circles contract (pyproject.toml, `acyclic_siblings`) holds on this code, and breaks
on a planted circle that runs through an import inside a function (the negative control)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CONTRACT = """
[tool.importlinter]
root_packages = ["planted"]

[[tool.importlinter.contracts]]
name = "no circles"
type = "acyclic_siblings"
ancestors = ["planted"]
"""


def _lint(root: Path, *args: str) -> subprocess.CompletedProcess:
    here = Path(sys.executable).parent / "lint-imports"
    tool = str(here) if here.exists() else shutil.which("lint-imports")
    if not tool:
        pytest.fail("lint-imports is not installed (pip install -e '.[test]')")
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([tool, "--no-cache", *args], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def _package(root: Path, store_body: str) -> None:
    pkg = root / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "views.py").write_text("from planted.store import Unit\n\n\ndef show(u: Unit) -> str:\n    return repr(u)\n")
    (pkg / "store.py").write_text("class Unit:\n" + store_body)
    (root / "pyproject.toml").write_text(CONTRACT)


def test_repository_has_no_import_circles() -> None:
    proc = _lint(REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # the contract's name may wrap; its verdict is on the line where the name ends
    out = " ".join(proc.stdout.split())
    assert "No import circles, even inside one folder or through an import inside a function KEPT" in out.replace(
        "functionKEPT", "function KEPT"
    )


def test_function_level_circle_breaks_the_contract(tmp_path: Path) -> None:
    # store -> views only inside a method, views -> store at the top: a circle all the same
    _package(
        tmp_path, "    def show(self) -> str:\n        from planted.views import show\n\n        return show(self)\n"
    )
    proc = _lint(tmp_path)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" in proc.stdout and "planted" in proc.stdout


def test_one_way_package_keeps_the_contract(tmp_path: Path) -> None:
    _package(tmp_path, "    pass\n")
    proc = _lint(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "KEPT" in proc.stdout
