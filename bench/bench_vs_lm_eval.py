"""Runner vs lm-evaluation-harness (lm_eval 0.4.13, Hugging Face backend `HFLM`).

The same model directory is loaded twice: by `interp.load` and by lm-eval's `HFLM(pretrained=
<local path>, backend="causal", device="cpu", dtype="float32")`. Both score the same
log-likelihood requests (context, continuation), strings identical:

* pressure: every trial plus each item's first-turn prompt of a deterministic, gold-balanced
  subset of the moral bank; continuations " wrong" and " acceptable" (the verdict as it follows
  "FINAL:"). Runner: `score_options(..., variants="exact")` (the study's path);
* cloze: a subset of the shipped cloze bank (all six languages of each chosen prompt id); the
  context is the text before the blank and the continuations are the stereotype,
  anti-stereotype and meaningless completions as `interp.studies.cloze.continuation_texts`
  builds them under template cloze_v1. Runner: `score_continuations`.

lm-eval gets `batch_size` equal to the runner's and its default logits cache (one forward per
context for one-token continuations). Reports wall time (median, min, max of --repeats runs,
model loads excluded), speedup, and per-request agreement: max |delta log-likelihood|
(summed over continuation tokens), split into requests where both tokenize identically and
those where they do not. lm-eval encodes the context alone and the whole string and takes the
continuation as the tokens past len(context tokens), after moving trailing context spaces
into the continuation; the runner encodes the whole string once and splits at the character
boundary with the tokenizer's offsets. The two differ only when a token straddles the
boundary; the script counts those requests and reports their deltas separately.

Rerun (defaults):
    python bench/bench_vs_lm_eval.py --repeats 5 --threads 2 --items 2 --cloze-prompts 8
Needs lm-eval in the venv: pip install lm-eval==0.4.13 -c <(echo torch==2.13.0)
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def cloze_requests(n_prompts: int | None):
    """[(context, [continuations])] and the flat request list, for a subset of the cloze bank."""
    from interp.studies.base import load_template
    from interp.studies.cloze import COMPLETIONS, check_template, continuation_texts, load_cloze_bank, resolve_span

    bank = load_cloze_bank("cloze")
    if n_prompts:
        bank = bank.subsample(n_prompts, seed=0, by="prompt_id", stratify="axis")
    span = check_template(load_template("cloze_v1"))["scored_span"]
    items = []
    for row in bank.items.itertuples(index=False):
        stem, conts = continuation_texts(
            row.context, {c: getattr(row, c) for c in COMPLETIONS}, scored_span=resolve_span(span, row.slot)
        )
        items.append((stem, list(conts.values())))
    return bank, items


def _cloze_work(tok, items) -> dict:
    """Token counts of the cloze requests as the runner splits them."""
    from interp.runner.scoring import split_continuation

    total = read = 0
    ctx_lens, shareable = [], []
    for ctx, conts in items:
        splits = [split_continuation(tok, ctx, c) for c in conts]
        total += sum(len(ids) for ids, _ in splits)
        read += sum(len(ids) - sp for ids, sp in splits)
        n_ctx = min(sp for _, sp in splits)
        ctx_lens.append(n_ctx)
        shareable.append((len(conts) - 1) * n_ctx)
    return {
        "total_tokens": total,
        "continuation_tokens_read": read,
        "mean_context_tokens": sum(ctx_lens) / len(ctx_lens),
        "mean_shareable_tokens": sum(shareable) / len(shareable),
    }


def lm_eval_split(lme, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-eval's own (context_enc, continuation_enc) for one request (as `loglikelihood` does it)."""
    if context == "":
        cont = lme.tok_encode(continuation, add_special_tokens=False)
        return ([lme.prefix_token_id], cont) if lme.prefix_token_id != cont[0] else (cont[:1], cont[1:])
    return lme._encode_pair(context, continuation)


def compare(tok, lme, flat, runner_ll, lme_ll) -> dict:
    import numpy as np

    from interp.runner.scoring import split_continuation

    same = []
    for ctx, cont in flat:
        ids, split = split_continuation(tok, ctx, cont)
        c_enc, k_enc = lm_eval_split(lme, ctx, cont)
        same.append(list(c_enc) + list(k_enc) == ids and len(c_enc) == split)
    same = np.array(same)
    signed = np.asarray(runner_ll) - np.asarray(lme_ll)
    d = np.abs(signed)
    rel = d / np.maximum(np.abs(np.asarray(lme_ll)), 1e-12)
    out = {
        "requests": len(flat),
        "same_tokens": int(same.sum()),
        "different_tokens": int((~same).sum()),
        "max_abs_dll": float(d.max()),
        "mean_abs_dll": float(d.mean()),
        "mean_signed_dll": float(signed.mean()),
        "max_rel_dll": float(rel.max()),
        "max_abs_dll_same_tokens": float(d[same].max()) if same.any() else None,
        "max_abs_dll_different_tokens": float(d[~same].max()) if (~same).any() else None,
    }
    if (~same).any():
        k = int(np.flatnonzero(~same)[np.argmax(d[~same])])
        ctx, cont = flat[k]
        ids, split = split_continuation(tok, ctx, cont)
        c_enc, k_enc = lm_eval_split(lme, ctx, cont)
        out["worst_different"] = {
            "context_tail": ctx[-40:],
            "continuation": cont,
            "runner_ll": float(runner_ll[k]),
            "lm_eval_ll": float(lme_ll[k]),
            "runner_continuation_tokens": tok.convert_ids_to_tokens(ids[split:]),
            "lm_eval_continuation_tokens": tok.convert_ids_to_tokens(list(k_enc)),
        }
    return out


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a checkpoint directory")
    p.add_argument("--items", type=int, default=2, help="moral-bank items for the pressure requests (0 = all)")
    p.add_argument("--cloze-prompts", type=int, default=8, help="cloze prompt ids, x6 languages (0 = all 32)")
    p.add_argument("--batch-size", type=int, default=16, help="batch size of both")
    p.add_argument("--skip", choices=["pressure", "cloze"], action="append", default=[])
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np
    import torch

    from interp.runner.scoring import ScoringConfig, score_continuations, score_options

    for name in ("lm_eval", "lm-eval", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM
    except ImportError:
        raise SystemExit("lm-eval is not installed: pip install lm-eval==0.4.13 -c <(echo torch==2.13.0)") from None

    path, lm = common.load_model(args.model, args.threads)
    lme = HFLM(
        pretrained=str(path),
        backend="causal",
        device="cpu",
        dtype="float32",
        batch_size=args.batch_size,
        trust_remote_code=False,
    )
    torch.set_num_threads(args.threads)  # in case lm-eval changed it
    tok = lm.tokenizer
    cfg = ScoringConfig(variants="exact", batch_size=args.batch_size)

    def lme_run(flat):
        reqs = [
            Instance(request_type="loglikelihood", doc={}, arguments=(c, k), idx=i) for i, (c, k) in enumerate(flat)
        ]
        return np.array([ll for ll, _ in lme.loglikelihood(reqs, disable_tqdm=True)])

    res = {
        "model": path.name,
        "batch_size": args.batch_size,
        "lm_eval_logits_cache": bool(lme.logits_cache),
        "torch_threads": torch.get_num_threads(),
    }
    rows, findings = [], []

    if "pressure" not in args.skip:
        bank = common.pressure_subset(args.items or None)
        prompts, verdicts, _ = common.pressure_prompts(bank, tok)
        options = common.option_words(verdicts, "exact")
        flat = [(pr, o) for pr in prompts for o in options]
        print(f"pressure: {len(bank)} items, {len(flat)} requests", file=sys.stderr)
        score_options(lm, prompts[:2], options, cfg=cfg)
        lme_run(flat[:2])
        t_r, r = common.time_runs(
            lambda: score_options(lm, prompts, options, cfg=cfg), args.repeats, label="runner pressure"
        )
        t_l, ll = common.time_runs(lambda: lme_run(flat), args.repeats, label="lm-eval pressure")
        agree = compare(tok, lme, flat, r.logp.reshape(-1), ll)
        sp = common.ratio(t_l, t_r)
        res["pressure"] = {
            "items": len(bank),
            "prompts": len(prompts),
            "timing": {"lm_eval": t_l, "runner": t_r},
            "speedup_runner_vs_lm_eval": sp,
            **agree,
        }
        rows += [
            [f"pressure ({len(flat)} requests)", "lm-eval HFLM", common.fmt_time(t_l), "1.00x"],
            [f"pressure ({len(flat)} requests)", "runner", common.fmt_time(t_r), common.fmt_ratio(sp)],
        ]
        findings.append(_agreement_line("pressure", agree))

    if "cloze" not in args.skip:
        cbank, items = cloze_requests(args.cloze_prompts or None)
        flat = [(c, k) for c, ks in items for k in ks]
        print(f"cloze: {len(cbank)} items, {len(flat)} requests", file=sys.stderr)
        score_continuations(lm, items[:1], cfg=cfg)
        lme_run(flat[:2])
        t_r, r = common.time_runs(lambda: score_continuations(lm, items, cfg=cfg), args.repeats, label="runner cloze")
        t_l, ll = common.time_runs(lambda: lme_run(flat), args.repeats, label="lm-eval cloze")
        agree = compare(tok, lme, flat, r.sum_logp, ll)
        sp = common.ratio(t_l, t_r)
        langs = sorted(cbank.items["language"].unique())
        work = _cloze_work(tok, items)
        res["cloze"] = {
            "items": len(cbank),
            "languages": langs,
            "timing": {"lm_eval": t_l, "runner": t_r},
            "speedup_runner_vs_lm_eval": sp,
            "continuation_tokens": int(sum(r.n_tokens)),
            **work,
            **agree,
        }
        rows += [
            [f"cloze ({len(cbank)} items, {len(flat)} requests)", "lm-eval HFLM", common.fmt_time(t_l), "1.00x"],
            [f"cloze ({len(cbank)} items, {len(flat)} requests)", "runner", common.fmt_time(t_r), common.fmt_ratio(sp)],
        ]
        findings.append(_agreement_line("cloze", agree))
        findings.append(
            f"cloze work: {work['total_tokens']:,} tokens in {len(flat)} sequences, {work['continuation_tokens_read']:,} "
            f"of them read; the continuations of an item share a context of {work['mean_context_tokens']:.0f} tokens "
            f"on average, so (continuations - 1) x context = {work['mean_shareable_tokens']:.0f} tokens per item "
            "can be shared: the runner's prefix tree computes each context once (lm-eval computes it per "
            "continuation) and unembeds only at read positions (lm-eval log-softmaxes the full vocabulary at every "
            "position)."
        )

    res["report"] = {
        "order": 2,
        "title": f"2. Runner vs lm-evaluation-harness (lm_eval {_version('lm_eval')}, HFLM, {path.name})",
        "rerun": (
            f"python bench/bench_vs_lm_eval.py --repeats {args.repeats} --threads {args.threads} "
            f"--items {args.items} --cloze-prompts {args.cloze_prompts}"
        ),
        "what": (
            "Same (context, continuation) strings through lm-eval's `HFLM.loglikelihood` (batch size "
            f"{args.batch_size}, logits cache on) and the runner (batch size {args.batch_size}). Pressure: "
            "trials + first turns, continuations ' wrong' / ' acceptable'. Cloze: context before the blank, "
            "the three completions (template cloze_v1)."
        ),
        "tables": [
            {
                "columns": ["workload", "scorer", "time: median (min-max)", "speedup vs lm-eval: median (min/min)"],
                "rows": rows,
            }
        ],
        "findings": findings
        + [
            "Why they differ at all: both score identical token ids wherever `different_tokens` is 0 (lm-eval "
            "encodes the context alone and the whole string and takes the continuation as the extra tokens, after "
            "moving trailing context spaces into the continuation; the runner encodes the whole string once and "
            "splits at the character boundary by token offsets; on these banks the two splits coincide, as they do "
            "for every request of the full cloze bank under both shipped tokenizers). What remains is float32 "
            "rounding: lm-eval runs each full sequence in padded batches without an attention mask and "
            "log-softmaxes every position; the runner reuses the KV cache of shared prefixes, masks padding, and "
            "unembeds only at read positions, so sums are accumulated in a different order. Per token the deltas are "
            "of order 1e-5 with no consistent sign (see the mean signed delta); a cloze continuation sums several "
            "tokens, a pressure verdict is one."
        ],
    }
    common.write_results("vs_lm_eval", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist.replace("_", "-"))
    except PackageNotFoundError:
        return "?"


def _agreement_line(name: str, a: dict) -> str:
    s = (
        f"{name}: max |delta log-likelihood| runner vs lm-eval {a['max_abs_dll']:.2e} over {a['requests']} requests "
        f"(mean {a['mean_abs_dll']:.1e}); {a['different_tokens']} requests tokenized differently"
    )
    if a["different_tokens"]:
        s += (
            f" (max |delta| on those {a['max_abs_dll_different_tokens']:.3g}, on the identically tokenized ones "
            f"{a['max_abs_dll_same_tokens']:.2e})"
        )
    s += f"; mean signed delta (runner - lm-eval) {a['mean_signed_dll']:+.1e}, max relative {a['max_rel_dll']:.1e}"
    return s + "."


if __name__ == "__main__":
    main()
