"""lm-eval model `interp` answers the same requests as lm-eval's own HFLM (within 1e-4), offline,
on local multiple-choice and rolling tasks built from the shipped banks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lm_eval")

TASKS = ["interp_factual", "interp_moral", "interp_cloze", "interp_rolling"]


@pytest.fixture(scope="module")
def setup(tiny_models, tmp_path_factory):
    from interp.lm_eval_tasks import write_tasks

    os.environ["HF_DATASETS_OFFLINE"] = "1"
    d = tmp_path_factory.mktemp("lm_eval_tasks")
    write_tasks(d, max_items=3)
    return tiny_models["llama"], d


def _evaluate(model: str, model_args: str, task_dir: Path) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    import interp.lm_eval_model  # noqa: F401  (registers "interp")

    return lm_eval.simple_evaluate(
        model=model,
        model_args=model_args,
        tasks=TASKS,
        task_manager=TaskManager(include_path=str(task_dir)),
        log_samples=True,
        batch_size=4,
    )


def _responses(result: dict, task: str) -> list:
    samples = sorted(result["samples"][task], key=lambda s: s["doc_id"])
    return [[r[0] for r in s["resps"]] for s in samples]


def test_equal_to_hflm_on_local_tasks(setup):
    model, task_dir = setup
    ours = _evaluate("interp", f"pretrained={model}", task_dir)
    ref = _evaluate("hf", f"pretrained={model},dtype=float32,device=cpu", task_dir)
    n_requests = 0
    for task in TASKS:
        a, b = _responses(ours, task), _responses(ref, task)
        assert len(a) == len(b) > 0
        for ra, rb in zip(a, b):
            assert len(ra) == len(rb)
            for x, y in zip(ra, rb):
                n_requests += 1
                if task == "interp_rolling":
                    np.testing.assert_allclose(float(x), float(y), atol=1e-4)
                else:
                    np.testing.assert_allclose(x[0], y[0], atol=1e-4)
                    assert bool(x[1]) == bool(y[1])  # is_greedy
        for metric, value in ref["results"][task].items():
            if isinstance(value, float) and "stderr" not in metric:
                np.testing.assert_allclose(ours["results"][task][metric], value, rtol=1e-4)
    assert n_requests >= 3 * 2 + 3 * 2 + 3 * 6 * 3  # every choice of every doc was compared


def test_cli_runs_offline(setup, tmp_path):
    model, task_dir = setup
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    out = tmp_path / "res"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "interp.lm_eval_model",
            "--model",
            "interp",
            "--model_args",
            f"pretrained={model}",
            "--include_path",
            str(task_dir),
            "--tasks",
            "interp_factual",
            "--output_path",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (res,) = out.rglob("results*.json")
    assert "acc,none" in json.loads(res.read_text())["results"]["interp_factual"]
