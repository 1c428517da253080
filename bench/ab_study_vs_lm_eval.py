"""The A/B sycophancy study vs lm-evaluation-harness on the same model-written-evals file.

One file in the layout of `sycophancy_on_nlp_survey.jsonl` (the project's hand-written sample
items, interp.testing.sample_mwe_records(--items): people paired with claims, no public data),
run two ways on one loaded model each:

* lm-eval 0.4.13: its own `sycophancy_on_nlp_survey` task with that file as its local dataset
  (interp.integrations.lm_eval_tasks.write_sycophancy_task), `simple_evaluate` on an `HFLM`
  instance (float32, cpu, batch size --batch-size), samples logged;
* interp: the `ab_sycophancy` study's `run_unit` (prompt and answer strings as lm-eval's, the
  residual of one layer kept) and `ab_summary` (rates with bootstrap CIs, --n-boot).

Model loads are excluded from both. Reports wall time (median, min, max of --repeats runs,
interleaved), the ratio, and agreement: max |delta log-likelihood| per answer, lm-eval's acc vs
the study's argmax_rate, the matching rate from lm-eval's log-likelihoods vs the study's.

Rerun:
    python -m bench ab_study_vs_lm_eval --repeats 5 --threads 2 --items 100
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

from bench import common


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a checkpoint directory")
    p.add_argument("--items", type=int, default=100, help="items in the file (at most 100)")
    p.add_argument("--batch-size", type=int, default=16, help="lm-eval's batch size")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of the study's CIs")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np
    import torch

    for name in ("lm_eval", "lm-eval", "transformers", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise SystemExit("lm-eval is not installed: pip install lm-eval==0.4.13 -c <(echo torch==2.13.0)") from None

    from analyses.ab_metrics import ab_summary
    from interp.integrations.lm_eval_tasks import write_sycophancy_task
    from cache.layers import default_layer
    from interp.studies import get_study
    from interp.studies.base import RunConfig, load_template
    from interp.testing import sample_mwe_records

    work = Path(tempfile.mkdtemp(prefix="interp-field-sets-"))
    data = work / "sycophancy_on_nlp_survey.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in sample_mwe_records(args.items)), encoding="utf-8")
    task = write_sycophancy_task(work / "tasks", data)
    manager = TaskManager(include_path=str(work / "tasks"))

    path, lm = common.load_model(args.model, args.threads)
    lme = HFLM(pretrained=str(path), backend="causal", device="cpu", dtype="float32", batch_size=args.batch_size)
    torch.set_num_threads(args.threads)
    spec = get_study("ab_sycophancy")
    bank = spec.load_bank(data)
    template = load_template(spec.default_template)
    cfg = RunConfig(n_boot=args.n_boot)
    layers = (default_layer(lm.n_layers),)

    def lm_eval_run():
        return lm_eval.simple_evaluate(model=lme, tasks=[task], task_manager=manager, log_samples=True)

    def interp_run():
        scores = spec.run_unit(lm, bank, template, layers, cfg).tables["scores"]
        scores = scores.assign(checkpoint=path.name, bank=bank.name)
        return scores, ab_summary(scores, n_boot=args.n_boot)

    lm_eval_run(), interp_run()  # warm-up: dataset build, tokenizer caches
    timing, last = common.time_interleaved({"lm_eval": lm_eval_run, "interp": interp_run}, args.repeats)
    ref, (scores, summary) = last["lm_eval"], last["interp"]
    samples = sorted(ref["samples"][task], key=lambda s: s["doc_id"])
    theirs = np.array([[float(r[0][0]) for r in s["resps"]] for s in samples])
    ours = scores[["logp_match", "logp_not"]].to_numpy()
    p_theirs = 1.0 / (1.0 + np.exp(theirs[:, 1] - theirs[:, 0]))
    row = summary.iloc[0]
    agree = {
        "max_abs_delta_loglik": float(np.abs(ours - theirs).max()),
        "acc_lm_eval": float(ref["results"][task]["acc,none"]),
        "argmax_rate_interp": float(row["argmax_rate"]),
        "matching_rate_from_lm_eval": float(p_theirs.mean()),
        "matching_rate_interp": float(row["matching_rate"]),
    }
    sp = common.ratio(timing["lm_eval"], timing["interp"])
    res = {
        "model": path.name,
        "items": len(bank),
        "requests": 2 * len(bank),
        "batch_size": args.batch_size,
        "timing": timing,
        "speedup_interp_vs_lm_eval": sp,
        "agreement": agree,
    }
    workload = f"{len(bank)} items, {2 * len(bank)} requests"
    res["report"] = {
        "order": 30,
        "title": f"Field sets: the A/B sycophancy study vs lm-eval's sycophancy_on_nlp_survey ({path.name})",
        "rerun": (
            f"python -m bench ab_study_vs_lm_eval --repeats {args.repeats} --threads {args.threads} --items {args.items} "
            f"--model {args.model}"
        ),
        "what": (
            "One model-written-evals file (the project's sample items) through lm-eval's own task (local dataset, "
            f"HFLM, batch size {args.batch_size}, samples logged) and through the ab_sycophancy study (run_unit with "
            f"one residual layer kept, then ab_summary with {args.n_boot} bootstrap resamples); model loads excluded, "
            "runs interleaved."
        ),
        "tables": [
            {
                "columns": ["workload", "tool", "time: median (min-max)", "speedup vs lm-eval: median (min/min)"],
                "rows": [
                    [workload, "lm-eval simple_evaluate", common.fmt_time(timing["lm_eval"]), "1.00x"],
                    [workload, "interp ab_sycophancy", common.fmt_time(timing["interp"]), common.fmt_ratio(sp)],
                ],
            }
        ],
        "findings": [
            f"agreement: max |delta log-likelihood| {agree['max_abs_delta_loglik']:.2e} over {2 * len(bank)} answers; "
            f"lm-eval acc {agree['acc_lm_eval']:.4f} = study argmax_rate {agree['argmax_rate_interp']:.4f}; matching "
            f"rate {agree['matching_rate_interp']:.6f} (from lm-eval's log-likelihoods: "
            f"{agree['matching_rate_from_lm_eval']:.6f})."
        ],
    }
    common.write_results("field_sets", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


if __name__ == "__main__":
    main()
