"""The layer contracts (pyproject.toml, import-linter) with a planted violation as control, and
ruff. That the cache-reading paths never import torch: tests/integration/test_torch_free.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _tool(name: str) -> str:
    """The tool next to this interpreter (a venv's bin/), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed (pip install -e '.[test]')")
    return found


def test_import_layers_contract() -> None:
    proc = subprocess.run(
        [_tool("lint-imports"), "--no-cache"], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_ruff_check() -> None:
    proc = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "."], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_format() -> None:
    proc = subprocess.run(
        [_tool("ruff"), "format", "--check", "--no-cache", "."],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _copy_sources(dst: Path) -> None:
    """The five packages' Python files and pyproject.toml (the contracts), nothing else."""
    for pkg in ("interp", "sweeps", "cache", "analyses", "probes"):
        for src in (REPO / pkg).rglob("*.py"):
            target = dst / src.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
    shutil.copyfile(REPO / "pyproject.toml", dst / "pyproject.toml")


def _lint(root: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run(
        [_tool("lint-imports"), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    return " ".join(proc.stdout.split()) + f" rc={proc.returncode}"


@pytest.mark.parametrize(
    "module, planted",
    [
        # a library module that sweeps itself imports (sweeps.plan -> interp.model.devices)
        ("interp/model/devices.py", "sweeps.api"),
        # a module in a new folder: the contract names the allowed importers, not the forbidden ones
        ("interp/integrations/wrapping.py", "sweeps.report"),
    ],
)
def test_a_library_importing_sweeps_breaks_the_contract(tmp_path: Path, module: str, planted: str) -> None:
    """Negative control of "Only the applications import sweeps": the real contract, on a copy of
    the code with one import of sweeps planted inside a function of a library module."""
    _copy_sources(tmp_path)
    assert "Only the applications import sweeps KEPT" in _lint(tmp_path)  # the copy as it is
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n\ndef _planted():\n    import {planted}\n\n    return {planted}\n")
    out = _lint(tmp_path)
    assert "Only the applications import sweeps BROKEN" in out and out.endswith("rc=1"), out[-3000:]
    assert module.removesuffix(".py").replace("/", ".") + " -> " + planted in out, out[-3000:]
