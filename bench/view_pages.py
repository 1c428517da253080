"""`interp view` at scale: a synthetic sweep of 741 checkpoints x 1,000 items, browsed through `--serve`.

The sweep is written with the store's own writer (`cache.Store.write`, no model): one pressure
unit per checkpoint (1,000 items x 30 conditions, the study's trials and first_turn tables; the
first two units also carry rendered prompts of a realistic length), along a lineage of a base and
two routes (247 checkpoints each). Its results tables (item_maps.csv, pressure_summary.csv) are
computed from those units by the analyses' own functions (`item_maps`, `pressure_summary`, with
200 bootstrap resamples) and written with `analyses.io.write_table`, as the sweep writes them.

Then, --repeats times, a fresh server (`interp view OUT --serve` in its own process, cold) and
Debian's headless Chromium: server start until it answers, then the overview, the item map and two
item pages. The first server ever reads every unit's trials for the item pages and keeps them in
OUT/.view-index (reported apart, `served_first`); the --repeats later ones load that index.
each timed from navigation until the page says it has drawn (and the browser's first contentful
paint). With --demo-out DIR it also times the static site of a demo-sized OUT by file://.

    python -m bench view_pages [--repeats 5] [--checkpoints 741] [--items 1000] [--demo-out demo_out]
    python -m bench view_pages --docs        # docs/view.md's Scale section from bench/results/view.json

Results: bench/results/view.json (median, min, max of each step). A benchmark, never a timed test.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

CHALLENGES = ("disagree", "doubt", "sure", "really", "think_again")
NEUTRALS = ("coffee", "thanks", "noted", "got_it", "next", "weather", "typing", "looked")
VERDICTS = ("wrong", "acceptable")
BANK = "synthetic[n=1000,seed=0]"


def _conditions() -> list[tuple[str, str, str, str]]:
    out = []
    for planted in VERDICTS:
        out += [(planted, "opinion", "agree", "agree"), (planted, "opinion", "oppose", "oppose")]
        out += [(planted, "challenge", "", v) for v in CHALLENGES]
        out += [(planted, "neutral", "", v) for v in NEUTRALS]
    return out


def _lineage(n: int) -> tuple[list[str], dict]:
    per = n // 3
    base = [f"stage1-step{(i + 1) * 100}" for i in range(n - 2 * per)]
    routes = {r: [f"{r}/step{(i + 1) * 50}" for i in range(per)] for r in ("sft", "dpo")}
    names = base + routes["sft"] + routes["dpo"]
    return names, {"base": base, "routes": routes, "final": {r: c[-1] for r, c in routes.items()}}


def write_synthetic(out: Path, n_ckpt: int, n_items: int, *, log=print) -> None:
    """The synthetic sweep (skipped when `out` already holds one of these sizes)."""
    from analyses.io import write_table
    from analyses.pressure_metrics import ITEM_MAP_COLUMNS, SUMMARY_COLUMNS, item_maps, pressure_summary
    from cache.store import Store, UnitIdentity

    stamp = out / "synthetic.json"
    sizes = {"checkpoints": n_ckpt, "items": n_items, "version": 1}
    if stamp.is_file() and json.loads(stamp.read_text()) == sizes:
        return
    names, lineage = _lineage(n_ckpt)
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "lineage.json").write_text(
        json.dumps(
            {"checkpoints": [{"name": c, "path": f"/synthetic/{c}", "step": None} for c in names], "lineage": lineage}
        )
    )
    store = Store(out / "cache")
    rng = np.random.default_rng(0)
    ids = [f"syn-{i:04d}" for i in range(n_items)]
    gold = np.where(np.arange(n_items) % 2 == 0, "wrong", "acceptable")
    cond = _conditions()
    item_col = np.repeat(ids, len(cond))
    keys = pd.DataFrame(
        [c for _ in ids for c in cond], columns=["planted", "turn_kind", "turn_side", "turn_variant"]
    ).assign(item_id=item_col, gold=np.repeat(gold, len(cond)))
    susceptibility = rng.normal(0, 1, n_items)  # where each item yields, drifting along training
    text = "You are a helpful assistant. " * 12  # a chat-templated prompt's length (~600 characters)
    maps, summaries, idents = [], [], []
    t0 = time.perf_counter()
    for k, ck in enumerate(names):
        drift = np.sin(k / 40.0)
        base_p = 1 / (1 + np.exp(-(2.0 + 0.3 * rng.normal(0, 1, len(keys)))))
        push = (keys["turn_kind"].to_numpy() != "neutral") * np.repeat(susceptibility * drift, len(cond))
        p = np.clip(base_p / (1 + np.exp(push)), 1e-6, 1 - 1e-6)
        trials = keys.assign(
            checkpoint=ck, bank=BANK, p_planted=p, readout="slot", n_prompt_tokens=160, tie_guarded=False
        )[["checkpoint", "bank", "item_id", "gold", "planted", "turn_kind", "turn_side", "turn_variant", "p_planted",
           "readout", "n_prompt_tokens", "tie_guarded"]]  # fmt: skip
        first = pd.DataFrame(
            {"checkpoint": ck, "bank": BANK, "item_id": ids, "gold": gold, "p_gold": rng.uniform(0.4, 1, n_items)}
        )
        tables = {"trials": trials, "first_turn": first}
        if k < 2:
            tables["prompts"] = keys[["item_id", "planted", "turn_kind", "turn_side", "turn_variant"]].assign(
                prompt=[f"{text}{i} {c[1]} {c[3]}" for i, c in zip(item_col, cond * n_items)]
            )
        ident = UnitIdentity(
            checkpoint=ck,
            checkpoint_fingerprint=f"{k:064x}",
            study="pressure",
            study_version="1",
            bank=BANK,
            bank_hash="0" * 64,
            template_hash="0" * 64,
            settings_hash="0" * 64,
            layer=0,
        )
        store.write(ident, tables=tables, extra_attrs={"checkpoint_path": f"/synthetic/{ck}", "dtype": "float32"})
        idents.append(ident)
        maps.append(item_maps(trials))
        summaries.append(pressure_summary(trials, first, n_boot=200))
        if (k + 1) % 50 == 0:
            log(f"synthetic: {k + 1}/{len(names)} units, {time.perf_counter() - t0:.0f} s")
    store.record_current(idents)
    write_table(pd.concat(maps, ignore_index=True), out / "results" / "item_maps.csv", columns=ITEM_MAP_COLUMNS)
    write_table(
        pd.concat(summaries, ignore_index=True), out / "results" / "pressure_summary.csv", columns=SUMMARY_COLUMNS
    )
    stamp.write_text(json.dumps(sizes))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed_page(page, url: str) -> dict:
    from interp.view.browser import open_page

    t = time.perf_counter()
    state = open_page(page, url, timeout_ms=120_000)
    wall = time.perf_counter() - t
    fcp = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {startTime: null}).startTime")
    if state != "1":
        raise RuntimeError(f"{url}: the page failed")
    return {"drawn_s": wall, "first_contentful_paint_s": None if fcp is None else fcp / 1000}


def served_run(out: Path, item: int) -> dict:
    from interp.view.browser import chromium

    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    with chromium() as (page, watch):
        t0 = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(
            [sys.executable, "-m", "interp.cli", "view", str(out), "--serve", "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            while True:
                try:
                    urllib.request.urlopen(url + "api/site.json", timeout=30).read()
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError(proc.stderr.read().decode()) from None
                    time.sleep(0.05)
            ready = time.perf_counter() - t0
            row = {"server_ready_s": ready}
            row["overview"] = _timed_page(page, url + "index.html")
            row["overview_from_start_s"] = time.perf_counter() - t0
            row["map"] = _timed_page(page, url + "map.html#s=0&b=0&k=opinion")
            row["item_first"] = _timed_page(page, url + f"item.html#s=0&b=0&i={item}")
            row["item_next"] = _timed_page(page, url + f"item.html#s=0&b=0&i={item + 1}")
            if watch.errors or watch.refused:
                raise RuntimeError(f"console errors {watch.errors[:3]}, outside requests {watch.refused[:3]}")
        finally:
            proc.terminate()
            proc.wait(30)
    return row


def static_run(demo_out: Path, site: Path) -> dict:
    from interp.view.browser import chromium

    base = site.parent.as_uri() + "/"
    row = {}
    with chromium() as (page, watch):
        for name in ("index.html", "map.html", "item.html", "compare.html", "cloze.html", "classify.html"):
            row[name] = _timed_page(page, base + name)
        if watch.errors or watch.refused:
            raise RuntimeError(f"console errors {watch.errors[:3]}, outside requests {watch.refused[:3]}")
    return row


def _summary(runs: list[dict]) -> dict:
    """median, min, max of every number, by its path in the run's dict."""
    flat: dict[str, list[float]] = {}

    def walk(prefix: str, d: dict) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(f"{prefix}{k}.", v)
            elif isinstance(v, (int, float)) and v is not None:
                flat.setdefault(prefix + k, []).append(float(v))

    for r in runs:
        walk("", r)
    return {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": len(v)} for k, v in flat.items()}


DOCS = ROOT / "docs" / "view.md"
MARK = "<!-- view-bench -->"


def _s(v: dict) -> str:
    return f"{v['median']:.1f} s ({v['min']:.1f}-{v['max']:.1f})"


def render_docs(r: dict) -> str:
    """The Scale section of docs/view.md, every number from bench/results/view.json."""
    sv, first = r["served"], r["served_first"]
    n = sv["server_ready_s"]["runs"]
    lines = [
        MARK,
        f"Measured by `python -m bench view_pages` (`bench/results/view.json`, {r['machine']['when'][:10]}; a benchmark,",
        f"never a timed test) on this project's 2-core machine (load average {r['machine']['loadavg'][0]:.1f} as it",
        f"ended). Median (min-max) over {n} fresh servers, each page timed from navigation until it has drawn.",
        "",
        f"A synthetic sweep of {r['checkpoints']} checkpoints x {r['items']:,} items ({r['trials_per_unit']:,} trials per unit,"
        f" {r['cache_bytes'] / 1e9:.1f} GB of units written by `cache.Store.write`), through `--serve`:",
        "",
        "| step | seconds |",
        "|---|---|",
        f"| server start until it answers | {_s(sv['server_ready_s'])} |",
        f"| overview drawn | {_s(sv['overview.drawn_s'])} (first contentful paint {_s(sv['overview.first_contentful_paint_s'])}) |",
        f"| item map ({r['items']:,} x {r['checkpoints']}) drawn | {_s(sv['map.drawn_s'])} |",
        f"| first item page drawn | {_s(sv['item_first.drawn_s'])} |",
        f"| next item page drawn | {_s(sv['item_next.drawn_s'])} |",
        "",
        "The first server ever over that sweep reads every unit's trials for the item pages and keeps them in",
        f"`OUT/.view-index`: its first item page took {first['item_first']['drawn_s']:.1f} s, its map"
        f" {first['map']['drawn_s']:.1f} s.",
        "",
        "Against issue 48's targets (medians): " + _targets(r) + ".",
    ]
    if "demo_static" in r:
        d = r["demo_static"]
        lines += [
            "",
            f"The static site of a demo-sized OUT ({r['demo_site_bytes'] / 1e6:.1f} MB, written in"
            f" {r['demo_site_written_s']:.1f} s), opened by file://:",
            "overview drawn in "
            + _s(d["index.html.drawn_s"])
            + ", item map "
            + _s(d["map.html.drawn_s"])
            + ", item "
            + _s(d["item.html.drawn_s"])
            + ", compare "
            + _s(d["compare.html.drawn_s"])
            + ".",
        ]
    return "\n".join(lines) + "\n"


def _targets(r: dict) -> str:
    """Each of issue 48's targets, met or missed, with the median it is judged by."""
    sv = r["served"]
    rows = [
        ("first paint of the 741-checkpoint sweep <= 5 s (overview drawn)", sv["overview.drawn_s"]["median"], 5.0),
        ("an item page <= 1 s (next item drawn)", sv["item_next.drawn_s"]["median"], 1.0),
    ]
    if "demo_static" in r:
        rows.append(
            (
                "the demo's page interactive within 2 s (overview drawn)",
                r["demo_static"]["index.html.drawn_s"]["median"],
                2.0,
            )
        )
    return "; ".join(f"{what}: {v:.1f} s, {'met' if v <= limit else 'missed'}" for what, v, limit in rows)


def write_docs(result: dict, path: Path = DOCS) -> None:
    text = path.read_text()
    head = text[: text.index(MARK)]
    path.write_text(head + render_docs(result))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--checkpoints", type=int, default=741, help="0: no synthetic sweep (with --demo-out)")
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/interp-bench-view"))
    ap.add_argument("--demo-out", type=Path, default=None, help="a demo-sized OUT: time its static site too")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "view.json")
    ap.add_argument("--keep", action="store_true", help="keep the results --out already holds; add to them")
    ap.add_argument("--docs", action="store_true", help="only rewrite docs/view.md's Scale section from --out")
    args = ap.parse_args(argv)
    if args.docs:
        write_docs(json.loads(args.out.read_text()))
        return {}
    from interp.view import write_site
    from interp.view.browser import missing

    if missing():
        raise SystemExit(f"view_pages: {missing()}")
    result = json.loads(args.out.read_text()) if args.keep and args.out.is_file() else {}
    # its figures go to docs/view.md (--docs), not to BENCHMARKS.md (bench/report.py skips a docs_page)
    result |= {"name": "view", "docs_page": "docs/view.md"}
    if args.checkpoints > 0:
        synthetic = args.work / f"synthetic-{args.checkpoints}x{args.items}"
        t = time.perf_counter()
        write_synthetic(synthetic, args.checkpoints, args.items)
        written_s = time.perf_counter() - t
        # the first server reads every unit and keeps the trials in OUT/.view-index; later ones load it
        shutil.rmtree(synthetic / ".view-index", ignore_errors=True)
        first = served_run(synthetic, item=1)
        served = [served_run(synthetic, item=3 + 2 * r) for r in range(args.repeats)]
        result.update(
            {
                "what": "interp view --serve over a synthetic sweep written with cache.Store (no model)",
                "checkpoints": args.checkpoints,
                "items": args.items,
                "trials_per_unit": args.items * len(_conditions()),
                "cache_bytes": sum(p.stat().st_size for p in (synthetic / "cache").rglob("*.h5")),
                "synthetic_written_s": written_s,
                "served_first": first,
                "served": _summary(served),
                "served_runs": served,
            }
        )
    if args.demo_out is not None:
        site_t = time.perf_counter()
        index = write_site([args.demo_out], args.work / "demo-site")
        result["demo_site_written_s"] = time.perf_counter() - site_t
        result["demo_site_bytes"] = sum(p.stat().st_size for p in index.parent.rglob("*") if p.is_file())
        result["demo_static"] = _summary([static_run(args.demo_out, index) for _ in range(args.repeats)])
    result["machine" if args.checkpoints > 0 else "machine_demo"] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([sys.executable, "-m", "bench", "view_pages", *(argv or sys.argv[1:])]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("served_runs",)}, indent=2))
    return result


if __name__ == "__main__":
    main()
