"""Achieved FLOP/s of the runner vs this machine's dense fp32 matmul rate, and tokens computed.

Workload: `score_options` on the pressure prompts (trials + first turns) of a gold-balanced
subset of the moral bank, for each --variants mode (`exact`: " wrong" / " acceptable", one
surface form per option; `space_case`: the study's default, {word, Word} x {"", " "} pooled,
where multi-token forms become extra continuation sequences).

One untimed, instrumented run records every backend forward (batch rows B, padded width T,
KV-cache length P, real row lengths, read positions R) and the engine's sequences. FLOPs:

* dense: 2 x (weights of every nn.Linear inside the decoder blocks) per computed position
  (the "2 x non-embedding parameters x tokens" rule; norms and biases ignored);
* attention: 4 x n_heads x head_dim per (query, key) pair per layer (QK^T and AV);
* unembedding: 2 x d_model x vocab per read position (the runner unembeds only there).

"useful" counts real tokens and causal (query, key) pairs; "executed" counts padded positions
and the full (P + T) key rectangle that SDPA computes with a mask. Achieved FLOP/s = FLOPs /
median wall time of --repeats timed runs. The physical limit is `torch.matmul` of two
--matmul-size square fp32 matrices at the same thread count (median of --repeats x 5 runs),
and, for reference, a model-shaped GEMM (rows x d_model) @ (d_model x d_mlp).

Tokens: the runner's computed positions (and its number of forwards) vs what a naive scorer
computes (one full forward per prompt x surface form, unembedding at every position) vs the
fewest any prefix-sharing scorer must compute (each distinct token prefix once: trie nodes).

Rerun (defaults):
    python -m bench flops_achieved --repeats 5 --threads 2 --items 2 --variants exact,space_case
"""

from __future__ import annotations


from bench import common
from bench.flop_counts import Recorder, gemm_rate, matmul_rate, min_tokens, model_shape, naive_counts, runner_counts


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a checkpoint directory")
    p.add_argument("--items", type=int, default=2, help="moral-bank items (0 = all 128)")
    p.add_argument("--variants", default="exact,space_case", help="comma-separated: exact, space, space_case")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--matmul-size", type=int, default=2048)
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import torch

    import interp.runner.scoring as scoring
    from interp.runner.scoring import ScoringConfig, option_variants, score_options, split_continuation

    path, lm = common.load_model(args.model, args.threads)
    tok = lm.tokenizer
    shape = model_shape(lm.backend.model)
    bank = common.pressure_subset(args.items or None)
    prompts, verdicts, _ = common.pressure_prompts(bank, tok)
    res = {
        "model": path.name,
        "items": len(bank),
        "prompts": len(prompts),
        "batch_size": args.batch_size,
        "shape": shape.__dict__,
        "torch_threads": torch.get_num_threads(),
        "modes": {},
    }

    # the machine's dense rate first, at the same thread count
    mm = matmul_rate(args.matmul_size, max(5, args.repeats * 5))
    gemm = gemm_rate(2048, shape.d_model, 1536 if shape.d_model == 576 else 4 * shape.d_model, max(5, args.repeats * 5))
    res["matmul"] = mm
    res["gemm_model_shaped"] = gemm
    limit = mm["gflops_median"] * 1e9
    rows, tok_rows = [], []
    for mode in [m.strip() for m in args.variants.split(",") if m.strip()]:
        options = common.option_words(verdicts, mode)
        cfg = ScoringConfig(variants=mode, batch_size=args.batch_size)
        # one instrumented run: forward shapes and the engine's sequences
        recorder = Recorder(lm.backend)
        seen: list = []
        real_engine = scoring.Engine

        class SpyEngine(real_engine):
            def run(self, seqs):
                seen.extend(seqs)
                return super().run(seqs)

        lm.backend, scoring.Engine = recorder, SpyEngine
        try:
            score_options(lm, prompts, options, cfg=cfg)
        finally:
            lm.backend, scoring.Engine = recorder.inner, real_engine
        counts = runner_counts(recorder.calls, shape)
        forms = [f for o in options for f in option_variants(o, mode)]
        naive_len = [len(split_continuation(tok, pr, f)[0]) for pr in prompts for f in forms]
        naive = naive_counts(naive_len, shape)
        minimum = min_tokens(seen)
        t, _ = common.time_runs(
            lambda: score_options(lm, prompts, options, cfg=cfg), args.repeats, label=f"runner {mode}"
        )
        achieved_useful = counts["flops_useful"] / t["median"]
        achieved_exec = counts["flops_executed"] / t["median"]
        res["modes"][mode] = {
            "options": options,
            "timing": t,
            "runner": counts,
            "naive": naive,
            "minimum": minimum,
            "achieved_gflops_useful": achieved_useful / 1e9,
            "achieved_gflops_executed": achieved_exec / 1e9,
            "fraction_of_matmul_useful": achieved_useful / limit,
            "fraction_of_matmul_executed": achieved_exec / limit,
            "naive_over_runner_tokens": naive["real_tokens"] / counts["real_tokens"],
            "naive_over_runner_flops": naive["flops"] / counts["flops_useful"],
        }
        rows.append(
            [
                mode,
                common.fmt_time(t),
                f"{counts['flops_useful'] / 1e12:.2f} / {counts['flops_executed'] / 1e12:.2f}",
                f"{achieved_useful / 1e9:.0f} / {achieved_exec / 1e9:.0f}",
                f"{achieved_useful / limit:.0%} / {achieved_exec / limit:.0%}",
            ]
        )
        tok_rows.append(
            [
                mode,
                f"{naive['real_tokens']:,} in {naive['forwards']:,} forwards ({naive['flops'] / 1e12:.2f} TFLOP)",
                f"{counts['real_tokens']:,} ({counts['padded_positions']:,} with padding) in "
                f"{counts['forwards']:,} forwards ({counts['flops_useful'] / 1e12:.2f} TFLOP)",
                f"{naive['real_tokens'] / counts['real_tokens']:.1f}x tokens, "
                f"{naive['flops'] / counts['flops_useful']:.1f}x FLOPs",
                f"{minimum['trie']:,}",
            ]
        )
    res["report"] = {
        "order": 4,
        "title": f"4. Achieved FLOP/s and tokens computed ({path.name})",
        "rerun": (
            f"python -m bench flops_achieved --repeats {args.repeats} --threads {args.threads} --items {args.items} "
            f"--variants {args.variants}"
        ),
        "what": (
            f"score_options on {len(prompts)} pressure prompts ({len(bank)} items). Machine limit: fp32 "
            f"torch.matmul {args.matmul_size}^3 at {args.threads} thread(s) = {mm['gflops_median']:.0f} GFLOP/s "
            f"median (best {mm['gflops_best']:.0f}); model-shaped GEMM {gemm['shape']} = "
            f"{gemm['gflops_median']:.0f} GFLOP/s. FLOPs: 2 x {shape.n_dense / 1e6:.1f}M dense weights per "
            "token + attention + unembedding at read positions; useful = real tokens, causal pairs; executed = "
            "with padding and the full key rectangle."
        ),
        "tables": [
            {
                "caption": "Achieved rate",
                "columns": [
                    "variants",
                    "time: median (min-max)",
                    "TFLOP useful / executed",
                    "GFLOP/s useful / executed",
                    "of matmul rate useful / executed",
                ],
                "rows": rows,
            },
            {
                "caption": "Tokens computed",
                "columns": [
                    "variants",
                    "naive scorer",
                    "runner",
                    "naive / runner",
                    "fewest possible (distinct prefixes)",
                ],
                "rows": tok_rows,
            },
        ],
        "findings": [],
    }
    common.write_results("flops", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


if __name__ == "__main__":
    main()
