"""bench/report.py: the page agrees with itself (issue 24, item 4).

Planted results files: a stale engine-dependent one is dropped (and listed with its rerun
command), an engine-free one of the same date stays, rows a newer file measures again are left
out, every section is dated, and a file's own `report.summary` lines (the hook other scripts
use, e.g. hash cost) appear in the summary once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _meta(date: str) -> dict:
    return {"date": date, "command": "python bench/x.py", "git": "abc", "loadavg_start": [0.1, 0.1, 0.1], "threads": 2}


def _section(title: str, rows: list[list[str]], findings: list[str], **extra) -> dict:
    return {
        "order": 1,
        "title": title,
        "rerun": f"python bench/{title.split()[0]}.py",
        "what": "planted",
        "tables": [{"columns": ["workload", "method", "time"], "rows": rows}],
        "findings": findings,
        **extra,
    }


def test_stale_dropped_superseded_left_out_hook_used(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    files = {
        "runner_vs_naive": {
            "meta": _meta("2026-11-29T17:29:22"),
            "report": _section("old_naive", [["a", "b", "1 s"]], []),
        },
        "gpu_check": {
            "meta": _meta("2026-11-29T17:41:24"),
            "report": _section("gpu_engine_free", [["p", "q", "2 s"]], []),
        },
        "tree": {
            "meta": _meta("2026-11-30T14:40:05"),
            "report": _section(
                "tree_section",
                [["pressure, 4 items", "lm-eval", "EXTRAPOLATED 247 s"], ["cloze, whole bank", "lm-eval", "50 s"]],
                ["pressure (124 prompts): extrapolated 5.5x", "cloze: runner 2.17x"],
            ),
        },
        "bank": {
            "meta": _meta("2026-12-01T17:30:00"),
            "report": _section("bank_section", [["pressure, 40 items", "runner", "45 s"]], []),
        },
        "hash_cost": {
            "meta": _meta("2026-12-01T17:00:00"),
            "report": _section(
                "hash_section", [["x", "y", "3 s"]], [], summary=["Hash while loading: PLANTED-FIGURE."]
            ),
        },
    }
    for name, d in files.items():
        (res / f"{name}.json").write_text(json.dumps({"name": name, **d}))
    bank = {"speedup": {}, "timing": {}, "precision": {}, "prompts": 1240, "items": 40, "model": "m"}
    (res / "bank.json").write_text(json.dumps({"name": "bank", **files["bank"], **bank}))
    out = tmp_path / "B.md"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "report.py"),
            "--results-dir",
            str(res),
            "--out",
            str(out),
            "--machine-note",
            "Quiet: planted.",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    page = out.read_text()
    body, dropped = page.split("## Dropped sections")
    assert "old_naive" not in body and "old_naive" in dropped and "python bench/old_naive.py" in dropped
    assert "## gpu_engine_free" in body  # engine-free: kept whatever its date
    assert "EXTRAPOLATED 247 s" not in page and "extrapolated 5.5x" not in page  # superseded by bank
    assert "cloze, whole bank" in page and "cloze: runner 2.17x" in page
    assert page.count("PLANTED-FIGURE") == 1 and "Quiet: planted." in page
    for title in ("tree_section", "bank_section", "hash_section", "gpu_engine_free"):
        section = body.split(f"## {title}")[1]
        assert section.lstrip().startswith("Measured 20"), title  # every section dated
