"""Cost of all-layer capture for a whole pressure unit, on both default models in one run.

For each model: `PressureStudy.run_unit` on a gold-balanced subset of the moral bank (trials
and first turns, the shipped template) with

* the default layer (floor(3 n_layers / 4)), and
* every layer (`--layers all`),

timed interleaved run by run (--repeats each), then each payload written with `cache.Store`
(float16 residuals, as a sweep writes them) to measure the unit file on disk. Reports median
(min-max) times, the all/one time ratio, residual bytes and file sizes, and checks that the
all-layer unit's default-layer slice equals the one-layer unit's residual bit for bit.

Rerun (defaults):
    python -m bench all_layer_capture_cost --repeats 5 --threads 2 --items 2
"""

from __future__ import annotations

import tempfile

from bench import common


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--models", default="smollm2,gemma3", help="comma-separated: smollm2, gemma3 or directories")
    p.add_argument("--items", type=int, default=2, help="moral-bank items")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import numpy as np

    from cache.layers import select_layer
    from cache.store import Store, UnitIdentity
    from interp.studies.base import RunConfig, load_template
    from interp.studies.pressure import PressureStudy

    study, template = PressureStudy(), load_template("pressure_v1")
    bank = common.pressure_subset(args.items)
    cfg = RunConfig()
    res, rows = {"items": len(bank), "models": {}}, []
    for name in args.models.split(","):
        path, lm = common.load_model(name, args.threads)
        one, every = (lm.default_layer,), tuple(range(lm.n_layers))
        study.run_unit(lm, bank, template, one, cfg)  # warm-up
        timings, outs = common.time_interleaved(
            {
                "one": lambda lm=lm, one=one: study.run_unit(lm, bank, template, one, cfg),
                "all": lambda lm=lm, every=every: study.run_unit(lm, bank, template, every, cfg),
            },
            args.repeats,
        )
        same = np.array_equal(
            select_layer(outs["all"].arrays["resid"], {"layers": list(every)}, lm.default_layer),
            outs["one"].arrays["resid"][:, 0],
        )
        sizes = {}
        with tempfile.TemporaryDirectory() as tmp:
            for key, layers in (("one", one), ("all", every)):
                ident = UnitIdentity(
                    checkpoint=path.name,
                    checkpoint_fingerprint="bench",
                    study="pressure",
                    study_version="1",
                    bank=bank.name,
                    bank_hash=bank.hash,
                    template_hash=template.hash,
                    settings_hash=key,
                    layer=",".join(map(str, layers)) if len(layers) > 1 else layers[0],
                )
                f = Store(tmp).write(
                    ident, tables=outs[key].tables, arrays=outs[key].arrays, extra_attrs={"layers": list(layers)}
                )
                resid_bytes = sum(a.nbytes for a in outs[key].arrays.values())
                sizes[key] = {"resid_bytes": int(resid_bytes), "file_bytes": f.stat().st_size}
        r = common.ratio(timings["all"], timings["one"])
        res["models"][path.name] = {
            "n_layers": lm.n_layers,
            "d_model": lm.d_model,
            "rows": len(outs["one"].arrays["resid"]),
            "timing": timings,
            "all_over_one": r,
            "sizes": sizes,
            "default_slice_equal": bool(same),
        }
        rows.append(
            [
                path.name,
                f"{lm.n_layers}",
                common.fmt_time(timings["one"]),
                common.fmt_time(timings["all"]),
                f"{r['median']:.2f} (min/min {r['min']:.2f})",
                f"{sizes['one']['file_bytes'] / 2**10:.0f} KiB -> {sizes['all']['file_bytes'] / 2**10:.0f} KiB",
                "yes" if same else "NO",
            ]
        )
        del lm
    res["report"] = {
        "order": 9,
        "title": "9. Cost of all-layer capture (both default models)",
        "rerun": f"python -m bench all_layer_capture_cost --repeats {args.repeats} --threads {args.threads} --items {args.items}",
        "what": (
            f"PressureStudy.run_unit on {len(bank)} moral items (trials + first turns), residuals at the default "
            "layer vs every layer, interleaved run by run; unit files written with cache.Store (float16)."
        ),
        "tables": [
            {
                "columns": [
                    "model",
                    "layers",
                    "default layer: median (min-max)",
                    "all layers: median (min-max)",
                    "all / one time",
                    "unit file",
                    "default slice bit-equal",
                ],
                "rows": rows,
            }
        ],
        "findings": [_finding(res["models"])],
    }
    common.write_results("layers", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)
    for row in rows:
        print(" | ".join(row))


def _finding(models: dict) -> str:
    parts = []
    for name, m in models.items():
        t = m["timing"]["one"]
        spread = (t["max"] - t["min"]) / t["median"]
        parts.append(
            f"{name} ({m['n_layers']} layers): all/one {m['all_over_one']['median']:.2f}, run-to-run spread "
            f"of the one-layer runs {spread:.0%}"
        )
    return (
        "Median time ratio, every layer vs the default layer: " + "; ".join(parts) + ". The forward is the same; "
        "only the hooks' copies of one row per layer are added. Residual bytes grow with the layer count "
        "(rows x layers x d_model x 2 bytes)."
    )


if __name__ == "__main__":
    main()
