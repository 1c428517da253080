"""bench/gpu_check.py is runnable: its whole path on the CPU (tiny model), and a clean skip
without CUDA. (The GPU run itself needs a lent GPU: see BENCHMARKS.md.) The script runs as
`python bench/gpu_check.py` would, in a process of its own (a fork-server child: the imports
are paid once, tests/_cli_process.py)."""

import json
from pathlib import Path

import pytest
import torch
from _cli_process import run_cli_process

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_on_cpu(tiny_models, tmp_path):
    res = run_cli_process(
        [
            "--device",
            "cpu",
            "--models",
            str(tiny_models["llama"]),
            "--items",
            "1",
            "--repeats",
            "1",
            "--threads",
            "1",
            "--dtypes",
            "float32",
            "--results-dir",
            str(tmp_path),
        ],
        script=ROOT / "bench" / "gpu_check.py",
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_check.json").read_text())
    (m,) = data["models"]
    checks = {c["name"]: c for c in data["selftest"]["float32"]}  # the selftest it wraps
    assert "backend hf cpu float32 vs plain HF" in checks and "sweep resume" in checks
    assert all(c["ok"] is not False for c in checks.values())
    assert m["speed"]["float32"]["tokens_per_s"] > 0 and m["speed"]["bfloat16"]["max_abs_dlogp_vs_cpu_fp32"] > 0
    assert "ok   sweep resume" in res.stderr  # the selftest's own lines


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_gpu_check_skips_without_cuda(tmp_path):
    res = run_cli_process(["--results-dir", tmp_path], script=ROOT / "bench" / "gpu_check.py", timeout=300)
    assert res.returncode == 0 and "skipped: no CUDA device" in res.stderr
    assert not (tmp_path / "gpu_check.json").exists()
