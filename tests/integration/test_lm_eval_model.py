"""lm-eval model `interp` answers the same requests as lm-eval's own HFLM, offline, on local
multiple-choice and rolling tasks built from the shipped banks: each log-likelihood within its
token count times the one-token bound derived from float error (tests/_tolerance.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _tolerance import bounds_for

pytest.importorskip("lm_eval")

TASKS = ["interp_factual", "interp_moral", "interp_cloze", "interp_rolling"]


@pytest.fixture(scope="module")
def setup(tiny_models, tmp_path_factory):
    from interp.integrations.lm_eval_tasks import write_tasks

    os.environ["HF_DATASETS_OFFLINE"] = "1"
    d = tmp_path_factory.mktemp("lm_eval_tasks")
    write_tasks(d, max_items=3)
    return tiny_models["llama"], d


def _evaluate(model: str, model_args: str, task_dir: Path) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    import interp.integrations.lm_eval_model  # noqa: F401  (registers "interp")

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
    from transformers import AutoTokenizer

    model, task_dir = setup
    ours = _evaluate("interp", f"pretrained={model}", task_dir)
    ref = _evaluate("hf", f"pretrained={model},dtype=float32,device=cpu", task_dir)
    tok = AutoTokenizer.from_pretrained(model)
    args = {t: [a for s in sorted(ref["samples"][t], key=lambda s: s["doc_id"]) for a in s["arguments"]] for t in TASKS}
    texts = ["".join(a) for t in TASKS for a in args[t]]
    one = bounds_for(model, texts, min_length=max(len(tok(x).input_ids) for x in texts) + 1).logp

    def scored_tokens(a: tuple) -> int:  # a continuation's tokens, or a rolled document's (+1: the first)
        return (
            len(tok(a[0]).input_ids) + 1
            if len(a) == 1
            else len(tok(a[0] + a[1]).input_ids) - len(tok(a[0]).input_ids) + 1
        )

    n_requests = 0
    for task in TASKS:
        a = [r for ra in _responses(ours, task) for r in ra]  # every request of every doc, in order
        b = [r for rb in _responses(ref, task) for r in rb]
        assert len(a) == len(b) == len(args[task]) > 0
        tols = [scored_tokens(x) * one for x in args[task]]
        for x, y, tol in zip(a, b, tols):
            n_requests += 1
            if task == "interp_rolling":
                np.testing.assert_allclose(float(x), float(y), rtol=0, atol=tol)
            else:
                np.testing.assert_allclose(x[0], y[0], rtol=0, atol=tol)
                assert bool(x[1]) == bool(y[1])  # is_greedy
        # a metric is a mean of (functions of) those log-likelihoods or of 0/1 choices they decide:
        # exp(sum of the bounds) - 1 bounds its relative change (equality for the 0/1 ones)
        rtol = float(np.expm1(sum(tols)))
        for metric, value in ref["results"][task].items():
            if isinstance(value, float) and "stderr" not in metric:
                np.testing.assert_allclose(ours["results"][task][metric], value, rtol=rtol)
    assert n_requests >= 3 * 2 + 3 * 2 + 3 * 6 * 3  # every choice of every doc was compared


def test_cli_runs_offline(setup, tmp_path):
    model, task_dir = setup
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    out = tmp_path / "res"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "interp.integrations.lm_eval_model",
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
