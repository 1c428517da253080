"""Regenerate BENCHMARKS.md from bench/results/*.json (written by the bench/*.py scripts).

    python bench/report.py                 # BENCHMARKS.md at the repository root
    python bench/report.py --preliminary "machine shared with other jobs"   # adds a warning banner

Nothing is measured here; every figure comes from the JSON files, so the page always matches
the last run of each script.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def _table(columns, rows) -> list[str]:
    out = [
        "| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def _get(d, *keys, default=None):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


# Results measured before this date ran the previous engine (one forward per tree node, the
# `min_saved_tokens` threshold): their sections are dropped from the page (listed at the end with
# the command that reruns them) unless they time no scoring engine at all.
CURRENT_ENGINE_SINCE = "2026-11-30T14:00"
ENGINE_FREE = {"probes", "crash_suite", "integrity_suite", "plan_741", "scale", "gpu_check"}
# rows / findings of a results file that a newer file measures better (measured at bank size
# instead of extrapolated): (file, prefix of the row's workload or of the finding) -> replaced by
SUPERSEDED = {
    ("tree", "pressure"): "bank",
    ("tree", "tokens"): "bank",
    ("tree", "FLOP rate"): "bank",
    ("tree", "runner seconds per prompt"): "bank",
}


def is_stale(name: str, d: dict) -> bool:
    return name not in ENGINE_FREE and d["meta"]["date"] < CURRENT_ENGINE_SINCE


def _superseded(name: str, text: str, res: dict) -> bool:
    return any(name == f and str(text).startswith(pre) and new in res for (f, pre), new in SUPERSEDED.items())


def _load(d: dict) -> str:
    la = d["meta"].get("loadavg_start") or d["meta"].get("loadavg")
    return f"{la[0]:.2f}" if la else "?"


def _date(d: dict) -> str:
    return d["meta"]["date"][:16].replace("T", " ")


def summary(res: dict) -> list[str]:
    """`_summary`, where a results file without the fields it reads says so instead of failing."""
    try:
        return _summary(res)
    except (KeyError, TypeError, IndexError) as exc:
        lines = _summary({n: d for n, d in res.items() if n not in SUMMARIZED}) if set(res) & set(SUMMARIZED) else []
        return lines + [f"- (summary incomplete: a results file lacks field {exc}; rerun its script)"]


MACHINE_NOTE = Path(__file__).resolve().parent / "machine_note.md"  # the Machine section's prose
SUMMARIZED = (
    "bank",
    "tree",
    "lm_eval_model",
    "lm_eval_model_bank",
    "lm_eval_model_bank_float32_medium",
    "probes",
    "scaling",
    "crash_suite",
    "integrity_suite",
    "plan_741",
    "field_sets",
)


def _summary(res: dict) -> list[str]:
    """One line per comparison, from the newest results file that measures it, each dated.

    Hook for other scripts: a results file whose `report` has `summary` (a list of one-line
    strings) contributes those lines as they are (e.g. hash cost and integrity-suite figures)."""
    lines = []
    b = res.get("bank")
    if b:
        sp, t = b["speedup"], b["timing"]
        w = f"{b['prompts']} pressure prompts ({b['items']} items x 31 conditions), {b['model']}"
        if "float32 vs lm-eval" in sp:
            lines.append(
                f"Runner (float32) vs lm-eval HFLM at its best batch size ({b['lm_eval_best_batch_size']}), {w}: "
                f"**{sp['float32 vs lm-eval']['median']:.2f}x** (median of {t['runner float32']['n']} interleaved runs; "
                f"max |Δ log-lik| {b['max_abs_dll_vs_lm_eval']:.1e}) ({_date(b)})."
            )
        if "float32 vs naive" in sp:
            n = t["naive loop"]["n"]
            lines.append(
                f"Runner (float32) vs the naive HF loop, {w}: **{sp['float32 vs naive']['median']:.1f}x** (naive loop "
                f"measured {n} time{'s' if n > 1 else ''} at full size; max |Δ log-prob| "
                f"{b['max_abs_dlogp_vs_naive']:.1e}) ({_date(b)})."
            )
        for d in ("mixed-bf16", "bfloat16"):
            if d in b["precision"]:
                p = b["precision"][d]
                lines.append(
                    f"`--dtype {d}` vs float32, {w}: **{sp[f'{d} vs float32']['median']:.2f}x** the speed (min/min "
                    f"{sp[f'{d} vs float32']['min']:.2f}x); verdict "
                    f"probability |ΔP| mean **{p['mean_abs_dp']:.4f}**, max **{p['max_abs_dp']:.4f}**, argmax flips "
                    f"**{p['argmax_flips']} of {p['prompts']}**; max |Δ log-prob| {p['max_abs_dlogp']:.2g} ({_date(b)})."
                )
    pr = res.get("precisions")
    for d, p in (pr or {}).get("precision", {}).items():
        sp = pr["speedup"][f"{d} vs float32"]
        margins = p.get("flip_margins")
        at = f" (float32 margins of the flipped: {', '.join(f'{m:.1g}' for m in margins)})" if margins else ""
        guard = p.get("tie_guard")
        name = f"`--dtype {p.get('dtype', d)}`" + (
            f" (tie guard {guard:g}: {p['tie_guarded']} re-scored in float32)"
            if guard
            else ", no tie guard"
            if guard == 0
            else ""
        )
        lines.append(
            f"{name} vs float32, {pr['prompts']} pressure prompts (precisions run): **{sp['median']:.2f}x** the "
            f"speed (runs {sp['low']:.2f}x-{sp['high']:.2f}x); verdict probability |ΔP| mean **{p['mean_abs_dp']:.1e}**, "
            f"max **{p['max_abs_dp']:.1e}**, argmax flips **{p['argmax_flips']} of {p['prompts']}**{at} ({_date(pr)})."
        )
    if b:
        fl = b.get("flops", {})
        if fl:
            lines.append(
                "Achieved rate on that workload against the matmul rate of the dtype that ran (2048^3, same process): "
                + "; ".join(
                    f"{d} {f['gflops_useful']:.0f} GFLOP/s = **{f['share_of_matmul']:.0%}** of {f['matmul_dtype']} "
                    f"matmul ({f['matmul_gflops']:.0f})"
                    for d, f in fl.items()
                )
                + f" ({_date(b)})."
            )
    r = res.get("tree")
    if r and not is_stale("tree", r):
        c = r.get("cloze")
        if c and "speedup_vs_lm_eval" in c:
            lines.append(
                f"Runner vs lm-eval HFLM, cloze ({c.get('requests', '?')} requests, whole bank): "
                f"**{c['speedup_vs_lm_eval']['median']:.2f}x**; max |Δ log-lik| {c.get('max_abs_dll', float('nan')):.1e} "
                f"({_date(r)})."
            )
        sm = r.get("sampling")
        if sm:
            for f in r["report"]["findings"]:
                if str(f).startswith("sampling"):
                    lines.append(f"Batched sampling vs HF generate: {f[len('sampling: ') :]} ({_date(r)}).")
    for name in sorted(n for n in res if n.startswith("lm_eval_model")):  # per size, then per --dtype
        r = res.get(name)
        if not r or is_stale(name, r):
            continue
        at = "" if r.get("dtype", "float32") == "float32" else f",dtype={r['dtype']}"
        per_task = "; by task: " + ", ".join(f"{t} {v['max_abs_dll']:.1e}" for t, v in r.get("per_task", {}).items())
        lines.append(
            f"lm-eval `--model interp{at}` vs `--model hf` ({r['requests']} requests of {len(r['tasks'])} local "
            f"tasks, {r['model']}): **{r['speedup_interp_vs_hf']['median']:.2f}x** the speed of hf (median of "
            f"{r['timing']['interp']['n']}; {r['speedup_interp_vs_hf']['min']:.2f}x on minimums); max |Δ log-likelihood| "
            f"{r['max_abs_dll']:.1e}{per_task if at else ''}, is_greedy flags differing: "
            f"{r['greedy_flags_different']} ({_date(r)})."
        )
    for name, d in res.items():
        if name.startswith("sweep_overhead_") and not is_stale(name, d):
            lines.append(
                f"Sweep overhead ({d['study']}, {d['max_items']} items, {', '.join(d['models'])}): "
                + " ".join(d["report"]["findings"])
                + f" ({_date(d)})"
            )
    r = res.get("probes")
    if r:
        c = r["cache"]
        parts = [f"{t} {x['timing']['median']:.1f} s" for t, x in r["targets"].items()]
        lines.append(
            f"Probing from the cache ({c['units']} units x {c['rows_per_unit']:,} rows x {c['d_model']}, "
            f"{r['shuffles']} shuffles, no model): " + ", ".join(parts) + f" for all units (median) ({_date(r)})."
        )
    r = res.get("scaling")
    if r and not is_stale("scaling", r):
        sz = r["sizes"]
        ks = sorted(sz, key=int)
        lines.append(
            "Scaling ("
            + ", ".join(f"{k}x = {sz[k]['items']} items" for k in ks)
            + "): time "
            + " : ".join(f"{sz[k]['time_ratio_vs_1x']:.2f}" for k in ks)
            + "; peak RSS "
            + " / ".join(f"{sz[k]['peak_scoring_mb']:.0f}" for k in ks)
            + " MiB."
        )
    r = res.get("crash_suite")
    if r:
        lines.append(
            f"Crash suite: {r['kills']} SIGKILLs, {r['kills'] - r['failed']} resumes passed every check "
            f"(tables byte-identical, units open, nothing recomputed) ({_date(r)})."
        )
    r = res.get("integrity_suite")
    if r and "summary" not in r.get("report", {}):
        cb, ct, lr = r["corrupted_body"], r["changed_tokenizer"], r["lock_race"]
        wl = r["worker_loss"]["rounds"]
        lines.append(
            f"Integrity suite: damaged unit bodies reported and recomputed {cb['recomputed']}/{cb['rounds']}; "
            f"edited tokenizers recomputed {ct['tables_equal_fresh']}/{ct['rounds']}; Dask worker SIGKILLed "
            f"1-{max(w['kills_done'] for w in wl)}x: identical tables "
            f"{sum(w['tables_identical'] for w in wl)}/{len(wl)}, no hang; stale-lock race with 6 "
            f"contenders: two holders in {lr['this']['trials_with_two_holders']}/{lr['this']['trials']} "
            f"trials (previous lock: {lr['previous']['trials_with_two_holders']}/{lr['previous']['trials']}) ({_date(r)})."
        )
    lines += integrity_bytes_summary(res)
    r = res.get("field_sets")
    if r:
        sp, a = r["speedup_interp_vs_lm_eval"], r["agreement"]
        same = "=" if a["acc_lm_eval"] == a["argmax_rate_interp"] else "≠"
        lines.append(
            f"A/B sycophancy study vs lm-eval's own sycophancy_on_nlp_survey task on the same local file "
            f"({r['items']} items, {r['requests']} requests), {r['model']}: **{sp['median']:.2f}x** (median of "
            f"{r['timing']['interp']['n']} interleaved runs; min/min {sp['min']:.2f}x; range {sp['low']:.2f}x-"
            f"{sp['high']:.2f}x); max |Δ log-lik| {a['max_abs_delta_loglik']:.1e}, lm-eval acc "
            f"{a['acc_lm_eval']:.4f} {same} argmax_rate {a['argmax_rate_interp']:.4f} ({_date(r)})."
        )
    r = res.get("plan_741")
    if r:
        lines.append(
            f"Planning {r['tree']['checkpoints']} checkpoints "
            f"({r['tree']['apparent_weight_bytes'] / 1e12:.1f} TB of weights, --dry-run): cold "
            f"{r['cold_median_s']:.0f} s, warm {r['warm_median_s']:.0f} s (median of {r['repeats']}; "
            f"{r['import_median_s']:.0f} s of it Python start-up) ({_date(r)})."
        )
    for d in res.values():  # the hook: lines a results file states for itself
        lines += [str(x) for x in d.get("report", {}).get("summary", [])]
    return ["- " + ln for ln in lines]


def integrity_bytes_summary(res: dict) -> list[str]:
    """Issue 23's headline figures (bench/integrity_suite.py --part bytes, bench/bench_hash.py)."""
    lines = []
    r = res.get("integrity_bytes")
    if r:
        t = r["totals"]
        lines.append(
            f"Integrity, issue 23: weight edits the sampled fingerprint cannot see caught {t['edits_caught']}/"
            f"{t['edits_tried']} (untouched reruns recomputed {t['false_recomputes']}/{t['controls']}); a FIFO at "
            f"every path read and the one-line cases: {t['command_cases_ok']}/{t['command_cases']} as expected, "
            f"hangs {t['hangs']}, tracebacks {t['tracebacks']}."
        )
    r = res.get("content_hash")
    if r:
        m = r["median"]
        lines.append(
            f"Content hash while loading ({r['model']}, {r['weight_bytes'] / 1e6:.0f} MB): {m['hash_s']:.2f} s, "
            f"{100 * m['hash_over_load']:.1f} % of load + first forward (median of {r['repeats']}; target 5 %)."
        )
    return lines


def derived_findings(res: dict) -> dict[str, list[str]]:
    """Observations computed from the data (added under the matching section)."""
    out: dict[str, list[str]] = {}
    f = res.get("flops")
    if f:
        notes = []
        modes = f["modes"]
        for mode, m in modes.items():
            mn, rn = m["minimum"], m["runner"]
            parts = rn["flops_useful_parts"]
            notes.append(
                f"`{mode}`: the runner computes {rn['real_tokens']:,} tokens in {rn['forwards']} forwards; the fewest "
                f"any prefix-sharing scorer could compute is {mn['trie']:,} ({rn['real_tokens'] / mn['trie']:.2f}x). "
                f"Useful FLOPs: dense {parts['dense'] / 1e12:.3f}, attention {parts['attention'] / 1e12:.3f}, "
                f"unembedding {parts['unembedding'] / 1e12:.3f} TFLOP."
            )
        if "exact" in modes and "space_case" in modes:
            e, s_ = modes["exact"], modes["space_case"]
            t_ratio = s_["timing"]["median"] / e["timing"]["median"]
            k_ratio = s_["runner"]["real_tokens"] / e["runner"]["real_tokens"]
            dfw = s_["runner"]["forwards"] - e["runner"]["forwards"]
            line = (
                f"`space_case` (the study's default: four surface forms per verdict, some of them two tokens) takes "
                f"{t_ratio:.2f}x the time of `exact` for {k_ratio:.2f}x the tokens and {dfw:+d} forwards"
            )
            if t_ratio > 1.5 * k_ratio and dfw > 0:
                dt = s_["timing"]["median"] - e["timing"]["median"]
                line += (
                    f": about {dt / dfw * 1e3:.0f} ms per extra forward, so per-forward overhead, not arithmetic, "
                    "sets its cost"
                )
            notes.append(line + ".")
        out["flops"] = notes
    sc = res.get("scaling")
    if sc:
        sz = sc["sizes"]
        ks = sorted(sz, key=int)
        per = [sz[k]["seconds_per_item"] for k in ks]
        grow = [sz[k]["peak_scoring_mb"] for k in ks]
        out["scaling"] = [
            f"time per item {' / '.join(f'{x:.2f}' for x in per)} s across the sizes (spread "
            f"{(max(per) - min(per)) / (sum(per) / len(per)):.0%} of the mean): linear when this is flat.",
            f"peak RSS while scoring {' / '.join(f'{x:.0f}' for x in grow)} MiB: grows by "
            f"{grow[-1] - grow[0]:+.0f} MiB from {ks[0]}x to {ks[-1]}x ({int(ks[-1]) // int(ks[0])}x the items); the "
            f"result arrays at {ks[-1]}x are {sz[ks[-1]]['result_array_mb']:.2f} MiB.",
        ]
    pr = res.get("probes")
    if pr and len(pr["targets"]) > 1:
        t = pr["targets"]
        out["probes"] = [
            " vs ".join(f"{k} ({v['metric']}) {v['seconds_per_unit']:.2f} s per unit" for k, v in t.items())
            + f", each with {pr['shuffles']} shuffles x 5 folds."
        ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results-dir", type=Path, default=common.RESULTS)
    ap.add_argument("--out", type=Path, default=common.ROOT / "BENCHMARKS.md")
    ap.add_argument("--preliminary", default=None, help="reason the figures are preliminary (adds a banner)")
    ap.add_argument(
        "--machine-note",
        default=None,
        help="whether the machine was quiet, stated under Machine (default: bench/machine_note.md)",
    )
    ap.add_argument(
        "--notes",
        type=Path,
        default=common.BENCH / "NOTES.md",
        help="hand-written observations appended verbatim, if the file exists",
    )
    args = ap.parse_args()
    res = {}
    for p in sorted(args.results_dir.glob("*.json")):
        d = json.loads(p.read_text())
        res[d["name"]] = d
    if not res:
        raise SystemExit(f"{args.results_dir}: no results (run bash bench/run_all.sh)")
    live = {n: d for n, d in res.items() if not is_stale(n, d)}
    stale = {n: d for n, d in res.items() if is_stale(n, d)}
    lines = ["# Benchmarks", ""]
    if args.preliminary:
        lines += [
            f"> **Preliminary figures.** {args.preliminary} Regenerate them on a quiet machine with "
            "`bash bench/run_all.sh` (which rewrites this file).",
            "",
        ]
    lines += [
        "Generated by `python bench/report.py` from `bench/results/*.json`; each section says how to rerun its "
        "script. `bash bench/run_all.sh` runs every benchmark (5 repeats, 2 threads; about 25 minutes on two quiet "
        "cores) and regenerates this page. These are scripts, not timed tests.",
        "",
        "Conventions: times are the median (min-max) of the stated number of runs, model loading excluded. "
        "A speedup `a/b` is the ratio of medians; `min/min` is the ratio of the fastest runs, the figure least "
        "disturbed by other load. When several methods are compared, their runs are interleaved (run r of each, "
        "then run r+1), so slow drift of a shared machine affects them alike.",
        "",
    ]
    metas = [d["meta"] for d in live.values()]
    m0 = metas[0]
    loads = [x for d in metas for x in ([d.get("loadavg_start")] + [d.get("loadavg")]) if x]
    lines += ["## Machine", ""]
    note = args.machine_note
    if note is None and MACHINE_NOTE.is_file():
        note = MACHINE_NOTE.read_text().strip()
    if note:
        lines += [note, ""]
    lines += _table(
        ["field", "value"],
        [
            ["CPU (by section below)", "; ".join(sorted({str(d.get("cpu")) for d in metas}))],
            ["cores visible", m0.get("cores_visible")],
            ["threads used", ", ".join(sorted({str(d.get("threads")) for d in metas}))],
            ["python / torch / transformers", f"{m0.get('python')} / {m0.get('torch')} / {m0.get('transformers')}"],
            [
                "numpy / scikit-learn / h5py / lm-eval",
                f"{m0.get('numpy')} / {m0.get('scikit-learn')} / {m0.get('h5py')} / {m0.get('lm-eval')}",
            ],
            ["git commit", ", ".join(sorted({str(d.get("git")) for d in metas}))],
            ["dates", f"{min(d['date'] for d in metas)} .. {max(d['date'] for d in metas)}"],
            [
                "1-min load average at start/end of the scripts",
                f"{min(x[0] for x in loads):.2f} .. {max(x[0] for x in loads):.2f}" if loads else "n/a",
            ],
        ],
    )
    lines += ["", "## Summary", ""] + summary(live) + [""]
    derived = derived_findings(live)
    for name, d in sorted(live.items(), key=lambda kv: kv[1].get("report", {}).get("order", 99)):
        rep = d.get("report")
        if not rep:
            continue
        lines += [
            f"## {rep['title']}",
            "",
            f"Measured {_date(d)} on {d['meta'].get('cpu')}, {d['meta'].get('threads')} thread(s) "
            f"(git {d['meta'].get('git')}; 1-min load average at start "
            f"{_load(d)}). " + rep.get("what", ""),
            "",
            f"Rerun: `{rep['rerun']}` (this run: `{d['meta'].get('command')}`)",
            "",
        ]
        dropped = False
        for t in rep.get("tables", []):
            rows = [r for r in t["rows"] if not _superseded(name, r[0], live)]
            dropped |= len(rows) < len(t["rows"])
            if not rows:
                continue
            if t.get("caption"):
                lines += [f"*{t['caption']}*", ""]
            lines += _table(t["columns"], rows) + [""]
        for f in rep.get("findings", []) + derived.get(name, []):
            if _superseded(name, f, live):
                dropped = True
                continue
            lines.append(f"- {f}")
        if dropped:
            lines.append(
                "- Rows and findings of this run that §1 (bank size, measured in one interleaved run) measures again "
                "are left out: they were measured on a subset and extrapolated."
            )
        lines.append("")
    if stale:
        lines += [
            "## Dropped sections",
            "",
            f"Measured before {CURRENT_ENGINE_SINCE[:10]} on the previous engine and not rerun since; their figures "
            "no longer describe the code. Rerun to bring them back:",
            "",
        ]
        lines += [
            f"- {d.get('report', {}).get('title', n)} ({_date(d)}): `{d['report']['rerun']}`"
            for n, d in stale.items()
            if d.get("report")
        ]
        lines.append("")
    if args.notes.exists():
        lines += [args.notes.read_text().rstrip(), ""]
    from interp.core.atomic import atomic_write_text

    atomic_write_text(args.out, "\n".join(lines).rstrip() + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
