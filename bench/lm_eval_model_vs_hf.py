"""lm-eval with `--model interp` vs `--model hf` on the same local tasks (lm_eval 0.4.13).

Tasks: interp.integrations.lm_eval_tasks.write_tasks (built from the shipped banks, no download):
interp_factual and interp_moral (two-choice multiple choice), interp_cloze (three completions in
six languages, CrowS-Pairs style) and interp_rolling (loglikelihood_rolling). Both models are
built once (`InterpLM(pretrained=DIR)`, `HFLM(pretrained=DIR, dtype=float32, batch_size=16)`),
then `lm_eval.simple_evaluate(model=<that object>, tasks=...)` runs the tasks --repeats times,
the two interleaved, so each timing is the whole evaluation minus model loading. Agreement:
max |delta| over every request's log-likelihood (and is_greedy flags equal).

Rerun (defaults; `--items 0` takes every item of every bank, written as lm_eval_model_bank.json):
    python -m bench lm_eval_model_vs_hf --repeats 3 --threads 2 --items 8
    python -m bench lm_eval_model_vs_hf --repeats 3 --threads 2 --items 0
"""

from __future__ import annotations

import time

from bench import common


def _responses(result: dict) -> dict[str, list]:
    out = {}
    for task, samples in result["samples"].items():
        out[task] = [r[0] for s in sorted(samples, key=lambda s: s["doc_id"]) for r in s["resps"]]
    return out


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a checkpoint directory")
    p.add_argument(
        "--items", type=int, default=8, help="items per bank (cloze: prompt ids, x6 languages); 0: every item"
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument(
        "--dtype", default="float32", help="the interp model's --dtype (HFLM stays float32): e.g. float32-medium"
    )
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np
    import torch

    import lm_eval
    from lm_eval.models.huggingface import HFLM

    from interp.integrations.lm_eval_model import InterpLM

    path = common.model_path(args.model)
    tasks, tm = common.local_lm_eval_tasks(args.items)
    ours = InterpLM(pretrained=str(path), batch_size=args.batch_size, threads=args.threads, dtype=args.dtype)
    ref = HFLM(
        pretrained=str(path),
        backend="causal",
        device="cpu",
        dtype="float32",
        batch_size=args.batch_size,
        trust_remote_code=False,
    )
    torch.set_num_threads(args.threads)

    # where the time goes: seconds inside each model's request-serving methods (tokenized requests
    # -> log-likelihoods: the forwards), the rest of an evaluation being lm-eval's own work
    serving = {"hf": [], "interp": []}
    depth = {"hf": 0, "interp": 0}

    def timed(model, key):
        for meth in ("_loglikelihood_tokens", "loglikelihood_rolling"):
            inner = getattr(model, meth)

            def wrapper(*a, _inner=inner, _meth=meth, **kw):
                if depth[key]:  # HFLM's rolling calls its _loglikelihood_tokens: count the outer call
                    return _inner(*a, **kw)
                depth[key] += 1
                t0 = time.perf_counter()
                try:
                    return _inner(*a, **kw)
                finally:
                    depth[key] -= 1
                    serving[key][-1][_meth] += time.perf_counter() - t0

            setattr(model, meth, wrapper)

    timed(ref, "hf")
    timed(ours, "interp")

    def run(model, key):
        def go():
            serving[key].append({"_loglikelihood_tokens": 0.0, "loglikelihood_rolling": 0.0})
            return lm_eval.simple_evaluate(
                model=model, tasks=tasks, task_manager=tm, log_samples=True, verbosity="ERROR"
            )

        return go

    timing, outs = common.time_interleaved({"hf": run(ref, "hf"), "interp": run(ours, "interp")}, args.repeats)
    import statistics

    serve = {k: statistics.median(sum(r.values()) for r in v) for k, v in serving.items()}
    # per request type (HFLM's rolling calls its _loglikelihood_tokens inside: counted as rolling)
    serve_by = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in serving.items()}
    overhead = {k: timing[k]["median"] - serve[k] for k in serve}
    a, b = _responses(outs["interp"]), _responses(outs["hf"])
    rows, per_task = [], {}
    max_d, n_req, greedy_diff = 0.0, 0, 0
    for task in tasks:
        xs, ys = a[task], b[task]
        if task == "interp_rolling":
            d = np.abs(np.array(xs, float) - np.array(ys, float))
        else:
            d = np.abs(np.array([x[0] for x in xs]) - np.array([y[0] for y in ys]))
            greedy_diff += sum(bool(x[1]) != bool(y[1]) for x, y in zip(xs, ys))
        per_task[task] = {"requests": len(xs), "max_abs_dll": float(d.max())}
        max_d, n_req = max(max_d, float(d.max())), n_req + len(xs)
    sp = common.ratio(timing["hf"], timing["interp"])
    st = ours.engine_stats.get("loglikelihood")
    engine = (
        {
            k: getattr(st, k, 0)
            for k in (
                "plain_tokens",
                "unique_tokens",
                "tokens",
                "padded_tokens",
                "forwards",
                "depth",
                "packed_forwards",
            )
        }
        if st
        else {}
    )
    engine_line = (
        f"Engine work for the loglikelihood requests (one call, last run): {engine['plain_tokens']:,} tokens as "
        f"requested, {engine['unique_tokens']:,} in the prefix tree, {engine['tokens']:,} computed in "
        f"{engine['forwards']} forwards, {engine['packed_forwards']} of them packed (their projections and MLPs "
        f"compute the real tokens only; rows x width, what padded forwards compute and packed attention sees: "
        f"{engine['padded_tokens']:,})."
        if engine
        else "Engine work: not recorded."
    )
    acc = {t: {m: v for m, v in outs["interp"]["results"][t].items() if isinstance(v, float)} for t in tasks}
    rows = [
        [f"{len(tasks)} tasks, {n_req} requests", "lm-eval --model hf (HFLM)", common.fmt_time(timing["hf"]), "1.00x"],
        [
            f"{len(tasks)} tasks, {n_req} requests",
            "lm-eval --model interp",
            common.fmt_time(timing["interp"]),
            common.fmt_ratio(sp),
        ],
    ]
    res = {
        "model": path.name,
        "tasks": tasks,
        "requests": n_req,
        "per_task": per_task,
        "timing": timing,
        "speedup_interp_vs_hf": sp,
        "max_abs_dll": max_d,
        "greedy_flags_different": greedy_diff,
        "metrics_interp": acc,
        "torch_threads": torch.get_num_threads(),
        "engine_loglikelihood": engine,
        "serving_median_s": serve,
        "serving_by_request_type_median_s": serve_by,
        "lm_eval_overhead_median_s": overhead,
    }
    size = f"{args.items} items per bank" if args.items else "every item of every bank"
    f32 = args.dtype == "float32"
    res["dtype"] = args.dtype
    res["report"] = {
        "order": (2.5 if args.items else 2.6) + (0 if f32 else 0.05),
        "title": f"2{'b' if args.items else 'c'}{'' if f32 else ' at ' + args.dtype}. lm-eval `--model interp"
        f"{'' if f32 else ',dtype=' + args.dtype}` vs `--model hf` ({path.name}, {size})",
        "rerun": f"python -m bench lm_eval_model_vs_hf --repeats {args.repeats} --threads {args.threads} "
        f"--items {args.items}" + ("" if f32 else f" --dtype {args.dtype}"),
        "what": (
            "Whole `lm_eval.simple_evaluate` runs (model loading excluded) on local tasks built from the shipped "
            f"banks ({size}): "
            + ", ".join(f"{t} ({per_task[t]['requests']} requests)" for t in tasks)
            + f". Both at batch size {args.batch_size}, hf float32, interp {args.dtype}; runs interleaved. Measured on whatever else the "
            f"machine was running (1-min load average {start_load[0] if start_load else '?'} at start): the ratio, "
            "not the seconds, is the figure."
        ),
        "tables": [
            {
                "columns": ["workload", "model", "time: median (min-max)", "speedup vs hf: median (min/min)"],
                "rows": rows,
            }
        ],
        "findings": [
            f"max |delta log-likelihood| interp vs hf over all {n_req} requests: {max_d:.2e}; is_greedy flags that "
            f"differ: {greedy_diff}.",
            engine_line,
            f"Where the time goes (medians): serving the requests (the models' forwards and log-softmax) "
            f"hf {serve['hf']:.2f} s, interp {serve['interp']:.2f} s ({serve['hf'] / serve['interp']:.2f}x); "
            f"lm-eval's own work around them (tasks, metrics, environment info) hf {overhead['hf']:.2f} s, "
            f"interp {overhead['interp']:.2f} s. By request type: loglikelihood hf "
            f"{serve_by['hf']['_loglikelihood_tokens']:.2f} s, interp {serve_by['interp']['_loglikelihood_tokens']:.2f} s "
            f"({serve_by['hf']['_loglikelihood_tokens'] / serve_by['interp']['_loglikelihood_tokens']:.2f}x); "
            f"loglikelihood_rolling hf {serve_by['hf']['loglikelihood_rolling']:.2f} s, interp "
            f"{serve_by['interp']['loglikelihood_rolling']:.2f} s "
            f"({serve_by['hf']['loglikelihood_rolling'] / serve_by['interp']['loglikelihood_rolling']:.2f}x).",
            "Where the difference comes from: HFLM runs each request's full sequence (its logits cache spares "
            "only one-token choices of a shared context) and log-softmaxes the whole vocabulary at every "
            "position; the interp model sends all requests of a call through the engine as one prefix tree "
            "(a question's choices share its context's forward), runs a batch whose rows differ in length "
            "packed (interp.runner.packed: no Linear computes padding) and unembeds only the continuation "
            "positions, where is_greedy is an argmax on the device. lm-eval's own per-evaluation work (building the tasks, "
            "collecting environment information) is in both timings, so the few-request tasks dilute the ratio.",
        ],
    }
    common.write_results(
        ("lm_eval_model" if args.items else "lm_eval_model_bank") + ("" if f32 else "_" + args.dtype.replace("-", "_")),
        res,
        threads=args.threads,
        results_dir=args.results_dir,
        started_load=start_load,
    )


if __name__ == "__main__":
    main()
