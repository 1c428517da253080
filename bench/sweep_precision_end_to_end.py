"""A whole pressure sweep at float32 vs a reduced precision, end to end (issue 25): what a user's
`interp sweep --dtype ...` gains once the precision audit (32+ prompts re-scored in float32 per
unit, without the prefix tree's sharing) and the tie guard are paid for.

Each run is `sweeps.api.run_sweep` (what `interp sweep` runs: load, plan, score, write, analyze,
report, figures) into a fresh output directory; the dtypes alternate run by run (the first one
rotating). Timers around `PrecisionAudit._measure` (the audit's float32 re-scores) and
`guard_ties` (the tie guard) say how much of a reduced-precision sweep they take.

    python -m bench sweep_precision_end_to_end --threads 2 --repeats 3 --items 40
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import common
from bench.sweep_overhead import _patch_everywhere, _totals


def main() -> None:
    p = common.parser(__doc__, repeats=3)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--items", type=int, default=40, help="moral items (31 trials each)")
    p.add_argument("--dtypes", default="float32,mixed-bf16-medium")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import pandas as pd

    import interp.runner.precision as precision
    import interp.runner.scoring as scoring
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    # the sweep-overhead bench's exclusive timers (the guard's call inside an audit re-score returns at once)
    _patch_everywhere(precision.PrecisionAudit, "_measure", "audit")
    _patch_everywhere(scoring, "guard_ties", "guard")

    model = str(common.model_path(args.model))
    dtypes = args.dtypes.split(",")
    walls: dict[str, list[float]] = {d: [] for d in dtypes}
    parts: dict[str, dict[str, list[float]]] = {d: {"audit": [], "guard": []} for d in dtypes}
    audited: dict[str, dict] = {}
    for r in range(args.repeats):
        for d in dtypes[r % len(dtypes) :] + dtypes[: r % len(dtypes)]:
            out = Path(tempfile.mkdtemp(prefix="interp-sweep-prec-"))
            cfg = RunConfig(max_items=args.items, dtype=d, threads=args.threads)
            _totals.clear()
            t0 = time.perf_counter()
            run_sweep([model], studies=["pressure"], banks=["moral"], out=out, cfg=cfg, progress=False)
            walls[d].append(time.perf_counter() - t0)
            for k in parts[d]:
                parts[d][k].append(_totals.get(k, 0.0))
            prec = out / "results" / "precision.csv"
            if prec.exists():
                audited[d] = pd.read_csv(prec)[["n", "tie_guarded", "max_abs_dp", "argmax_flips"]].sum().to_dict()
            shutil.rmtree(out, ignore_errors=True)
            print(f"  {d}: run {r + 1}/{args.repeats} {walls[d][-1]:.1f}s", file=sys.stderr, flush=True)
    timing = {d: common.summarize(v) for d, v in walls.items()}
    base = dtypes[0]
    res = {
        "model": Path(model).name,
        "items": args.items,
        "timing": timing,
        "speedup": {f"{d} vs {base}": common.ratio(timing[base], timing[d]) for d in dtypes[1:]},
        "audit_s": {d: common.summarize(parts[d]["audit"]) for d in dtypes},
        "guard_s": {d: common.summarize(parts[d]["guard"]) for d in dtypes},
        "precision_csv": audited,
    }
    rows = []
    for d in dtypes:
        a, g = res["audit_s"][d]["median"], res["guard_s"][d]["median"]
        sp = "1.00x" if d == base else common.fmt_ratio(res["speedup"][f"{d} vs {base}"])
        pc = audited.get(d)
        rows.append(
            [
                d,
                common.fmt_time(timing[d]),
                sp,
                f"{a:.1f} s" if a >= 0.05 else "-",  # float32 runs neither (the guard returns at once)
                f"{g:.1f} s" if g >= 0.05 else "-",
                f"{int(pc['n'])} sampled, {int(pc['tie_guarded'])} guarded" if pc else "-",
            ]
        )
    res["report"] = {
        "order": 2.05,
        "title": f"Precisions end to end: a pressure sweep ({args.items} moral items) at {', '.join(dtypes)}",
        "what": (
            "`run_sweep` (what `interp sweep` runs: loading, planning, scoring, HDF5, analysis, report, figures) "
            f"of {Path(model).name} into a fresh directory per run, the dtypes alternating run by run; the audit "
            "column is the time of the precision audit's float32 re-scores, the guard column the tie guard's, both "
            "inside the sweep's time."
        ),
        "rerun": (
            f"python -m bench sweep_precision_end_to_end --threads {args.threads} --repeats {args.repeats} "
            f"--items {args.items}"
        ),
        "tables": [
            {
                "columns": ["dtype", "sweep time", f"speed vs {base}", "audit", "tie guard", "precision.csv"],
                "rows": rows,
            }
        ],
    }
    common.write_results(
        "sweep_precisions", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


if __name__ == "__main__":
    main()
