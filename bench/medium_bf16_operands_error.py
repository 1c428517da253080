"""The error of the "medium" precisions on a machine whose "medium" kernel rounds operands to bf16,
measured here by emulation (issue 25: its CPU kind, an Intel Xeon with AMX, may do so; this
project's AMD CPU does not).

    python -m bench medium_bf16_operands_error --threads 2 --items 40

Inside `interp.runner.rounding_kernels.bf16_operand_kernels()` every float32 matmul at "medium"
takes bf16-rounded operands with float32 sums, as such a kernel computes. Each row is scored once
(accuracy only: the emulation is slower, not faster, so it says nothing about speed) and compared with
float32 on the same prompts, with the default tie guard and without it:

- `float32-medium, medium everywhere`: what float32-medium computed on such a machine before its
  fallback (`make_medium`: every block matmul and the attention products with bf16 operands);
- `mixed-bf16-medium, medium rest`: what mixed-bf16-medium computed there before its fallback (the
  MLP's gate / up in bf16, every other matmul "medium", i.e. bf16 operands);
- `float32-medium` and `mixed-bf16-medium` as loaded now: where the probe finds bf16 operands, what
  they would run at "medium" stays float32 (`interp.runner.mixed.make_float32_medium` /
  `make_mixed_medium`): float32 itself, and the gate / up alone in bf16;
- `mixed-bf16` (no "medium" matmul: unaffected by the emulation; the reference of what bf16
  operands everywhere but the keys cost).

Writes bench/results/emulated_medium.json (section of BENCHMARKS.md via bench/report.py).
"""

from __future__ import annotations

import sys
from dataclasses import replace

from bench import common
from bench.precision_error import precision_error

EVERYWHERE = "float32-medium, medium everywhere"
MEDIUM_REST = "mixed-bf16-medium, medium rest"
ROWS = (EVERYWHERE, MEDIUM_REST, "float32-medium", "mixed-bf16-medium", "mixed-bf16")
NO_GUARD = ", no guard"


def main() -> None:
    p = common.bank_parser(__doc__, repeats=None)
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    import warnings

    import torch

    import interp
    from interp.runner import mixed
    from interp.runner.rounding_kernels import bf16_operand_kernels
    from interp.runner.scoring import ScoringConfig, score_options

    path = common.model_path(args.model)
    cfg = ScoringConfig(variants="exact")  # the default tie guard
    f32 = interp.load(path, dtype="float32", threads=args.threads)
    prompts, verdicts, _ = common.pressure_prompts(common.pressure_subset(args.items), f32.tokenizer)
    options = common.option_words(verdicts, "exact")
    reference = score_options(f32, prompts, options, cfg=cfg)
    res: dict = {"items": args.items, "prompts": len(prompts), "precision": {}}
    with bf16_operand_kernels(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res["medium_operand_error"] = mixed.medium_operand_error("cpu")  # the emulated kernel, as the probe sees it
        lms = {
            d: interp.load(path, dtype=d, threads=args.threads)
            for d in ("float32-medium", "mixed-bf16-medium", "mixed-bf16")
        }
        for row in (EVERYWHERE, MEDIUM_REST):  # the layouts before the fallback, built by hand
            lms[row] = interp.load(path, dtype="float32", threads=args.threads)
            model = lms[row].backend.precision_model
            if row == MEDIUM_REST:
                mixed.make_mixed(model, torch.bfloat16, keep=(), only=mixed.mlp_input_projection)
            mixed.make_medium(model)
        common.setup(args.threads)
        res["load_warnings"] = sorted({str(w.message) for w in caught})
        for row in ROWS:
            for label, c in ((row, cfg), (row + NO_GUARD, replace(cfg, tie_guard=0.0))):
                out = score_options(lms[row], prompts, options, cfg=c)
                res["precision"][label] = {**precision_error(out, reference), "tie_guarded": int(len(out.tie_guarded))}
                print(f"  {label}: max |dP| {res['precision'][label]['max_abs_dp']:.3g}", file=sys.stderr, flush=True)
    w = f"pressure, {args.items} items x 31 conditions ({len(prompts)} prompts)"
    rows = []
    for label, pr in res["precision"].items():
        guard = "off" if label.endswith(NO_GUARD) else f"{cfg.tie_guard:g} ({pr['tie_guarded']} re-scored)"
        rows.append(
            [
                w,
                label.removesuffix(NO_GUARD),
                guard,
                f"{pr['max_abs_dlogp']:.2g}",
                f"{pr['mean_abs_dp']:.2g}",
                f"{pr['max_abs_dp']:.2g}",
                f"{pr['argmax_flips']} of {pr['prompts']}",
            ]
        )
    res["report"] = {
        "order": 2.5,
        "title": 'Precisions where "medium" rounds operands to bf16 (emulated)',
        "what": "SmolLM2-135M-Instruct, `interp.score_options`, errors against float32 on the same prompts. "
        'Every float32 matmul at torch\'s "medium" precision took bf16-rounded operands with float32 sums '
        "(`interp.runner.rounding_kernels`), as a CPU with AMX or a GPU may compute it; the probe then read "
        f"{res['medium_operand_error']:.1e} (bf16 operands: 1e-3). Accuracy only: the emulation is slower, so "
        "there is no speed column. 'medium everywhere' and 'medium rest' are float32-medium and mixed-bf16-medium "
        "before their fallback; as loaded, where the probe finds bf16 operands, float32-medium computes in "
        "float32 and mixed-bf16-medium keeps every matmul but the MLP's gate / up float32.",
        "rerun": f"python -m bench medium_bf16_operands_error --threads {args.threads} --items {args.items}",
        "tables": [
            {
                "columns": [
                    "workload",
                    "dtype",
                    "tie guard",
                    "max |d log-prob|",
                    "verdict P: mean |d|",
                    "max |d|",
                    "argmax flips",
                ],
                "rows": rows,
            }
        ],
    }
    common.write_results(
        "emulated_medium", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


if __name__ == "__main__":
    main()
