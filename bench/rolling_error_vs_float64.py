"""Whose float error is the lm-eval model's |Δ| on loglikelihood_rolling? The interp model (float32)
and lm-eval's HFLM (float32) against a float64 forward of the same rolling windows.

    python -m bench rolling_error_vs_float64 --threads 2

The interp_rolling task (every factual and moral text, `interp.integrations.lm_eval_tasks`) runs once through
each model with `lm_eval.simple_evaluate`; the reference re-runs HFLM's own windows
(`lm_eval.utils.get_rolling_token_windows`, HFLM's tokenization) through the same weights in
float64 and sums the log-probabilities in float64. Writes bench/results/rolling_float64.json.
"""

from __future__ import annotations


from bench import common


def main() -> None:
    p = common.parser(__doc__, repeats=1)
    p.add_argument("--model", default="smollm2")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import lm_eval
    import numpy as np
    import torch
    from lm_eval import utils
    from lm_eval.models.huggingface import HFLM

    from interp.integrations.lm_eval_model import InterpLM

    path = common.model_path(args.model)
    _, tm = common.local_lm_eval_tasks(0)
    ours = InterpLM(pretrained=str(path), batch_size=16, threads=args.threads)
    ref = HFLM(pretrained=str(path), backend="causal", device="cpu", dtype="float32", batch_size=16)

    def totals(model) -> tuple[list[str], np.ndarray]:
        out = lm_eval.simple_evaluate(
            model=model, tasks=["interp_rolling"], task_manager=tm, log_samples=True, verbosity="ERROR"
        )
        s = out["samples"]["interp_rolling"]
        return [x["doc"]["text"] for x in s], np.array([float(x["resps"][0][0]) for x in s])

    texts, ll_interp = totals(ours)
    texts_hf, ll_hf = totals(ref)
    if texts != texts_hf:
        raise SystemExit("the two runs saw the documents in another order")
    f64 = ref.model.double().eval()
    ll_64, n_tok = [], []
    with torch.no_grad():
        for text in texts:
            total, n = 0.0, 0
            windows = utils.get_rolling_token_windows(
                token_list=ref.tok_encode(text),
                prefix_token=ref.prefix_token_id,
                max_seq_len=ref.max_length,
                context_len=1,
            )
            for ctx, cont in map(utils.make_disjoint_window, windows):
                logp = torch.log_softmax(f64(torch.tensor([(ctx + cont)[:-1]])).logits[0], dim=-1)
                total += float(logp[-len(cont) :].gather(-1, torch.tensor(cont)[:, None]).sum())
                n += len(cont)
            ll_64.append(total)
            n_tok.append(n)
    ll_64, n_tok = np.array(ll_64), np.array(n_tok)
    err = {"interp": np.abs(ll_interp - ll_64), "hf": np.abs(ll_hf - ll_64)}
    res = {
        "documents": len(texts),
        "tokens": {"median": float(np.median(n_tok)), "max": int(n_tok.max()), "total": int(n_tok.sum())},
        "max_abs_vs_float64": {k: float(v.max()) for k, v in err.items()},
        "median_abs_vs_float64": {k: float(np.median(v)) for k, v in err.items()},
        "max_abs_per_token_vs_float64": {k: float((v / n_tok).max()) for k, v in err.items()},
        "max_abs_interp_vs_hf": float(np.abs(ll_interp - ll_hf).max()),
        "within_1e-4_of_float64": {k: int((v <= 1e-4).sum()) for k, v in err.items()},
    }
    rows = [
        [
            name,
            f"{res['max_abs_vs_float64'][k]:.2e}",
            f"{res['median_abs_vs_float64'][k]:.2e}",
            f"{res['max_abs_per_token_vs_float64'][k]:.2e}",
        ]
        for k, name in (("interp", "lm-eval --model interp, float32"), ("hf", "lm-eval --model hf, float32"))
    ]
    res["report"] = {
        "order": 2.7,
        "title": "lm-eval loglikelihood_rolling: both models against a float64 forward",
        "what": f"interp_rolling ({len(texts)} documents, {res['tokens']['median']:.0f} tokens median, "
        f"{res['tokens']['max']} max) through `--model interp` and `--model hf` in float32, and HFLM's own windows "
        "through the same weights in float64 (log-probabilities summed in float64).",
        "rerun": f"python -m bench rolling_error_vs_float64 --threads {args.threads}",
        "tables": [
            {
                "columns": ["model", "max |Δ| vs float64", "median |Δ| vs float64", "max |Δ| per token"],
                "rows": rows,
            }
        ],
        "findings": [
            f"interp vs hf: max |Δ| {res['max_abs_interp_vs_hf']:.2e}: each model's float32 sum differs from the "
            "float64 one (table), so a comparison of the two is a comparison of two float32 errors. Documents "
            f"within 1e-4 of float64: interp {res['within_1e-4_of_float64']['interp']} of {len(texts)}, hf "
            f"{res['within_1e-4_of_float64']['hf']} of {len(texts)}."
        ],
    }
    common.write_results(
        "rolling_float64", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


if __name__ == "__main__":
    main()
