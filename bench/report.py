"""Regenerate BENCHMARKS.md from bench/results/*.json (written by the benchmarks, `python -m bench NAME`).

    python -m bench report                 # BENCHMARKS.md at the repository root
    python -m bench report --preliminary "machine shared with other jobs"   # adds a warning banner

Nothing is measured here; every figure comes from the JSON files, so the page always matches
the last run of each script.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import common


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


def summary(res: dict) -> list[list[str]]:
    """`_summary`, where a results file without the fields it reads says so instead of failing."""
    try:
        return _summary(res)
    except (KeyError, TypeError, IndexError) as exc:
        rows = _summary({n: d for n, d in res.items() if n not in SUMMARIZED}) if set(res) & set(SUMMARIZED) else []
        return rows + [["(summary incomplete)", "", f"a results file lacks field {exc}: rerun its benchmark", "", ""]]


SUMMARIZED = (
    "bank",
    "precision_moral",
    "precision_long",
    "precision_cloze",
    "tree",
    "lm_eval_model_bank",
    "sweep_overhead_pressure",
    "probes",
    "crash_suite",
    "integrity_suite",
    "plan_741",
    "field_sets",
)
SUMMARY_COLUMNS = ["comparison", "workload", "result", "agreement", "measured"]


def _measured(d: dict) -> str:
    """The section's number where its title has one (`§1`), and the date."""
    head = d.get("report", {}).get("title", "").split(" ", 1)[0]
    return (f"§{head.rstrip('.')}, " if head[:1].isdigit() else "") + _date(d)[:10]


def _summary(res: dict) -> list[list[str]]:
    """The headline figures, one row per comparison, from the newest results file that measures it.

    Hook for other benchmarks: a results file whose `report` has `summary` (a list of one-line
    strings "comparison: result") contributes one row per line."""
    rows = []
    b = res.get("bank")
    if b:
        sp, t = b["speedup"], b["timing"]
        w = f"{b['prompts']} pressure prompts, {b['model']}"
        if "float32 vs lm-eval" in sp:
            rows.append(
                [
                    f"runner (float32) vs lm-eval HFLM at its best batch size ({b['lm_eval_best_batch_size']})",
                    w,
                    f"**{sp['float32 vs lm-eval']['median']:.2f}x** (median of {t['runner float32']['n']})",
                    f"max |Δ log-lik| {b['max_abs_dll_vs_lm_eval']:.1e}",
                    _measured(b),
                ]
            )
        if "float32 vs naive" in sp:
            n = t["naive loop"]["n"]
            rows.append(
                [
                    "runner (float32) vs a naive HF loop",
                    w,
                    f"**{sp['float32 vs naive']['median']:.1f}x** (naive loop {n} run{'s' if n > 1 else ''})",
                    f"max |Δ log-prob| {b['max_abs_dlogp_vs_naive']:.1e}",
                    _measured(b),
                ]
            )
    for w in ("moral", "long", "cloze"):  # precision kinds: one row per workload, every kind's speed and error
        pr = res.get(f"precision_{w}")
        if not pr:
            continue
        kinds = [k for k in pr["precision"] if ", no guard" not in k]
        rows.append(
            [
                "`--dtype` kinds vs float32 (speed; max |ΔP|, flips)",
                pr["what"].split(" (")[0],
                ", ".join(f"{k} **{pr['speedup'][k]['median']:.2f}x**" for k in kinds),
                "; ".join(
                    f"{pr['precision'][k]['max_abs_dp']:.2g}, {pr['precision'][k]['argmax_flips']}" for k in kinds
                ),
                _measured(pr),
            ]
        )
    r = res.get("tree")
    if r and not is_stale("tree", r):
        c = r.get("cloze")
        if c and "speedup_vs_lm_eval" in c:
            rows.append(
                [
                    "runner vs lm-eval HFLM, cloze",
                    f"{c.get('requests', '?')} requests, whole bank",
                    f"**{c['speedup_vs_lm_eval']['median']:.2f}x**",
                    f"max |Δ log-lik| {c.get('max_abs_dll', float('nan')):.1e}",
                    _measured(r),
                ]
            )
        sm = r.get("sampling")
        if sm and "speedup_vs_generate" in sm:
            rows.append(
                [
                    "batched sampling vs HF generate per prompt",
                    f"{sm['prompts']} prompts x {sm['n_samples']} samples",
                    f"**~{sm['speedup_vs_generate']['median']:.1f}x** (HF extrapolated from {sm['hf_prompts']} prompts)",
                    f"{sm['identical_reply_share']:.0%} of compared replies identical",
                    _measured(r),
                ]
            )
    r = res.get("lm_eval_model_bank")
    if r and not is_stale("lm_eval_model_bank", r):
        rows.append(
            [
                "lm-eval `--model interp` vs `--model hf`",
                f"{r['requests']} requests of {len(r['tasks'])} local tasks",
                f"**{r['speedup_interp_vs_hf']['median']:.2f}x** (median of {r['timing']['interp']['n']})",
                f"max |Δ log-lik| {r['max_abs_dll']:.1e}; is_greedy differing {r['greedy_flags_different']}",
                _measured(r),
            ]
        )
    r = res.get("sweep_overhead_pressure")
    if r and not is_stale("sweep_overhead_pressure", r):
        rows.append(
            [
                "a sweep's time outside the engine's forwards",
                f"pressure, {r['max_items']} items, {len(r['models'])} models",
                f"**{r['non_scoring_share']:.1%}** of wall time",
                "",
                _measured(r),
            ]
        )
    r = res.get("probes")
    if r:
        c = r["cache"]
        rows.append(
            [
                f"probing from the cache, {r['shuffles']} shuffles, no model",
                f"{c['units']} units x {c['rows_per_unit']:,} rows x {c['d_model']}",
                ", ".join(f"{t} **{x['timing']['median']:.1f} s**" for t, x in r["targets"].items()),
                "",
                _measured(r),
            ]
        )
    r = res.get("crash_suite")
    if r:
        rows.append(
            [
                "SIGKILL during a sweep, then resume",
                f"{r['kills']} kills",
                f"**{r['kills'] - r['failed']}/{r['kills']}** resumes pass every check",
                "tables byte-identical, nothing recomputed",
                _measured(r),
            ]
        )
    r = res.get("integrity_suite")
    if r and "summary" not in r.get("report", {}):
        cb, ct, lr = r["corrupted_body"], r["changed_tokenizer"], r["lock_race"]
        wl = r["worker_loss"]["rounds"]
        rows.append(
            [
                "integrity: damaged units, edited tokenizers, worker loss, lock race",
                f"{cb['rounds']} + {ct['rounds']} + {len(wl)} + {lr['this']['trials']} rounds",
                f"recomputed **{cb['recomputed']}/{cb['rounds']}**, **{ct['tables_equal_fresh']}/{ct['rounds']}**; "
                f"tables identical **{sum(w['tables_identical'] for w in wl)}/{len(wl)}**; two lock holders "
                f"**{lr['this']['trials_with_two_holders']}/{lr['this']['trials']}**",
                f"previous lock: two holders {lr['previous']['trials_with_two_holders']}/{lr['previous']['trials']}",
                _measured(r),
            ]
        )
    rows += integrity_bytes_summary(res)
    r = res.get("field_sets")
    if r:
        sp, a = r["speedup_interp_vs_lm_eval"], r["agreement"]
        same = "=" if a["acc_lm_eval"] == a["argmax_rate_interp"] else "≠"
        rows.append(
            [
                "A/B sycophancy study vs lm-eval's own sycophancy_on_nlp_survey task on the same local file",
                f"{r['items']} items, {r['requests']} requests, {r['model']}",
                f"**{sp['median']:.2f}x** (median of {r['timing']['interp']['n']} interleaved runs; min/min "
                f"{sp['min']:.2f}x; range {sp['low']:.2f}x-{sp['high']:.2f}x)",
                f"max |Δ log-lik| {a['max_abs_delta_loglik']:.1e}; lm-eval acc {a['acc_lm_eval']:.4f} {same} "
                f"argmax_rate {a['argmax_rate_interp']:.4f}",
                _measured(r),
            ]
        )
    r = res.get("plan_741")
    if r:
        rows.append(
            [
                "planning with `--dry-run`",
                f"{r['tree']['checkpoints']} checkpoints, {r['tree']['apparent_weight_bytes'] / 1e12:.1f} TB",
                f"cold **{r['cold_median_s']:.0f} s**, warm **{r['warm_median_s']:.0f} s** (median of {r['repeats']})",
                f"{r['import_median_s']:.0f} s of it Python start-up",
                _measured(r),
            ]
        )
    for d in res.values():  # the hook: rows a results file states for itself
        for line in d.get("report", {}).get("summary", []):
            what, _, figure = str(line).partition(": ")
            rows.append([what, "", figure, "", _measured(d)])
    return rows


def integrity_bytes_summary(res: dict) -> list[list[str]]:
    """Issue 23's headline figures (integrity_suite --part bytes, content_hash_cost)."""
    rows = []
    r = res.get("integrity_bytes")
    if r:
        t = r["totals"]
        rows.append(
            [
                "integrity: weight edits the sampled fingerprint cannot see; FIFOs and bad input",
                f"{t['edits_tried']} edits, {t['command_cases']} command cases",
                f"caught **{t['edits_caught']}/{t['edits_tried']}**; as expected **{t['command_cases_ok']}/"
                f"{t['command_cases']}**, hangs {t['hangs']}, tracebacks {t['tracebacks']}",
                f"untouched reruns recomputed {t['false_recomputes']}/{t['controls']}",
                _measured(r),
            ]
        )
    r = res.get("content_hash")
    if r:
        m = r["median"]
        rows.append(
            [
                "content hash while loading",
                f"{r['model']}, {r['weight_bytes'] / 1e6:.0f} MB",
                f"**{m['hash_s']:.2f} s**, {100 * m['hash_over_load']:.1f} % of load + first forward (target 5 %)",
                "",
                _measured(r),
            ]
        )
    return rows


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


PRECISION_WORKLOADS = {"moral": "moral bank", "long": "long chat contexts", "cloze": "cloze"}
DOCS = Path(__file__).resolve().parents[1] / "docs" / "commands.md"  # its precision table is written here
BLOCK = "<!-- precision table: written by `python -m bench report` from bench/results/precision_*.json -->"
BLOCK_END = "<!-- end of precision table -->"


def precision_table(res: dict) -> list[str]:
    """docs/commands.md's one precision table: per kind and workload, the speed over float32 (median,
    range over interleaved rounds; wall clock, then the process's CPU seconds, which count less of
    other jobs' share of a loaded machine) and the error (max |ΔP|, flips), with the tie guard by default."""
    measured = {w: res[f"precision_{w}"] for w in PRECISION_WORKLOADS if f"precision_{w}" in res}
    if not measured:
        return ["(no precision_*.json in bench/results: run `python -m bench precision_speed_and_error`)"]
    kinds = list(dict.fromkeys(k for d in measured.values() for k in d["precision"]))
    rows = []
    for k in kinds:
        cells = []
        for d in measured.values():
            if k not in d["precision"]:
                cells.append("-")
                continue
            sp, cpu, pr = d["speedup"][k], d["cpu_speedup"][k], d["precision"][k]
            cells.append(
                f"**{sp['median']:.2f}x** ({sp['min']:.2f}-{sp['max']:.2f}), CPU {cpu['median']:.2f}x "
                f"({cpu['min']:.2f}-{cpu['max']:.2f}); max |ΔP| {pr['max_abs_dp']:.2g}, "
                f"{pr['argmax_flips']} of {pr['prompts']} flipped"
            )
        rows.append([f"`{k}`" if ", no guard" not in k else f"`{k.split(',')[0]}`, `--tie-guard 0`", *cells])
    notes = [
        f"{PRECISION_WORKLOADS[w]}: {d['what']}; {d['timing']['float32']['n']} rounds, 1-minute load "
        f"{min(la[0] for la in d['loadavg_rounds']):.1f}-{max(la[0] for la in d['loadavg_rounds']):.1f} on "
        f"{d['meta']['threads']} threads of {d['meta']['cpu']} ({_date(d)[:10]}; `{d['report']['rerun']}`)."
        for w, d in measured.items()
    ]
    return _table(["`--dtype`", *(PRECISION_WORKLOADS[w] for w in measured)], rows) + [""] + notes


def update_docs(path: Path, table: list[str]) -> bool:
    """Replace the block between BLOCK and BLOCK_END in `path` with `table`; False if it has no block."""
    text = path.read_text() if path.is_file() else ""
    if BLOCK not in text:
        return False
    head, rest = text.split(BLOCK, 1)
    _, tail = rest.split(BLOCK_END, 1)
    from interp.core.atomic import atomic_write_text

    atomic_write_text(path, head + BLOCK + "\n" + "\n".join(table) + "\n" + BLOCK_END + tail)
    return True


def section_meta(d: dict) -> list[str]:
    """The small table under a section's title: when, where, under what load, at which commit, how."""
    m = d["meta"]
    return _table(
        ["measured", "machine", "threads", "1-min load at start", "commit", "this run"],
        [[_date(d), m.get("cpu"), m.get("threads"), _load(d), m.get("git"), f"`{m.get('command')}`"]],
    )


def software(metas: list[dict]) -> list[str]:
    """One row per distinct set of library versions the sections ran with."""
    keys = ("python", "torch", "transformers", "numpy", "scikit-learn", "h5py", "lm-eval")
    seen: dict[tuple, int] = {}
    for m in metas:
        k = tuple(str(m.get(x)) for x in keys)
        seen[k] = seen.get(k, 0) + 1
    return _table([*keys, "sections"], [[*k, n] for k, n in seen.items()])


def render(res: dict, *, preliminary: str | None = None, notes: str | None = None) -> str:
    """BENCHMARKS.md from the results files (name -> parsed JSON)."""
    live = {n: d for n, d in res.items() if not is_stale(n, d)}
    stale = {n: d for n, d in res.items() if is_stale(n, d)}
    lines = ["# Benchmarks", ""]
    if preliminary:
        lines += [
            f"> **Preliminary figures.** {preliminary} Regenerate them on a quiet machine with "
            "`bash bench/run_all.sh` (which rewrites this file).",
            "",
        ]
    lines += ["## Summary", ""] + _table(SUMMARY_COLUMNS, summary(live)) + [""]
    lines += [
        "Generated by `python -m bench report` from `bench/results/*.json`; each section gives the command that "
        "reruns it (`python -m bench --list` names every benchmark; `bash bench/run_all.sh` runs them all and "
        "regenerates this page). Times are the median (min-max) of the stated runs, model loading excluded; a "
        "speed-up is the ratio of medians, `min/min` that of the fastest runs. Methods compared in one section run "
        "interleaved (run r of each, then run r+1), so the drift of a shared machine hits them alike; each section "
        "gives the 1-minute load average at its start (2 cores: near 0 is quiet).",
        "",
    ]
    derived = derived_findings(live)
    for name, d in sorted(live.items(), key=lambda kv: kv[1].get("report", {}).get("order", 99)):
        rep = d.get("report")
        if not rep:
            continue
        lines += [f"## {rep['title']}", ""] + section_meta(d) + [""]
        if rep.get("what"):
            lines += [rep["what"], ""]
        lines += [f"Rerun: `{rep['rerun']}`", ""]
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
    if live:
        lines += ["## Software", ""] + software([d["meta"] for d in live.values()]) + [""]
    if notes:
        lines += [notes.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def read_results(results_dir: Path) -> dict:
    res = {}
    for p in sorted(Path(results_dir).glob("*.json")):
        d = json.loads(p.read_text())
        if "docs_page" not in d:  # a benchmark with its own page (view.json: docs/view.md) is not a section here
            res[d["name"]] = d
    return res


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench report", description=__doc__.splitlines()[0])
    ap.add_argument("--results-dir", type=Path, default=common.RESULTS)
    ap.add_argument("--out", type=Path, default=common.ROOT / "BENCHMARKS.md")
    ap.add_argument("--preliminary", default=None, help="reason the figures are preliminary (adds a banner)")
    ap.add_argument(
        "--notes",
        type=Path,
        default=common.BENCH / "NOTES.md",
        help="hand-written observations appended verbatim, if the file exists",
    )
    ap.add_argument("--docs", type=Path, default=DOCS, help="where the precision table goes (its marked block)")
    args = ap.parse_args()
    res = read_results(args.results_dir)
    if not res:
        raise SystemExit(f"{args.results_dir}: no results (run bash bench/run_all.sh)")
    notes = args.notes.read_text() if args.notes.exists() else None
    from interp.core.atomic import atomic_write_text

    atomic_write_text(args.out, render(res, preliminary=args.preliminary, notes=notes))
    print(f"wrote {args.out}", file=sys.stderr)
    if args.docs and update_docs(args.docs, precision_table(res)):
        print(f"wrote the precision table in {args.docs}", file=sys.stderr)


if __name__ == "__main__":
    main()
