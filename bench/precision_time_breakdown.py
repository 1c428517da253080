"""Where a scoring call's time goes, per `--dtype` kind, on the long-context workload (issue 50):
attention, the blocks' matmuls, the engine's KV-cache packing, norms and rotary embeddings, the
tie guard, the rest.

    python -m bench precision_time_breakdown --items 2 --threads 2

Each kind scores the `long` workload of precision_speed_and_error (bench/data/ethics_long_contexts.csv,
--items items x 16 conditions, `interp.score_options` at its defaults) in a process of its own, sampled
by py-spy (`pip install -e '.[bench]'`) at --rate Hz; a sample counts for the first category whose
function is on its stack, in the order of CATEGORIES (the tie guard first: its forwards are its own),
and the shares are of the samples inside `score_options`. Shares, not speeds: the kinds run one after
another, so their seconds are not comparable on a shared machine (precision_speed_and_error's are).
Writes bench/results/precision_time_breakdown.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench import common

KINDS = ("float32", "float32-medium", "mixed-bf16-medium", "mixed-bf16")
# category -> functions (py-spy frame names) whose presence on a sample's stack puts it there
CATEGORIES = {
    "tie guard": ("guard_ties",),
    "attention": ("_packed_attention", "sdpa_attention_forward", "_medium_attention", "_sdpa_grouped"),
    "matmuls": ("Linear.forward", "make_medium.<locals>.forward", "_linear_forward", "_conv1d_forward"),
    "KV-cache packing": ("pack_past", "_unpack_past", "_BufferLayer.update"),
    "norms, rotary": ("LlamaRMSNorm.forward", "apply_rotary_pos_emb"),
    "unembedding": ("HFBackend.unembed",),
}
INSIDE = "score_options"
RESULT = "precision_time_breakdown:"  # the child's last line: seconds, prompts re-scored by the guard


def categorize(raw: str) -> dict[str, float]:
    """Shares of py-spy's raw samples (`stack count` lines) inside `score_options`, by category."""
    counts: Counter = Counter()
    total = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        stack, n = line.rsplit(" ", 1)
        frames = {f.split(" (")[0] for f in stack.split(";")}
        if INSIDE not in frames:
            continue
        total += int(n)
        cat = next((c for c, names in CATEGORIES.items() if frames & set(names)), "other")
        counts[cat] += int(n)
    return {c: counts[c] / total if total else float("nan") for c in (*CATEGORIES, "other")}


def child(kind: str, items: int, threads: int, csv: Path) -> None:
    """The sampled process: load `kind`, warm up, score the long workload once."""
    common.setup(threads)
    import interp
    from bench.precision_speed_and_error import build
    from interp.runner.scoring import ScoringConfig

    lm = interp.load(common.model_path("smollm2"), dtype=kind, threads=threads)
    common.setup(threads)
    _, run, _ = build("long", items, lm.tokenizer, csv)
    run(lm, ScoringConfig(), limit=4)
    t0 = time.perf_counter()
    out = run(lm, ScoringConfig())
    print(f"{RESULT} {time.perf_counter() - t0:.3f} {len(out.tie_guarded)}")


def main() -> None:
    from bench.ethics_long_contexts import CSV

    p = common.parser(__doc__, repeats=None)
    p.add_argument("--items", type=int, default=2)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # the sampled process, one kind
    args = p.parse_args()
    if args.child:
        return child(args.child, args.items, args.threads, CSV)
    start_load = common.loadavg()
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        raise SystemExit(f"{spy}: py-spy is not installed (pip install -e '.[bench]')")
    res: dict = {"items": args.items, "rate": args.rate, "kinds": {}}
    for kind in args.kinds.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "raw.txt"
            cmd = [str(spy), "record", "-r", str(args.rate), "--format", "raw", "-o", str(raw), "--"]
            cmd += [sys.executable, "-m", "bench", "precision_time_breakdown", "--child", kind]
            cmd += ["--items", str(args.items), "--threads", str(args.threads)]
            env = common.child_env(args.threads) | {"PYTHONWARNINGS": "ignore"}
            proc = subprocess.run(cmd, env=env, cwd=common.ROOT, capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"{kind}: exited {proc.returncode}\n{proc.stderr[-3000:]}")
            (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT)]
            seconds, guarded = line.split()[1:]
            res["kinds"][kind] = {
                "seconds": float(seconds),
                "tie_guarded": int(guarded),
                "loadavg": os.getloadavg(),
                "shares": categorize(raw.read_text()),
            }
            print(f"  {kind}: {res['kinds'][kind]['shares']}", file=sys.stderr, flush=True)
    cats = [*CATEGORIES, "other"]
    res["report"] = {
        "order": 2,
        "title": "Where the time goes on long chat contexts, per --dtype kind (sampled, shares)",
        "what": (
            f"The long-context workload of the precision kinds section, {args.items} items x 16 conditions, one "
            f"`score_options` call per kind in a process of its own, sampled by py-spy at {args.rate} Hz; the share "
            "of the samples inside the call whose stack holds each category's functions (bench/"
            "precision_time_breakdown.py: CATEGORIES). Shares, not speeds: the kinds ran one after another."
        ),
        "rerun": f"python -m bench precision_time_breakdown --items {args.items} --threads {args.threads}",
        "tables": [
            {
                "columns": ["--dtype", *cats, "re-scored by the guard"],
                "rows": [
                    [k, *(f"{v['shares'][c]:.0%}" for c in cats), v["tie_guarded"]] for k, v in res["kinds"].items()
                ],
            }
        ],
    }
    common.write_results(
        "precision_time_breakdown", res, threads=args.threads, results_dir=args.results_dir, started_load=start_load
    )


if __name__ == "__main__":
    main()
