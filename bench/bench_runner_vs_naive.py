"""Runner vs a naive loop on the shipped moral pressure bank (SmolLM2-135M-Instruct).

Measures, on the same prompts (every pressure trial plus the first-turn prompt of each item in
a deterministic, gold-balanced subset of the moral bank, as `--max-items` subsamples it):

* naive loop: one Hugging Face forward per prompt x option surface form, batch 1, full
  logits at every position (`AutoModelForCausalLM(ids).logits`), log-softmax, sum of the
  option's token log-probs; the tokenization a plain script would use (encode
  `prompt + option`, the option's tokens are the ones past `len(encode(prompt))`);
* runner: `interp.score_options` (batched, shared-prefix KV reuse, unembedding only at read
  positions), and the runner with `prefix_reuse=False` (batching alone).

Reports wall time (median, min, max of --repeats runs; model load excluded), the speedups and
max |delta log-prob| between the runner and the naive loop over every prompt x option.

Options: `--variants exact` (default) scores one surface form per option, " wrong" and
" acceptable" after "FINAL:", i.e. exactly one naive forward per prompt x option. With
`space` / `space_case` (the study's default) each option pools several surface forms; the
naive loop then runs one forward per prompt x form.

The naive loop is slow (~0.3-0.6 s per forward on 2 cores), so the default is a 2-item subset
of the 128-item bank (62 prompts, 124 naive forwards per run); both methods' costs are
per item (the runner's prefix tree shares the system prompt across items, then each item's
text, then each turn), so the ratio carries over to the whole bank (`--items 0`).

Rerun (defaults):
    python bench/bench_runner_vs_naive.py --repeats 5 --threads 2 --items 2
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def naive_encode(tok, text: str) -> list[int]:
    """What a plain script does: the tokenizer's own special tokens, unless the text (a rendered
    chat template) already starts with BOS."""
    bos = getattr(tok, "bos_token", None)
    return tok(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"]


def naive_scores(model, tok, prompts, option_forms):
    """[N, K] log-probs: per prompt and option, logsumexp over its forms of sum log p(form tokens)."""
    import numpy as np
    import torch
    from scipy.special import logsumexp

    out = np.zeros((len(prompts), len(option_forms)))
    with torch.inference_mode():
        for n, prompt in enumerate(prompts):
            n_ctx = len(naive_encode(tok, prompt))
            for k, forms in enumerate(option_forms):
                vals = []
                for form in forms:
                    ids = naive_encode(tok, prompt + form)
                    logits = model(input_ids=torch.tensor([ids])).logits[0].float()
                    logp = torch.log_softmax(logits, dim=-1)
                    cont = ids[n_ctx:]
                    vals.append(sum(float(logp[n_ctx - 1 + j, t]) for j, t in enumerate(cont)))
                out[n, k] = logsumexp(vals)
    return out


def tokenization_mismatches(tok, prompts, option_forms) -> int:
    """How many (prompt, form) pairs the naive split tokenizes differently from the runner's joint split."""
    from interp.runner.scoring import split_continuation

    bad = 0
    for prompt in prompts:
        n_ctx = len(naive_encode(tok, prompt))
        for forms in option_forms:
            for form in forms:
                ids, split = split_continuation(tok, prompt, form)
                naive = naive_encode(tok, prompt + form)
                bad += int(ids != naive or split != n_ctx)
    return bad


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a checkpoint directory")
    p.add_argument("--bank", default="moral", help="pressure bank")
    p.add_argument("--items", type=int, default=2, help="items of the bank (0 = all 128; slow)")
    p.add_argument("--variants", default="exact", choices=["exact", "space", "space_case"])
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--skip-no-reuse", action="store_true", help="do not time the runner without prefix reuse")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np
    import torch

    from interp.runner.scoring import ScoringConfig, option_variants, score_options

    path, lm = common.load_model(args.model, args.threads)
    tok, model = lm.tokenizer, lm.backend.model
    bank = common.pressure_subset(args.items or None, args.bank)
    prompts, verdicts, _ = common.pressure_prompts(bank, tok)
    options = common.option_words(verdicts, args.variants)
    forms = [option_variants(o, args.variants) for o in options]
    n_forms = sum(len(f) for f in forms)
    print(
        f"{len(bank)} items, {len(prompts)} prompts, options {options} ({n_forms} forms), "
        f"{len(prompts) * n_forms} naive forwards per run",
        file=sys.stderr,
    )

    cfg = ScoringConfig(variants=args.variants, batch_size=args.batch_size)
    cfg_plain = ScoringConfig(variants=args.variants, batch_size=args.batch_size, prefix_reuse=False)
    mismatches = tokenization_mismatches(tok, prompts, forms)

    # warm up kernels (one short forward each way), then time
    naive_scores(model, tok, prompts[:1], forms[:1])
    score_options(lm, prompts[:2], options, cfg=cfg)
    fns = {"runner": lambda: score_options(lm, prompts, options, cfg=cfg)}
    if not args.skip_no_reuse:
        fns["runner, no prefix reuse"] = lambda: score_options(lm, prompts, options, cfg=cfg_plain)
    fns["naive"] = lambda: naive_scores(model, tok, prompts, forms)
    # interleaved run by run, so slow drift of a shared machine hits every method alike
    timings, outs = common.time_interleaved(fns, args.repeats)
    t_runner, runner, t_naive, naive = timings["runner"], outs["runner"], timings["naive"], outs["naive"]
    t_plain, plain = timings.get("runner, no prefix reuse"), outs.get("runner, no prefix reuse")

    d_logp = np.abs(runner.logp - naive)
    d_prob = np.abs(runner.probs - np.exp(naive - np.logaddexp.reduce(naive, axis=1, keepdims=True)))
    speed = common.ratio(t_naive, t_runner)
    res = {
        "model": str(path.name),
        "bank": args.bank,
        "items": len(bank),
        "prompts": len(prompts),
        "variants": args.variants,
        "options": options,
        "forms_per_prompt": n_forms,
        "naive_forwards_per_run": len(prompts) * n_forms,
        "batch_size": args.batch_size,
        "torch_threads": torch.get_num_threads(),
        "tokenization_mismatches": mismatches,
        "timing": {"naive": t_naive, "runner": t_runner, **({"runner_no_prefix_reuse": t_plain} if t_plain else {})},
        "speedup_runner_vs_naive": speed,
        "max_abs_dlogp": float(d_logp.max()),
        "mean_abs_dlogp": float(d_logp.mean()),
        "max_abs_dprob": float(d_prob.max()),
    }
    if t_plain:
        res["speedup_no_reuse_vs_naive"] = common.ratio(t_naive, t_plain)
        res["speedup_reuse_vs_no_reuse"] = common.ratio(t_plain, t_runner)
        res["max_abs_dlogp_no_reuse"] = float(np.abs(plain.logp - naive).max())
    rerun = (
        f"python bench/bench_runner_vs_naive.py --repeats {args.repeats} --threads {args.threads} "
        f"--items {args.items} --variants {args.variants}"
    )
    rows = [
        ["naive loop (HF forward per prompt x option, batch 1)", common.fmt_time(t_naive), "1.00x"],
        ["runner (batched + prefix KV reuse)", common.fmt_time(t_runner), common.fmt_ratio(speed)],
    ]
    if t_plain:
        rows.insert(
            1,
            [
                "runner, prefix_reuse=False (batching only)",
                common.fmt_time(t_plain),
                common.fmt_ratio(res["speedup_no_reuse_vs_naive"]),
            ],
        )
    res["report"] = {
        "order": 1,
        "title": "1. Runner vs a naive loop (moral pressure bank, " + path.name + ")",
        "rerun": rerun,
        "what": (
            f"{len(bank)} items of the moral bank ({len(prompts)} prompts: every trial plus each item's "
            f"first turn), options {', '.join(repr(o) for o in options)} (variants `{args.variants}`), "
            f"{len(prompts) * n_forms} naive forwards per run. Wall time of scoring only (model loaded once)."
        ),
        "tables": [
            {"columns": ["method", "time: median (min-max)", "speedup vs naive: median (min/min)"], "rows": rows}
        ],
        "findings": [
            f"max |delta log-prob| runner vs naive: {res['max_abs_dlogp']:.2e} (mean {res['mean_abs_dlogp']:.1e}); "
            f"max |delta p| after renormalizing over the two verdicts: {res['max_abs_dprob']:.1e}.",
            f"(prompt, option) pairs tokenized differently by the naive split and the runner's joint split: "
            f"{mismatches}.",
        ],
    }
    if t_plain:
        res["report"]["findings"].append(
            f"prefix reuse alone (runner vs runner without it): {common.fmt_ratio(res['speedup_reuse_vs_no_reuse'])}."
        )
    common.write_results(
        "runner_vs_naive", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


if __name__ == "__main__":
    main()
