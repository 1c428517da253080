"""Cost of residual capture: scoring the pressure workload with and without reading resid_pre.

Same prompts as bench_runner_vs_naive (trials + first turns of a gold-balanced subset of the
moral bank), `score_options` with the verdict options, timed with

* no capture (`layers=None`),
* one layer (the study's default, floor(3 n_layers / 4)), residual at the last prompt token,
* every layer (n_layers forward pre-hooks), residual at the last prompt token,
* optionally (--all-positions) one layer with `capture_all_positions=True` (every position).

Reports median, min, max of --repeats runs per setting, the overhead relative to no capture,
and checks that capture leaves the log-probs bit-for-bit unchanged (max |delta|).

Rerun (defaults):
    python bench/bench_residual_capture.py --repeats 5 --threads 2 --items 2
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a checkpoint directory")
    p.add_argument("--items", type=int, default=2, help="moral-bank items (0 = all 128)")
    p.add_argument("--variants", default="exact", choices=["exact", "space", "space_case"])
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--all-positions", action="store_true", help="also time capture at every position")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np

    from interp.runner.scoring import ScoringConfig, score_options

    path, lm = common.load_model(args.model, args.threads)
    bank = common.pressure_subset(args.items or None)
    prompts, verdicts, _ = common.pressure_prompts(bank, lm.tokenizer)
    options = common.option_words(verdicts, args.variants)
    cfg = ScoringConfig(variants=args.variants, batch_size=args.batch_size)
    settings = [
        ("no capture", None, cfg),
        (f"1 layer (L{lm.default_layer})", [lm.default_layer], cfg),
        (f"all {lm.n_layers} layers", list(range(lm.n_layers)), cfg),
    ]
    if args.all_positions:
        settings.append(
            (
                "1 layer, every position",
                [lm.default_layer],
                ScoringConfig(variants=args.variants, batch_size=args.batch_size, capture_all_positions=True),
            )
        )
    score_options(lm, prompts[:2], options, layers=[lm.default_layer], cfg=cfg)  # warm-up

    # settings interleaved run by run: slow drift of a shared machine hits all of them alike
    timings, outs = common.time_interleaved(
        {
            name: (lambda layers=layers, c=c: score_options(lm, prompts, options, layers=layers, cfg=c))
            for name, layers, c in settings
        },
        args.repeats,
    )
    base = settings[0][0]
    rows, res_settings = [], {}
    for name, layers, _ in settings:
        over = common.ratio(timings[name], timings[base])
        d = float(np.abs(outs[name].logp - outs[base].logp).max())
        n_floats = sum(
            np.asarray(v).size if not isinstance(v, list) else sum(x.size for x in v) for v in outs[name].resid.values()
        )
        res_settings[name] = {
            "layers": layers,
            "timing": timings[name],
            "relative_to_no_capture": over,
            "max_abs_dlogp_vs_no_capture": d,
            "captured_floats": int(n_floats),
        }
        rows.append(
            [
                name,
                common.fmt_time(timings[name]),
                f"{(over['median'] - 1) * 100:+.1f}% (min/min {(over['min'] - 1) * 100:+.1f}%)",
                f"{n_floats * 4 / 2**20:.1f} MiB",
                f"{d:.1e}",
            ]
        )
    res = {
        "model": path.name,
        "items": len(bank),
        "prompts": len(prompts),
        "variants": args.variants,
        "settings": res_settings,
    }
    one = res_settings[settings[1][0]]["relative_to_no_capture"]
    res["report"] = {
        "order": 3,
        "title": f"3. Cost of residual capture ({path.name})",
        "rerun": f"python bench/bench_residual_capture.py --repeats {args.repeats} --threads {args.threads} "
        f"--items {args.items}" + (" --all-positions" if args.all_positions else ""),
        "what": (
            f"score_options on {len(prompts)} pressure prompts ({len(bank)} items), with and without reading "
            "resid_pre (forward pre-hooks); settings interleaved run by run."
        ),
        "tables": [
            {
                "columns": [
                    "capture",
                    "time: median (min-max)",
                    "overhead vs no capture: median (min/min)",
                    "captured (fp32)",
                    "max |delta log-prob|",
                ],
                "rows": rows,
            }
        ],
        "findings": [_capture_line(one, timings[base]) + " Log-probs are bit-for-bit unchanged by capture."],
    }
    common.write_results(
        "residual_capture", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


def _capture_line(over: dict, base: dict) -> str:
    noise = (base["max"] - base["min"]) / base["median"]
    s = (
        f"Capturing the study's one layer changes the median time by {(over['median'] - 1) * 100:+.1f}% "
        f"(fastest runs: {(over['min'] - 1) * 100:+.1f}%)"
    )
    if abs(over["median"] - 1) <= noise:
        s += f", within the run-to-run spread of the no-capture runs ({noise:.0%})"
    return s + "."


if __name__ == "__main__":
    main()
