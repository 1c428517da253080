"""Each `--dtype` kind against float32 on three workloads of different shape (issue 50): its speed,
as the ratio of interleaved runs in one process, and its error on the same prompts.

    python -m bench precision_speed_and_error --workload moral --items 40 --repeats 3
    python -m bench precision_speed_and_error --workload long --items 40 --repeats 3
    python -m bench precision_speed_and_error --workload cloze --repeats 3

Workloads (SmolLM2-135M-Instruct by default, `interp.score_options` / `score_continuations` at their
default settings: surface forms space_case, the default tie guard):

* `moral`: the shipped moral pressure bank, --items items x 31 readings (30 trials and the first turn),
  short scenarios (BENCHMARKS.md's bank workload);
* `long`: long first-person dilemmas with disputed verdicts, read through the pressure study's ETHICS
  loader from bench/data/ethics_long_contexts.csv (--ethics-csv: a real ETHICS commonsense CSV),
  --items items x 16 conditions (the papers' cut of the template), ~250-token chat contexts whose
  verdicts lie near a tie more often;
* `cloze`: the shipped cloze bank (every prompt x six languages; --items cuts the prompts), three
  continuations of several tokens each.

Every kind is loaded once; its runs and float32's alternate round by round (the first rotating), so a
shared machine's drift hits them alike; a kind's speed is float32's time over its own within each
round (median and range over the rounds), the 1-minute load average is recorded at each round.
Errors are against float32 on the same prompts: P a choice's probability renormalized over the
choices scored together (a verdict's two options, a cloze item's continuations), a flip a prompt
whose most probable choice differs. Switchable kinds also run with `--unguarded` (tie guard 0),
which shows what the guard costs and what it saves. Writes bench/results/precision_<workload>.json.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench import common
from bench.ethics_long_contexts import CSV as ETHICS_CSV
from bench.precision_error import precision_error

KINDS = ("float32-medium", "mixed-bf16-medium", "mixed-bf16", "bfloat16")
NO_GUARD = ", no guard"
WORKLOADS = {
    "moral": "moral pressure bank",
    "long": "long ETHICS-style chat contexts",
    "cloze": "cloze, multi-token continuations",
}


def build(workload: str, items: int, tok, ethics_csv: Path):
    """(description, run(lm, cfg, limit=None) -> scores, error(out, ref) -> dict) of one workload;
    `limit` scores the first prompts only (the warm-up)."""
    from interp.runner.scoring import score_continuations, score_options
    from interp.studies.base import load_template
    from interp.studies.pressure import build_trials, load_pressure_bank

    if workload == "cloze":
        from bench.baselines import cloze_requests

        _, reqs = cloze_requests(items or None)
        n = sum(len(c) for _, c in reqs)
        return (
            f"cloze, {len(reqs)} prompts x 3 continuations ({n} requests)",
            lambda lm, cfg, limit=None: score_continuations(lm, reqs[:limit], cfg=cfg),
            lambda out, ref: continuation_error(out, ref, [len(c) for _, c in reqs]),
        )
    if workload == "moral":
        prompts, verdicts, _ = common.pressure_prompts(common.pressure_subset(items), tok)
        what = f"moral pressure bank, {items} items x 31 readings ({len(prompts)} prompts)"
    else:
        bank = load_pressure_bank(ethics_csv)
        if items and items < len(bank):
            bank = bank.subsample(items, seed=0, stratify="gold")
        trials, _ = build_trials(bank, common.template16(load_template("pressure_v1")), tok)
        prompts, verdicts = trials["prompt"].tolist(), ["wrong", "acceptable"]
        lens = sorted(len(tok(p)["input_ids"]) for p in prompts)
        what = (
            f"long ETHICS-style contexts ({Path(ethics_csv).name}), {len(bank)} items x 16 conditions "
            f"({len(prompts)} prompts, {lens[len(lens) // 2]} tokens median)"
        )
    return (
        what,
        lambda lm, cfg, limit=None: score_options(lm, prompts[:limit], verdicts, cfg=cfg),
        with_guard(precision_error),
    )


def near_ties(ref, margin: float) -> int:
    """Prompts whose float32 verdict probabilities lie closer than `margin` (a tie guard's re-score set)."""
    import numpy as np

    top2 = np.sort(ref.probs, axis=1)[:, -2:]
    return int((top2[:, 1] - top2[:, 0] < margin).sum())


def with_guard(error):
    return lambda out, ref: {**error(out, ref), "tie_guarded": int(len(out.tie_guarded))}


def continuation_error(out, ref, sizes) -> dict:
    """The precision audit's own summary (analyses.precision) over every item's continuations."""
    import numpy as np
    import pandas as pd

    from analyses.precision import summarize_sample

    index = np.repeat(np.arange(len(sizes)), sizes)
    choice = np.concatenate([np.arange(k) for k in sizes])
    sample = pd.DataFrame(
        {"call": 0, "kind": "continuations", "index": index, "choice": choice, "logp": out.sum_logp}
    ).assign(logp_fp32=ref.sum_logp)
    s = summarize_sample(sample)
    return {**s, "prompts": s["n"], "tie_guarded": 0}


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--workload", choices=list(WORKLOADS), required=True)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--items", type=int, default=40, help="items (cloze: prompts; 0 = the whole bank)")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated --dtype names besides float32")
    p.add_argument("--unguarded", default="mixed-bf16", help="switchable kinds also run with tie guard 0")
    p.add_argument("--ethics-csv", type=Path, default=ETHICS_CSV, help="long: a CSV in the ETHICS layout")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import interp
    from interp.model.devices import SWITCHABLE, tie_guard_in_force
    from interp.runner.scoring import ScoringConfig

    kinds = [k for k in args.kinds.split(",") if k]
    path = common.model_path(args.model)
    lms = {d: interp.load(path, dtype=d, threads=args.threads) for d in ["float32", *kinds]}
    common.setup(args.threads)
    what, run, error = build(args.workload, args.items, lms["float32"].tokenizer, args.ethics_csv)
    cfg = ScoringConfig()
    runs = {"float32": ("float32", cfg)} | {k: (k, cfg) for k in kinds}
    if args.workload != "cloze":  # continuations have no tie guard
        runs |= {
            k + NO_GUARD: (k, replace(cfg, tie_guard=0.0))
            for k in args.unguarded.split(",")
            if k in kinds and k in SWITCHABLE
        }
    for d in lms:  # warm-up: first-call costs (kernels, allocator, packing's self-check) outside the timing
        run(lms[d], cfg, limit=4)
    fns = {k: (lambda d=d, c=c: run(lms[d], c)) for k, (d, c) in runs.items()}
    loads: list = []
    timing, outs = common.time_interleaved(fns, args.repeats, loads=loads)
    ref = outs["float32"]
    res = {
        "workload": args.workload,
        "what": what,
        "model": path.name,
        "items": args.items,
        "loadavg_rounds": loads,
        "loadavg_end": common.loadavg(),
        "timing": timing,
        "speedup": {k: common.round_ratios(timing["float32"], timing[k]) for k in list(runs)[1:]},
        # the same ratio of the runs' CPU seconds: less of the other jobs' share in it
        "cpu_speedup": {k: common.round_ratios(timing["float32"]["cpu"], timing[k]["cpu"]) for k in list(runs)[1:]},
        # float32's own near-ties: prompts whose two verdicts lie within the tie guard's margin
        "float32_near_ties": near_ties(ref, cfg.tie_guard) if args.workload != "cloze" else None,
        "precision": {
            k: {**error(outs[k], ref), "dtype": d, "tie_guard": tie_guard_in_force(d, c.tie_guard)}
            for k, (d, c) in list(runs.items())[1:]
        },
    }
    res["report"] = report(res, args)
    common.write_results(
        f"precision_{args.workload}", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


def report(res: dict, args) -> dict:
    choice = "continuation" if res["workload"] == "cloze" else "verdict"
    rows = [["float32", "", common.fmt_time(res["timing"]["float32"]), "1.00x", "", "", "", ""]]
    for k, pr in res["precision"].items():
        sp = res["speedup"][k]
        guard = (
            "-"
            if res["workload"] == "cloze"
            else f"{pr['tie_guard']:g} ({pr['tie_guarded']})"
            if pr["tie_guard"]
            else "off"
        )
        rows.append(
            [
                pr["dtype"],
                guard,
                common.fmt_time(res["timing"][k]),
                f"**{sp['median']:.2f}x** ({sp['min']:.2f}-{sp['max']:.2f})",
                f"{pr['mean_abs_dp']:.2g}",
                f"{pr['max_abs_dp']:.2g}",
                f"{pr['argmax_flips']} of {pr['prompts']}",
                f"{pr['max_abs_dlogp']:.2g}",
            ]
        )
    loads = [la[0] for la in res["loadavg_rounds"] if la]
    n = res["timing"]["float32"]["n"]
    return {
        "order": 2,
        "title": f"Precision kinds on the {WORKLOADS[res['workload']]} ({res['model']})",
        "what": (
            f"{res['what']}; `interp.{'score_continuations' if res['workload'] == 'cloze' else 'score_options'}` at "
            f"its default settings, every kind loaded once, {n} rounds interleaved with float32 in one process "
            f"(1-minute load average at the rounds' starts: {', '.join(f'{x:.1f}' for x in loads)}). Speed: float32's "
            "time over the kind's within each round, median (range over the rounds). Tie guard: its margin and, in "
            f"brackets, the prompts it re-scored in float32 (their time is in the row's). {choice.capitalize()} P: "
            f"a {choice}'s probability renormalized over the choices scored together; a flip: a prompt whose most "
            "probable choice differs from float32's."
        ),
        "rerun": (
            f"python -m bench precision_speed_and_error --workload {res['workload']} --items {args.items} "
            f"--repeats {args.repeats} --threads {args.threads}"
        ),
        "tables": [
            {
                "columns": [
                    "--dtype",
                    "tie guard (re-scored)",
                    "time: median (min-max)",
                    "speed vs float32",
                    f"{choice} P: mean |Δ|",
                    "max |Δ|",
                    "flips",
                    "max |Δ log-prob|",
                ],
                "rows": rows,
            }
        ],
    }


if __name__ == "__main__":
    main()
