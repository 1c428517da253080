"""The engine's node caches: chained own segments in reused buffers vs the cumulative copies before.

    python -m bench engine_node_caches --threads 2 --repeats 3

The workload is one checkpoint of `interp validate`'s pressure sweep: the moral bank's 128 items
through the lite template (11 readings per item, interp.organism.validate.lite_template) at
`--dtype float32-medium`, on SmolLM2-135M-Instruct, through `sweeps.api.run_sweep` as the
validation runs it (its precision audit included). Timed: the seconds spent inside `Engine.run`
(model loading, tables and figures excluded). "before" is `interp/runner/engine.py` as it was at
`--before` (read from git, loaded as a module of its own and swapped into the scoring code), so
both engines run interleaved in one process on the same prompts; the pressure tables of the two
are compared (max |delta log-odds|). Writes bench/results/engine_chain.json (BENCHMARKS.md).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common

BEFORE = "33cafb1"  # the last commit with cumulative per-node caches


def load_engine_at(commit: str):
    """interp/runner/engine.py at `commit`, as a separate module."""
    src = subprocess.run(
        ["git", "-C", str(common.ROOT), "show", f"{commit}:interp/runner/engine.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader(f"interp.runner._engine_{commit}", loader=None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    exec(compile(src, f"engine.py@{commit}", "exec"), mod.__dict__)
    return mod


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--before", default=BEFORE, help="commit whose engine.py is the baseline")
    p.add_argument("--items", type=int, default=128)
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import pandas as pd

    import interp.runner.engine as now
    import interp.runner.scoring as scoring
    from interp.organism.validate import lite_template
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    engines = {"before": load_engine_at(args.before).Engine, "now": now.Engine}
    spent = {"s": 0.0}

    def timed(cls):
        class Timed(cls):
            def run(self, seqs):
                t = time.perf_counter()
                try:
                    return super().run(seqs)
                finally:
                    spent["s"] += time.perf_counter() - t

        return Timed

    timed_engines = {k: timed(v) for k, v in engines.items()}
    path = common.model_path(args.model)
    tables: dict[str, pd.DataFrame] = {}

    def run(which: str) -> float:
        scoring.Engine = timed_engines[which]
        spent["s"] = 0.0
        try:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "out"
                run_sweep(
                    [path],
                    studies=["pressure"],
                    out=out,
                    banks=["moral"],
                    template=str(lite_template(Path(tmp) / "lite.json")),
                    cfg=RunConfig(max_items=args.items, seed=0, threads=args.threads, dtype="float32-medium"),
                    progress=False,
                    report=False,
                )
                tables[which] = pd.read_csv(out / "results" / "pressure_trials.csv")
        finally:
            scoring.Engine = now.Engine
        return spent["s"]

    run("now")  # warm-up (first-call allocations, kernels)
    runs: dict[str, list[float]] = {k: [] for k in engines}
    for r in range(args.repeats):  # interleaved, the first rotating
        for k in ["before", "now"] if r % 2 == 0 else ["now", "before"]:
            runs[k].append(run(k))
            print(f"{k}: {runs[k][-1]:.1f} s", file=sys.stderr, flush=True)
    s = {k: common.summarize(v) for k, v in runs.items()}
    sp = common.ratio(s["before"], s["now"])
    keys = ["checkpoint", "item_id", "planted", "turn_kind", "turn_side", "turn_variant", "readout"]
    a = tables["before"].sort_values(keys).reset_index(drop=True)
    b = tables["now"].sort_values(keys).reset_index(drop=True)
    dmax = float((a["logodds"] - b["logodds"]).abs().max())
    res = {"items": args.items, "trials": len(b), "runs": runs, "engine_seconds": s, "speedup": sp}
    res["max_abs_delta_logodds"] = dmax
    res["report"] = {
        "order": 0.6,
        "title": "Engine node caches: own segments in reused buffers vs cumulative copies (one interleaved run)",
        "what": f"One checkpoint of `interp validate`'s pressure sweep ({args.items} moral items x 11 readings of the "
        f"lite template = {len(b)} trials, float32-medium, precision audit included) on SmolLM2-135M-Instruct, "
        f"{args.repeats} runs each; seconds inside `Engine.run`. 'before': engine.py at {args.before} (each node "
        "kept its cumulative cache, a copy of all its ancestors' tokens, and every forward zeroed a fresh batch "
        "buffer); 'now': each node keeps its own tokens, linked to its parent's, and batch buffers are reused. "
        f"Max |delta log-odds| between the two runs' trials: {dmax:.2e} (float32-medium: summation order).",
        "rerun": f"python -m bench engine_node_caches --threads {args.threads} --repeats {args.repeats}",
        "tables": [
            {
                "columns": ["engine", "engine seconds: median (min-max)", "speed"],
                "rows": [
                    ["before", common.fmt_time(s["before"]), "1.00x"],
                    ["now", common.fmt_time(s["now"]), common.fmt_ratio(sp)],
                ],
            }
        ],
    }
    common.write_results(
        "engine_chain", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


if __name__ == "__main__":
    main()
