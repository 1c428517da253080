"""`interp lm-eval-hook`: plain `lm_eval --model interp` works once the hook's .pth is in a site
directory, lm-eval's own models stay, nothing is imported at start-up, and --remove undoes it.
The shared environment is never touched: each subprocess adds a temporary site directory."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("lm_eval")

from interp.integrations import lm_eval_hook  # noqa: E402
from interp.cli import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, site_dir: Path | None, timeout: int = 300) -> subprocess.CompletedProcess:
    """A fresh interpreter that processes `site_dir` as a site directory (its .pth files run)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    prelude = f"import site; site.addsitedir({str(site_dir)!r})\n" if site_dir else ""
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def _lm_eval_cli(args: list[str]) -> str:
    return f"import sys\nsys.argv = ['lm_eval', *{args!r}]\nfrom lm_eval.__main__ import cli_evaluate\ncli_evaluate()\n"


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    from interp.integrations.lm_eval_tasks import write_tasks

    d = tmp_path_factory.mktemp("lm_eval_tasks")
    write_tasks(d, max_items=2)
    return d


def test_install_status_remove(tmp_path):
    assert not lm_eval_hook.status(tmp_path).installed
    st = lm_eval_hook.install(tmp_path)
    assert st.installed and st.current
    assert (tmp_path / lm_eval_hook.PTH_NAME).read_text() == lm_eval_hook.PTH_LINE
    (tmp_path / "_interp_lm_eval_hook.py").write_text("# an older hook\n")
    assert not lm_eval_hook.status(tmp_path).current
    assert lm_eval_hook.install(tmp_path).current  # --install refreshes
    st = lm_eval_hook.remove(tmp_path)
    assert not st.installed and sorted(tmp_path.iterdir()) == []


def test_cli_command(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["lm-eval-hook", "--install", "--site-dir", str(tmp_path)])
    assert res.exit_code == 0 and "installed in" in res.output and "current" in res.output
    res = runner.invoke(app, ["lm-eval-hook", "--site-dir", str(tmp_path)])
    assert "installed in" in res.output
    res = runner.invoke(app, ["lm-eval-hook", "--remove", "--site-dir", str(tmp_path)])
    assert res.exit_code == 0 and "not installed" in res.output
    for bad in (["--install", "--remove"], ["--install", "--site-dir", str(tmp_path / "missing")]):
        proc = subprocess.run(
            [sys.executable, "-m", "interp.cli", "lm-eval-hook", *bad],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_hook_registers_lazily_and_keeps_lm_evals_models(tmp_path):
    lm_eval_hook.install(tmp_path)
    proc = _python(
        """
        import sys
        heavy = [m for m in ("lm_eval", "interp", "torch", "transformers") if m in sys.modules]
        assert not heavy, heavy  # start-up imported nothing of these
        from lm_eval.api.registry import get_model, model_registry
        import lm_eval.models
        assert "interp" not in sys.modules  # a lazy entry until asked for
        assert "hf" in model_registry and "dummy" in model_registry
        cls = get_model("interp")
        from interp.integrations.lm_eval_model import InterpLM
        assert cls is InterpLM, cls
        print("ok")
        """,
        tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_python_m_with_the_hook_installed(tmp_path):
    # `python -m interp.integrations.lm_eval_model` must not register a second (`__main__`) class
    lm_eval_hook.install(tmp_path)
    code = "import runpy, sys\nsys.argv = ['lm_eval', '--help']\nrunpy.run_module('interp.integrations.lm_eval_model', run_name='__main__')\n"
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_without_the_hook_lm_eval_has_no_interp_model(tmp_path):
    lm_eval_hook.install(tmp_path)
    lm_eval_hook.remove(tmp_path)
    code = """
        from lm_eval.api.registry import get_model
        try:
            get_model("interp")
        except ValueError as exc:
            print("no model" if "no model for this name" in str(exc) else exc)
        """
    proc = _python(code, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "no model", proc.stderr[-2000:]


def test_plain_lm_eval_cli_with_the_hook(tiny_models, task_dir, tmp_path):
    site_dir, out = tmp_path / "site", tmp_path / "res"
    site_dir.mkdir()
    lm_eval_hook.install(site_dir)
    args = ["--model", "interp", "--model_args", f"pretrained={tiny_models['llama']}"]
    args += ["--include_path", str(task_dir), "--tasks", "interp_factual", "--output_path", str(out)]
    proc = _python(_lm_eval_cli(args), site_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (res,) = out.rglob("results*.json")
    result = json.loads(res.read_text())
    assert result["config"]["model"] == "interp"
    assert "acc,none" in result["results"]["interp_factual"]


def test_leftover_pth_without_its_module_is_silent(tmp_path):
    """A .pth left behind after its module was deleted prints nothing at start-up (issue 23); the
    old unguarded line printed an error at every Python start-up (negative control)."""
    lm_eval_hook.install(tmp_path)
    (tmp_path / f"{lm_eval_hook.MODULE_NAME}.py").unlink()
    res = _python("print('started')", tmp_path, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "started" and res.stderr == "", res.stderr
    (tmp_path / lm_eval_hook.PTH_NAME).write_text(f"import {lm_eval_hook.MODULE_NAME}\n")
    old = _python("print('started')", tmp_path, timeout=60)
    assert "Error processing line" in old.stderr and "ModuleNotFoundError" in old.stderr
