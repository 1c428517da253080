"""Integrity suite, issue-23 part (run by `python -m bench integrity_suite --part bytes`):
the unit's identity is the bytes that ran, no path hangs, one line for the rest.

* weight edits the sampled fingerprint cannot see (each round on a fresh copy of a tiny Llama;
  the sampled fingerprint is checked unchanged, else the round is not counted):
  - one float32 of a random tensor set to +-500 at a random offset outside every sampled
    block, mtime restored (`touch -r`);
  - a rank-4 update added in place to q_proj and v_proj of two random layers (a merged LoRA),
    on rows outside the sampled blocks.
  An edit is caught when the rerun into the same OUT says it recomputes the unit and its tables
  equal a fresh OUT's. Before each edit the untouched checkpoint is rerun (negative control: the
  unit must be reused, its file unchanged).
* a --full-hash unit against a stale sampled one (sampled sweep, edit, --full-hash sweep,
  sampled sweep): the stale unit recomputed and the --full-hash unit still current.
* tensors not what the config says (a norm stored as I32, NaN in a norm, Inf in the embedding):
  `interp sweep` must exit 2 with one line naming the tensor.
* a FIFO at every path the toolkit reads (current.json, a unit file, the lock, --config,
  --template, --cluster-config, a results table, the fingerprint memo), and the one-line cases
  (--max-items -3 / 0, predict with only the target or too few items, a CSV row short of a
  field, read-only OUT for probe and report): each command in a subprocess with a timeout;
  counted: hangs (timeouts), tracebacks, wrong exit codes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HANG_S = 120


def _sweep(cks, out, **kw):
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    return run_sweep(
        list(cks),
        studies=["pressure"],
        banks=["moral"],
        out=out,
        cfg=kw.pop("cfg", RunConfig(max_items=3, threads=1, n_boot=20)),
        progress=False,
        report=False,
        **kw,
    )


def _recorded(ck, out, **kw) -> tuple[dict, list[str]]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        tables = _sweep([ck], out, **kw)
    return tables, [str(w.message) for w in got if "recomputing" in str(w.message)]


def _same(a: dict, b: dict) -> bool:
    import pandas as pd

    if set(a) != set(b):
        return False
    try:
        for k in a:
            pd.testing.assert_frame_equal(a[k].reset_index(drop=True), b[k].reset_index(drop=True))
    except AssertionError:
        return False
    return True


def _units(out: Path) -> dict:
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "cache").rglob("*.h5")}


def _layout(path: Path) -> tuple[int, dict]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return 8 + n, json.loads(f.read(n))


def _sampled(path: Path) -> list[tuple[int, int]]:
    from interp.model.fingerprint import SAMPLE_BYTES, sample_offsets

    start, _ = _layout(path)
    return [(o, o + SAMPLE_BYTES) for o in sample_offsets(start, path.stat().st_size)]


def _free(blocks, lo: int, hi: int) -> bool:
    return all(hi <= a or lo >= b for a, b in blocks)


def _write(path: Path, offset: int, data: bytes) -> None:
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def edit_float(ck: Path, rng: random.Random) -> str:
    f = ck / "model.safetensors"
    start, header = _layout(f)
    blocks = _sampled(f)
    names = sorted(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32" and "norm" not in k)
    while True:
        name = rng.choice(names)
        b, e = header[name]["data_offsets"]
        i = rng.randrange((e - b) // 4)
        off = start + b + 4 * i
        if _free(blocks, off, off + 4):
            _write(f, off, struct.pack("<f", rng.choice((500.0, -500.0))))
            return f"{name}[{i}]"


def edit_rank4(ck: Path, rng: random.Random, n_layers: int) -> str:
    f = ck / "model.safetensors"
    start, header = _layout(f)
    blocks = _sampled(f)
    nrng = np.random.default_rng(rng.randrange(1 << 30))
    layers = sorted(rng.sample(range(n_layers), 2))
    for layer in layers:
        for proj in ("q_proj", "v_proj"):
            meta = header[f"model.layers.{layer}.self_attn.{proj}.weight"]
            rows, cols = meta["shape"]
            off = start + meta["data_offsets"][0]
            free = [r for r in range(rows) if _free(blocks, off + 4 * r * cols, off + 4 * (r + 1) * cols)]
            with open(f, "rb") as fh:
                fh.seek(off)
                w = np.frombuffer(fh.read(4 * rows * cols), dtype="<f4").reshape(rows, cols).copy()
            u = np.zeros((rows, 4), dtype=np.float32)
            u[free] = nrng.normal(size=(len(free), 4)).astype(np.float32)
            w += u @ nrng.normal(size=(4, cols)).astype(np.float32) * 0.5
            for r in free:
                _write(f, off + 4 * r * cols, w[r].tobytes())
    return f"q/v of layers {layers}"


def weight_edits(work: Path, ck: Path, rounds: int, rng: random.Random) -> dict:
    from interp.model.checkpoint import fingerprint, inspect_checkpoint

    n_layers = inspect_checkpoint(ck).n_layers
    res = {}
    for kind in ("float_500", "rank4_qv"):
        r = {"tried": 0, "caught": 0, "not_counted": 0, "false_recomputes": 0, "controls": 0, "edits": []}
        for i in range(rounds):
            copy = Path(shutil.copytree(ck, work / f"{kind}-{i}" / "ck"))
            out = work / f"{kind}-{i}" / "OUT"
            before = _sweep([copy], out)
            units = _units(out)
            _, lines = _recorded(copy, out)  # negative control: untouched -> reused
            r["controls"] += 1
            r["false_recomputes"] += bool(lines) or _units(out) != units
            fp0 = fingerprint(inspect_checkpoint(copy))
            what = edit_float(copy, rng) if kind == "float_500" else edit_rank4(copy, rng, n_layers)
            if fingerprint(inspect_checkpoint(copy)) != fp0:
                r["not_counted"] += 1  # the edit reached a sampled block: not what this measures
                continue
            r["tried"] += 1
            rerun, lines = _recorded(copy, out)
            fresh = _sweep([copy], work / f"{kind}-{i}" / "FRESH")
            caught = len(lines) == 1 and _same(rerun, fresh)
            r["caught"] += caught
            r["edits"].append({"edit": what, "caught": caught, "numbers_changed": not _same(before, rerun)})
            shutil.rmtree(work / f"{kind}-{i}")
        res[kind] = r
    return res


def full_hash_displacement(work: Path, ck: Path, rounds: int, rng: random.Random) -> dict:
    from interp.studies.base import RunConfig

    kept = recomputed = 0
    for i in range(rounds):
        copy = Path(shutil.copytree(ck, work / f"fh-{i}" / "ck"))
        out = work / f"fh-{i}" / "OUT"
        _sweep([copy], out)
        edit_float(copy, rng)
        _sweep([copy], out, cfg=RunConfig(max_items=3, threads=1, n_boot=20, full_hash=True))
        manifest = json.loads((out / "cache" / "current.json").read_text())
        _, lines = _recorded(copy, out)
        recomputed += len(lines) == 1
        kept += json.loads((out / "cache" / "current.json").read_text()) == manifest
        shutil.rmtree(work / f"fh-{i}")
    return {"rounds": rounds, "stale_sampled_recomputed": recomputed, "full_hash_unit_kept_current": kept}


# ---------------------------------------------------------------- command-line cases (subprocess)


def _run(argv: list, env: dict, cwd: Path) -> dict:
    t = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "interp.cli", *map(str, argv)],
            capture_output=True,
            text=True,
            timeout=HANG_S,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"hang": True, "rc": None, "traceback": False, "error_lines": 0, "seconds": HANG_S}
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("interp: error:")]
    return {
        "hang": False,
        "rc": p.returncode,
        "traceback": "Traceback" in p.stderr,
        "error_lines": len(errors),
        "error": errors[-1][:300] if errors else "",
        "seconds": round(time.perf_counter() - t, 1),
    }


def _header_edit(ck: Path, name: str, field: str, value) -> None:
    f = ck / "model.safetensors"
    with open(f, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    header[name][field] = value
    raw = json.dumps(header, separators=(",", ":")).encode()
    with open(f, "r+b") as fh:
        fh.seek(8)
        fh.write(raw.ljust(n, b" "))


def _poison(ck: Path, name: str, value: float) -> None:
    f = ck / "model.safetensors"
    start, header = _layout(f)
    with open(f, "r+b") as fh:
        fh.seek(start + header[name]["data_offsets"][0] + 12)
        fh.write(struct.pack("<f", value))


def _mount_ro(src: Path, where: Path) -> Path | None:
    where.mkdir(parents=True, exist_ok=True)
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(where)], capture_output=True).returncode
    ):
        return None
    out = Path(shutil.copytree(src, where / "OUT"))
    if subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        return None
    return out


def command_cases(work: Path, ck: Path, ck2: Path, root: Path) -> dict:
    import hashlib

    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    base = work / "cmd-base"
    _sweep([ck], base)
    two = work / "cmd-two"
    _sweep([ck, ck2], two)
    sweep = ["--study", "pressure", "--bank", "moral", "--max-items", "3", "--threads", "1", "--quiet"]
    probe = ["--study", "pressure", "--target", "flipped", "--shuffles", "2", "--folds", "2"]
    cases: dict[str, dict] = {}

    def fresh(name: str) -> Path:
        return Path(shutil.copytree(base, work / name / "OUT", symlinks=True))

    def fifo(path: Path) -> Path:
        path.unlink(missing_ok=True)
        os.mkfifo(path)
        return path

    def unit(out: Path) -> Path:
        return next((out / "cache").rglob("*.h5"))

    fifo_cases = {
        "current.json -> probe": (lambda o: o / "cache" / "current.json", lambda o: ["probe", o, *probe]),
        "current.json -> sweep": (lambda o: o / "cache" / "current.json", lambda o: ["sweep", ck, *sweep, "--out", o]),
        "unit .h5 -> probe": (unit, lambda o: ["probe", o, *probe]),
        "unit .h5 -> sweep": (unit, lambda o: ["sweep", ck, *sweep, "--out", o]),
        "unit .h5 -> predict": (unit, lambda o: ["predict", o, "--target", ck.name]),
        "lock file -> sweep": (lambda o: o / ".interp-sweep.lock", lambda o: ["sweep", ck, *sweep, "--out", o]),
        "--config -> sweep": (
            lambda o: o.parent / "run.toml",
            lambda o: ["sweep", ck, *sweep, "--out", o, "--config", o.parent / "run.toml"],
        ),
        "--template -> sweep": (
            lambda o: o.parent / "t.json",
            lambda o: ["sweep", ck, *sweep, "--out", o, "--template", o.parent / "t.json"],
        ),
        "--cluster-config -> sweep": (
            lambda o: o.parent / "c.toml",
            lambda o: ["sweep", ck, *sweep, "--out", o, "--executor", "slurm", "--cluster-config", o.parent / "c.toml"],
        ),
        "results CSV -> report": (lambda o: o / "results" / "pressure_summary.csv", lambda o: ["report", o]),
    }
    for i, (name, (where, argv)) in enumerate(fifo_cases.items()):
        out = fresh(f"fifo-{i}")
        fifo(where(out))
        cases[f"FIFO: {name}"] = {**_run(argv(out), env, work), "want_rc": 2}
    memo_dir = work / "memo-fifo"
    memo_dir.mkdir()
    fifo(memo_dir / (hashlib.sha256(str(ck.resolve()).encode()).hexdigest()[:32] + ".json"))
    out = fresh("fifo-memo")
    cases["FIFO: fingerprint memo -> sweep (ignored)"] = {
        **_run(["sweep", ck, *sweep, "--out", out], {**env, "INTERP_FINGERPRINT_CACHE": str(memo_dir)}, work),
        "want_rc": 0,
    }
    for n in ("-3", "0"):
        out = fresh(f"max-{n}")
        cases[f"--max-items {n}"] = {
            **_run(["sweep", ck, *sweep[:4], "--max-items", n, "--out", out], env, work),
            "want_rc": 2,
        }
    out = fresh("predict-target")
    cases["predict, only the target cached"] = {**_run(["predict", out, "--target", ck.name], env, work), "want_rc": 2}
    cases["predict, only the target cached"]["csv_left"] = (out / "results" / "predictive.csv").exists()
    out2 = Path(shutil.copytree(two, work / "predict-few" / "OUT"))
    cases["predict, 3 items < 5 folds"] = {**_run(["predict", out2, "--target", ck2.name], env, work), "want_rc": 2}
    bank = work / "short.csv"
    bank.write_text("item_id,text,gold\nm1,I returned the wallet.,acceptable\nm2,I kept the wallet\n")
    out = fresh("short-csv")
    cases["CSV bank row short of a field"] = {
        **_run(["sweep", ck, "--study", "pressure", "--bank", bank, "--out", out, "--quiet"], env, work),
        "want_rc": 2,
    }
    for tensor_case, edit in (
        ("model.norm stored as I32", lambda c: _header_edit(c, "model.norm.weight", "dtype", "I32")),
        ("NaN in model.norm", lambda c: _poison(c, "model.norm.weight", float("nan"))),
        ("Inf in the embedding", lambda c: _poison(c, "model.embed_tokens.weight", float("inf"))),
    ):
        bad = Path(shutil.copytree(ck, work / f"tensor-{len(cases)}" / "ck"))
        edit(bad)
        out = fresh(f"tensor-out-{len(cases)}")
        cases[f"tensor: {tensor_case}"] = {**_run(["sweep", bad, *sweep, "--out", out], env, work), "want_rc": 2}
    for cmd, argv in (("probe", ["probe", "{o}", *probe]), ("report", ["report", "{o}"])):
        ro = _mount_ro(base, work / f"ro-{cmd}")
        if ro is None:
            cases[f"read-only OUT -> {cmd}"] = {"skipped": "cannot mount a read-only tmpfs here"}
            continue
        try:
            cases[f"read-only OUT -> {cmd}"] = {
                **_run([str(a).format(o=ro) for a in argv], env, work),
                "want_rc": 2,
            }
        finally:
            subprocess.run(["umount", "-l", str(work / f"ro-{cmd}")], capture_output=True)
    for c in cases.values():
        if "want_rc" in c:
            c["ok"] = (
                not c["hang"]
                and not c["traceback"]
                and c["rc"] == c["want_rc"]
                and (c["want_rc"] == 0 or c["error_lines"] == 1)
                and not c.get("csv_left", False)
            )
    return cases


def run(work: Path, ck: Path, ck2: Path, rounds: int, seed: int, root: Path) -> dict:
    from analyses.bootstrap import UndefinedCIWarning

    warnings.filterwarnings("ignore", category=UndefinedCIWarning)  # 3 items: NaN intervals, said once here
    rng = random.Random(seed)
    res = {"weight_edits": weight_edits(work, ck, rounds, rng)}
    print("weight edits:", {k: {kk: v[kk] for kk in ("tried", "caught")} for k, v in res["weight_edits"].items()})
    res["full_hash"] = full_hash_displacement(work, ck, max(2, rounds // 3), rng)
    print("full hash:", res["full_hash"], file=sys.stderr)
    res["commands"] = command_cases(work, ck, ck2, root)
    ran = [c for c in res["commands"].values() if "want_rc" in c]
    we = res["weight_edits"].values()
    res["totals"] = {
        "edits_tried": sum(r["tried"] for r in we) + res["full_hash"]["rounds"],
        "edits_caught": sum(r["caught"] for r in we) + res["full_hash"]["stale_sampled_recomputed"],
        "false_recomputes": sum(r["false_recomputes"] for r in we),
        "controls": sum(r["controls"] for r in we),
        "command_cases": len(ran),
        "command_cases_ok": sum(c["ok"] for c in ran),
        "hangs": sum(c["hang"] for c in ran),
        "tracebacks": sum(c["traceback"] for c in ran),
        "skipped": [k for k, c in res["commands"].items() if "skipped" in c],
    }
    print("totals:", res["totals"], file=sys.stderr)
    return res


def report_section(res: dict, rerun: str, total_s: float) -> dict:
    t, we, fh = res["totals"], res["weight_edits"], res["full_hash"]
    rows = [
        [
            "one float32 set to +-500 outside the sampled blocks, mtime restored",
            we["float_500"]["tried"],
            f"recomputed, tables equal a fresh OUT: {we['float_500']['caught']}/{we['float_500']['tried']}",
        ],
        [
            "rank-4 update to q_proj/v_proj of two layers, in place, outside the sampled blocks",
            we["rank4_qv"]["tried"],
            f"recomputed, tables equal a fresh OUT: {we['rank4_qv']['caught']}/{we['rank4_qv']['tried']}",
        ],
        [
            "--full-hash unit vs the stale sampled unit of the same slot",
            fh["rounds"],
            f"stale unit recomputed {fh['stale_sampled_recomputed']}/{fh['rounds']}; --full-hash unit still current "
            f"{fh['full_hash_unit_kept_current']}/{fh['rounds']}",
        ],
        [
            "untouched checkpoint rerun (negative control)",
            t["controls"],
            f"recomputed anyway: {t['false_recomputes']}/{t['controls']}",
        ],
    ]
    for name, c in res["commands"].items():
        if "skipped" in c:
            rows.append([name, 0, f"skipped: {c['skipped']}"])
            continue
        got = "HANG" if c["hang"] else f"exit {c['rc']}" + (", traceback" if c["traceback"] else "")
        rows.append(
            [name, 1, f"{got} in {c['seconds']:.0f} s (want exit {c['want_rc']}){'' if c['ok'] else ' FAILED'}"]
        )
    return {
        "order": 7.55,
        "title": "7d. Integrity suite, issue 23 (bytes that ran, no hangs, one-line errors)",
        "rerun": rerun,
        "what": (
            "Tiny Llama checkpoint (4 layers, d 64), pressure study, moral bank, --max-items 3. Weight edits are placed "
            "outside the 32 sampled 8 KiB blocks of the sampled fingerprint (checked unchanged: otherwise the round is "
            "not counted). Commands run in subprocesses with a "
            f"{HANG_S} s timeout (a hang is the timeout firing). Total {total_s / 60:.1f} min on the shared machine."
        ),
        "tables": [{"columns": ["case", "rounds", "result"], "rows": rows}],
        "findings": [
            f"Edits caught / tried: {t['edits_caught']}/{t['edits_tried']}; untouched reruns recomputed: "
            f"{t['false_recomputes']}/{t['controls']}.",
            f"Command cases with the expected exit code and one error line: {t['command_cases_ok']}/{t['command_cases']}; "
            f"hangs: {t['hangs']}; tracebacks: {t['tracebacks']}"
            + (f"; skipped: {', '.join(t['skipped'])}" if t["skipped"] else "")
            + ".",
        ],
    }
