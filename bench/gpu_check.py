"""GPU check: the three backends on a GPU against CPU float32, and tokens/s + peak memory.

For each model in --models:
1. reference: backend hf on the CPU in float32, `score_options` on the pressure prompts of
   --items moral items (verdict options, residual at the default layer);
2. agreement: hf, transformer_lens and nnsight on --device in float32, and hf with
   device_map="auto" (accelerate; the hooks read each block where it lives): max |delta
   log-prob| and max |delta residual| against the reference (float32 on a GPU: expected
   within 1e-3 -- TF32 matmul is off by default in torch; reported, not hidden);
3. speed: hf on --device in float32 and bfloat16, --repeats timed runs of the same call
   (synchronized), real tokens the engine computed per second (counted by wrapping the
   backend, bench_flops.Recorder) and the peak device memory (torch.cuda.max_memory_allocated;
   peak RSS on a CPU). bfloat16's log-prob error against the reference is reported too.

Writes bench/results/gpu_check.json and prints a Markdown table. Without CUDA and with the
default --device cuda it writes nothing and exits 0 with a "skipped" line (bench/gpu_check.sh).
`--device cpu` runs every step on the CPU: a smoke test of this script on any machine.

Rerun:
    bash bench/gpu_check.sh                      # both default models, cuda
    python bench/gpu_check.py --device cpu --models <tiny checkpoint> --items 1 --repeats 1
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

TOL_FP32 = 1e-3


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _reset_peak(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    else:
        common.reset_peak_rss()


def _peak_mib(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return common.peak_rss_mb()


def check_model(path: Path, args) -> dict:
    import gc

    import numpy as np
    from bench_flops import Recorder

    import interp
    from interp.runner.scoring import ScoringConfig, score_options

    out: dict = {"model": path.name, "agreement": {}, "speed": {}}
    ref_lm = interp.load(path, threads=args.threads)
    layer = ref_lm.default_layer
    bank = common.pressure_subset(args.items)
    prompts, verdicts, _ = common.pressure_prompts(bank, ref_lm.tokenizer)
    cfg = ScoringConfig(batch_size=args.batch_size)
    ref = score_options(ref_lm, prompts, verdicts, layers=[layer], cfg=cfg)
    out.update(prompts=len(prompts), layer=layer)
    del ref_lm
    gc.collect()

    def compare(lm, label):
        got = score_options(lm, prompts, verdicts, layers=[layer], cfg=cfg)
        d_lp = float(np.abs(got.logp - ref.logp).max())
        d_res = float(np.abs(got.resid[layer] - ref.resid[layer]).max())
        scale = float(np.abs(ref.resid[layer]).max())
        out["agreement"][label] = {
            "max_abs_dlogp": d_lp,
            "max_abs_dresid": d_res,
            "resid_scale": scale,
            "within_tol": bool(d_lp <= TOL_FP32 and d_res <= TOL_FP32 * max(1.0, scale)),
        }
        print(f"  {path.name} {label}: max|dlogp| {d_lp:.2e}, max|dresid| {d_res:.2e}", file=sys.stderr, flush=True)

    for backend in ("hf", "transformer_lens", "nnsight"):
        lm = interp.load(path, backend=backend, device=args.device, threads=args.threads)
        compare(lm, f"{backend} float32 {args.device}")
        del lm
        gc.collect()
    if args.device.startswith("cuda"):
        for backend in ("hf", "nnsight"):
            lm = interp.load(path, backend=backend, device_map="auto", threads=args.threads)
            compare(lm, f"{backend} float32 device_map=auto")
            del lm
            gc.collect()

    for dtype in ("float32", "bfloat16"):
        _reset_peak(args.device)
        lm = interp.load(path, dtype=dtype, device=args.device, threads=args.threads)
        rec = Recorder(lm.backend)
        lm.backend = rec
        got = score_options(lm, prompts, verdicts, layers=[layer], cfg=cfg)  # warm-up, and the error
        tokens = sum(sum(c["lens"]) for c in rec.calls)
        runs = []
        for _ in range(args.repeats):
            _sync(args.device)
            t0 = time.perf_counter()
            score_options(lm, prompts, verdicts, layers=[layer], cfg=cfg)
            _sync(args.device)
            runs.append(time.perf_counter() - t0)
        t = common.summarize(runs)
        out["speed"][dtype] = {
            "timing": t,
            "tokens": tokens,
            "tokens_per_s": tokens / t["median"],
            "peak_mib": _peak_mib(args.device),
            "max_abs_dlogp_vs_cpu_fp32": float(np.abs(got.logp - ref.logp).max()),
        }
        print(
            f"  {path.name} {dtype}: {tokens / t['median']:.0f} tokens/s, peak {_peak_mib(args.device):.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
        del lm, rec
        gc.collect()
    return out


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--models", default="smollm2,gemma3")
    p.add_argument("--device", default="cuda")
    p.add_argument("--items", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16)
    args = p.parse_args()
    common.setup(args.threads)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            f"gpu_check: skipped: no CUDA device (torch {torch.__version__}, CUDA build: "
            f"{torch.version.cuda or 'none'}); nothing written",
            file=sys.stderr,
        )
        return
    res = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
        "tolerance_fp32": TOL_FP32,
        "models": [],
    }
    for name in args.models.split(","):
        res["models"].append(check_model(common.model_path(name), args))
    rows = []
    for m in res["models"]:
        for label, a in m["agreement"].items():
            rows.append(
                [
                    m["model"],
                    label,
                    f"{a['max_abs_dlogp']:.1e}",
                    f"{a['max_abs_dresid']:.1e}",
                    "yes" if a["within_tol"] else "NO",
                    "",
                    "",
                ]
            )
        for dtype, s in m["speed"].items():
            rows.append(
                [
                    m["model"],
                    f"hf {dtype} {args.device} (speed)",
                    f"{s['max_abs_dlogp_vs_cpu_fp32']:.1e}",
                    "",
                    "",
                    f"{s['tokens_per_s']:,.0f}",
                    f"{s['peak_mib']:,.0f}",
                ]
            )
    res["report"] = {
        "order": 10,
        "title": f"10. GPU check ({res['device_name']})",
        "rerun": "bash bench/gpu_check.sh",
        "what": "Three backends on the device against CPU float32; tokens/s and peak memory at float32 and bfloat16.",
        "tables": [
            {
                "columns": [
                    "model",
                    "run",
                    "max |dlogp| vs CPU fp32",
                    "max |dresid|",
                    f"within {TOL_FP32:g}",
                    "tokens/s",
                    "peak MiB",
                ],
                "rows": rows,
            }
        ],
        "findings": [],
    }
    common.write_results("gpu_check", res, threads=args.threads, results_dir=args.results_dir)
    print("| " + " | ".join(res["report"]["tables"][0]["columns"]) + " |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if not all(a["within_tol"] for m in res["models"] for a in m["agreement"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
