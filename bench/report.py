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


def summary(res: dict) -> list[str]:
    """One line per headline figure, where the result exists."""
    lines = []
    r = res.get("tree")
    if r:
        lines.append(
            f"Prefix tree by level ({r['model']}, {r['meta']['date']}): "
            + "; ".join(str(f) for f in r["report"]["findings"])
        )
        if any(d["meta"]["date"] < r["meta"]["date"][:10] for n, d in res.items() if n != "tree"):
            lines.append(
                "Sections dated before that run measured the previous engine (one forward per tree node, "
                "`min_saved_tokens` threshold); rerun `bash bench/run_all.sh` to refresh them."
            )
    for name, d in res.items():
        if name.startswith("sweep_overhead_"):
            lines.append(
                f"Sweep overhead ({d['study']}, {d['max_items']} items, {', '.join(d['models'])}): "
                + " ".join(d["report"]["findings"])
            )
    r = res.get("runner_vs_naive")
    if r:
        lines.append(
            f"Runner vs naive HF loop ({r['prompts']} pressure prompts, {r['model']}): "
            f"**{r['speedup_runner_vs_naive']['median']:.1f}x** faster (median; "
            f"{r['speedup_runner_vs_naive']['min']:.1f}x on minimums); max |Δ log-prob| "
            f"**{r['max_abs_dlogp']:.1e}**."
        )
    r = res.get("vs_lm_eval")
    if r:
        for w in ("pressure", "cloze"):
            if w in r:
                x = r[w]
                lines.append(
                    f"Runner vs lm-eval HFLM, {w} ({x['requests']} requests): "
                    f"**{x['speedup_runner_vs_lm_eval']['median']:.1f}x** faster; max |Δ log-likelihood| "
                    f"**{x['max_abs_dll']:.1e}** ({x['different_tokens']} requests tokenized differently)."
                )
    r = res.get("lm_eval_model")
    if r:
        lines.append(
            f"lm-eval `--model interp` vs `--model hf` ({r['requests']} requests of {len(r['tasks'])} local "
            f"tasks, {r['model']}): **{r['speedup_interp_vs_hf']['median']:.2f}x** the speed of hf (median; "
            f"{r['speedup_interp_vs_hf']['min']:.2f}x on minimums; below 1 = slower); max |Δ log-likelihood| "
            f"**{r['max_abs_dll']:.1e}**, is_greedy flags differing: {r['greedy_flags_different']}."
        )
    r = res.get("residual_capture")
    if r:
        names = list(r["settings"])
        one = r["settings"][names[1]]["relative_to_no_capture"]
        allr = r["settings"][names[2]]["relative_to_no_capture"] if len(names) > 2 else None
        base = r["settings"][names[0]]["timing"]
        noise = (base["max"] - base["min"]) / base["median"]
        s = f"Residual capture: one layer **{(one['median'] - 1) * 100:+.1f}%**"
        if allr:
            s += f", all layers {(allr['median'] - 1) * 100:+.1f}%"
        s += " wall time vs no capture (median ratio)"
        if abs(one["median"] - 1) <= noise:
            s += f", i.e. within the run-to-run spread of the no-capture runs ({noise:.0%})"
        lines.append(s + "; log-probs unchanged.")
    r = res.get("flops")
    if r:
        for mode, m in r["modes"].items():
            lines.append(
                f"Achieved rate ({mode}): **{m['achieved_gflops_useful']:.0f} GFLOP/s** useful = "
                f"**{m['fraction_of_matmul_useful']:.0%}** of fp32 matmul "
                f"({r['matmul']['gflops_median']:.0f} GFLOP/s at {r['meta']['threads']} thread(s)); naive scorer "
                f"computes {m['naive_over_runner_tokens']:.1f}x the tokens, "
                f"{m['naive_over_runner_flops']:.1f}x the FLOPs."
            )
    r = res.get("probes")
    if r:
        c = r["cache"]
        parts = [f"{t} {x['timing']['median']:.1f} s" for t, x in r["targets"].items()]
        lines.append(
            f"Probing from the cache ({c['units']} units x {c['rows_per_unit']:,} rows x {c['d_model']}, "
            f"{r['shuffles']} shuffles, no model): " + ", ".join(parts) + " for all units (median)."
        )
    r = res.get("scaling")
    if r:
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
            f"(tables byte-identical, units open, nothing recomputed)."
        )
    r = res.get("integrity_suite")
    if r:
        cb, ct, lr = r["corrupted_body"], r["changed_tokenizer"], r["lock_race"]
        wl = r["worker_loss"]["rounds"]
        lines.append(
            f"Integrity suite: damaged unit bodies reported and recomputed {cb['recomputed']}/{cb['rounds']}; "
            f"edited tokenizers recomputed {ct['tables_equal_fresh']}/{ct['rounds']}; Dask worker SIGKILLed "
            f"1-{max(w['kills_done'] for w in wl)}x: identical tables "
            f"{sum(w['tables_identical'] for w in wl)}/{len(wl)}, no hang; stale-lock race with 6 "
            f"contenders: two holders in {lr['this']['trials_with_two_holders']}/{lr['this']['trials']} "
            f"trials (previous lock: {lr['previous']['trials_with_two_holders']}/{lr['previous']['trials']})."
        )
    lines += integrity_bytes_summary(res)
    r = res.get("plan_741")
    if r:
        lines.append(
            f"Planning {r['tree']['checkpoints']} checkpoints "
            f"({r['tree']['apparent_weight_bytes'] / 1e12:.1f} TB of weights, --dry-run): cold "
            f"{r['cold_median_s']:.0f} s, warm {r['warm_median_s']:.0f} s (median of {r['repeats']}; "
            f"{r['import_median_s']:.0f} s of it Python start-up)."
        )
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
    metas = [d["meta"] for d in res.values()]
    m0 = metas[0]
    loads = [x for d in metas for x in ([d.get("loadavg_start")] + [d.get("loadavg")]) if x]
    lines += ["## Machine", ""]
    lines += _table(
        ["field", "value"],
        [
            ["CPU", m0.get("cpu")],
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
    lines += ["", "## Summary", ""] + summary(res) + [""]
    derived = derived_findings(res)
    for name, d in sorted(res.items(), key=lambda kv: kv[1].get("report", {}).get("order", 99)):
        rep = d.get("report")
        if not rep:
            continue
        lines += [
            f"## {rep['title']}",
            "",
            rep.get("what", ""),
            "",
            f"Rerun: `{rep['rerun']}` (this run: `{d['meta'].get('command')}`, {d['meta'].get('date')})",
            "",
        ]
        for t in rep.get("tables", []):
            if t.get("caption"):
                lines += [f"*{t['caption']}*", ""]
            lines += _table(t["columns"], t["rows"]) + [""]
        for f in rep.get("findings", []) + derived.get(name, []):
            lines.append(f"- {f}")
        lines.append("")
    if args.notes.exists():
        lines += [args.notes.read_text().rstrip(), ""]
    from interp.core.atomic import atomic_write_text

    atomic_write_text(args.out, "\n".join(lines).rstrip() + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
