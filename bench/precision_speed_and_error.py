"""float32 vs `float32-medium` vs `mixed-bf16-medium` vs `mixed-bf16` on the bank-size pressure workload, interleaved in
one process (issue 25): speed of each against float32 and each one's error against float32, the
mixed precisions with their default tie guard (near-ties re-scored in float32) and without it.

    python -m bench precision_speed_and_error --threads 2 --repeats 3 --items 40

`float32-medium` runs the blocks' Linears at torch's "medium" float32 matmul precision (on this
CPU's AVX512-BF16 a oneDNN path with nearly float32 products); `mixed-bf16` gives them bf16
operands (the key projection excepted); `mixed-bf16-medium` only the MLP's gate / up projections,
the rest at "medium". Also per dtype: the float32 margin (|P(first) - P(second)|) of each prompt
whose argmax flipped, and how many prompts the tie guard re-scored. Writes bench/results/precisions.json (section of BENCHMARKS.md via bench/report.py).
"""

from __future__ import annotations

from dataclasses import replace

from bench import common
from bench.precision_error import precision_error

DTYPES = ("float32", "float32-medium", "mixed-bf16-medium", "mixed-bf16")
UNGUARDED = ("mixed-bf16-medium", "mixed-bf16")  # also run with tie_guard=0: the precision's own error
NO_GUARD = ", no guard"


def main() -> None:
    p = common.bank_parser(__doc__, repeats=3)
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import interp
    from interp.devices import tie_guard_in_force
    from interp.runner.scoring import ScoringConfig, score_options

    path = common.model_path(args.model)
    lms = {d: interp.load(path, dtype=d, threads=args.threads) for d in DTYPES}
    common.setup(args.threads)
    tok = lms["float32"].tokenizer
    cfg = ScoringConfig(variants="exact")  # the default tie guard
    runs = {d: (d, cfg) for d in DTYPES} | {d + NO_GUARD: (d, replace(cfg, tie_guard=0.0)) for d in UNGUARDED}
    prompts, verdicts, _ = common.pressure_prompts(common.pressure_subset(args.items), tok)
    options = common.option_words(verdicts, "exact")
    for d in DTYPES:  # warm-up
        score_options(lms[d], prompts[:4], options, cfg=cfg)
    fns = {k: (lambda d=d, c=c: score_options(lms[d], prompts, options, cfg=c)) for k, (d, c) in runs.items()}
    timing, outs = common.time_interleaved(fns, args.repeats)
    f32 = outs["float32"]
    labels = list(runs)[1:]
    from interp.runner.mixed import medium_operand_error

    res = {
        "items": args.items,
        "prompts": len(prompts),
        # how exact "medium" is on this CPU: 1.001 x 1 summed over 576 terms, relative error
        # (~1e-6 near float32, 1e-3 with operands rounded to bf16; interp selftest prints it too)
        "medium_operand_error": medium_operand_error("cpu"),
        "timing": timing,
        "speedup": {f"{k} vs float32": common.ratio(timing["float32"], timing[k]) for k in labels},
        "precision": {
            k: {
                **precision_error(outs[k], f32),
                "dtype": runs[k][0],
                "tie_guard": tie_guard_in_force(runs[k][0], runs[k][1].tie_guard),
                "tie_guarded": int(len(outs[k].tie_guarded)),
            }
            for k in labels
        },
    }
    w = f"pressure, {args.items} items x 31 conditions ({len(prompts)} prompts)"
    rows = [[w, "float32", "", common.fmt_time(timing["float32"]), "1.00x", "", "", "", "", ""]]
    for d in labels:
        pr = res["precision"][d]
        rows.append(
            [
                w,
                pr["dtype"],
                f"{pr['tie_guard']:g} ({pr['tie_guarded']} re-scored)" if pr["tie_guard"] else "off",
                common.fmt_time(timing[d]),
                common.fmt_ratio(res["speedup"][f"{d} vs float32"]),
                f"{pr['max_abs_dlogp']:.2g}",
                f"{pr['mean_abs_dp']:.2g}",
                f"{pr['max_abs_dp']:.2g}",
                f"{pr['argmax_flips']} of {pr['prompts']}",
                ", ".join(f"{m:.1g}" for m in pr["flip_margins"]) or "-",
            ]
        )
    res["report"] = {
        "order": 2,
        "title": "Precisions at bank size: float32, float32-medium, mixed-bf16-medium, mixed-bf16 (one interleaved run)",
        "what": "SmolLM2-135M-Instruct, `interp.score_options`, every dtype loaded once in the same process; "
        "errors are against the float32 run of the same prompts. A prompt's argmax flips when its verdict "
        "probability moves by more than half of float32's margin |P(verdict) - P(other)|; the smallest margins "
        f"on this workload: {', '.join(f'{m:.1g}' for m in res['precision'][DTYPES[1]]['smallest_margins'])}, so "
        "unguarded, 'no flip' asks a reduced precision to move those prompts by less than that. The tie guard "
        "(`--tie-guard`, default 0.05) re-scores in float32 every prompt whose reduced-precision margin is below "
        'it; its time is in the row\'s time. How exact "medium" is on this CPU: a planted product '
        f'(1.001 x 1 over 576 terms) off by {res["medium_operand_error"]:.1e} relative at "medium" (bf16 '
        "operands would give 1e-3).",
        "rerun": f"python -m bench precision_speed_and_error --threads {args.threads} --repeats {args.repeats} --items {args.items}",
        "tables": [
            {
                "columns": [
                    "workload",
                    "dtype",
                    "tie guard",
                    "time",
                    "speed vs float32",
                    "max |d log-prob|",
                    "verdict P: mean |d|",
                    "max |d|",
                    "argmax flips",
                    "float32 margin of each flipped prompt",
                ],
                "rows": rows,
            }
        ],
    }
    common.write_results("precisions", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


if __name__ == "__main__":
    main()
