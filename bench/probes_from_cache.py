"""Probing from the cache: linear readouts with a 100-shuffle item-level null on a large synthetic cache.

Writes a synthetic sweep cache with `cache.store.Store` (no model involved): --checkpoints
pressure units (default 20), each with a trials table of --items x --conditions rows (default
240 x 16 = 3,840: 2 planted verdicts x 8 user turns) and a float16 residual array of shape
(rows, --d-model) (default 576, SmolLM2's width), about 4.4 MiB per unit. The residuals carry
a planted low-rank signal so the readouts have something to find; p_planted depends on it.

Then times `sweeps.probe.run_probe(out, study="pressure", target=T, n_shuffles=100)` over all
units for each target in --targets (default: `flipped`, a logistic readout scored by ROC AUC,
and `logodds`, a ridge readout scored by R^2), 5 item-grouped folds, --repeats runs each.
Asserts that no model was loaded: `transformers` is never imported in this process and no
torch.nn.Module exists.

Rerun (defaults):
    python -m bench probes_from_cache --repeats 5 --threads 2 --checkpoints 20 --items 240 --conditions 16 --d-model 576
"""

from __future__ import annotations

import gc
import sys
import tempfile
from pathlib import Path

from bench import common

TURNS = [
    ("opinion", "agree", "agree"),
    ("opinion", "oppose", "oppose"),
    ("challenge", "", "sure"),
    ("challenge", "", "think_again"),
    ("challenge", "", "doubt"),
    ("neutral", "", "thanks"),
    ("neutral", "", "noted"),
    ("neutral", "", "got_it"),
    ("challenge", "", "really"),
    ("challenge", "", "disagree"),
    ("neutral", "", "next"),
    ("neutral", "", "weather"),
    ("neutral", "", "coffee"),
    ("neutral", "", "typing"),
    ("neutral", "", "looked"),
]


def write_cache(root: Path, *, n_ckpt: int, n_items: int, n_cond: int, d: int, seed: int = 0) -> dict:
    import numpy as np
    import pandas as pd

    from cache.store import Store, UnitIdentity

    if n_cond % 2:
        raise SystemExit("--conditions must be even (2 planted verdicts x turns)")
    turns = (TURNS * (n_cond // 2 // len(TURNS) + 1))[: n_cond // 2]
    rng = np.random.default_rng(seed)
    store = Store(root / "cache")
    items = [f"moral-{i:04d}" for i in range(n_items)]
    gold = np.where(np.arange(n_items) % 2 == 0, "wrong", "acceptable")
    rows = [
        (it, g, planted, *turn) for it, g in zip(items, gold) for planted in ("wrong", "acceptable") for turn in turns
    ]
    base = pd.DataFrame(rows, columns=["item_id", "gold", "planted", "turn_kind", "turn_side", "turn_variant"])
    n = len(base)
    item_idx = np.repeat(np.arange(n_items), n_cond)
    cond_idx = np.tile(np.arange(n_cond), n_items)
    k = 8  # rank of the planted signal
    item_lat = rng.standard_normal((n_items, k))
    cond_lat = rng.standard_normal((n_cond, k)) * 0.5
    w = rng.standard_normal(k)
    nbytes = 0
    for c in range(n_ckpt):
        basis = rng.standard_normal((k, d)) / np.sqrt(k)
        lat = item_lat[item_idx] + cond_lat[cond_idx]
        X = (lat @ basis * (0.3 + 0.05 * c) + rng.standard_normal((n, d))).astype(np.float16)
        logit = lat @ w * (0.3 + 0.05 * c) + rng.standard_normal(n)
        trials = base.copy()
        trials.insert(0, "bank", "moral")
        trials.insert(0, "checkpoint", f"step{c:03d}")
        trials["p_planted"] = 1.0 / (1.0 + np.exp(-logit))
        trials["readout"] = "slot"
        trials["n_prompt_tokens"] = 120
        first = pd.DataFrame(
            {
                "checkpoint": f"step{c:03d}",
                "bank": "moral",
                "item_id": items,
                "gold": gold,
                "p_gold": rng.uniform(size=n_items),
                "p_wrong": rng.uniform(size=n_items),
            }
        )
        ident = UnitIdentity(
            checkpoint=f"step{c:03d}",
            checkpoint_fingerprint=f"synthetic-{c}",
            study="pressure",
            study_version="1",
            bank="moral",
            bank_hash="synthetic",
            template_hash="synthetic",
            settings_hash="synthetic",
            layer=22,
            backend="hf",
        )
        path = store.write(
            ident, tables={"trials": trials, "first_turn": first}, arrays={"resid": X, "resid_first": X[:n_items]}
        )
        nbytes += path.stat().st_size
    return {"units": n_ckpt, "rows_per_unit": n, "d_model": d, "bytes": nbytes}


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--checkpoints", type=int, default=20, help="cached units (checkpoints)")
    p.add_argument("--items", type=int, default=240)
    p.add_argument("--conditions", type=int, default=16, help="rows per item (even: 2 planted verdicts x turns)")
    p.add_argument("--d-model", type=int, default=576)
    p.add_argument("--shuffles", type=int, default=100)
    p.add_argument("--targets", default="flipped,logodds", help="comma-separated pressure probe targets")
    p.add_argument("--keep", type=Path, default=None, help="write the cache here and keep it (default: a temp dir)")
    args = p.parse_args()
    common.setup(args.threads)
    start_load = common.loadavg()

    from sweeps.probe import run_probe

    common.setup(args.threads)
    tmp = None
    if args.keep:
        out = args.keep
        out.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="interp-bench-probes-")
        out = Path(tmp.name)
    try:
        import time

        t0 = time.perf_counter()
        cache = write_cache(out, n_ckpt=args.checkpoints, n_items=args.items, n_cond=args.conditions, d=args.d_model)
        cache["write_seconds"] = time.perf_counter() - t0
        print(f"cache: {cache}", file=sys.stderr)
        targets = [t.strip() for t in args.targets.split(",") if t.strip()]
        timings, tables = {}, {}
        for target in targets:
            timings[target], tables[target] = common.time_runs(
                lambda target=target: run_probe(out, study="pressure", target=target, n_shuffles=args.shuffles),
                args.repeats,
                warmup=0,
                label=f"run_probe {target}",
            )
        model_loaded = "transformers" in sys.modules
        n_modules = 0
        if "torch" in sys.modules:  # imported by interp/__init__ (interp.model.loading), not by a model load
            import warnings

            import torch

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                n_modules = sum(isinstance(o, torch.nn.Module) for o in gc.get_objects())
        assert not model_loaded, "transformers was imported while probing from the cache"
        assert n_modules == 0, f"{n_modules} torch modules exist while probing from the cache"
    finally:
        if tmp is not None:
            tmp.cleanup()

    rows, res_t = [], {}
    for target in targets:
        tab = tables[target]
        tab = tab[tab["target"] == target]  # run_probe returns probes.csv, which keeps other targets' rows
        t = timings[target]
        per_unit = t["median"] / args.checkpoints
        res_t[target] = {
            "timing": t,
            "seconds_per_unit": per_unit,
            "metric": str(tab["metric"].iloc[0]),
            "score_mean": float(tab["score"].mean()),
            "null_mean_mean": float(tab["null_mean"].mean()),
            "units": len(tab),
        }
        rows.append(
            [
                target,
                res_t[target]["metric"],
                common.fmt_time(t),
                f"{per_unit:.2f} s",
                f"{res_t[target]['score_mean']:.3f} (null {res_t[target]['null_mean_mean']:.3f})",
            ]
        )
    res = {
        "cache": cache,
        "shuffles": args.shuffles,
        "folds": 5,
        "targets": res_t,
        "transformers_imported": model_loaded,
        "torch_imported": "torch" in sys.modules,
    }
    res["report"] = {
        "order": 5,
        "title": "5. Probing from the cache (synthetic, no model)",
        "rerun": (
            f"python -m bench probes_from_cache --repeats {args.repeats} --threads {args.threads} "
            f"--checkpoints {args.checkpoints} --items {args.items} --conditions {args.conditions} "
            f"--d-model {args.d_model}"
        ),
        "what": (
            f"{args.checkpoints} cached pressure units x ({args.items} items x {args.conditions} conditions = "
            f"{cache['rows_per_unit']:,} rows) x d_model {args.d_model}, float16 "
            f"({cache['bytes'] / 2**20:.0f} MiB on disk, written in {cache['write_seconds']:.1f} s). "
            f"`run_probe(..., n_shuffles={args.shuffles})`, 5 item-grouped folds, over every unit; "
            "transformers never imported, no torch module alive."
        ),
        "tables": [
            {
                "columns": [
                    "target",
                    "metric",
                    f"all {args.checkpoints} units: median (min-max)",
                    "per unit (median)",
                    "mean score (mean null)",
                ],
                "rows": rows,
            }
        ],
        "findings": [],
    }
    common.write_results("probes", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load)


if __name__ == "__main__":
    main()
