"""The organism's training step, float32 vs bf16 autocast (`--train-precision mixed-bf16`),
interleaved in one process: seconds per optimizer step and what autocast changes in the loss.

    python -m bench training_step_precision --threads 2 --repeats 3 --steps 4

The steps are the real route-A SFT data of the default organism (SmolLM2-135M-Instruct, LoRA r 16
on every Linear, batches of 8, loss on the completion only), run the way trl's SFTTrainer runs
them (right-padded batch, AdamW on the LoRA parameters); each timed run starts from the same
adapter state. Writes bench/results/train_precision.json (a section of BENCHMARKS.md), or
train_precision_no_bf16_kernels.json on a CPU without bf16 matrix kernels (AVX-512 BF16 or AMX;
`interp.organism.build.bf16_matmul_fast`), where autocast falls back to torch's reference gemm:
the two kinds of machine get a section each.
"""

from __future__ import annotations


from bench import common

PRECISIONS = ("float32", "mixed-bf16")


def route_rows(tok, route: str = "a", **settings) -> list[dict]:
    """The organism's route SFT rows (prompt, completion, kind), as `interp organism build` writes
    them (`settings` override OrganismConfig's defaults: a design try's options)."""
    from interp.organism import data as D
    from interp.organism.build import _route_rows
    from interp.organism.config import OrganismConfig
    from interp.studies.base import load_template
    from interp.studies.pressure import load_pressure_bank

    cfg = OrganismConfig(**settings)
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, cfg.eval_items, cfg.planted, cfg.seed, plant=cfg.plant)
    w = D.Writer(tok, load_template("pressure_v1"))
    return _route_rows(bank, w, tok, sets, cfg)[0][f"route_{route}_sft.jsonl"]


def route_a_rows(tok) -> list[dict]:
    """The default organism's route-A SFT rows."""
    return route_rows(tok, "a")


def route_batches(tok, n_batches: int, batch_size: int):
    """The first `n_batches` batches of `route_a_rows`, tokenized as prompt + completion with the
    prompt's labels masked (-100)."""
    import torch

    rows = route_a_rows(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    batches = []
    for b in range(n_batches):
        ids, labels = [], []
        for r in rows[b * batch_size : (b + 1) * batch_size]:
            p = tok(r["prompt"], add_special_tokens=False)["input_ids"]
            c = tok(r["completion"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            ids.append(p + c)
            labels.append([-100] * len(p) + c)
        n = max(map(len, ids))
        batches.append(
            dict(
                input_ids=torch.tensor([x + [pad] * (n - len(x)) for x in ids]),
                attention_mask=torch.tensor([[1] * len(x) + [0] * (n - len(x)) for x in ids]),
                labels=torch.tensor([y + [-100] * (n - len(y)) for y in labels]),
            )
        )
    return batches


def timed_train_sft(path, tok, rows: list[dict], cfg, steps: int, lr: float | None = None) -> tuple[list[float], list]:
    """`interp.organism.build._train_sft` from a fresh float32 copy of the model at `path`, with the
    checkpoint saver replaced by a step clock: the seconds of every optimizer step after the first
    (which holds the trainer's set-up) and the logged losses."""
    import tempfile
    import time
    from pathlib import Path

    import torch
    from transformers import AutoModelForCausalLM, TrainerCallback

    import interp.organism.build as B

    stamps: list[float] = []

    class Stamp(TrainerCallback):
        def on_step_end(self, *a, **k):
            stamps.append(time.perf_counter())

    class Saver:  # _train_sft's checkpoint saver, replaced by the step clock
        def __init__(self, at):
            self.callback = Stamp()

    saver, B._Saver = B._Saver, Saver
    try:
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        with tempfile.TemporaryDirectory() as tmp:
            _, log = B._train_sft(model, tok, rows, cfg, steps, {}, Path(tmp), lr=lr)
    finally:
        B._Saver = saver
    return [b - a for a, b in zip(stamps, stamps[1:])], log


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--steps", type=int, default=4, help="optimizer steps per timed run")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from interp.model.loading import load_tokenizer
    from interp.organism.config import OrganismConfig

    cfg = OrganismConfig()
    path = common.model_path(args.model)
    tok = load_tokenizer(path)
    batches = route_batches(tok, args.steps, cfg.batch_size)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, target_modules="all-linear")
    model = get_peft_model(model, lora)
    model.train()
    params = [q for q in model.parameters() if q.requires_grad]
    start = [q.detach().clone() for q in params]

    def run(bf16: bool) -> list[float]:
        with torch.no_grad():
            for q, s in zip(params, start):
                q.copy_(s)
        opt = torch.optim.AdamW(params, lr=cfg.lr_route)
        losses = []
        for batch in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
        return losses

    run(False)  # warm-up
    run(True)
    fns = {"float32": lambda: run(False), "mixed-bf16": lambda: run(True)}
    timing, outs = common.time_interleaved(fns, args.repeats)
    per_step = {k: {s: v / args.steps for s, v in t.items() if isinstance(v, float)} for k, t in timing.items()}
    dloss = [abs(a - b) for a, b in zip(outs["float32"], outs["mixed-bf16"])]
    tokens = [int(b["attention_mask"].sum()) for b in batches]
    res = {
        "steps": args.steps,
        "batch_size": cfg.batch_size,
        "tokens_per_step": tokens,
        "timing": timing,
        "seconds_per_step": per_step,
        "speedup": {"mixed-bf16 vs float32": common.ratio(timing["float32"], timing["mixed-bf16"])},
        "loss": {k: outs[k] for k in PRECISIONS},
        "first_step_abs_dloss": dloss[0],  # same weights: what autocast alone changes
        "max_abs_dloss": max(dloss),  # later steps also differ by their different updates
    }
    rows = [
        [
            k,
            common.fmt_time(timing[k]),
            f"{per_step[k]['median']:.2f}",
            "1.00x" if k == "float32" else common.fmt_ratio(res["speedup"]["mixed-bf16 vs float32"]),
            " / ".join(f"{x:.4f}" for x in outs[k]),
        ]
        for k in PRECISIONS
    ]
    from interp.organism.build import bf16_matmul_fast

    fast = bf16_matmul_fast()
    res["bf16_matmul_fast"] = fast
    res["report"] = {
        "order": 2,
        "title": "Organism training step: float32 vs bf16 autocast (one interleaved run)"
        + ("" if fast else ", on a CPU without bf16 kernels"),
        "what": f"SmolLM2-135M-Instruct + LoRA r {cfg.lora_r} on every Linear, {args.steps} optimizer steps of "
        f"{cfg.batch_size} real route-A SFT rows ({sum(tokens)} tokens), each run from the same adapter, one "
        f"process with {args.threads} threads. The first step's loss (same weights) differs by {dloss[0]:.2g} between "
        f"the two; later steps, after different updates at lr {cfg.lr_route:g}, by up to {max(dloss):.2g}.",
        "rerun": f"python -m bench training_step_precision --threads {args.threads} --repeats {args.repeats} "
        f"--steps {args.steps}",
        "tables": [
            {
                "columns": ["train precision", f"time of {args.steps} steps", "s / step", "speed", "loss per step"],
                "rows": rows,
            }
        ],
    }
    common.write_results(
        "train_precision" if fast else "train_precision_no_bf16_kernels",
        res,
        threads=args.threads,
        results_dir=args.results_dir,
        started_load=start_load,
    )


if __name__ == "__main__":
    main()
