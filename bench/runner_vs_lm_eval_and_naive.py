"""At bank size, in one interleaved run: the runner in float32 and mixed-bf16 vs lm-eval HFLM at its
best batch size, the naive loop, precision of the reduced precisions vs float32, and the achieved
FLOP rate against the matmul rate of the dtype that ran (issue 25).

Workload: every trial plus each item's first turn of a gold-balanced subset of the moral pressure
bank (--items; 31 prompts per item: all conditions), continuations " wrong" / " acceptable"
(variants exact, as lm-eval scores them).

* timed, interleaved (run r of each method, then run r+1, the first one rotating), --repeats runs:
  runner float32, runner mixed-bf16, runner bfloat16 (unless --skip bf16), lm-eval HFLM at the batch
  size that was fastest in one-run pilots on --pilot-items items (--lm-eval-batch-sizes), and a
  float32 and a bf16 `torch.matmul` 2048^3 (the machine's rate per dtype under the same load).
* naive loop (HF forward per prompt x option, batch 1) on the same prompts, --naive-repeats runs
  after the interleaved ones (0: skipped); the JSON is written before it starts, so a cut-off run
  still leaves the interleaved results.
* precision: each reduced precision's log-probs vs the float32 runner's, per prompt: max / mean
  |d log-prob|, verdict probability (renormalized over the two options) mean / max |dP|, argmax flips.
* FLOPs: the shapes of the forwards of the timed runs (recorded): dense 2 x params per token + attention pairs +
  unembedding at reads (bench.flop_counts.Shape), over the median time, against that dtype's matmul rate.

    python -m bench runner_vs_lm_eval_and_naive --threads 2 --repeats 3 --items 40 --naive-repeats 1
"""

from __future__ import annotations

import logging
import sys
import time

from bench import common
from bench.precision_error import precision_error


def main() -> None:
    p = common.bank_parser(__doc__, repeats=3)
    p.add_argument("--pilot-items", type=int, default=1)
    p.add_argument("--lm-eval-batch-sizes", default="8,16,32")
    p.add_argument("--naive-repeats", type=int, default=1)
    p.add_argument("--skip", action="append", default=[], choices=["bf16", "lm-eval"])
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np
    import torch
    from bench.flop_counts import model_shape
    from bench.baselines import naive_scores
    from bench.flop_counts import EngineRecorder, engine_counts

    import interp
    from interp.model.devices import matmul_dtype
    from interp.runner.scoring import ScoringConfig, option_variants, score_options

    for name in ("lm_eval", "lm-eval", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)

    def stage(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    path = common.model_path(args.model)
    dtypes = ["float32", "mixed-bf16"] + ([] if "bf16" in args.skip else ["bfloat16"])
    lms = {d: interp.load(path, dtype=d, threads=args.threads) for d in dtypes}
    common.setup(args.threads)
    tok = lms["float32"].tokenizer
    cfg = ScoringConfig(variants="exact")
    bank = common.pressure_subset(args.items)
    prompts, verdicts, _ = common.pressure_prompts(bank, tok)
    options = common.option_words(verdicts, "exact")
    flat = [(pr, o) for pr in prompts for o in options]
    for d in dtypes:  # warm-up (first-call allocations, oneDNN kernels)
        score_options(lms[d], prompts[:4], options, cfg=cfg)

    lme = None
    best_bs, pilots = None, {}
    if "lm-eval" not in args.skip:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM

        lme = HFLM(
            pretrained=str(path), backend="causal", device="cpu", dtype="float32", batch_size=1, trust_remote_code=False
        )
        torch.set_num_threads(args.threads)

        def lme_run(pairs, bs):
            lme.batch_size_per_gpu = bs
            reqs = [
                Instance(request_type="loglikelihood", doc={}, arguments=(c, k), idx=i)
                for i, (c, k) in enumerate(pairs)
            ]
            return np.array([ll for ll, _ in lme.loglikelihood(reqs, disable_tqdm=True)])

        pilot_bank = common.pressure_subset(args.pilot_items)
        pilot, _, _ = common.pressure_prompts(pilot_bank, tok)
        pilot_flat = [(pr, o) for pr in pilot for o in options]
        for bs in [int(b) for b in args.lm_eval_batch_sizes.split(",")]:
            t0 = time.perf_counter()
            lme_run(pilot_flat, bs)
            pilots[bs] = time.perf_counter() - t0
            stage(f"lm-eval pilot bs={bs}: {pilots[bs]:.1f}s")
        best_bs = min(pilots, key=pilots.get)

    n_mm = 2048
    mats = {
        dt: (torch.randn(n_mm, n_mm).to(dt), torch.randn(n_mm, n_mm).to(dt)) for dt in (torch.float32, torch.bfloat16)
    }
    k_mm = 10

    def matmuls(dt):
        a, b = mats[dt]

        def go():
            for _ in range(k_mm):
                torch.matmul(a, b)

        return go

    names = {"float32": "runner float32", "mixed-bf16": "runner mixed-bf16", "bfloat16": "runner bfloat16"}
    # the timed runs record each forward's shape (a few list operations per forward): FLOP counts
    # come from the runs that were timed, no extra pass
    recs = {d: EngineRecorder(lms[d].backend) for d in dtypes}
    rec_lms = {d: type(lms[d])(info=lms[d].info, tokenizer=tok, backend=recs[d], dtype=d) for d in dtypes}

    def scored(d):
        def go():
            recs[d].calls.clear()
            return score_options(rec_lms[d], prompts, options, cfg=cfg)

        return go

    fns = {names[d]: scored(d) for d in dtypes}
    lme_name = f"lm-eval HFLM (bs {best_bs})"
    if lme is not None:
        fns[lme_name] = lambda: lme_run(flat, best_bs)
    fns["matmul float32"] = matmuls(torch.float32)
    fns["matmul bfloat16"] = matmuls(torch.bfloat16)
    stage(f"interleaved: {len(prompts)} prompts, {args.repeats} repeats of {', '.join(fns)}")
    timing, outs = common.time_interleaved(fns, args.repeats)
    f32 = outs[names["float32"]]
    mm = {
        str(dt).replace("torch.", ""): {
            "gflops_median": 2.0 * n_mm**3 * k_mm / timing[f"matmul {str(dt).replace('torch.', '')}"]["median"] / 1e9,
            "gflops_best": 2.0 * n_mm**3 * k_mm / timing[f"matmul {str(dt).replace('torch.', '')}"]["min"] / 1e9,
        }
        for dt in (torch.float32, torch.bfloat16)
    }

    shape = model_shape(lms["float32"].backend.model)
    flops = {}
    for d in dtypes:  # what each forward of the last timed run computed
        c = engine_counts(recs[d].calls, shape)
        mm_dt = str(matmul_dtype(d)).replace("torch.", "")
        rate = c["flops_useful"] / timing[names[d]]["median"] / 1e9
        flops[d] = {
            **c,
            "gflops_useful": rate,
            "matmul_dtype": mm_dt,
            "matmul_gflops": mm[mm_dt]["gflops_median"],
            "share_of_matmul": rate / mm[mm_dt]["gflops_median"],
        }

    res: dict = {
        "model": path.name,
        "items": len(bank),
        "prompts": len(prompts),
        "requests": len(flat),
        "torch_threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "timing": timing,
        "matmul": mm,
        "flops": flops,
        "lm_eval_best_batch_size": best_bs,
        "lm_eval_pilots_s": pilots,
        "speedup": {},
        "precision": {d: precision_error(outs[names[d]], f32) for d in dtypes if d != "float32"},
    }
    for d in dtypes[1:]:
        res["speedup"][f"{d} vs float32"] = common.ratio(timing[names["float32"]], timing[names[d]])
    if lme is not None:
        res["speedup"]["float32 vs lm-eval"] = common.ratio(timing[lme_name], timing[names["float32"]])
        res["max_abs_dll_vs_lm_eval"] = float(np.abs(f32.logp.reshape(-1) - outs[lme_name]).max())
    res["report"] = _report(res, args, start_load, names, lme_name)
    common.write_results("bank", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)

    if args.naive_repeats:
        forms = [option_variants(o, "exact") for o in options]
        stage(f"naive loop: {len(prompts)} prompts x {len(options)} options, {args.naive_repeats} run(s)")
        t, out = common.time_runs(
            lambda: naive_scores(lms["float32"].backend.model, tok, prompts, forms), args.naive_repeats, label="naive"
        )
        res["timing"]["naive loop"] = t
        res["speedup"]["float32 vs naive"] = common.ratio(t, timing[names["float32"]])
        res["max_abs_dlogp_vs_naive"] = float(np.abs(f32.logp - out).max())
        res["report"] = _report(res, args, start_load, names, lme_name)
        common.write_results("bank", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


def _report(res, args, start_load, names, lme_name) -> dict:
    t, sp = res["timing"], res["speedup"]
    w = f"pressure, {res['items']} items x 31 conditions ({res['prompts']} prompts)"
    rows = [[w, names["float32"], common.fmt_time(t[names["float32"]]), "1.00x"]]
    for d in ("mixed-bf16", "bfloat16"):
        if names[d] in t:
            rows.append([w, names[d], common.fmt_time(t[names[d]]), common.fmt_ratio(sp[f"{d} vs float32"])])
    if lme_name in t:
        r = common.ratio(t[names["float32"]], t[lme_name])
        rows.append([w, lme_name, common.fmt_time(t[lme_name]), common.fmt_ratio(r)])
    if "naive loop" in t:
        r = common.ratio(t[names["float32"]], t["naive loop"])
        n = t["naive loop"]["n"]
        rows.append(
            [w, f"naive loop ({n} run{'s' if n > 1 else ''})", common.fmt_time(t["naive loop"]), common.fmt_ratio(r)]
        )
    prec_rows = [
        [
            d,
            f"{p['max_abs_dlogp']:.3g}",
            f"{p['median_abs_dlogp']:.2g}",
            f"{p['mean_abs_dp']:.4f}",
            f"{p['max_abs_dp']:.4f}",
            f"{p['argmax_flips']} of {p['prompts']}",
        ]
        for d, p in res["precision"].items()
    ]
    flop_rows = [
        [
            d,
            f"{f['real_tokens']:,} ({f['padded_tokens']:,} padded) in {f['forwards']} forwards",
            f"{f['gflops_useful']:.0f}",
            f"{f['matmul_dtype']} {f['matmul_gflops']:.0f}",
            f"{100 * f['share_of_matmul']:.0f}%",
        ]
        for d, f in res["flops"].items()
    ]
    findings = []
    if "float32 vs lm-eval" in sp:
        findings.append(
            f"float32 runner vs lm-eval HFLM (best batch size {res['lm_eval_best_batch_size']}; one-run pilots: "
            + ", ".join(f"bs {b} {s:.0f}s" for b, s in res["lm_eval_pilots_s"].items())
            + f"): {sp['float32 vs lm-eval']['median']:.2f}x (min/min {sp['float32 vs lm-eval']['min']:.2f}x); "
            f"max |d log-lik| {res['max_abs_dll_vs_lm_eval']:.1e}."
        )
    if "float32 vs naive" in sp:
        findings.append(
            f"float32 runner vs the naive loop: {sp['float32 vs naive']['median']:.1f}x (naive: "
            f"{t['naive loop']['n']} run(s) after the interleaved ones); max |d log-prob| {res['max_abs_dlogp_vs_naive']:.1e}."
        )
    for d in ("mixed-bf16", "bfloat16"):
        if d in res["precision"]:
            p = res["precision"][d]
            findings.append(
                f"{d}: {sp[f'{d} vs float32']['median']:.2f}x the float32 runner; verdict P mean |dP| "
                f"{p['mean_abs_dp']:.4f}, max {p['max_abs_dp']:.4f}, argmax flips {p['argmax_flips']} of {p['prompts']}."
            )
    return {
        "order": 0,
        "title": f"1. At bank size: float32 and mixed-bf16 vs lm-eval and the naive loop ({res['model']}, issue 25)",
        "rerun": (
            f"python -m bench runner_vs_lm_eval_and_naive --threads {args.threads} --repeats {args.repeats} "
            f"--items {args.items} --naive-repeats {args.naive_repeats}" + "".join(f" --skip {s}" for s in args.skip)
        ),
        "what": (
            "One process, methods interleaved run by run (the first rotating), model loads excluded; "
            "the float32 and bf16 torch.matmul 2048^3 are timed in the same rotation. Variants exact; the runner "
            "with the default ScoringConfig. Ratio column: the row's speed relative to the float32 runner "
            f"(<1: slower). 1-, 5-, 15-minute load average at the start: {start_load}."
        ),
        "tables": [
            {"columns": ["workload", "method", "time: median (min-max)", "speed vs float32 runner"], "rows": rows},
            {
                "columns": [
                    "dtype vs float32",
                    "max |d log-prob|",
                    "median |d log-prob|",
                    "verdict P mean |dP|",
                    "max |dP|",
                    "argmax flips",
                ],
                "rows": prec_rows,
            },
            {
                "columns": ["dtype", "tokens computed", "GFLOP/s useful", "matmul GFLOP/s (dtype)", "of matmul rate"],
                "rows": flop_rows,
            },
        ],
        "findings": findings,
    }


if __name__ == "__main__":
    main()
