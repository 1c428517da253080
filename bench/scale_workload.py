"""The papers' workload on paper: tokens, FLOPs, cache bytes, GPU-hours, workers for a day.

Counts come from the engine itself: the shipped moral and factual banks are rendered with the
shipped pressure template cut to the paper's 16 conditions per item (2 planted verdicts x
(2 stated opinions + 3 bare challenges + 3 neutral fillers)) plus the unpressured first turn,
in the chat format of each --tokenizers model, and scored by `score_options` (default
ScoringConfig, variants space_case, one residual layer) on a 1-layer, width-16 random model
that carries that tokenizer: the backend is wrapped to record every forward (rows, padded
width, cached prefix length, real tokens, read positions). The same run is repeated with
prefix reuse off. FLOPs for the paper's models are then those recorded shapes x the model's
dense weights, attention and unembedding at read positions (bench.flop_counts.Shape).

GPU time is an ESTIMATE: no GPU was measured. Throughput = (the fraction of the CPU's fp32
matmul rate the engine achieved in bench/results/flops.json) x --gpu-peak-tflops; weight
loading at --disk-gbps; sampled decoding bound below by reading all weights once per step
at --hbm-tbps.

Rerun:
    python -m bench scale_workload --tokenizers models/smollm2-135m-instruct,models/gemma3-270m
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from bench import common
from bench.flop_counts import Recorder, Shape, runner_counts

# Public configs (Hugging Face config.json of each model); dense = every Linear in the decoder
# stack (attention + MLP), i.e. all weights but the embedding and the LM head.
MODELS = {
    "7B (OLMo-2-1124-7B)": dict(
        n_layers=32,
        d_model=4096,
        n_heads=32,
        head_dim=128,
        vocab=100352,
        n_dense=6_480_000_000,
        n_total=7_300_000_000,
        gpus=1,
    ),
    "8B (Llama-3.1-8B)": dict(
        n_layers=32,
        d_model=4096,
        n_heads=32,
        head_dim=128,
        vocab=128256,
        n_dense=6_980_000_000,
        n_total=8_030_000_000,
        gpus=1,
    ),
    "70B (Llama-3.1-70B)": dict(
        n_layers=80,
        d_model=8192,
        n_heads=64,
        head_dim=128,
        vocab=128256,
        n_dense=68_450_000_000,
        n_total=70_550_000_000,
        gpus=2,
    ),
}
PAPER = {"checkpoints": 741, "items": 240, "conditions": 16}


def record_bank(lm, rec, bank_ref: str, reuse: bool) -> dict:
    from interp.runner.scoring import ScoringConfig, score_options
    from interp.studies.base import load_template
    from interp.studies.pressure import build_trials, load_pressure_bank

    bank = load_pressure_bank(bank_ref)
    tmpl = common.template16(load_template("pressure_v1"))
    trials, first = build_trials(bank, tmpl, lm.tokenizer)
    assert len(trials) == PAPER["conditions"] * len(bank)
    verdicts = list(tmpl.data["verdicts"][bank.items["domain"].iloc[0]])
    prompts = trials["prompt"].tolist() + first["prompt"].tolist()
    rec.calls.clear()
    score_options(lm, prompts, verdicts, layers=[0], cfg=ScoringConfig(prefix_reuse=reuse))
    lens = [len(lm.tokenizer(p)["input_ids"]) for p in trials["prompt"]]
    return {"items": len(bank), "prompts": len(prompts), "calls": list(rec.calls), "trial_prompt_tokens": lens}


def gpu_seconds(flops: float, eff: float, peak_tflops: float) -> float:
    return flops / (eff * peak_tflops * 1e12)


def main() -> None:
    p = common.parser(__doc__, repeats=1)
    p.add_argument("--tokenizers", default=str(common.MODELS["smollm2"]) + "," + str(common.MODELS["gemma3"]))
    p.add_argument("--gpu-name", default="NVIDIA H100 SXM (bf16 dense)")
    p.add_argument("--gpu-peak-tflops", type=float, default=989.0)
    p.add_argument("--hbm-tbps", type=float, default=3.35, help="GPU memory bandwidth, TB/s")
    p.add_argument("--disk-gbps", type=float, default=2.0, help="weight loading, GB/s per worker")
    p.add_argument("--selected-factual", type=int, default=74, help="checkpoints with the factual bank (10%%)")
    p.add_argument("--samples", type=int, default=21, help="sampled replies per factual trial")
    p.add_argument("--max-new-tokens", type=int, default=6)
    p.add_argument("--gen-batch", type=int, default=8, help="replies per generate() call (runner.generate)")
    p.add_argument("--mix-70b", type=int, default=41, help="of the 741 checkpoints, how many are 70B (assumed)")
    args = p.parse_args()
    common.setup(args.threads)

    import interp
    from interp.model.loading import load_tokenizer
    from interp.testing import build_tiny_arch

    flops_json = json.loads((common.RESULTS / "flops.json").read_text())
    mode = (
        flops_json["modes"]["space_case"]
        if "space_case" in flops_json["modes"]
        else next(iter(flops_json["modes"].values()))
    )
    eff = mode["fraction_of_matmul_executed"]  # achieved / fp32 matmul rate, same machine, same run

    out = {"paper": PAPER, "models": MODELS, "assumptions": vars(args) | {"efficiency": eff}, "tokenizers": {}}
    for tok_dir in args.tokenizers.split(","):
        tok = load_tokenizer(Path(tok_dir))
        with tempfile.TemporaryDirectory() as tmp:
            d = build_tiny_arch(Path(tmp) / "m", "llama", n_layers=1, d_model=16, tokenizer=tok)
            lm = interp.load(d)
            rec = Recorder(lm.backend)
            lm.backend = rec
            res = {}
            for bank in ("moral", "factual"):
                for reuse in (True, False):
                    res[f"{bank}/{'reuse' if reuse else 'no-reuse'}"] = record_bank(lm, rec, bank, reuse)
        out["tokenizers"][Path(tok_dir).name] = res
    report = analyse(out, args)
    out["report_md"] = report
    for res in out["tokenizers"].values():  # keep the totals, not every recorded forward
        for r in res.values():
            calls, lens = r.pop("calls"), r.pop("trial_prompt_tokens")
            r.update(
                forwards=len(calls),
                real_tokens=sum(sum(c["lens"]) for c in calls),
                padded_positions=sum(c["B"] * c["T"] for c in calls),
                mean_trial_prompt_tokens=sum(lens) / len(lens),
            )
    common.write_results("scale", out, threads=args.threads, results_dir=args.results_dir)
    print(report)


def analyse(out: dict, args) -> str:
    eff, peak = out["assumptions"]["efficiency"], args.gpu_peak_tflops
    lines = []
    tok_rows, cost_rows = [], []
    per_ck = {}  # (tokenizer, model) -> seconds per checkpoint (moral, reuse) and per factual checkpoint
    for tname, res in out["tokenizers"].items():
        for bank in ("moral", "factual"):
            r, n = res[f"{bank}/reuse"], res[f"{bank}/no-reuse"]
            scale = PAPER["items"] / r["items"]
            tr = sum(sum(c["lens"]) for c in r["calls"]) * scale
            tn = sum(sum(c["lens"]) for c in n["calls"]) * scale
            pr = sum(c["B"] * c["T"] for c in r["calls"]) * scale
            tok_rows.append(
                [
                    tname,
                    bank,
                    f"{r['items']} -> {PAPER['items']}",
                    f"{tn:,.0f}",
                    f"{tr:,.0f}",
                    f"{pr:,.0f}",
                    f"{tn / tr:.2f}x",
                ]
            )
        for mname, m in MODELS.items():
            shape = Shape(
                n_dense=m["n_dense"],
                n_layers=m["n_layers"],
                n_heads=m["n_heads"],
                head_dim=m["head_dim"],
                d_model=m["d_model"],
                vocab=m["vocab"],
            )
            moral = runner_counts(res["moral/reuse"]["calls"], shape)
            moral_nr = runner_counts(res["moral/no-reuse"]["calls"], shape)
            s_items = PAPER["items"] / res["moral/reuse"]["items"]
            f_moral = moral["flops_executed"] * s_items
            f_moral_nr = moral_nr["flops_executed"] * s_items
            fac = runner_counts(res["factual/reuse"]["calls"], shape)
            f_items = PAPER["items"] / res["factual/reuse"]["items"]
            f_fac_slot = fac["flops_executed"] * f_items
            # sampled replies: prefill once per generate() batch, then max_new_tokens decode steps per reply
            lens = res["factual/reuse"]["trial_prompt_tokens"]
            batches = math.ceil(args.samples / args.gen_batch)
            prefill = sum(shape.dense(L) + shape.attn(L * (L + 1) / 2) + shape.unembed(L) for L in lens) * batches
            steps = len(lens) * batches * args.max_new_tokens
            dec_tokens = len(lens) * args.samples * args.max_new_tokens
            L0 = sum(lens) / len(lens)
            decode = dec_tokens * (shape.dense(1) + shape.unembed(1) + shape.attn(L0 + args.max_new_tokens / 2))
            weight_bytes = 2 * m["n_total"]
            t_decode = steps * f_items * max(weight_bytes / (args.hbm_tbps * 1e12), 0.0) + gpu_seconds(
                decode * f_items, eff, peak
            )
            t_prefill = gpu_seconds(prefill * f_items, eff, peak)
            load_s = weight_bytes / (args.disk_gbps * 1e9)
            t_moral = gpu_seconds(f_moral, eff, peak)
            t_fac = gpu_seconds(f_fac_slot, eff, peak) + t_prefill + t_decode
            per_ck[(tname, mname)] = {
                "moral": t_moral,
                "moral_no_reuse": gpu_seconds(f_moral_nr, eff, peak),
                "factual": t_fac,
                "load": load_s,
                "gpus": m["gpus"],
            }
            cost_rows.append(
                [
                    tname,
                    mname,
                    f"{f_moral_nr / 1e15:.1f}",
                    f"{f_moral / 1e15:.1f}",
                    f"{t_moral / 60:.1f} min",
                    f"{t_fac / 60:.1f} min",
                    f"{load_s:.0f} s",
                    str(m["gpus"]),
                ]
            )
    lines.append(
        "| tokenizer | bank | items (shipped -> paper) | tokens without prefix reuse | tokens with reuse "
        "| positions incl. padding | saved |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    lines += ["| " + " | ".join(r) + " |" for r in tok_rows]
    lines.append("")
    lines.append(
        "| tokenizer | model | PFLOP / checkpoint, no reuse | PFLOP, reuse | moral bank, GPU time "
        "| + factual (slot + 21 samples) | weight load | GPUs per worker |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    lines += ["| " + " | ".join(r) + " |" for r in cost_rows]
    lines.append("")
    # totals: 741 checkpoints, (741 - mix_70b) at 8B, mix_70b at 70B; factual at selected ones
    n70, n_small = args.mix_70b, PAPER["checkpoints"] - args.mix_70b
    lines.append(
        f"| tokenizer | mix | GPU-hours (moral, every checkpoint) | + factual at {args.selected_factual} "
        "| + loading | total GPU-hours | 1-GPU workers to finish in 24 h |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for tname in out["tokenizers"]:
        for label, mix in (
            (f"all {PAPER['checkpoints']} at 7B", {"7B (OLMo-2-1124-7B)": PAPER["checkpoints"]}),
            (f"{n_small} at 8B + {n70} at 70B", {"8B (Llama-3.1-8B)": n_small, "70B (Llama-3.1-70B)": n70}),
        ):
            moral = fac = load = 0.0
            for mname, count in mix.items():
                c = per_ck[(tname, mname)]
                moral += count * c["moral"] * c["gpus"]
                load += count * c["load"] * c["gpus"]
                fac += args.selected_factual * count / PAPER["checkpoints"] * c["factual"] * c["gpus"]
            total_h = (moral + fac + load) / 3600
            lines.append(
                f"| {tname} | {label} | {moral / 3600:.1f} | {fac / 3600:.1f} | {load / 3600:.1f} | "
                f"{total_h:.1f} | {max(1, math.ceil(total_h / 24))} |"
            )
    lines.append("")
    rows = PAPER["items"] * (PAPER["conditions"] + 1)  # trials + first turn, per bank
    lines.append(
        f"Residual cache per checkpoint and bank ({rows:,} rows = {PAPER['items']} items x "
        f"({PAPER['conditions']} conditions + first turn)), and for the moral bank at all "
        f"{PAPER['checkpoints']} checkpoints:"
    )
    lines.append("")
    lines.append(
        "| model | layers cached | float16 (default resid_dtype) | float32 | 741 checkpoints, float16 | 741, float32 |"
    )
    lines.append("|---|---|---|---|---|---|")
    for mname, m in MODELS.items():
        for label, k in (("1 (floor(3n/4))", 1), ("4 (every n/4)", 4), (f"all {m['n_layers']}", m["n_layers"])):
            b16 = rows * k * m["d_model"] * 2
            b32 = 2 * b16
            lines.append(
                f"| {mname} | {label} | {_size(b16)} | {_size(b32)} | {_size(b16 * PAPER['checkpoints'])} | "
                f"{_size(b32 * PAPER['checkpoints'])} |"
            )
    return "\n".join(lines)


def _size(b: float) -> str:
    for unit, f in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if b >= f:
            return f"{b / f:.1f} {unit}"
    return f"{b / 2**10:.0f} KiB"


if __name__ == "__main__":
    main()
