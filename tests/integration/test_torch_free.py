"""The cache-reading paths never import torch or transformers (checked in a fresh interpreter's
sys.modules), and `interp report`, `probe` and `predict` run where importing torch fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


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
