"""Integrity suite (issue 13): damaged unit bodies, edited tokenizers, repeated Dask worker
loss and the stale-lock race, each repeated and counted.

* corrupted body: one tiny pressure sweep; each round copies OUT, overwrites 4 bytes (XOR
  0xFF) at a random offset inside a random numeric dataset of the unit (tables and arrays;
  string bodies live in HDF5's global heap and are left out of the draw), then checks that
  reading the unit reports the dataset (checksum mismatch) and that the next sweep moves it
  aside, recomputes it and writes results byte-identical to the reference.
* changed tokenizer: each round cuts a random fraction (10-60 %) of tokenizer.json's merges
  in a copy of the checkpoint; checks that --dry-run calls the unit `todo` and that the
  sweep's tables equal a fresh OUT's tables for the edited checkpoint.
* Dask worker loss: a LocalCluster of 2 workers; the driver SIGKILLs the worker running a
  unit task K times (K = 1, 2, 3 over the rounds); checks the sweep ends (no hang), and
  with tables byte-identical to a local reference.
* lock race: 20 trials, 6 processes racing for a lock left by a dead process, the window
  between reading the holder and acting widened by a random 0-100 ms; counts trials with
  two holders at once, for this branch's lock and for the previous one (git 2836df6).

Issue 23 (`--part bytes`, bench/integrity_bytes.py; written to bench/results/integrity_bytes.json):
weight edits the sampled fingerprint cannot see, a --full-hash unit against a stale sampled one,
tensors not what the config says, a FIFO at every path read, and the remaining one-line cases.

Rerun:  python -m bench integrity_suite --rounds 10 --seed 0            (both parts)
        python -m bench integrity_suite --part bytes --rounds 6 --seed 0
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing as mp
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from bench import common

PREVIOUS_LOCK = "2836df6"


def _csvs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "results").glob("*.csv"))}


def _sweep(cks, out, **kw):
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    return run_sweep(
        list(cks),
        studies=["pressure"],
        banks=["moral"],
        out=out,
        cfg=kw.pop("cfg", RunConfig(max_items=3, threads=1)),
        progress=False,
        **kw,
    )


def corrupted_bodies(work: Path, ck: Path, rounds: int, rng: random.Random) -> dict:
    import h5py

    from cache.store import DamagedUnit, read_unit

    ref = work / "corrupt-ref"
    _sweep([ck], ref)
    (unit,) = sorted((ref / "cache").rglob("*.h5"))
    with h5py.File(unit, "r") as f:
        names = []
        f.visititems(
            lambda n, o: (
                names.append(n)
                if isinstance(o, h5py.Dataset)
                and o.dtype.kind in "fiub"
                and o.id.get_offset() is not None
                and o.id.get_storage_size() >= 4
                else None
            )
        )
    detected = recomputed = identical = 0
    hit = []
    for r in range(rounds):
        out = work / f"corrupt-{r}"
        shutil.copytree(ref, out)
        u = out / unit.relative_to(ref)
        name = rng.choice(names)
        with h5py.File(u, "r") as f:
            off, size = f[name].id.get_offset(), f[name].id.get_storage_size()
        pos = off + rng.randrange(0, size - 3)
        with open(u, "r+b") as fh:
            fh.seek(pos)
            old = fh.read(4)
            fh.seek(pos)
            fh.write(bytes(b ^ 0xFF for b in old))
        try:
            read_unit(u)
        except DamagedUnit as exc:
            detected += name in str(exc)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _sweep([ck], out)
        recomputed += any("checksum mismatch" in str(w.message) for w in caught) and read_unit(u) is not None
        identical += _csvs(out) == _csvs(ref)
        hit.append(name)
        shutil.rmtree(out)
    return {
        "rounds": rounds,
        "detected": detected,
        "recomputed": recomputed,
        "tables_identical": identical,
        "datasets_hit": sorted(set(hit)),
        "numeric_datasets": len(names),
    }


def changed_tokenizers(work: Path, ck: Path, rounds: int, rng: random.Random) -> dict:
    todo = identical = changed_numbers = 0
    for r in range(rounds):
        c = Path(shutil.copytree(ck, work / f"tok-{r}" / "ck"))
        out = work / f"tok-{r}" / "OUT"
        before = _sweep([c], out)["pressure_trials"]
        tok = json.loads((c / "tokenizer.json").read_text())
        merges = tok["model"]["merges"]
        frac = rng.uniform(0.1, 0.6)
        tok["model"]["merges"] = merges[: int(len(merges) * (1 - frac))]
        (c / "tokenizer.json").write_text(json.dumps(tok))
        todo += _sweep([c], out, dry_run=True)["plan"]["status"].tolist() == ["todo"]
        after = _sweep([c], out)["pressure_trials"]
        fresh = _sweep([c], work / f"tok-{r}" / "FRESH")["pressure_trials"]
        identical += after.equals(fresh)
        changed_numbers += not before["p_planted"].equals(after["p_planted"])
        shutil.rmtree(work / f"tok-{r}")
    return {"rounds": rounds, "dry_run_todo": todo, "tables_equal_fresh": identical, "numbers_changed": changed_numbers}


def worker_loss(work: Path, tree: Path, kills_per_round: list[int]) -> dict:
    import logging

    from distributed import Client, LocalCluster

    from interp.studies.base import RunConfig

    cfg = RunConfig(max_items=4, threads=1)
    ref = work / "dask-ref"
    _sweep([tree], ref, cfg=cfg)
    rows = []
    for r, k in enumerate(kills_per_round):
        out = work / f"dask-{r}"
        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,
                resources={"model_slot": 1},
            ) as cluster,
            Client(cluster) as client,
        ):
            errors: list[BaseException] = []

            def run():
                try:
                    _sweep([tree], out, cfg=cfg, executor="dask", scheduler=cluster.scheduler_address)
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)

            t = threading.Thread(target=run)
            t0 = time.perf_counter()
            t.start()
            done = 0
            while t.is_alive() and done < k:
                busy = [w for w, ts in client.processing().items() if any("interp-unit" in str(x) for x in ts)]
                if busy:
                    time.sleep(0.5)
                    for pid in client.run(os.getpid, workers=busy[:1]).values():
                        os.kill(pid, 9)
                    done += 1
                    time.sleep(1.0)
                time.sleep(0.1)
            t.join(timeout=600)
            rows.append(
                {
                    "kills_planned": k,
                    "kills_done": done,
                    "ended": not t.is_alive(),
                    "error": str(errors[0])[:200] if errors else None,
                    "tables_identical": (not errors) and _csvs(out) == _csvs(ref),
                    "seconds": time.perf_counter() - t0,
                }
            )
    return {"rounds": rows}


def _contender(lock_file: str, out: str, barrier, results) -> None:
    spec = importlib.util.spec_from_file_location("lock_under_test", lock_file)
    lock = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lock)
    from interp.core.errors import LockError

    real = lock._holder

    def slow(path):
        info = real(path)
        time.sleep(random.random() * 0.1)
        return info

    lock._holder = slow
    barrier.wait()
    try:
        with lock.sweep_lock(Path(out)):
            t0 = time.monotonic()
            time.sleep(0.3)
            results.put((t0, time.monotonic()))
    except LockError:
        results.put((None, None))


def lock_race(work: Path, lock_file: Path, trials: int = 20, contenders: int = 6) -> dict:
    ctx = mp.get_context("fork")
    overlapping = 0
    for t in range(trials):
        out = work / f"race-{lock_file.stem}-{t}"
        out.mkdir(parents=True)
        (out / ".interp-sweep.lock").write_text(
            json.dumps({"pid": 2**22 + 777, "host": os.uname().nodename, "since": 0})
        )
        barrier, q = ctx.Barrier(contenders), ctx.Queue()
        ps = [ctx.Process(target=_contender, args=(str(lock_file), str(out), barrier, q)) for _ in range(contenders)]
        for p in ps:
            p.start()
        got = [q.get(timeout=60) for _ in ps]
        for p in ps:
            p.join(timeout=60)
        held = sorted(g for g in got if g[0] is not None)
        overlapping += any(b[0] < a[1] for a, b in zip(held, held[1:]))
    return {"trials": trials, "contenders": contenders, "trials_with_two_holders": overlapping}


def bytes_part(args) -> None:
    from bench import integrity_bytes

    from interp.testing import build_tiny_model, build_tokenizer

    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="integrity-bytes-") as tmp:
        work = Path(tmp)
        os.environ["INTERP_FINGERPRINT_CACHE"] = str(work / "memo")
        tok = build_tokenizer()
        ck = build_tiny_model(work / "models" / "ck", "llama", tokenizer=tok)
        ck2 = build_tiny_model(work / "models" / "ck2", "llama", tokenizer=tok, seed=1)
        res = integrity_bytes.run(work, ck, ck2, args.rounds, args.seed, common.ROOT)
    total = time.perf_counter() - t_all
    res["total_s"] = total
    res["report"] = integrity_bytes.report_section(
        res, f"python -m bench integrity_suite --part bytes --rounds {args.rounds} --seed {args.seed}", total
    )
    common.write_results("integrity_bytes", res, threads=1, results_dir=args.results_dir)


def main() -> None:
    ap = common.parser(__doc__, repeats=1)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("all", "previous", "bytes"), default="all", help="bytes: issue 23 only")
    args = ap.parse_args()
    common.setup(1)
    from interp.testing import build_tiny_model, build_tokenizer

    if args.part in ("all", "bytes"):
        bytes_part(args)
    if args.part == "bytes":
        return
    rng = random.Random(args.seed)
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="integrity-") as tmp:
        work = Path(tmp)
        os.environ["INTERP_FINGERPRINT_CACHE"] = str(work / "memo")
        tok = build_tokenizer()
        ck = build_tiny_model(work / "models" / "ck", "llama", tokenizer=tok)
        tree = work / "tree"
        for i, arch in enumerate(("gpt2", "llama")):
            build_tiny_model(tree / f"step{i + 1}", arch, tokenizer=tok, seed=i)
        res = {"corrupted_body": corrupted_bodies(work, ck, args.rounds, rng)}
        print("corrupted body:", res["corrupted_body"], file=sys.stderr)
        res["changed_tokenizer"] = changed_tokenizers(work, ck, max(3, args.rounds // 2), rng)
        print("changed tokenizer:", res["changed_tokenizer"], file=sys.stderr)
        res["worker_loss"] = worker_loss(work, tree, [1, 2, 3])
        print("worker loss:", res["worker_loss"], file=sys.stderr)
        prev = work / "previous_lock.py"
        prev.write_text(
            subprocess.run(
                ["git", "show", f"{PREVIOUS_LOCK}:sweeps/lock.py"],
                cwd=common.ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        res["lock_race"] = {
            "this": lock_race(work, common.ROOT / "sweeps" / "lock.py"),
            "previous": lock_race(work, prev),
        }
        print("lock race:", res["lock_race"], file=sys.stderr)
    total = time.perf_counter() - t_all
    cb, ct, wl, lr = res["corrupted_body"], res["changed_tokenizer"], res["worker_loss"]["rounds"], res["lock_race"]
    res["total_s"] = total
    res["report"] = {
        "order": 7.5,
        "title": "7b. Integrity suite (damaged bodies, edited tokenizers, worker loss, lock race)",
        "rerun": f"python -m bench integrity_suite --rounds {args.rounds} --seed {args.seed}",
        "what": (
            f"Tiny Llama checkpoint, pressure study, moral bank, --max-items 3 (Dask: two checkpoints, "
            f"--max-items 4, LocalCluster of 2 workers). Seed {args.seed}; total {total / 60:.1f} min on the "
            "shared 2-core machine."
        ),
        "tables": [
            {
                "columns": ["fault", "rounds", "result"],
                "rows": [
                    [
                        "4 bytes flipped in a numeric dataset of a unit",
                        cb["rounds"],
                        f"reported (dataset named) {cb['detected']}/{cb['rounds']}; recomputed by the next sweep "
                        f"{cb['recomputed']}/{cb['rounds']}; tables byte-identical {cb['tables_identical']}/{cb['rounds']}",
                    ],
                    [
                        "10-60 % of tokenizer merges cut",
                        ct["rounds"],
                        f"--dry-run says todo {ct['dry_run_todo']}/{ct['rounds']}; tables equal a fresh OUT "
                        f"{ct['tables_equal_fresh']}/{ct['rounds']}; numbers changed {ct['numbers_changed']}/{ct['rounds']}",
                    ],
                    *[
                        [
                            f"Dask worker SIGKILLed {w['kills_done']}x mid-unit",
                            1,
                            f"sweep ended {'yes' if w['ended'] else 'NO (hang)'} in {w['seconds']:.0f} s; tables byte-identical "
                            f"{'yes' if w['tables_identical'] else 'no'}"
                            + (f"; error: {w['error']}" if w["error"] else ""),
                        ]
                        for w in wl
                    ],
                    [
                        "stale lock, 6 contenders (this branch)",
                        lr["this"]["trials"],
                        f"two holders at once in {lr['this']['trials_with_two_holders']}/{lr['this']['trials']} trials",
                    ],
                    [
                        f"stale lock, 6 contenders (previous lock, git {PREVIOUS_LOCK})",
                        lr["previous"]["trials"],
                        f"two holders at once in {lr['previous']['trials_with_two_holders']}/{lr['previous']['trials']} trials",
                    ],
                ],
            }
        ],
        "findings": [
            f"numeric datasets hit by the corruption draw: {', '.join(cb['datasets_hit'])} "
            f"(of {cb['numeric_datasets']})"
        ],
    }
    common.write_results("integrity_suite", res, threads=1)


if __name__ == "__main__":
    main()
