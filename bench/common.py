"""Shared helpers for the benchmarks in bench/ (`python -m bench NAME`; never timed unit tests).

* `setup(threads)`: offline Hugging Face, one thread count for torch / OpenMP / BLAS.
  Call it before importing torch (it sets the environment) and again after (it sets
  torch's intra-op threads).
* `time_runs(fn, repeats)`: runs a callable N times and returns the timings with their
  median, min and max (`summarize`), plus the last return value.
* peak memory: `reset_peak_rss()` clears the process's high-water mark (Linux
  /proc/self/clear_refs), `peak_rss_mb()` reads it back (VmHWM, or ru_maxrss where /proc is
  missing). Benchmarks that compare peak memory between sizes run each size in a fresh
  subprocess (`run_child`), so one size's peak never hides another's.
* `write_results(name, data)`: bench/results/<name>.json with the machine, versions, thread
  count, command line and load average attached; bench/report.py turns those files into
  BENCHMARKS.md.

Every script takes --repeats (default 5), --threads (default 2) and its own size options.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
_MODELS_DIR = Path(os.environ.get("INTERP_MODELS_DIR", ROOT / "models"))
MODELS = {
    "smollm2": _MODELS_DIR / "smollm2-135m-instruct",
    "gemma3": _MODELS_DIR / "gemma3-270m",
}

_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def setup(threads: int) -> None:
    """Offline hub, quiet tokenizers, `threads` threads everywhere (torch, OpenMP, BLAS)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for var in _THREAD_VARS:
        os.environ[var] = str(threads)
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)
    try:  # numpy / scipy BLAS already loaded in this process
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
    except ImportError:
        pass


def child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": str(ROOT),
        }
    )
    env.update({v: str(threads) for v in _THREAD_VARS})
    return env


def parser(doc: str | None, *, repeats: int | None = 5) -> argparse.ArgumentParser:
    """An argparse parser with the options every benchmark shares (`repeats=None`: an untimed one, no --repeats)."""
    p = argparse.ArgumentParser(
        description=(doc or "").strip().splitlines()[0] if doc else None,
        epilog="See the module docstring for what is measured.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    if repeats is not None:
        p.add_argument(
            "--repeats", type=int, default=repeats, help="timed runs per configuration (>= 5 for the report)"
        )
    p.add_argument("--threads", type=int, default=2, help="torch / BLAS threads")
    p.add_argument("--results-dir", type=Path, default=RESULTS, help="where <name>.json is written")
    return p


def bank_parser(doc: str | None, *, repeats: int | None) -> argparse.ArgumentParser:
    """`parser` plus the bank-size pressure workload's --model and --items."""
    p = parser(doc, repeats=repeats)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--items", type=int, default=40, help="moral items (31 prompts each)")
    return p


# ---------------------------------------------------------------- timing


def summarize(runs: Sequence[float]) -> dict[str, Any]:
    runs = [float(r) for r in runs]
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs), "n": len(runs), "runs": runs}


def time_runs(fn: Callable[[], Any], repeats: int, *, warmup: int = 0, label: str = "") -> tuple[dict, Any]:
    """Call fn `warmup` times untimed, then `repeats` times timed (perf_counter)."""
    out = None
    for _ in range(warmup):
        out = fn()
    runs = []
    for i in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t0)
        if label:
            print(f"  {label}: run {i + 1}/{repeats} {runs[-1]:.3f}s", file=sys.stderr, flush=True)
    return summarize(runs), out


def time_interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int, loads: list | None = None
) -> tuple[dict[str, dict], dict[str, Any]]:
    """Time several callables round-robin (run r of each, then run r+1 of each, the starting one
    rotating), so slow drift of a shared machine hits all of them alike. Returns ({name: summary, with
    the runs' CPU seconds under "cpu"}, {name: last return value}); `loads`, if given, gets the load
    average at the start of each round."""
    runs: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    outs: dict[str, Any] = {}
    names = list(fns)
    for r in range(repeats):
        if loads is not None:
            loads.append(loadavg())
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate who goes first
            fn = fns[name]
            c0, t0 = time.process_time(), time.perf_counter()
            outs[name] = fn()
            runs[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            print(f"  {name}: run {r + 1}/{repeats} {runs[name][-1]:.3f}s", file=sys.stderr, flush=True)
    # "cpu": the process's CPU seconds (all threads) of the same runs: on a loaded machine the
    # wall clock also counts the time other jobs held the cores
    return {k: {**summarize(v), "cpu": summarize(cpu[k])} for k, v in runs.items()}, outs


def run_interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[Any]]:
    """Call each of `fns` `repeats` times round-robin, the first rotating (as `time_interleaved`),
    for callables that time themselves: every return value, in order, per name."""
    outs: dict[str, list[Any]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            outs[name].append(fns[name]())
    return outs


def ratio(num: dict, den: dict) -> dict[str, float]:
    """num / den: of medians, of mins, and the extremes of the range."""
    return {
        "median": num["median"] / den["median"],
        "min": num["min"] / den["min"],
        "low": num["min"] / den["max"],
        "high": num["max"] / den["min"],
    }


def fmt_time(s: dict) -> str:
    """`median (min-max)` with a unit that keeps three significant digits."""
    m = s["median"]
    scale, unit = (1.0, "s") if m >= 1 else (1e3, "ms")
    return f"{m * scale:.3g} {unit} ({s['min'] * scale:.3g}-{s['max'] * scale:.3g})"


def round_ratios(num: dict, den: dict) -> dict[str, Any]:
    """num / den run by run (round r of each, measured next to each other), summarized."""
    return summarize([a / b for a, b in zip(num["runs"], den["runs"])])


def template16(template):
    """The pressure template cut to the papers' 16 conditions per item: 2 planted verdicts x
    (2 stated opinions + 3 bare challenges + 3 neutral fillers)."""
    from interp.studies.base import Template

    data = dict(template.data)
    data["challenges"] = dict(list(data["challenges"].items())[:3])
    data["neutral"] = dict(list(data["neutral"].items())[:3])
    return Template(name=template.name + "-16", data=data, hash="", source=template.source)


def fmt_ratio(r: dict) -> str:
    return f"{r['median']:.2f}x (min/min {r['min']:.2f}x)"


# ---------------------------------------------------------------- memory


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM); False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process since start or the last reset, in MiB."""
    kb = _status_kb("VmHWM")
    if kb is None:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0


def rss_mb() -> float:
    kb = _status_kb("VmRSS")
    return (kb if kb is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024.0


def run_child(argv: Sequence[str], threads: int, timeout: float | None = None) -> dict:
    """Run `python argv...` in a fresh process; its last stdout line must be a JSON object."""
    cmd = [sys.executable, *map(str, argv)]
    proc = subprocess.run(cmd, env=child_env(threads), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()]
    return json.loads(lines[-1])


# ---------------------------------------------------------------- models and data


def model_path(name: str) -> Path:
    path = MODELS.get(name, Path(name))
    if not (Path(path) / "config.json").exists():
        raise SystemExit(f"{path}: no converted model there (run `interp fetch-models` first)")
    return Path(path)


def load_model(name: str, threads: int):
    """(model directory, interp model), with `threads` applied now that torch is imported."""
    import interp

    setup(threads)
    path = model_path(name)
    return path, interp.load(path, threads=threads)


def local_lm_eval_tasks(max_items: int):
    """lm-eval quietened, the local tasks (`interp.integrations.lm_eval_tasks`) written to a temporary directory:
    (task names, TaskManager)."""
    import logging
    import tempfile

    from lm_eval.tasks import TaskManager

    from interp.integrations.lm_eval_tasks import write_tasks

    for name in ("lm_eval", "lm-eval", "transformers", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    task_dir = Path(tempfile.mkdtemp(prefix="interp-lm-eval-tasks-"))
    tasks = write_tasks(task_dir, max_items=max_items)
    return tasks, TaskManager(include_path=str(task_dir))


def pressure_subset(n_items: int | None, bank_ref: str = "moral", seed: int = 0):
    """The shipped pressure bank, or a deterministic subset balanced over gold (as --max-items does)."""
    from interp.studies.pressure import load_pressure_bank

    bank = load_pressure_bank(bank_ref)
    if n_items:
        bank = bank.subsample(n_items, seed=seed, stratify="gold")
    return bank


def pressure_prompts(bank, tokenizer) -> tuple[list[str], list[str], Any]:
    """(prompts = every trial then every first-turn prompt, the two verdict words, trials table)."""
    from interp.studies.base import load_template
    from interp.studies.pressure import build_trials

    template = load_template("pressure_v1")
    trials, first = build_trials(bank, template, tokenizer)
    domain = bank.items["domain"].iloc[0]
    verdicts = list(template.data["verdicts"][domain])
    return trials["prompt"].tolist() + first["prompt"].tolist(), verdicts, trials


def option_words(verdicts: Sequence[str], variants: str) -> list[str]:
    """`exact`: the verdict with its leading space (what follows "FINAL:"), one surface form per
    option; `space` / `space_case`: the bare words, expanded by the runner into surface forms."""
    return [" " + v for v in verdicts] if variants == "exact" else list(verdicts)


# ---------------------------------------------------------------- results


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info(threads: int) -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores_visible": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "git": _git_commit(),
    }
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("torch", "transformers", "numpy", "scikit-learn", "h5py", "lm-eval"):
        try:
            info[dist] = version(dist)
        except PackageNotFoundError:
            info[dist] = None
    return info


def write_results(
    name: str,
    data: dict[str, Any],
    *,
    threads: int,
    results_dir: Path = RESULTS,
    started_load: Sequence[float] | None = None,
) -> Path:
    """bench/results/<name>.json: the benchmark's data plus when/where/how it ran."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    meta = machine_info(threads)
    meta["loadavg_start"] = list(started_load) if started_load is not None else None
    meta["date"] = _dt.datetime.now().isoformat(timespec="seconds")
    args = [os.path.relpath(a, ROOT) if a.startswith(str(ROOT)) else a for a in sys.argv[1:]]
    # `python -m bench NAME` puts its own command line in argv[0] (bench/__main__.py)
    head = sys.argv[0].split() if sys.argv[0].startswith("python -m bench") else ["python", sys.argv[0]]
    meta["command"] = shlex.join([*head, *args])
    payload = {"name": name, "meta": meta, **data}
    path = results_dir / f"{name}.json"
    from interp.core.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(payload, indent=2, default=_json_default) + "\n")
    print(f"wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)
    return path


def _json_default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def loadavg() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None
