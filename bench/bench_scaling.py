"""Scaling: time and peak memory of one pressure unit at 1x, 2x and 4x bank size.

Each size runs in a fresh Python process (so one size's peak never hides another's). The
process loads the model, builds a gold-balanced subset of the moral bank of `--base-items x
factor` items, warms up on two prompts, resets its peak-RSS mark (/proc/self/clear_refs),
then times --repeats runs of `PressureStudy.run_unit` (build trials, score every trial and
first-turn prompt, capture resid_pre at the default layer, build the tables), and reads the
peak RSS back. Reported per size: time (median, min, max), time per item, peak RSS during
scoring, RSS after loading, and the increase of the peak over the loaded model.
Linear cost means time per item stays flat; flat memory means the peak does not grow with
the bank beyond the (small) result arrays.

`--variants` sets the option surface forms (default `exact`: " wrong" / " acceptable";
`space_case` is the study's default and costs more, see bench_flops).

Rerun (defaults):
    python bench/bench_scaling.py --repeats 5 --threads 2 --base-items 2 --factors 1,2,4
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def child(args) -> None:
    common.setup(args.threads)
    import numpy as np

    import interp
    from interp.runner.scoring import ScoringConfig
    from interp.studies.base import RunConfig, load_template
    from interp.studies.pressure import PressureStudy

    common.setup(args.threads)
    rss0 = common.rss_mb()
    lm = interp.load(common.model_path(args.model), threads=args.threads)
    bank = common.pressure_subset(args.items)
    template = load_template("pressure_v1")
    cfg = RunConfig(scoring=ScoringConfig(variants=args.variants, batch_size=args.batch_size), threads=args.threads)
    study = PressureStudy()
    study.run_unit(lm, common.pressure_subset(2), template, lm.default_layer, cfg)  # warm-up
    rss_loaded = common.rss_mb()
    peak_before = common.peak_rss_mb()
    reset_ok = common.reset_peak_rss()
    t, payload = common.time_runs(
        lambda: study.run_unit(lm, bank, template, lm.default_layer, cfg), args.repeats, label=f"{args.items} items"
    )
    out = {
        "items": len(bank),
        "trials": int(len(payload.tables["trials"])),
        "timing": t,
        "rss_start_mb": rss0,
        "rss_loaded_mb": rss_loaded,
        "peak_load_mb": peak_before,
        "peak_scoring_mb": common.peak_rss_mb(),
        "peak_reset": reset_ok,
        "result_array_mb": float(sum(np.asarray(a).nbytes for a in payload.arrays.values()) / 2**20),
    }
    print(json.dumps(out))


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a checkpoint directory")
    p.add_argument("--base-items", type=int, default=2, help="items at 1x")
    p.add_argument("--factors", default="1,2,4")
    p.add_argument("--variants", default="exact", choices=["exact", "space", "space_case"])
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--child", action="store_true", help=argparse_suppress())
    p.add_argument("--items", type=int, default=None, help=argparse_suppress())
    args = p.parse_args()
    if args.child:
        child(args)
        return
    start_load = common.loadavg()
    factors = [int(f) for f in args.factors.split(",")]
    sizes = {}
    for f in factors:
        n = args.base_items * f
        print(f"size {f}x: {n} items (fresh process)", file=sys.stderr, flush=True)
        sizes[f] = common.run_child(
            [
                Path(__file__).resolve(),
                "--child",
                "--items",
                n,
                "--repeats",
                args.repeats,
                "--threads",
                args.threads,
                "--model",
                args.model,
                "--variants",
                args.variants,
                "--batch-size",
                args.batch_size,
            ],
            args.threads,
        )
    base = sizes[factors[0]]
    rows = []
    for f in factors:
        s = sizes[f]
        per_item = s["timing"]["median"] / s["items"]
        s["seconds_per_item"] = per_item
        s["time_ratio_vs_1x"] = s["timing"]["median"] / base["timing"]["median"]
        s["peak_over_loaded_mb"] = s["peak_scoring_mb"] - s["rss_loaded_mb"]
        rows.append(
            [
                f"{f}x",
                f"{s['items']} ({s['trials']} trials)",
                common.fmt_time(s["timing"]),
                f"{s['time_ratio_vs_1x']:.2f}x",
                f"{per_item:.2f} s",
                f"{s['peak_scoring_mb']:.0f} MiB",
                f"{s['rss_loaded_mb']:.0f} MiB",
                f"{s['peak_over_loaded_mb']:+.0f} MiB",
            ]
        )
    res = {
        "model": args.model,
        "base_items": args.base_items,
        "factors": factors,
        "variants": args.variants,
        "sizes": {str(k): v for k, v in sizes.items()},
    }
    res["report"] = {
        "order": 6,
        "title": "6. Scaling with bank size (one pressure unit, fresh process per size)",
        "rerun": (
            f"python bench/bench_scaling.py --repeats {args.repeats} --threads {args.threads} "
            f"--base-items {args.base_items} --factors {args.factors} --variants {args.variants}"
        ),
        "what": (
            "PressureStudy.run_unit (trials + first turns, resid_pre at the default layer, "
            f"variants `{args.variants}`) on a gold-balanced subset of the moral bank; peak RSS reset after "
            "model load and warm-up, read after the timed runs."
        ),
        "tables": [
            {
                "columns": [
                    "size",
                    "items",
                    "time: median (min-max)",
                    "time vs 1x",
                    "time per item",
                    "peak RSS while scoring",
                    "RSS after load",
                    "peak - loaded",
                ],
                "rows": rows,
            }
        ],
        "findings": [],
    }
    common.write_results("scaling", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
