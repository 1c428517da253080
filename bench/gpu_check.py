"""GPU check: `interp selftest` on the device, then tokens/s + peak memory of real models.

1. correctness: `interp.tools.selftest.run_selftest(--device, dtype)` for each of --dtypes
   (every installed backend against a plain Hugging Face forward within the tolerance derived
   from that dtype, the residual capture, cache checksums, a two-checkpoint sweep and its
   resume; see `interp selftest`);
2. for each model in --models, a reference: backend hf on the CPU in float32, `score_options`
   on the pressure prompts of --items moral items (verdict options, residual at the default layer);
3. speed: hf on --device in float32 and bfloat16, --repeats timed runs of the same call
   (synchronized), real tokens the engine computed per second (counted by wrapping the
   backend, bench.flop_counts.Recorder) and the peak device memory (torch.cuda.max_memory_allocated;
   peak RSS on a CPU). bfloat16's log-prob error against the reference is reported too.

Writes bench/results/gpu_check.json and prints a Markdown table; exits 1 if a selftest check
failed. Without CUDA and with the
default --device cuda it writes nothing and exits 0 with a "skipped" line (bench/gpu_check.sh).
`--device cpu` runs every step on the CPU: a smoke test of this script on any machine.

Rerun:
    bash bench/gpu_check.sh                      # both default models, cuda
    python -m bench gpu_check --device cpu --models <tiny checkpoint> --items 1 --repeats 1 --dtypes float32
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench import common


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
    from bench.flop_counts import Recorder

    import interp
    from interp.runner.scoring import ScoringConfig, score_options

    out: dict = {"model": path.name, "speed": {}}
    ref_lm = interp.load(path, threads=args.threads)
    layer = ref_lm.default_layer
    bank = common.pressure_subset(args.items)
    prompts, verdicts, _ = common.pressure_prompts(bank, ref_lm.tokenizer)
    cfg = ScoringConfig(batch_size=args.batch_size)
    ref = score_options(ref_lm, prompts, verdicts, layers=[layer], cfg=cfg)
    out.update(prompts=len(prompts), layer=layer)
    del ref_lm
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
    p.add_argument("--dtypes", default="float32,bfloat16", help="dtypes `interp selftest` checks on --device")
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
    from interp.tools.selftest import passed, run_selftest

    res = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
        "selftest": {},
        "models": [],
    }
    rows, all_passed = [], True
    for dtype in args.dtypes.split(","):
        checks = run_selftest(args.device, dtype, echo=lambda line: print(line, file=sys.stderr, flush=True))
        all_passed = all_passed and passed(checks)
        res["selftest"][dtype] = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks]
        for c in checks:
            rows.append(["selftest", c.name, c.detail, {True: "yes", False: "NO", None: "skipped"}[c.ok], "", ""])
    for name in args.models.split(","):
        res["models"].append(check_model(common.model_path(name), args))
    for m in res["models"]:
        for dtype, s in m["speed"].items():
            rows.append(
                [
                    m["model"],
                    f"hf {dtype} {args.device} (speed)",
                    f"max |dlogp| vs CPU fp32 {s['max_abs_dlogp_vs_cpu_fp32']:.1e}",
                    "",
                    f"{s['tokens_per_s']:,.0f}",
                    f"{s['peak_mib']:,.0f}",
                ]
            )
    res["report"] = {
        "order": 10,
        "title": f"10. GPU check ({res['device_name']})",
        "rerun": "bash bench/gpu_check.sh",
        "what": "`interp selftest` on the device (backends vs plain HF within derived tolerances, "
        "residuals, cache, sweep resume); tokens/s and peak memory at float32 and bfloat16.",
        "tables": [
            {
                "columns": ["model", "check / run", "result", "holds", "tokens/s", "peak MiB"],
                "rows": rows,
            }
        ],
        "findings": [],
    }
    common.write_results("gpu_check", res, threads=args.threads, results_dir=args.results_dir)
    print("| " + " | ".join(res["report"]["tables"][0]["columns"]) + " |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if not all_passed:
        sys.exit(1)


if __name__ == "__main__":
    main()
