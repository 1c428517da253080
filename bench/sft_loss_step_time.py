"""The organism's SFT step through the real trainer: trl's own loss (its always-on float32 fused LM
head) vs `interp.organism.sft_loss` (the head only at completion positions, under autocast), both
under `--train-precision mixed-bf16`, interleaved in one process.

    python -m bench sft_loss_step_time --threads 2 --repeats 3 --steps 6

Each timed run calls `interp.organism.build._train_sft` on a fresh copy of SmolLM2-135M-Instruct
with the default organism's route-A SFT rows; seconds per optimizer step are read from a Trainer
callback (step 1 excluded: it includes the trainer's set-up). The first step's loss is the same
quantity in both (same weights, same batch). Writes bench/results/sft_loss.json (BENCHMARKS.md).
"""

from __future__ import annotations

import statistics

from bench import common

LOSSES = ("trl", "interp")


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--steps", type=int, default=6, help="optimizer steps per timed run")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    from trl import SFTTrainer

    from bench.training_step_precision import route_a_rows, timed_train_sft
    from interp.model.loading import load_tokenizer
    from interp.organism import sft_loss
    from interp.organism.config import OrganismConfig

    cfg = OrganismConfig()
    path = common.model_path(args.model)
    tok = load_tokenizer(path)
    rows = route_a_rows(tok)
    ours = sft_loss.completion_sft_trainer

    def run(loss: str) -> dict:
        sft_loss.completion_sft_trainer = ours if loss == "interp" else (lambda split=True, **kw: SFTTrainer(**kw))
        try:
            steps, log = timed_train_sft(path, tok, rows, cfg, args.steps)
        finally:
            sft_loss.completion_sft_trainer = ours
        return {"s_per_step": statistics.median(steps), "steps": steps, "first_loss": log[0]["loss"]}

    # the loss alone: one padded pass per batch, as when this was measured (bench sft_batch_split: the split)
    cfg = OrganismConfig(**{**cfg.to_dict(), "train_precision": "mixed-bf16", "sft_batch_split": "none"})
    run("interp")  # warm-up
    runs = common.run_interleaved({k: (lambda k=k: run(k)) for k in LOSSES}, args.repeats)
    per_step = {k: common.summarize([x["s_per_step"] for x in v]) for k, v in runs.items()}
    sp = common.ratio(per_step["trl"], per_step["interp"])
    first = {k: v[0]["first_loss"] for k, v in runs.items()}
    res = {
        "steps": args.steps,
        "batch_size": cfg.batch_size,
        "runs": runs,
        "seconds_per_step": per_step,
        "speedup_interp_vs_trl": sp,
        "first_step_loss": first,
    }
    table = [
        [
            k,
            f"{per_step[k]['median']:.2f} ({per_step[k]['min']:.2f}-{per_step[k]['max']:.2f})",
            "1.00x" if k == "trl" else common.fmt_ratio(sp),
            f"{first[k]:.4f}",
        ]
        for k in LOSSES
    ]
    res["report"] = {
        "order": 2.1,
        "title": "Organism SFT step: trl's loss vs interp's completion loss (one interleaved run)",
        "what": f"`_train_sft` (trl SFTTrainer, LoRA r {cfg.lora_r} on every Linear, batches of {cfg.batch_size} real "
        f"route-A rows, bf16 autocast) for {args.steps} steps per run from a fresh SmolLM2-135M-Instruct, one "
        f"process with {args.threads} threads; seconds per step from a Trainer callback, step 1 excluded. trl "
        "1.16 computes the LM head over every position in float32 outside autocast; interp's loss applies it "
        "only at completion positions, under autocast (interp/organism/sft_loss.py).",
        "rerun": f"python -m bench sft_loss_step_time --threads {args.threads} --repeats {args.repeats} --steps {args.steps}",
        "tables": [{"columns": ["SFT loss", "s / step: median (min-max)", "speed", "first-step loss"], "rows": table}],
    }
    common.write_results("sft_loss", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


if __name__ == "__main__":
    main()
