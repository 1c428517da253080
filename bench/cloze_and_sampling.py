"""The level-batched prefix tree at bank sizes: runner vs lm-eval (best batch size) vs a naive
loop, tokens computed vs the tree's unique tokens, achieved FLOP/s vs the matmul rate, and
batched sampling vs Hugging Face `generate` (issue 16).

Sections (each optional with --skip):

* pressure: every trial plus each item's first turn of a gold-balanced subset of the moral
  bank (--items; 31 prompts per item), continuations " wrong" / " acceptable" (variants
  exact, as lm-eval scores them). The runner runs on all --items; lm-eval and the naive loop
  on the first --compare-items of them (they are ~5-10x slower and the machine is shared), and
  the runner is timed on that same subset too, so every ratio compares equal work in one run.
  lm-eval's batch size: each of --lm-eval-batch-sizes runs once on --pilot-items items; the
  fastest is then timed --repeats times ("best batch size").
* cloze: the whole shipped cloze bank (all prompt ids x six languages; --cloze-prompts to cut),
  runner vs lm-eval at the best pressure batch size.
* flops: one instrumented runner pass over the --items workload: tokens computed (real and
  padded) vs the tree's unique tokens vs the plain sum, forwards, and achieved FLOP/s (dense
  2 x params per token + attention pairs + unembedding at reads, as bench.flop_counts counts) vs
  `torch.matmul` of two 2048^2 fp32 matrices.
* sampling: the sampled readout, --n-samples replies (max --max-new-tokens tokens) for
  --sample-items items x the first --conditions trials of each: `interp.runner.generate`
  (prefix tree + one batch, KV expanded n times) vs HF `generate` called per prompt with
  num_return_sequences=n, same seeds (sample_seed); the share of identical replies is reported.

Wall times: median (min-max) of --repeats runs, model loads excluded; ratios of medians and of
minimums.

Full size (issue 16: 40 items x every condition, the whole cloze bank, 21 samples for 40 items x
16 conditions; about 15 minutes on two quiet cores):
    python -m bench cloze_and_sampling --threads 2 --repeats 2 --items 40 --compare-items 2 \
        --pilot-items 1 --full-repeats 1 --sample-items 40 --conditions 16 --n-samples 21 \
        --sample-hf-prompts 16 --sample-repeats 1
lm-eval and the naive loop cost the same per prompt at any size (one padded / single forward per
context; no sharing across prompts), and HF `generate` runs one prompt at a time, so at full size
they are timed on a subset (--compare-items, --sample-hf-prompts) and their full-size time is
that run's seconds per prompt x the full prompt count: those rows say "extrapolated" and the
ratio is against the runner's time measured on the full workload. --compare-items 40 and
--sample-hf-prompts 0 measure everything instead (hours).
"""

from __future__ import annotations

import logging
import sys
import time

from bench import common


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--items", type=int, default=40, help="moral items for the runner (31 prompts each)")
    p.add_argument("--compare-items", type=int, default=4, help="of those, items lm-eval and the naive loop score")
    p.add_argument("--pilot-items", type=int, default=1, help="items of the one-run lm-eval batch-size pilots")
    p.add_argument("--full-repeats", type=int, default=1, help="timed runs of the --items workload")
    p.add_argument("--lm-eval-batch-sizes", default="1,8,16,32")
    p.add_argument("--cloze-prompts", type=int, default=0, help="cloze prompt ids x 6 languages (0 = whole bank)")
    p.add_argument("--sample-items", type=int, default=4)
    p.add_argument("--conditions", type=int, default=16)
    p.add_argument("--n-samples", type=int, default=21)
    p.add_argument("--max-new-tokens", type=int, default=6)
    p.add_argument(
        "--sample-hf-prompts",
        type=int,
        default=0,
        help="prompts (spread over the sampling workload) HF generate is timed on; 0 = all of them",
    )
    p.add_argument("--sample-repeats", type=int, default=0, help="timed runs of the sampling section (0 = --repeats)")
    p.add_argument("--skip", action="append", default=[], choices=["pressure", "naive", "cloze", "flops", "sampling"])
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np
    import torch
    from bench.flop_counts import EngineRecorder, engine_counts, matmul_rate, model_shape
    from bench.baselines import naive_scores
    from bench.baselines import cloze_requests

    from interp.runner import engine as engine_mod
    from interp.runner.scoring import (
        ScoringConfig,
        option_variants,
        score_continuations,
        score_options,
    )

    for name in ("lm_eval", "lm-eval", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    path, lm = common.load_model(args.model, args.threads)
    tok = lm.tokenizer
    cfg = ScoringConfig(variants="exact")
    res: dict = {
        "model": path.name,
        "torch_threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "scoring_config": {"batch_size": cfg.batch_size, "max_batch_tokens": cfg.max_batch_tokens},
    }
    rows, findings = [], []
    lme = None

    def lme_get():
        nonlocal lme
        if lme is None:
            from lm_eval.models.huggingface import HFLM

            lme = HFLM(
                pretrained=str(path),
                backend="causal",
                device="cpu",
                dtype="float32",
                batch_size=1,
                trust_remote_code=False,
            )
            torch.set_num_threads(args.threads)
        return lme

    def lme_run(flat, bs):
        from lm_eval.api.instance import Instance

        m = lme_get()
        m.batch_size_per_gpu = bs
        reqs = [
            Instance(request_type="loglikelihood", doc={}, arguments=(c, k), idx=i) for i, (c, k) in enumerate(flat)
        ]
        return np.array([ll for ll, _ in m.loglikelihood(reqs, disable_tqdm=True)])

    def stage(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def make_report() -> dict:
        return {
            "order": 0,
            "title": f"0. Prefix tree by level at bank sizes ({path.name}, issue 16)",
            "rerun": (
                f"python -m bench cloze_and_sampling --repeats {args.repeats} --threads {args.threads} "
                f"--items {args.items} --compare-items {args.compare_items} --sample-items {args.sample_items} "
                f"--full-repeats {args.full_repeats} --pilot-items {args.pilot_items} --conditions {args.conditions}"
                + f" --n-samples {args.n_samples}"
                + (f" --sample-hf-prompts {args.sample_hf_prompts}" if args.sample_hf_prompts else "")
                + (f" --sample-repeats {args.sample_repeats}" if args.sample_repeats else "")
                + (f" --cloze-prompts {args.cloze_prompts}" if args.cloze_prompts else "")
                + "".join(f" --skip {s}" for s in args.skip)
            ),
            "what": (
                "Runner = score_options / score_continuations with the default ScoringConfig (variants exact). "
                "Ratios column: time of the row's method relative to the runner's (>1: slower than the runner). "
                f"1-, 5-, 15-minute load average at the start: {start_load} (2 cores: near 0 is a quiet machine); "
                "compare ratios within this run only."
            ),
            "tables": [
                {
                    "columns": ["workload", "method", "time: median (min-max)", "time / runner: median (min/min)"],
                    "rows": rows,
                }
            ],
            "findings": findings,
        }

    mm = matmul_rate(2048, 3)  # replaced by the interleaved measurement of the flops section
    res["matmul"] = mm
    shape = model_shape(lm.backend.model)
    best_bs = None

    bank = common.pressure_subset(args.items or None)
    prompts, verdicts, _ = common.pressure_prompts(bank, tok)
    options = common.option_words(verdicts, "exact")
    if "pressure" not in args.skip:
        sub_bank = common.pressure_subset(args.compare_items)
        sub, _, _ = common.pressure_prompts(sub_bank, tok)
        flat = [(pr, o) for pr in sub for o in options]
        score_options(lm, sub[:2], options, cfg=cfg)
        pilot_bank = common.pressure_subset(args.pilot_items)
        pilot, _, _ = common.pressure_prompts(pilot_bank, tok)
        pilot_flat = [(pr, o) for pr in pilot for o in options]
        stage(f"lm-eval batch-size pilots on {len(pilot_bank)} items ({len(pilot)} prompts)")
        pilots = {}
        for bs in [int(b) for b in args.lm_eval_batch_sizes.split(",")]:
            t0 = time.perf_counter()
            lme_run(pilot_flat, bs)
            pilots[bs] = time.perf_counter() - t0
            stage(f"  lm-eval bs={bs}: {pilots[bs]:.1f}s")
        best_bs = min(pilots, key=pilots.get)
        fns = {
            "runner": lambda: score_options(lm, sub, options, cfg=cfg),
            f"lm-eval (bs {best_bs})": lambda: lme_run(flat, best_bs),
        }
        forms = [option_variants(o, "exact") for o in options]
        if "naive" not in args.skip:
            fns["naive loop"] = lambda: naive_scores(lm.backend.model, tok, sub, forms)
        stage("pressure subset: timed runs (interleaved)")
        t, outs = common.time_interleaved(fns, args.repeats)
        r = outs["runner"]
        d_lme = float(np.abs(r.logp.reshape(-1) - outs[f"lm-eval (bs {best_bs})"]).max())
        sec = {
            "items": len(sub_bank),
            "prompts": len(sub),
            "requests": len(flat),
            "lm_eval_pilots_s": pilots,
            "lm_eval_best_batch_size": best_bs,
            "timing": t,
            "max_abs_dll_vs_lm_eval": d_lme,
            "speedup_vs_lm_eval": common.ratio(t[f"lm-eval (bs {best_bs})"], t["runner"]),
        }
        if "naive loop" in t:
            sec["speedup_vs_naive"] = common.ratio(t["naive loop"], t["runner"])
            sec["max_abs_dlogp_vs_naive"] = float(np.abs(r.logp - outs["naive loop"]).max())
        res["pressure_subset"] = sec
        w = f"pressure, {len(sub_bank)} items x 31 conditions ({len(sub)} prompts)"
        rows.append([w, "runner (tree by level)", common.fmt_time(t["runner"]), "1.00x"])
        rows.append(
            [
                w,
                f"lm-eval HFLM, best batch size {best_bs}",
                common.fmt_time(t[f"lm-eval (bs {best_bs})"]),
                common.fmt_ratio(common.ratio(t[f"lm-eval (bs {best_bs})"], t["runner"])),
            ]
        )
        if "naive loop" in t:
            rows.append(
                [
                    w,
                    "naive loop",
                    common.fmt_time(t["naive loop"]),
                    common.fmt_ratio(common.ratio(t["naive loop"], t["runner"])),
                ]
            )
        findings.append(
            f"pressure ({len(sub)} prompts): runner {sec['speedup_vs_lm_eval']['median']:.2f}x lm-eval at its best batch "
            f"size ({best_bs}; one-run pilots on {len(pilot)} prompts: "
            + ", ".join(f"bs {b} {s:.0f}s" for b, s in pilots.items())
            + ")"
            + (f", {sec['speedup_vs_naive']['median']:.1f}x the naive loop" if "speedup_vs_naive" in sec else "")
            + f"; max |delta log-lik| vs lm-eval {d_lme:.1e}"
            + (f", vs naive {sec['max_abs_dlogp_vs_naive']:.1e}." if "max_abs_dlogp_vs_naive" in sec else ".")
        )

    if "flops" not in args.skip:
        stage(f"flops / tokens: runner on {len(bank)} items ({len(prompts)} prompts)")
        rec = EngineRecorder(lm.backend)
        stats = {}
        real_run = engine_mod.Engine.run

        def run_keep(self, seqs):
            out = real_run(self, seqs)
            stats["s"] = self.stats
            return out

        engine_mod.Engine.run = run_keep
        lm_rec = type(lm)(info=lm.info, tokenizer=tok, backend=rec, dtype=lm.dtype)
        a_mm, b_mm = torch.randn(2048, 2048), torch.randn(2048, 2048)
        k_mm = 10

        def matmuls():
            for _ in range(k_mm):
                torch.matmul(a_mm, b_mm)

        def scored():
            rec.calls.clear()
            return score_options(lm_rec, prompts, options, cfg=cfg)

        try:  # the matmul rate measured interleaved with the runner's runs: both see the same load
            tt, _ = common.time_interleaved({"runner": scored, "matmul": matmuls}, args.full_repeats)
        finally:
            engine_mod.Engine.run = real_run
        t_full = tt["runner"]
        flops_mm = 2.0 * 2048**3 * k_mm
        mm = {
            "shape": [2048, 2048, 2048],
            "gflops_median": flops_mm / tt["matmul"]["median"] / 1e9,
            "gflops_best": flops_mm / tt["matmul"]["min"] / 1e9,
            "timing": tt["matmul"],
            "interleaved": True,
        }
        res["matmul"] = mm
        counts = engine_counts(rec.calls, shape)
        st = stats["s"]
        gf = counts["flops_useful"] / t_full["median"] / 1e9
        gf_exec = counts["flops_executed"] / t_full["median"] / 1e9
        res["full"] = {
            "items": len(bank),
            "prompts": len(prompts),
            "timing": t_full,
            **counts,
            "unique_tokens": st.unique_tokens,
            "plain_tokens": st.plain_tokens,
            "depth": st.depth,
            "computed_over_unique": counts["real_tokens"] / st.unique_tokens,
            "padded_over_unique": counts["padded_tokens"] / st.unique_tokens,
            "gflops_useful": gf,
            "gflops_executed": gf_exec,
            "fraction_of_matmul_useful": gf / mm["gflops_median"],
            "fraction_of_matmul_executed": gf_exec / mm["gflops_median"],
            "tokens_per_s": counts["real_tokens"] / t_full["median"],
        }
        rows.append(
            [
                f"pressure, {len(bank)} items x 31 conditions ({len(prompts)} prompts)",
                "runner (tree by level)",
                common.fmt_time(t_full),
                "-",
            ]
        )
        f = res["full"]
        findings.append(
            f"tokens ({len(prompts)} prompts): plain sum {st.plain_tokens:,}; prefix tree unique {st.unique_tokens:,} "
            f"(depth {st.depth}); computed {counts['real_tokens']:,} real = {f['computed_over_unique']:.3f}x unique, "
            f"{counts['padded_tokens']:,} with padding = {f['padded_over_unique']:.3f}x, in {counts['forwards']} forwards."
        )
        findings.append(
            f"FLOP rate: {gf:.0f} GFLOP/s useful ({gf_exec:.0f} executed incl. padding and masked attention) = "
            f"{f['fraction_of_matmul_useful']:.0%} ({f['fraction_of_matmul_executed']:.0%}) of torch.matmul 2048^3 at "
            f"{args.threads} thread(s), {mm['gflops_median']:.0f} GFLOP/s (median of runs interleaved with the runner's; "
            f"best {mm['gflops_best']:.0f}); best runner run vs best matmul run: "
            f"{counts['flops_useful'] / t_full['min'] / 1e9 / mm['gflops_best']:.0%}."
        )

    if "pressure_subset" in res and "full" in res and res["full"]["prompts"] > res["pressure_subset"]["prompts"]:
        ps, pf = res["pressure_subset"], res["full"]
        per_sub = ps["timing"]["runner"]["median"] / ps["prompts"]
        per_full = pf["timing"]["median"] / pf["prompts"]
        ps["runner_s_per_prompt"], pf["runner_s_per_prompt"] = per_sub, per_full
        derived = {"lm_eval": ps["speedup_vs_lm_eval"]["median"] * per_sub / per_full}
        if "speedup_vs_naive" in ps:
            derived["naive"] = ps["speedup_vs_naive"]["median"] * per_sub / per_full
        res["derived_full_speedups"] = derived
        full_w = f"pressure, {pf['items']} items x 31 conditions ({pf['prompts']} prompts)"
        t_full_med = pf["timing"]["median"]
        extrap = {}
        for key, label in (
            ("lm-eval", f"lm-eval HFLM, batch size {ps['lm_eval_best_batch_size']}"),
            ("naive", "naive loop"),
        ):
            tk = ps["timing"].get(f"lm-eval (bs {ps['lm_eval_best_batch_size']})" if key == "lm-eval" else "naive loop")
            if tk is None:
                continue
            est = tk["median"] / ps["prompts"] * pf["prompts"]
            extrap[key] = {"seconds": est, "ratio_vs_runner": est / t_full_med}
            rows.append(
                [
                    full_w,
                    f"{label} -- EXTRAPOLATED: {tk['median'] / ps['prompts']:.3f} s/prompt measured on "
                    f"{ps['prompts']} prompts x {pf['prompts']}",
                    f"~{est:.0f} s (extrapolated)",
                    f"~{est / t_full_med:.1f}x (extrapolated)",
                ]
            )
        pf["extrapolated"] = extrap
        findings.append(
            f"runner seconds per prompt: {per_sub:.3f} on the {ps['prompts']}-prompt subset, {per_full:.3f} on all "
            f"{pf['prompts']} prompts (fuller batches, the system prompt shared across items). lm-eval and the naive loop "
            "cost the same per prompt at any size (one padded / single forward per context), so at the full size the "
            f"ratios would be about {derived['lm_eval']:.1f}x (lm-eval)"
            + (f" and {derived['naive']:.1f}x (naive)" if "naive" in derived else "")
            + " -- derived from this run's measurements, not measured at that size."
        )

    if "cloze" not in args.skip:
        cbank, items = cloze_requests(args.cloze_prompts or None)
        flat = [(c, k) for c, ks in items for k in ks]
        bs = best_bs or 16
        stage(f"cloze: {len(cbank)} items, {len(flat)} requests, lm-eval bs {bs}")
        score_continuations(lm, items[:1], cfg=cfg)
        t, outs = common.time_interleaved(
            {"runner": lambda: score_continuations(lm, items, cfg=cfg), "lm-eval": lambda: lme_run(flat, bs)},
            args.repeats,
        )
        d = float(np.abs(outs["runner"].sum_logp - outs["lm-eval"]).max())
        res["cloze"] = {
            "items": len(cbank),
            "requests": len(flat),
            "lm_eval_batch_size": bs,
            "timing": t,
            "speedup_vs_lm_eval": common.ratio(t["lm-eval"], t["runner"]),
            "max_abs_dll": d,
        }
        w = (
            f"cloze, whole bank ({len(cbank)} items, {len(flat)} requests)"
            if not args.cloze_prompts
            else f"cloze ({len(cbank)} items, {len(flat)} requests)"
        )
        rows.append([w, "runner (tree by level)", common.fmt_time(t["runner"]), "1.00x"])
        rows.append(
            [
                w,
                f"lm-eval HFLM, batch size {bs}",
                common.fmt_time(t["lm-eval"]),
                common.fmt_ratio(common.ratio(t["lm-eval"], t["runner"])),
            ]
        )
        findings.append(
            f"cloze: runner {res['cloze']['speedup_vs_lm_eval']['median']:.2f}x lm-eval (bs {bs}); "
            f"max |delta log-lik| {d:.1e}."
        )

    common.write_results(
        "tree",
        {**res, "partial": True, "report": make_report()},
        threads=args.threads,
        results_dir=args.results_dir,
        started_load=start_load,
    )

    if "sampling" not in args.skip:
        from interp.runner.generate import generate, sample_seed
        from interp.runner.scoring import encode

        sbank = common.pressure_subset(args.sample_items)
        from interp.studies.base import load_template
        from interp.studies.pressure import build_trials

        trials, _ = build_trials(sbank, load_template("pressure_v1"), tok)
        sp = trials.groupby("item_id", sort=False).head(args.conditions)["prompt"].tolist()
        n, mnt = args.n_samples, args.max_new_tokens
        model = lm.backend.model
        k_hf = args.sample_hf_prompts if 0 < args.sample_hf_prompts < len(sp) else len(sp)
        hf_idx = np.linspace(0, len(sp) - 1, k_hf).round().astype(int).tolist()  # spread over items / conditions
        hf_prompts = [sp[i] for i in hf_idx]

        def hf_per_prompt():
            out = []
            for prompt in hf_prompts:
                ids = encode(tok, prompt)[0]
                x = torch.tensor([ids])
                torch.manual_seed(sample_seed(0, prompt))
                with torch.inference_mode():
                    g = model.generate(
                        x,
                        attention_mask=torch.ones_like(x),
                        do_sample=True,
                        temperature=1.0,
                        top_k=0,
                        top_p=1.0,
                        max_new_tokens=mnt,
                        num_return_sequences=n,
                        pad_token_id=tok.pad_token_id,
                    )
                out.append([tok.decode(r[len(ids) :], skip_special_tokens=True) for r in g])
            return out

        stage(f"sampling: {len(sp)} prompts x {n} samples, {mnt} new tokens (HF generate on {k_hf} of them)")
        generate(lm, sp[:1], max_new_tokens=2, n=2)
        t, outs = common.time_interleaved(
            {"batched": lambda: generate(lm, sp, max_new_tokens=mnt, n=n, seed=0), "hf": hf_per_prompt},
            args.sample_repeats or args.repeats,
        )
        # replies depend only on the prompt's own seed, so the subset compares one to one
        same = np.mean([a == b for i, rb in zip(hf_idx, outs["hf"]) for a, b in zip(outs["batched"][i], rb)])
        w = f"sampled readout, {len(sbank)} items x {args.conditions} conditions x {n} samples ({len(sp)} prompts)"
        rows.append([w, "interp generate (tree + one batch)", common.fmt_time(t["batched"]), "1.00x"])
        if k_hf == len(sp):
            speed = common.ratio(t["hf"], t["batched"])
            rows.append(
                [w, "HF generate per prompt, num_return_sequences", common.fmt_time(t["hf"]), common.fmt_ratio(speed)]
            )
            speed_med, note = speed["median"], ""
        else:
            per = t["hf"]["median"] / k_hf
            est = per * len(sp)
            speed, speed_med = (
                {"median": est / t["batched"]["median"], "extrapolated": True},
                est / t["batched"]["median"],
            )
            rows.append(
                [
                    w,
                    f"HF generate per prompt, num_return_sequences -- EXTRAPOLATED: {per:.2f} s/prompt measured on "
                    f"{k_hf} prompts (median {common.fmt_time(t['hf'])}) x {len(sp)}",
                    f"~{est:.0f} s (extrapolated)",
                    f"~{speed_med:.1f}x (extrapolated)",
                ]
            )
            note = f" (HF timed on {k_hf} of {len(sp)} prompts and extrapolated per prompt)"
        res["sampling"] = {
            "items": len(sbank),
            "prompts": len(sp),
            "hf_prompts": k_hf,
            "n_samples": n,
            "max_new_tokens": mnt,
            "timing": t,
            "speedup_vs_generate": speed,
            "identical_reply_share": float(same),
        }
        findings.append(
            f"sampling: batched {speed_med:.1f}x HF generate per prompt{note}; {same:.1%} of the compared replies "
            "identical to HF's under the same seeds."
        )

    res["report"] = make_report()
    common.write_results("tree", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


if __name__ == "__main__":
    main()
