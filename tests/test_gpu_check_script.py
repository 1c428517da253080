"""bench/gpu_check.py is runnable: its whole path on the CPU (tiny model), and a clean skip
without CUDA. (The GPU run itself needs a lent GPU: see BENCHMARKS.md.)"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_runs_on_cpu(tiny_models, tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "gpu_check.py"),
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
            "--results-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_check.json").read_text())
    (m,) = data["models"]
    assert set(m["agreement"]) == {"hf float32 cpu", "transformer_lens float32 cpu", "nnsight float32 cpu"}
    assert all(a["within_tol"] for a in m["agreement"].values())
    assert m["agreement"]["hf float32 cpu"]["max_abs_dlogp"] == 0.0  # same device, same dtype, same code
    assert m["speed"]["float32"]["tokens_per_s"] > 0 and m["speed"]["bfloat16"]["max_abs_dlogp_vs_cpu_fp32"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_gpu_check_skips_without_cuda(tmp_path):
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and "skipped: no CUDA device" in res.stderr
    assert not (tmp_path / "gpu_check.json").exists()
