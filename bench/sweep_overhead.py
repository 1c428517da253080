"""Where a sweep's wall time goes: scoring vs loading, fingerprinting, HDF5 writing, analysis,
figures (issue 16).

Runs `sweeps.api.run_sweep` (the code behind `interp sweep`) over the default models with one
study into a fresh output directory, with timers wrapped around the functions that do each kind
of work; nested timers are exclusive (a figure saved inside the analysis counts as figures).

* scoring: `Engine.run` (every forward of the prefix tree) and batched sampling's decoding;
* scoring prep: tokenization and planning in `score_options` / `score_continuations` outside
  the engine (joint encodings of every prompt x option form);
* loading: `interp.load` (tokenizer, weights, backend);
* fingerprint: `interp.model.checkpoint.fingerprint` (cold: its memo of weight-file hashes is pointed
  at an empty directory, as on a new machine);
* hdf5: `Store.write`; analysis: the sweep's `analyze`; figures: matplotlib `savefig`;
  report: `write_report` outside figures;
* planning: `plan_units` outside fingerprints and tokenizer loads (banks, identities);
* study code: the study's `run_unit` outside scoring (trials, prompts, tables);
* other: the rest of `run_sweep` (discovery, lock, logging, merge).

Fixed costs (loading, fingerprint, planning) do not grow with the bank; scoring does, so the
script also reports the smallest item count at which the measured non-scoring share would fall
under 10% (fixed seconds and per-item seconds from this run).

Rerun:
    python -m bench sweep_overhead --study pressure --max-items 16 --threads 2
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench import common

_stack: list[list] = []  # [category, start, child time]
_totals: dict[str, float] = defaultdict(float)


def _timed(category: str, fn):
    def wrapper(*a, **k):
        _stack.append([category, time.perf_counter(), 0.0])
        try:
            return fn(*a, **k)
        finally:
            cat, t0, child = _stack.pop()
            dt = time.perf_counter() - t0
            _totals[cat] += dt - child
            if _stack:
                _stack[-1][2] += dt

    wrapper.__wrapped__ = fn
    return wrapper


def _patch_everywhere(obj, name: str, category: str) -> None:
    """Wrap obj.name and every module-level alias of the same function already imported."""
    orig = getattr(obj, name)
    w = _timed(category, orig)
    setattr(obj, name, w)
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not d:
            continue
        for k, v in list(d.items()):
            if v is orig and mod is not obj:
                setattr(mod, k, w)


def main() -> None:
    p = common.parser(__doc__, repeats=1)
    p.add_argument("--models", default="smollm2,gemma3")
    p.add_argument("--study", default="pressure")
    p.add_argument("--max-items", type=int, default=16)
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="interp-fp-")  # cold fingerprint memo

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure

    import cache.store
    import interp.model.checkpoint
    import interp.model.loading
    import interp.runner.engine
    import interp.runner.generate
    import interp.runner.scoring
    import interp.studies
    import sweeps.api
    import sweeps.execute
    import sweeps.plan
    import sweeps.report
    from interp.runner.scoring import ScoringConfig
    from interp.studies.base import RunConfig

    _patch_everywhere(interp.runner.engine.Engine, "run", "scoring")
    _patch_everywhere(interp.runner.generate._Sampler, "_decode", "scoring")
    _patch_everywhere(interp.runner.scoring, "score_options", "scoring prep")
    _patch_everywhere(interp.runner.scoring, "score_continuations", "scoring prep")
    _patch_everywhere(interp.model.loading, "load", "loading")
    _patch_everywhere(interp.model.checkpoint, "fingerprint", "fingerprint")
    _patch_everywhere(cache.store.Store, "write", "hdf5")
    _patch_everywhere(sweeps.api, "analyze", "analysis")
    _patch_everywhere(sweeps.report, "write_report", "report")
    _patch_everywhere(matplotlib.figure.Figure, "savefig", "figures")
    _patch_everywhere(sweeps.plan, "plan_units", "planning")
    _patch_everywhere(interp.model.loading, "load_tokenizer", "tokenizer loads")
    from interp.studies import get_study

    study_cls = type(get_study(args.study))
    _patch_everywhere(study_cls, "run_unit", "study code (trials, tables)")

    models = [str(common.model_path(m)) for m in args.models.split(",")]
    cfg = RunConfig(max_items=args.max_items, threads=args.threads, scoring=ScoringConfig())
    out = Path(tempfile.mkdtemp(prefix="interp-sweep-"))
    t0 = time.perf_counter()
    run = _timed("other", sweeps.api.run_sweep)
    run(models, studies=[args.study], out=out, cfg=cfg, progress=False)
    wall = time.perf_counter() - t0
    shares = {k: v / wall for k, v in sorted(_totals.items(), key=lambda kv: -kv[1])}
    non_scoring = 1.0 - shares.get("scoring", 0.0)
    # per-item work: scoring, scoring prep, study code, hdf5; the rest is fixed per sweep/checkpoint
    per_item_keys = ("scoring", "scoring prep", "study code (trials, tables)", "hdf5")
    per_item = sum(_totals.get(k, 0.0) for k in per_item_keys) / args.max_items
    fixed = wall - per_item * args.max_items
    overhead_per_item = sum(_totals.get(k, 0.0) for k in per_item_keys[1:]) / args.max_items
    score_per_item = _totals.get("scoring", 0.0) / args.max_items
    # non-scoring share at n items: (fixed + o n) / (fixed + (s + o) n) < 0.1  <=>  n > 0.9 fixed / (0.1 s - 0.9 o)
    denom = 0.1 * score_per_item - 0.9 * overhead_per_item
    items_for_10pct = 0.9 * fixed / denom if denom > 0 else None
    rows = [[k, f"{_totals[k]:.1f} s", f"{v:.1%}"] for k, v in shares.items()]
    res = {
        "models": [Path(m).name for m in models],
        "study": args.study,
        "max_items": args.max_items,
        "wall_s": wall,
        "seconds": dict(_totals),
        "shares": shares,
        "non_scoring_share": non_scoring,
        "fixed_s": fixed,
        "per_item_s": per_item,
        "items_for_10pct": items_for_10pct,
    }
    res["report"] = {
        "order": 0.5,
        "title": f"0b. Sweep overhead: {args.study}, {args.max_items} items, {', '.join(res['models'])}",
        "rerun": (
            f"python -m bench sweep_overhead --study {args.study} --max-items {args.max_items} --threads {args.threads}"
        ),
        "what": (
            "One `run_sweep` (what `interp sweep` runs) into a fresh directory, cold fingerprint memo; exclusive "
            "time per kind of work (one run: shares, not speeds)."
        ),
        "tables": [{"columns": ["work", "time", "share of wall"], "rows": rows + [["wall", f"{wall:.1f} s", "100%"]]}],
        "findings": [
            f"everything but the engine's forwards: {non_scoring:.1%} of the sweep's wall time.",
            f"fixed (per sweep and checkpoint: loading, fingerprints, planning, analysis, report): {fixed:.1f} s; "
            f"per item (all models): {per_item:.2f} s, of which scoring {score_per_item:.2f} s"
            + (
                f"; the non-scoring share falls under 10% from about {items_for_10pct:.0f} items per bank"
                if items_for_10pct
                else ""
            )
            + ".",
        ],
    }
    common.write_results(
        f"sweep_overhead_{args.study}", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )
    for r in rows:
        print(*r, sep="\t")
    print(f"non-scoring share {non_scoring:.1%} of {wall:.1f}s")


if __name__ == "__main__":
    main()
