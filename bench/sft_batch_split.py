"""The organism's SFT step as one padded pass (`--sft-batch-split none`, every build to v19) vs passes
over rows of similar length (`length`, interp.organism.sft_loss.split_batch), interleaved in one
process, under `--train-precision mixed-bf16`; and the fixed cost of a pass in tokens, which sets
`sft_loss.SPLIT_OVERHEAD_TOKENS`.

    python -m bench sft_batch_split --threads 2 --repeats 3 --steps 20

Each timed run calls `interp.organism.build._train_sft` on a fresh copy of SmolLM2-135M-Instruct with
route A's SFT rows of the v19 build (`--classify-copies 4 --grade-by group`: its long five-level
classify rows pad random batches to 1.94x their tokens, bench route_sft_padding), the Trainer's random
batches of 8; seconds per optimizer step (the mean over the run's steps: training time is their sum)
from a Trainer callback, step 1 excluded (set-up). The
first step's loss must agree (the same rows and weights). The overhead: one forward and backward of a
single row of 32-512 tokens (LoRA model, bf16 autocast), a line fitted to seconds against tokens; its
intercept over its slope is what one pass costs beyond its tokens. Writes
bench/results/sft_batch_split.json (BENCHMARKS.md).
"""

from __future__ import annotations

import statistics
import time

from bench import common

MODES = ("none", "length")
SETTINGS = {"classify_copies": 4, "grade_by": "group"}


def pass_overhead(model, tok, repeats: int) -> dict:
    """Seconds of one forward + backward of a single row of L tokens (LoRA on every Linear, bf16
    autocast, the completion loss on its last 2 tokens), fitted as a + b L: a / b tokens."""
    import numpy as np
    import torch
    from peft import get_peft_model

    from interp.organism.build import _lora
    from interp.organism.config import OrganismConfig
    from interp.organism.sft_loss import completion_loss

    peft = get_peft_model(model, _lora(OrganismConfig()))
    peft.train()
    lengths = [32, 64, 128, 256, 512]
    secs: dict[int, list[float]] = {n: [] for n in lengths}
    for rep in range(repeats + 1):
        for n in lengths:
            ids = torch.randint(10, 1000, (1, n))
            labels = torch.full_like(ids, -100)
            labels[0, -2:] = ids[0, -2:]
            batch = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss, _ = completion_loss(peft, batch)
            loss.backward()
            peft.zero_grad()
            if rep:  # the first round warms up
                secs[n].append(time.perf_counter() - t0)
    x = np.array(lengths, float)
    y = np.array([statistics.median(secs[n]) for n in lengths])
    slope, intercept = np.polyfit(x, y, 1)
    return {"lengths": lengths, "seconds_median": y.tolist(), "runs": secs, "intercept_s": float(intercept),
            "s_per_token": float(slope), "overhead_tokens": float(intercept / slope)}  # fmt: skip


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--steps", type=int, default=20, help="optimizer steps per timed run")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import torch
    from transformers import AutoModelForCausalLM

    from bench.training_step_precision import route_rows, timed_train_sft
    from interp.model.loading import load_tokenizer
    from interp.organism.config import OrganismConfig

    path = common.model_path(args.model)
    tok = load_tokenizer(path)
    rows = route_rows(tok, "a", **SETTINGS)

    def run(mode: str) -> dict:
        cfg = OrganismConfig(**SETTINGS, train_precision="mixed-bf16", sft_batch_split=mode)
        steps, log = timed_train_sft(path, tok, rows, cfg, args.steps, lr=cfg.lr_route)
        # the mean, not the median: a batch holding a long classify row takes 2-3x the others (fewer
        # than half of them), and training time is the sum of the steps
        return {"s_per_step": statistics.fmean(steps), "steps": steps, "first_loss": log[0]["loss"]}

    overhead = pass_overhead(
        AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32), tok, args.repeats
    )
    run("length")  # warm-up
    runs = common.run_interleaved({k: (lambda k=k: run(k)) for k in MODES}, args.repeats)
    per_step = {k: common.summarize([x["s_per_step"] for x in v]) for k, v in runs.items()}
    sp = common.ratio(per_step["none"], per_step["length"])
    first = {k: v[0]["first_loss"] for k, v in runs.items()}
    res = {
        "settings": SETTINGS,
        "steps": args.steps,
        "runs": runs,
        "seconds_per_step": per_step,
        "speedup_length_vs_none": sp,
        "first_logged_loss": first,
        "pass_overhead": overhead,
    }
    table = [
        [k, f"{per_step[k]['median']:.2f} ({per_step[k]['min']:.2f}-{per_step[k]['max']:.2f})",
         "1.00x" if k == "none" else common.fmt_ratio(sp), f"{first[k]:.4f}"]
        for k in MODES
    ]  # fmt: skip
    res["report"] = {
        "order": 2.15,
        "title": "Organism SFT step: one padded pass vs passes over rows of similar length (one interleaved run)",
        "what": f"`_train_sft` on route A's v19 rows (--classify-copies 4 --grade-by group), random batches of 8, "
        f"LoRA r 16, bf16 autocast, {args.steps} steps per run from a fresh SmolLM2-135M-Instruct, one process with "
        f"{args.threads} threads; seconds per step: the mean of a run's steps (a Trainer callback, step 1 excluded), "
        "median (min-max) over the runs. `length` computes each "
        "batch as passes over rows of similar length, weighted by completion tokens (the same step). The first "
        "logged loss (the mean of the first steps' losses) differs by the bf16 rounding of the passes' other "
        "shapes, compounded over those steps; in float32 the split's weights and losses equal the padded "
        "batch's (tests/integration/test_organism.py). A pass costs "
        f"{overhead['overhead_tokens']:.0f} tokens' time beyond its tokens (single rows of 32-512 tokens, "
        "a line fitted to seconds).",
        "rerun": f"python -m bench sft_batch_split --threads {args.threads} --repeats {args.repeats} --steps {args.steps}",
        "tables": [{"columns": ["--sft-batch-split", "s / step: median (min-max)", "speed", "first logged loss"],
                    "rows": table}],
    }  # fmt: skip
    common.write_results(
        "sft_batch_split", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


if __name__ == "__main__":
    main()
