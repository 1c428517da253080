"""One entry for every benchmark (bench/catalog.py lists them).

    python -m bench --list                     # name, what it measures, results files
    python -m bench NAME [OPTIONS...]          # one benchmark; NAME --help gives its options
    python -m bench --all [--quick] [--threads 2] [--repeats 5] [--only A,B] [--report]
                                               # the runs behind BENCHMARKS.md / SCALE.md, each in
                                               # a fresh process, then (with --report) the page
    python -m bench report [--preliminary WHY] # BENCHMARKS.md from bench/results/*.json

`bash bench/run_all.sh` is `--all --report`. Timings are wall-clock: run on an otherwise idle
machine, or read each section's load average.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time

from bench import catalog


def _list() -> None:
    width = max(len(b.name) for b in catalog.BENCHMARKS)
    for b in catalog.BENCHMARKS:
        print(f"{b.name:<{width}}  {b.what} [{', '.join(b.results)}]")


def run_one(name: str, args: list[str]) -> None:
    """Run benchmark `name` in this process with `args` as its command line."""
    if name not in catalog.BY_NAME:
        raise SystemExit(f"bench: no benchmark {name!r} (python -m bench --list)")
    module = importlib.import_module(f"bench.{name}")
    sys.argv = [catalog.command(name), *args]  # argparse's prog; common.write_results records it
    module.main()


def run_all(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench --all", description="every benchmark's runs, in order")
    ap.add_argument("--all", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="small sizes: checks every script works")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="where a run's repeats are not fixed")
    ap.add_argument("--only", default="", help="comma-separated names (default: all)")
    ap.add_argument("--report", action="store_true", help="regenerate BENCHMARKS.md afterwards")
    ap.add_argument("--preliminary", default=None, help="with --report: why the figures are preliminary")
    a = ap.parse_args(argv)
    only = [n for n in a.only.split(",") if n]
    unknown = [n for n in only if n not in catalog.BY_NAME]
    if unknown:
        raise SystemExit(f"bench: no benchmark {', '.join(map(repr, unknown))} (python -m bench --list)")
    t_all = time.monotonic()
    for b in catalog.BENCHMARKS:
        if only and b.name not in only:
            continue
        for args in (b.quick or b.runs[:1]) if a.quick else b.runs:
            cmd = [sys.executable, "-m", "bench", b.name, *catalog.fill(args, threads=a.threads, repeats=a.repeats)]
            print(f"== {b.name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            code = subprocess.call(cmd)
            print(f"== {b.name}: {time.monotonic() - t0:.0f} s, exit {code}", file=sys.stderr, flush=True)
            if code:
                return code
    print(f"== all benchmarks: {time.monotonic() - t_all:.0f} s", file=sys.stderr)
    if a.report:
        extra = ["--preliminary", a.preliminary] if a.preliminary else []
        return subprocess.call([sys.executable, "-m", "bench", "report", *extra])
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv[0] == "--list":
        _list()
        return 0
    if argv[0] == "--all":
        return run_all(argv)
    if argv[0] == "report":
        from bench import report

        sys.argv = ["python -m bench report", *argv[1:]]
        report.main()
        return 0
    run_one(argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
