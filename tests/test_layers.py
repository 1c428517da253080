"""The layer contract (pyproject.toml, import-linter), ruff, and that the cache-reading paths
never import torch or transformers (checked in a fresh interpreter's sys.modules)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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


_PROBE = """
import sys
{code}
heavy = sorted(m for m in ("torch", "transformers", "transformer_lens", "nnsight") if m in sys.modules)
print(",".join(heavy))
"""


@pytest.mark.parametrize(
    "what, code",
    [
        (
            "libraries",
            "import cache, probes, analyses, cache.store, probes.readouts, probes.predictive, analyses.stats, "
            "analyses.mediation, analyses.fertility, analyses.weat, analyses.pressure_metrics, "
            "analyses.classify_metrics, analyses.cloze_metrics, analyses.cloze_figures",
        ),
        ("report", "from sweeps.report import write_report"),
        ("probe and predict", "from sweeps.probe import run_probe, run_predict"),
        ("cli", "import interp.cli"),
        ("studies registry", "from interp.studies import all_studies; all_studies()"),
    ],
)
def test_cache_readers_never_import_torch(what: str, code: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "", f"{what} imported {proc.stdout.strip()}"


def test_report_probe_predict_commands_run_without_torch(tmp_path: Path) -> None:
    """`interp report`, `probe` and `predict` on a cache written by a tiny sweep, in a process
    where importing torch fails: they must not need it."""
    from interp.testing import build_tiny_model
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    tree = tmp_path / "run"
    for i, name in enumerate(("a", "b")):
        build_tiny_model(tree / name, "llama", n_layers=2, d_model=32, seed=i)
    out = tmp_path / "out"
    run_sweep(
        [tree], studies=["pressure"], banks=["moral"], out=out, cfg=RunConfig(max_items=6, n_boot=10), progress=False
    )
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    for mod in ("torch", "transformers"):
        (blocker / f"{mod}.py").write_text(f"raise ImportError('{mod} must not be imported here')\n")
    env = _env()
    env["PYTHONPATH"] = str(blocker) + os.pathsep + env["PYTHONPATH"]
    for args in (
        ["report", str(out)],
        ["probe", str(out), "--study", "pressure", "--target", "logodds", "--shuffles", "3", "--folds", "2"],
        ["predict", str(out), "--target", "b", "--shuffles", "3"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "interp.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{args[0]}: {proc.stderr[-2000:]}"


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
