"""Every benchmark `python -m bench NAME` runs: what it measures, the runs that wrote the figures on
BENCHMARKS.md and SCALE.md (`python -m bench --all` repeats them), and the results files they write.

A benchmark is a module `bench/NAME.py` with a `main()` that reads its options from `sys.argv`
(argparse) and writes `bench/results/<results>.json` through `common.write_results`. Its `runs`
are argument lists, `{threads}` and `{repeats}` filled in by the driver (defaults 2 and 5, as the
figures were measured); `quick` are small sizes that check the script works in minutes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

Args = tuple[str, ...]


@dataclass(frozen=True)
class Benchmark:
    name: str
    what: str
    results: tuple[str, ...]
    runs: tuple[Args, ...]
    quick: tuple[Args, ...] = ()


def _a(text: str) -> Args:
    return tuple(text.split())


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "ab_study_vs_lm_eval",
        "the A/B sycophancy study vs lm-eval's sycophancy_on_nlp_survey task on the same local file",
        ("field_sets",),
        (_a("--repeats {repeats} --threads {threads} --items 100"),),
        (_a("--repeats 1 --threads {threads} --items 4"),),
    ),
    Benchmark(
        "view_pages",
        "interp view --serve: first paint and the next item page over a synthetic 741 x 1,000 sweep (docs/view.md)",
        ("view",),
        (_a("--repeats {repeats}"),),
        (_a("--repeats 1 --checkpoints 3 --items 20"),),
    ),
    Benchmark(
        "runner_vs_lm_eval_and_naive",
        "the runner (float32, mixed-bf16, bfloat16) vs lm-eval HFLM and a naive HF loop at bank size",
        ("bank",),
        (_a("--threads {threads} --repeats 3 --items 40 --naive-repeats 2"),),
        (_a("--threads {threads} --repeats 2 --items 2 --naive-repeats 1 --lm-eval-batch-sizes 8,16"),),
    ),
    Benchmark(
        "cloze_and_sampling",
        "prefix tree at bank sizes: cloze vs lm-eval, batched sampling vs HF generate",
        ("tree",),
        (
            _a(
                "--threads {threads} --repeats 2 --items 40 --compare-items 4 --pilot-items 1 --full-repeats 1 "
                "--sample-items 40 --conditions 16 --n-samples 21 --sample-hf-prompts 16 --sample-repeats 1"
            ),
        ),
        (
            _a(
                "--threads {threads} --repeats 2 --items 2 --compare-items 1 --cloze-prompts 2 --sample-items 1 "
                "--conditions 4 --lm-eval-batch-sizes 8,16"
            ),
        ),
    ),
    Benchmark(
        "sweep_overhead",
        "where a sweep's wall time goes besides the engine's forwards",
        ("sweep_overhead_pressure",),
        (_a("--threads {threads} --study pressure --max-items 16"),),
        (_a("--threads {threads} --study pressure --max-items 2"),),
    ),
    Benchmark(
        "lm_eval_model_vs_hf",
        "lm-eval `--model interp` vs `--model hf` on the local tasks",
        ("lm_eval_model", "lm_eval_model_bank", "lm_eval_model_bank_float32_medium"),
        (
            _a("--threads {threads} --repeats 3 --items 8"),
            _a("--threads {threads} --repeats 3 --items 0"),
            _a("--threads {threads} --repeats 3 --items 0 --dtype float32-medium"),
        ),
        (_a("--threads {threads} --repeats 2 --items 2"),),
    ),
    Benchmark(
        "rolling_error_vs_float64",
        "loglikelihood_rolling of both lm-eval models against a float64 forward",
        ("rolling_float64",),
        (_a("--threads {threads}"),),
    ),
    Benchmark(
        "engine_node_caches",
        "the engine's chained node caches vs the cumulative copies before (git 33cafb1)",
        ("engine_chain",),
        (_a("--threads {threads} --repeats 3"),),
        (_a("--threads {threads} --repeats 1"),),
    ),
    Benchmark(
        "packed_vs_padded",
        "packed forwards vs padded ones at bank size, per dtype",
        ("packed", "packed_float32_medium", "packed_mixed_bf16"),
        (
            _a("--threads {threads} --repeats 3 --items 40"),
            _a("--threads {threads} --repeats 3 --items 40 --dtype float32-medium"),
            _a("--threads {threads} --repeats 3 --items 40 --dtype mixed-bf16"),
        ),
        (_a("--threads {threads} --repeats 2 --items 2"),),
    ),
    Benchmark(
        "precision_speed_and_error",
        "each --dtype kind's speed and error against float32 on three workloads (moral bank, long contexts, cloze)",
        ("precision_moral", "precision_long", "precision_cloze"),
        (
            _a("--threads {threads} --repeats 3 --workload moral --items 40"),
            _a("--threads {threads} --repeats 3 --workload long --items 40"),
            _a("--threads {threads} --repeats 3 --workload cloze --items 0"),
        ),
        (_a("--threads {threads} --repeats 1 --workload long --items 1 --kinds mixed-bf16"),),
    ),
    Benchmark(
        "precision_time_breakdown",
        "where a scoring call's time goes per --dtype kind on long chat contexts (py-spy samples, shares)",
        ("precision_time_breakdown",),
        (_a("--threads {threads} --items 2"),),
        (_a("--threads {threads} --items 1 --kinds float32,mixed-bf16"),),
    ),
    Benchmark(
        "medium_bf16_operands_error",
        "the error of the medium kinds where 'medium' rounds operands to bf16 (emulated)",
        ("emulated_medium",),
        (_a("--threads {threads} --items 40"),),
        (_a("--threads {threads} --items 2"),),
    ),
    Benchmark(
        "sweep_precision_end_to_end",
        "a whole pressure sweep at float32 vs a reduced precision, audit and tie guard included",
        ("sweep_precisions",),
        (_a("--threads {threads} --repeats 3 --items 40"),),
        (_a("--threads {threads} --repeats 1 --items 2"),),
    ),
    Benchmark(
        "training_step_precision",
        "the organism's training step, float32 vs bf16 autocast",
        ("train_precision", "train_precision_no_bf16_kernels"),  # one of them, by the CPU's bf16 kernels
        (_a("--threads {threads} --repeats 3 --steps 4"),),
        (_a("--threads {threads} --repeats 1 --steps 2"),),
    ),
    Benchmark(
        "route_sft_padding",
        "route SFT tokens: random vs length-grouped batches, padded over real (no model)",
        ("route_sft_padding",),
        (_a("--repeats 5 --classify-copies 4 --grade-by group"),),
        (_a("--repeats 1"),),
    ),
    Benchmark(
        "sft_loss_step_time",
        "the organism's SFT step: trl's loss vs interp's completion loss",
        ("sft_loss",),
        (_a("--threads {threads} --repeats 3 --steps 6"),),
        (_a("--threads {threads} --repeats 1 --steps 2"),),
    ),
    Benchmark(
        "sft_batch_split",
        "the organism's SFT step: one padded pass vs passes over rows of similar length",
        ("sft_batch_split",),
        (_a("--threads {threads} --repeats 3 --steps 20"),),
        (_a("--threads {threads} --repeats 1 --steps 2"),),
    ),
    Benchmark(
        "probes_from_cache",
        "linear probes with a 100-shuffle null over a large synthetic cache (no model)",
        ("probes",),
        (_a("--threads {threads} --repeats {repeats} --checkpoints 20 --items 240 --conditions 16 --d-model 576"),),
        (_a("--threads {threads} --repeats 2 --checkpoints 4 --items 240"),),
    ),
    Benchmark(
        "content_hash_cost",
        "hashing every weight byte while loading, against the load itself",
        ("content_hash",),
        (_a("--threads {threads} --repeats 7"),),
        (_a("--threads {threads} --repeats 2"),),
    ),
    Benchmark(
        "flops_achieved",
        "the runner's achieved FLOP/s against the matmul rate, tokens computed (SCALE.md's efficiency)",
        ("flops",),
        (_a("--threads {threads} --repeats {repeats} --items 2 --variants exact,space_case"),),
        (_a("--threads {threads} --repeats 2 --items 2 --variants exact,space_case"),),
    ),
    Benchmark(
        "all_layer_capture_cost",
        "all-layer residual capture vs one layer for a pressure unit, both default models",
        ("layers",),
        (_a("--threads {threads} --repeats {repeats} --items 1"),),
        (_a("--threads {threads} --repeats 2 --items 1"),),
    ),
    Benchmark(
        "crash_suite",
        "SIGKILL during `interp sweep` at random moments, then resume: tables identical, nothing recomputed",
        ("crash_suite",),
        (_a("--kills 20 --checkpoints 6 --items 2 --parallel 2 --seed 0"),),
        (_a("--kills 4 --checkpoints 3"),),
    ),
    Benchmark(
        "integrity_suite",
        "damaged unit bodies, edited tokenizers, worker loss, lock race; weight edits and one-line errors",
        ("integrity_suite", "integrity_bytes"),
        (_a("--rounds 10 --seed 0"), _a("--part bytes --rounds 4 --seed 0")),
        (_a("--rounds 2 --seed 0"),),
    ),
    Benchmark(
        "planning_741_checkpoints",
        "`interp sweep --dry-run` planning a synthetic tree of 741 checkpoints, cold and warm",
        ("plan_741",),
        (_a("--repeats 3"),),
        (_a("--repeats 1"),),
    ),
    Benchmark(
        "scale_workload",
        "SCALE.md's tables: the papers' workload in tokens, FLOPs, cache bytes and GPU-hours (counts)",
        ("scale",),
        (_a("--threads {threads}"),),
        (_a("--threads {threads}"),),
    ),
    Benchmark(
        "gpu_check",
        "selftest on CUDA and tokens/s, peak memory of both default models (skips without CUDA)",
        ("gpu_check",),
        (_a("--threads 4 --items 8 --repeats 3"),),
        (_a("--threads 4 --items 2 --repeats 1"),),
    ),
)

BY_NAME = {b.name: b for b in BENCHMARKS}
# modules of bench/ that are not benchmarks: the driver, shared helpers, the page writer
HELPERS = frozenset(
    {"__init__", "__main__", "catalog", "common", "report", "baselines", "flop_counts", "precision_error"}
    | {"ethics_long_contexts"}  # precision_speed_and_error's long workload (its CSV in bench/data/)
    | {"integrity_bytes"}  # integrity_suite --part bytes
)


def command(name: str, args: Args = ()) -> str:
    """The command line that runs one benchmark, as BENCHMARKS.md prints it."""
    return " ".join(("python", "-m", "bench", name, *args))


def fill(args: Args, *, threads: int, repeats: int) -> list[str]:
    return [a.format(threads=threads, repeats=repeats) for a in args]


_RERUN = re.compile(r"python -m bench ([a-z0-9_]+)")


def check(results_dir: Path, bench_dir: Path) -> list[str]:
    """What does not hold together: a benchmark without its module, a module that is neither a
    benchmark nor a helper, a results file no benchmark writes, a rerun command naming no benchmark."""
    problems = []
    modules = {p.stem for p in Path(bench_dir).glob("*.py")}
    problems += [f"{b.name}: no bench/{b.name}.py" for b in BENCHMARKS if b.name not in modules]
    problems += [f"bench/{m}.py: not in the catalog" for m in sorted(modules - set(BY_NAME) - HELPERS)]
    written = {r: b.name for b in BENCHMARKS for r in b.results}
    for p in sorted(Path(results_dir).glob("*.json")):
        d = json.loads(p.read_text())
        name = d.get("name", p.stem)
        if name not in written:
            problems.append(f"{p.name}: no benchmark writes {name!r}")
        rerun = (d.get("report") or {}).get("rerun") or ""
        m = _RERUN.search(rerun)
        if rerun and not m:
            problems.append(f"{p.name}: rerun {rerun!r} does not run `python -m bench NAME`")
        elif m and m.group(1) not in BY_NAME:
            problems.append(f"{p.name}: rerun names {m.group(1)!r}, not a benchmark")
        elif m and name in written and m.group(1) != written[name]:
            problems.append(f"{p.name}: rerun runs {m.group(1)!r}, but {written[name]!r} writes it")
    return problems
