"""Packed forwards (interp.runner.packed) vs padded ones, in one interleaved run (issue 25).

    python -m bench packed_vs_padded --threads 2 --repeats 3 --items 40 [--dtype mixed-bf16]

Workload: BENCHMARKS §1's (every trial plus each item's first turn of a gold-balanced subset of
the moral pressure bank, 31 prompts per item, continuations " wrong" / " acceptable", variants
exact), float32 unless `--dtype` says otherwise, SmolLM2-135M-Instruct. Two instances of the model, each scored by
`interp.score_options`: "padded" with `ScoringConfig(packed=False)`, which is the engine as it was
before packing (its model never leaves transformers' SDPA attention, batches cut where padding
costs more than a forward), and "packed" with the default (rows packed wherever a batch has
padding, attention in runs of rows of similar width, grouped-query keys not copied per head).
Timed: `score_options`, interleaved, the first rotating; the engine's counts of the last run;
max |delta log-prob| between the two. Writes bench/results/packed.json (packed_<dtype>.json for
another dtype; BENCHMARKS.md).
"""

from __future__ import annotations


from bench import common


def main() -> None:
    p = common.bank_parser(__doc__, repeats=3)
    p.add_argument("--dtype", default="float32", help="the --dtype both instances load in")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np

    import interp
    import interp.runner.scoring as scoring
    from interp.runner.scoring import ScoringConfig, score_options

    path = common.model_path(args.model)
    lms = {k: interp.load(path, dtype=args.dtype, threads=args.threads) for k in ("padded", "packed")}
    common.setup(args.threads)
    tok = lms["padded"].tokenizer
    bank = common.pressure_subset(args.items)
    prompts, verdicts, _ = common.pressure_prompts(bank, tok)
    options = common.option_words(verdicts, "exact")
    cfgs = {"padded": ScoringConfig(variants="exact", packed=False), "packed": ScoringConfig(variants="exact")}
    stats = {}
    real_engine = scoring.Engine

    class Recorded(real_engine):
        def run(self, seqs):
            try:
                return super().run(seqs)
            finally:
                stats[self.cfg.packed is not False] = self.stats

    scoring.Engine = Recorded
    for k in lms:  # warm-up (first-call allocations, kernels; the packed model's check)
        score_options(lms[k], prompts[:4], options, cfg=cfgs[k])

    def go(k):
        return lambda: score_options(lms[k], prompts, options, cfg=cfgs[k])

    timing, outs = common.time_interleaved({k: go(k) for k in lms}, args.repeats)
    scoring.Engine = real_engine
    sp = common.ratio(timing["padded"], timing["packed"])
    dmax = float(np.abs(outs["padded"].logp - outs["packed"].logp).max())
    eng = {
        k: {f: getattr(stats[k == "packed"], f) for f in ("forwards", "tokens", "padded_tokens", "packed_forwards")}
        for k in lms
    }
    res = {
        "model": path.name,
        "dtype": args.dtype,
        "items": len(bank),
        "prompts": len(prompts),
        "timing": timing,
        "speedup": sp,
        "engine": eng,
        "max_abs_dlogp": dmax,
        "attention": lms["packed"].backend.model.config._attn_implementation,
    }

    def counts(k):
        e = eng[k]
        return f"{e['forwards']} ({e['packed_forwards']} packed)", f"{e['tokens']:,}", f"{e['padded_tokens']:,}"

    suffix = "" if args.dtype == "float32" else f", {args.dtype}"
    res["report"] = {
        "order": 0.65 if args.dtype == "float32" else 0.66,
        "title": f"Packed forwards vs padded ones at bank size{suffix} (one interleaved run)",
        "what": f"BENCHMARKS §1's workload ({len(prompts)} pressure prompts: {len(bank)} moral items x 31 conditions, "
        f"{args.dtype}) on {path.name}, {args.repeats} runs each, interleaved; two instances of the model. 'padded': "
        "`ScoringConfig(packed=False)`, the engine as it was before packing (transformers' SDPA attention, which "
        "copies grouped-query keys per head when a mask is given; batches cut where padding costs more than a "
        "forward). 'packed': the default (interp.runner.packed: the rows of a padded batch as one sequence of their "
        "real tokens, attention in runs of rows of similar width, grouped keys not copied). Max |delta log-prob| "
        f"between the two: {dmax:.1e} (summation order, amplified by the rounding of the dtype that ran).",
        "summary": [
            f"Packed forwards vs padded ones ({len(prompts)} pressure prompts, {path.name}, {args.dtype}): "
            f"**{sp['median']:.2f}x** (median of {args.repeats} interleaved runs; min/min {sp['min']:.2f}x); max "
            f"|Δ log-prob| {dmax:.1e}."
        ],
        "rerun": f"python -m bench packed_vs_padded --threads {args.threads} --repeats {args.repeats} --items {args.items}"
        + ("" if args.dtype == "float32" else f" --dtype {args.dtype}"),
        "tables": [
            {
                "columns": [
                    "engine",
                    "time: median (min-max)",
                    "speed",
                    "forwards",
                    "tokens computed",
                    "rows x width",
                ],
                "rows": [
                    ["padded", common.fmt_time(timing["padded"]), "1.00x", *counts("padded")],
                    ["packed", common.fmt_time(timing["packed"]), common.fmt_ratio(sp), *counts("packed")],
                ],
            }
        ],
    }
    name = "packed" if args.dtype == "float32" else f"packed_{args.dtype.replace('-', '_')}"
    common.write_results(name, res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


if __name__ == "__main__":
    main()
