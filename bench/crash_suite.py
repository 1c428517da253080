"""Crash suite: SIGKILL an `interp sweep` at random moments, resume, and check the outcome.

Builds a small tree of tiny random checkpoints with `interp.testing.build_tiny_model`
(--checkpoints, default 6: a base run and two post-training routes, 2-layer Llama,
d_model 32), runs one uninterrupted reference sweep

    python -m interp.cli sweep TREE --study pressure --bank moral --max-items 2 --threads 1 --quiet --out REF

and records its timeline: when each unit file appeared and when the process ended. Then,
--kills times (default 20), in a fresh output directory: start the same sweep and SIGKILL it
at a random moment, then resume. The moment is drawn (seeded) so that every phase is hit: a
phase n is chosen uniformly from 0..N (N units; phase 0 = start-up, loading and the first
unit, phase n = after the n-th unit file appeared, phase N = merge, analysis and report),
the kill comes a uniform random delay after the phase begins (n units on disk), within the
phase's length in the reference run. Moments the sweep outlives are redrawn (misses). Checks:

* after the kill: every unit file under its final name (*.h5) opens with
  `cache.store.read_unit` (a killed writer never leaves a half-written file that looks done);
* the resume (the same command) exits 0 (the dead sweep's lock is stale and taken over);
* every results/*.csv is byte-identical to the reference run's;
* every *.h5 opens with `read_unit`, the unit count equals the reference's, and no stale
  temporaries are left;
* no unit finished before the kill was recomputed (its mtime_ns is unchanged).

When a round fails, an uninterrupted sweep is run again to tell a kill-related failure from
nondeterminism. The product's source (interp/, cache/, sweeps/, analyses/, probes/) is hashed
at the start and after every round: if someone edits the tree during the suite, the run is
reported as invalid rather than as a crash-safety failure.

Kill/resume rounds run --parallel at a time (default 2; each sweep uses one thread).
Results: bench/results/crash_suite.json; the exit status is 1 if any check failed.

Rerun (defaults):
    python -m bench crash_suite --kills 20 --checkpoints 6 --items 2 --parallel 2 --seed 0
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import common

NAMES = [
    "stage1-step100",
    "stage1-step200",
    "sft/step50",
    "sft/final",
    "dpo/step50",
    "dpo/final",
    "sft/step100",
    "dpo/step100",
    "stage1-step300",
    "stage1-step400",
]


def build_tree(root: Path, n: int) -> list[str]:
    from interp.testing import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    names = NAMES[:n] if n <= len(NAMES) else NAMES + [f"stage1-step{1000 + i}" for i in range(n - len(NAMES))]
    for i, name in enumerate(names):
        build_tiny_model(root / name, "llama", n_layers=2, d_model=32, seed=i, tokenizer=tok)
    return names


def sweep_cmd(tree: Path, out: Path, items: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "interp.cli",
        "sweep",
        str(tree),
        "--study",
        "pressure",
        "--bank",
        "moral",
        "--max-items",
        str(items),
        "--threads",
        "1",
        "--quiet",
        "--out",
        str(out),
    ]


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, env=common.child_env(1), cwd=common.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def source_fingerprint() -> str:
    """Hash of the product's source (Python files, shipped banks and templates): a run is only
    meaningful if the code does not change under it (others may be editing the tree)."""
    import hashlib

    h = hashlib.sha256()
    for pkg in ("interp", "cache", "sweeps", "analyses", "probes"):
        for path in sorted((common.ROOT / pkg).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".json", ".jsonl") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(common.ROOT)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def unit_files(out: Path) -> list[Path]:
    cache = out / "cache"
    return sorted(p for p in cache.rglob("*.h5") if not p.name.startswith(".")) if cache.exists() else []


def temporaries(out: Path) -> list[Path]:
    cache = out / "cache"
    return sorted(cache.rglob(".*.tmp-*")) if cache.exists() else []


def opens(paths) -> list[str]:
    from cache.store import read_unit

    bad = []
    for p in paths:
        try:
            read_unit(p)
        except Exception as exc:  # report any failure, whatever its type
            bad.append(f"{p.name}: {type(exc).__name__}: {exc}")
    return bad


def csv_bytes(out: Path) -> dict[str, bytes]:
    res = out / "results"
    return {p.name: p.read_bytes() for p in sorted(res.glob("*.csv"))} if res.exists() else {}


def reference_run(tree: Path, out: Path, items: int) -> tuple[float, list[float]]:
    """Run the uninterrupted sweep; return (wall time, times at which unit files appeared)."""
    t0 = time.perf_counter()
    proc = start(sweep_cmd(tree, out, items))
    seen: list[float] = []
    while proc.poll() is None:
        n = len(unit_files(out))
        while len(seen) < n:
            seen.append(time.perf_counter() - t0)
        time.sleep(0.01)
    _, err = proc.communicate()
    t_end = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"reference sweep failed ({proc.returncode}):\n{err[-3000:]}")
    n = len(unit_files(out))
    seen += [t_end] * (n - len(seen))
    return t_end, seen


def one_round(k: int, phase: int, delay: float, tree: Path, work: Path, items: int, ref: dict) -> dict:
    out = work / f"kill{k:02d}"
    cmd = sweep_cmd(tree, out, items)
    t0 = time.perf_counter()
    proc = start(cmd)
    while phase and proc.poll() is None and len(unit_files(out)) < phase:  # wait for the phase to begin
        time.sleep(0.005)
    t_phase = time.perf_counter()
    while proc.poll() is None and time.perf_counter() - t_phase < delay:
        time.sleep(0.005)
    if proc.poll() is not None:  # finished before the kill moment: a miss, not a kill
        proc.communicate()
        shutil.rmtree(out, ignore_errors=True)
        return {"round": k, "phase": phase, "delay_s": delay, "killed": False}
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    killed_at = time.perf_counter() - t0
    before = {str(p): p.stat().st_mtime_ns for p in unit_files(out)}
    bad_after_kill = opens(map(Path, before))
    tmp_after_kill = len(temporaries(out))
    r0 = time.perf_counter()
    resume = start(cmd)
    _, err = resume.communicate(timeout=3600)
    resume_s = time.perf_counter() - r0
    after = unit_files(out)
    tables = csv_bytes(out)
    changed = [Path(p).name for p, m in before.items() if not Path(p).exists() or Path(p).stat().st_mtime_ns != m]
    checks = {
        "units_open_after_kill": not bad_after_kill,
        "resume_exit_0": resume.returncode == 0,
        "tables_identical": tables == ref["tables"],
        "units_open_after_resume": not opens(after),
        "unit_count": len(after) == ref["units"],
        "no_temporaries_left": not temporaries(out),
        "finished_units_not_recomputed": not changed,
    }
    source_changed = source_fingerprint() != ref["source"]
    if not all(checks.values()) and not source_changed:
        # diagnostic: does an uninterrupted sweep run now reproduce the reference? (if not, the
        # difference is nondeterminism or a changed environment, not the kill)
        fresh = work / f"fresh{k:02d}"
        proc = start(cmd[:-1] + [str(fresh)])
        proc.communicate(timeout=3600)
        checks_fresh = csv_bytes(fresh) == ref["tables"]
        shutil.rmtree(fresh, ignore_errors=True)
    else:
        checks_fresh = None
    rec = {
        "round": k,
        "phase": phase,
        "delay_s": delay,
        "killed": True,
        "killed_at_s": killed_at,
        "source_changed": source_changed,
        "fresh_run_matches_reference": checks_fresh,
        "units_done_at_kill": len(before),
        "temporaries_at_kill": tmp_after_kill,
        "results_dir_at_kill": (out / "results").exists(),
        "resume_s": resume_s,
        "checks": checks,
        "ok": all(checks.values()),
    }
    if not rec["ok"]:
        rec["details"] = {
            "bad_after_kill": bad_after_kill,
            "recomputed": changed,
            "differing_tables": sorted(
                set(tables) ^ set(ref["tables"]) | {n for n in tables if tables[n] != ref["tables"].get(n)}
            ),
            "stderr_tail": err[-2000:],
        }
    else:
        shutil.rmtree(out, ignore_errors=True)
    status = "ok" if rec["ok"] else "FAILED " + ", ".join(c for c, v in checks.items() if not v)
    if source_changed:
        status += " (product source changed during the round: not a valid round)"
    elif checks_fresh is False:
        status += " (an uninterrupted run now differs from the reference too)"
    print(
        f"  round {k:2d}: killed at {killed_at:5.2f}s with {len(before)}/{ref['units']} units done, "
        f"resume {resume_s:5.1f}s: {status}",
        file=sys.stderr,
        flush=True,
    )
    return rec


def main() -> None:
    p = common.parser(__doc__)
    p.set_defaults(threads=1)
    p.add_argument("--kills", type=int, default=20, help="SIGKILL rounds that must land (>= 20 for the report)")
    p.add_argument("--checkpoints", type=int, default=6, help="tiny checkpoints in the tree")
    p.add_argument("--items", type=int, default=2, help="--max-items of the sweep")
    p.add_argument("--parallel", type=int, default=2, help="kill/resume rounds at a time")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", type=Path, default=None, help="work directory (default: a temp dir, removed)")
    args = p.parse_args()
    common.setup(1)
    start_load = common.loadavg()
    tmp = None
    if args.work:
        work = args.work
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="interp-crash-")
        work = Path(tmp.name)
    t_all = time.perf_counter()
    try:
        tree = work / "tree"
        names = build_tree(tree, args.checkpoints)
        print(f"tree: {len(names)} tiny checkpoints in {tree}", file=sys.stderr)
        ref_out = work / "reference"
        t_ref, t_units = reference_run(tree, ref_out, args.items)
        source = source_fingerprint()
        ref = {"tables": csv_bytes(ref_out), "units": len(unit_files(ref_out)), "source": source}
        bounds = [0.0] + t_units + [t_ref]  # phase n runs from bounds[n] to bounds[n + 1]
        print(
            f"reference: {t_ref:.1f}s, {ref['units']} units (at "
            + ", ".join(f"{t:.1f}" for t in t_units)
            + f" s), {len(ref['tables'])} results CSVs",
            file=sys.stderr,
        )
        rng = random.Random(args.seed)
        rounds, misses, k = [], 0, 0
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            while sum(r["killed"] for r in rounds) < args.kills and k < args.kills * 4:
                need = args.kills - sum(r["killed"] for r in rounds)
                batch = []
                for _ in range(need):
                    k += 1
                    phase = rng.randint(0, ref["units"])
                    delay = rng.uniform(0.0, bounds[phase + 1] - bounds[phase])
                    batch.append(pool.submit(one_round, k, phase, delay, tree, work, args.items, ref))
                for f in batch:
                    r = f.result()
                    rounds.append(r)
                    misses += not r["killed"]
    finally:
        if tmp is not None:
            tmp.cleanup()
    invalid = [r for r in rounds if r.get("source_changed")]
    if invalid or source_fingerprint() != ref["source"]:
        print(
            f"product source changed during the suite ({len(invalid)} rounds affected): results are not valid; "
            "rerun on a tree nobody is editing",
            file=sys.stderr,
        )
    killed = [r for r in rounds if r["killed"]]
    failed = [r for r in killed if not r["ok"]]
    check_names = list(killed[0]["checks"]) if killed else []
    passed = {c: sum(r["checks"][c] for r in killed) for c in check_names}
    done_hist: dict[int, int] = {}
    for r in killed:
        done_hist[r["units_done_at_kill"]] = done_hist.get(r["units_done_at_kill"], 0) + 1
    total = time.perf_counter() - t_all
    res = {
        "checkpoints": names,
        "items": args.items,
        "reference_s": t_ref,
        "reference_units": ref["units"],
        "reference_unit_times_s": t_units,
        "results_csvs": sorted(ref["tables"]),
        "kills": len(killed),
        "misses": misses,
        "failed": len(failed),
        "checks_passed": passed,
        "units_done_at_kill": {str(k): v for k, v in sorted(done_hist.items())},
        "kills_with_temporaries": sum(r["temporaries_at_kill"] > 0 for r in killed),
        "kills_during_analysis": sum(r["units_done_at_kill"] == ref["units"] for r in killed),
        "total_s": total,
        "seed": args.seed,
        "source_fingerprint": ref["source"],
        "rounds_with_source_change": len(invalid),
        "rounds": rounds,
    }
    rows = [[c.replace("_", " "), f"{passed[c]}/{len(killed)}"] for c in check_names]
    res["report"] = {
        "order": 7,
        "title": "7. Crash suite (SIGKILL during `interp sweep`, then resume)",
        "rerun": (
            f"python -m bench crash_suite --kills {args.kills} --checkpoints {args.checkpoints} "
            f"--items {args.items} --parallel {args.parallel} --seed {args.seed}"
        ),
        "what": (
            f"{len(names)} tiny checkpoints (2-layer Llama, d_model 32), pressure study, moral bank, "
            f"--max-items {args.items}; reference sweep {t_ref:.1f} s, {ref['units']} units, "
            f"{len(ref['tables'])} results CSVs. {len(killed)} SIGKILLs at random moments spread over the "
            f"phases of the sweep (a phase = n units on disk, n uniform in 0..{ref['units']}, then a uniform "
            f"delay within the phase; seed {args.seed}; {misses} moments outlived the sweep and were redrawn), "
            f"each followed by a resume with the same command. Total {total / 60:.1f} min."
        ),
        "tables": [{"columns": ["check", "passed"], "rows": rows}],
        "findings": [
            "units complete at the moment of the kill: "
            + ", ".join(f"{k} units: {v}x" for k, v in sorted(done_hist.items())),
            f"kills that left a temporary unit file behind: {res['kills_with_temporaries']} (removed by the resume); "
            f"kills after every unit was written (during merge/report): {res['kills_during_analysis']}.",
            (
                "all checks passed in every round."
                if not failed
                else f"{len(failed)} round(s) failed: "
                + "; ".join(
                    f"round {r['round']}: " + ", ".join(c for c, v in r["checks"].items() if not v) for r in failed
                )
            ),
        ]
        + (
            [
                f"INVALID RUN: the product source changed during {len(invalid)} round(s) (someone edited the tree); "
                "rerun on a stable tree."
            ]
            if invalid
            else []
        ),
    }
    common.write_results("crash_suite", res, threads=1, results_dir=args.results_dir, started_load=start_load)
    sys.exit(1 if failed or invalid or len(killed) < args.kills else 0)


if __name__ == "__main__":
    main()
