"""bench/report.py and the benchmark driver (issue 24 item 4, issue 46 items 5-6).

Planted results files: a stale engine-dependent one is dropped (and listed with its rerun
command), an engine-free one of the same date stays, rows a newer file measures again are left
out, every section opens with its small table (date, machine, load, commit), the summary table
comes first, and a file's own `report.summary` lines (the hook other benchmarks use) appear in
the summary once. BENCHMARKS.md is what the report makes of bench/results/ (a changed figure in
a results file changes the page: the control). The catalog names a module for every benchmark,
a benchmark for every results file and rerun command, and finds each planted mismatch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _meta(date: str) -> dict:
    return {
        "date": date,
        "command": "python -m bench x",
        "git": "abc1234",
        "loadavg_start": [0.37, 0.1, 0.1],
        "threads": 2,
        "cpu": "PLANTED-CPU",
    }


def _section(title: str, rows: list[list[str]], findings: list[str], **extra) -> dict:
    return {
        "order": 1,
        "title": title,
        "rerun": f"python -m bench {title.split()[0]}",
        "what": "planted",
        "tables": [{"columns": ["workload", "method", "time"], "rows": rows}],
        "findings": findings,
        **extra,
    }


def test_stale_dropped_superseded_left_out_hook_used(tmp_path):
    from bench import report

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
    out, docs = tmp_path / "B.md", tmp_path / "commands.md"
    docs.write_text(f"before\n{report.BLOCK}\nold table\n{report.BLOCK_END}\nafter\n")
    subprocess.run(
        [sys.executable, "-m", "bench", "report", "--results-dir", str(res), "--out", str(out), "--docs", str(docs)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    page = out.read_text()
    body, dropped = page.split("## Dropped sections")
    assert "old_naive" not in body and "old_naive" in dropped and "python -m bench old_naive" in dropped
    assert "## gpu_engine_free" in body  # engine-free: kept whatever its date
    assert "EXTRAPOLATED 247 s" not in page and "extrapolated 5.5x" not in page  # superseded by bank
    assert "cloze, whole bank" in page and "cloze: runner 2.17x" in page
    assert page.count("PLANTED-FIGURE") == 1
    assert page.index("## Summary") < page.index("## ") + 1 and "| comparison | workload | result |" in page
    for title in ("tree_section", "bank_section", "hash_section", "gpu_engine_free"):
        section = body.split(f"## {title}")[1]
        meta = section.lstrip().splitlines()[2]  # the row under the small table's header
        assert meta.startswith("| 20") and "PLANTED-CPU | 2 | 0.37 | abc1234 |" in meta, title


def _results_and_notes():
    from bench import common, report

    notes = common.BENCH / "NOTES.md"
    return report.read_results(common.RESULTS), notes.read_text() if notes.exists() else None


def test_benchmarks_md_is_generated_from_the_results():
    from bench import report

    res, notes = _results_and_notes()
    page = report.render(res, notes=notes)
    assert page == (ROOT / "BENCHMARKS.md").read_text(), "BENCHMARKS.md differs: run `python -m bench report`"
    # control: a figure changed in one results file shows on the page
    bank = json.loads(json.dumps(res["bank"]))
    bank["speedup"]["float32 vs naive"]["median"] = 99.25
    assert report.render({**res, "bank": bank}, notes=notes) != page
    assert "**99.2x**" in report.render({**res, "bank": bank}, notes=notes)


def test_catalog_holds_together(tmp_path):
    from bench import catalog, common

    assert catalog.check(common.RESULTS, common.BENCH) == []
    # planted: a module outside the catalog, a results file nobody writes, reruns that name no
    # benchmark or the wrong one, and a catalog entry without its module
    bench_dir, res = tmp_path / "bench", tmp_path / "results"
    bench_dir.mkdir(), res.mkdir()
    for b in catalog.BENCHMARKS[1:]:
        (bench_dir / f"{b.name}.py").write_text("")
    (bench_dir / "stray_timing.py").write_text("")
    first, second = catalog.BENCHMARKS[0], catalog.BENCHMARKS[1]
    files = {
        "orphan": "python -m bench " + second.name,
        second.results[0]: "python bench/old_script.py --items 2",
        catalog.BENCHMARKS[2].results[0]: "python -m bench no_such_benchmark",
        catalog.BENCHMARKS[3].results[0]: "python -m bench " + second.name,
    }
    for name, rerun in files.items():
        (res / f"{name}.json").write_text(json.dumps({"name": name, "report": {"rerun": rerun}}))
    problems = catalog.check(res, bench_dir)
    assert len(problems) == 6, problems
    assert any(p.startswith(f"{first.name}: no bench/") for p in problems)
    assert any("stray_timing.py: not in the catalog" in p for p in problems)
    assert any("orphan.json: no benchmark writes" in p for p in problems)
    assert any("does not run `python -m bench NAME`" in p for p in problems)
    assert any("'no_such_benchmark', not a benchmark" in p for p in problems)
    assert any(f"rerun runs {second.name!r}, but" in p for p in problems)


def test_driver_lists_and_runs_by_name(capsys, monkeypatch):
    import bench.__main__ as driver
    from bench import catalog

    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the driver sets it for the benchmark it runs

    assert driver.main(["--list"]) == 0
    listed = [ln.split()[0] for ln in capsys.readouterr().out.splitlines()]
    assert listed == [b.name for b in catalog.BENCHMARKS]
    for b in catalog.BENCHMARKS:  # each one's own options parse (--help), under its driver name
        with pytest.raises(SystemExit) as e:
            driver.main([b.name, "--help"])
        assert e.value.code == 0, b.name
        assert f"usage: python -m bench {b.name}" in capsys.readouterr().out, b.name
    with pytest.raises(SystemExit, match="no benchmark 'nope'"):
        driver.main(["nope"])


def _precision_result(workload: str, speed: list[float], max_dp: float, flips: int) -> dict:
    runs = sorted(speed)
    return {
        "name": f"precision_{workload}",
        "meta": {**_meta("2026-12-04T18:00:00"), "cpu": "PLANTED-CPU"},
        "what": f"planted {workload}",
        "loadavg_rounds": [[2.5, 1, 1], [4.0, 1, 1], [3.0, 1, 1]],
        "timing": {"float32": {"n": len(speed)}},
        "speedup": {"mixed-bf16": {"median": runs[len(runs) // 2], "min": runs[0], "max": runs[-1]}},
        "cpu_speedup": {"mixed-bf16": {"median": runs[len(runs) // 2] / 2, "min": runs[0] / 2, "max": runs[-1] / 2}},
        "precision": {"mixed-bf16": {"max_abs_dp": max_dp, "argmax_flips": flips, "prompts": 640}},
        "report": {"rerun": f"python -m bench precision_speed_and_error --workload {workload}"},
    }


def test_precision_table_in_the_docs(tmp_path):
    from bench import report

    res = {
        "precision_long": _precision_result("long", [1.4, 1.6, 1.5], 0.054, 1),
        "precision_moral": _precision_result("moral", [2.1, 1.9, 2.0], 0.019, 0),
    }
    table = report.precision_table(res)
    assert table[0] == "| `--dtype` | moral bank | long chat contexts |"  # workloads in their fixed order
    assert (
        "| `mixed-bf16` | **2.00x** (1.90-2.10), CPU 1.00x (0.95-1.05); max \\|ΔP\\| 0.019, 0 of 640 flipped | "
        "**1.50x** (1.40-1.60), CPU 0.75x (0.70-0.80)" in table[2]
    )
    assert any(n.startswith("long chat contexts: planted long; 3 rounds, 1-minute load 2.5-4.0") for n in table)
    docs = tmp_path / "commands.md"
    docs.write_text(f"intro\n{report.BLOCK}\nstale\n{report.BLOCK_END}\nrest\n")
    assert report.update_docs(docs, table)
    text = docs.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{report.BLOCK_END}\nrest\n") and "stale" not in text
    assert "\n".join(table) in text
    plain = tmp_path / "other.md"  # control: a page without the block is left alone
    plain.write_text("no block here\n")
    assert not report.update_docs(plain, table) and plain.read_text() == "no block here\n"


def test_docs_precision_table_is_generated_from_the_results():
    from bench import report

    res, _ = _results_and_notes()
    text = report.DOCS.read_text()
    block = text.split(report.BLOCK)[1].split(report.BLOCK_END)[0]
    assert block.strip("\n") == "\n".join(report.precision_table(res)), "run `python -m bench report`"


def test_time_breakdown_counts_each_sample_once_in_its_first_category():
    from bench.precision_time_breakdown import categorize

    raw = "\n".join(
        [
            # planted: 6 samples in attention, 3 in a Linear, 1 in the tie guard's own Linear (guard first)
            "<module> (x.py:1);score_options (s.py:2);LlamaAttention.forward (m.py:3);_packed_attention (p.py:4) 6",
            "<module> (x.py:1);score_options (s.py:2);LlamaMLP.forward (m.py:5);Linear.forward (l.py:6) 3",
            "<module> (x.py:1);score_options (s.py:2);guard_ties (g.py:7);score_options (s.py:2);"
            "Linear.forward (l.py:6) 1",
            # control: samples outside score_options (loading) count nowhere
            "<module> (x.py:1);load (i.py:9);Linear.forward (l.py:6) 90",
        ]
    )
    shares = categorize(raw)
    assert shares["attention"] == 0.6 and shares["matmuls"] == 0.3 and shares["tie guard"] == 0.1
    assert shares["other"] == 0 and abs(sum(shares.values()) - 1) < 1e-12


def _field_sets(acc: float, argmax: float) -> dict:
    timing = {k: {"median": 1.0, "min": 1.0, "max": 1.0, "n": 5, "runs": [1.0] * 5} for k in ("lm_eval", "interp")}
    return {
        "name": "field_sets",
        "meta": _meta("2026-12-04T21:00:00"),
        "model": "m",
        "items": 20,
        "requests": 40,
        "timing": timing,
        "speedup_interp_vs_lm_eval": {"median": 3.21, "min": 2.87, "low": 1.65, "high": 4.32},
        "agreement": {"max_abs_delta_loglik": 2.5e-5, "acc_lm_eval": acc, "argmax_rate_interp": argmax},
    }


def _field_sets_row(acc: float, argmax: float) -> list[str]:
    from bench import report

    (row,) = [r for r in report._summary({"field_sets": _field_sets(acc, argmax)}) if "nlp_survey" in r[0]]
    return row


def test_field_sets_summary_reads_the_file():
    row = _field_sets_row(0.45, 0.45)
    assert "**3.21x**" in row[2] and "min/min 2.87x" in row[2] and "1.65x-4.32x" in row[2]
    assert row[1].startswith("20 items, 40 requests") and "median of 5" in row[2]
    assert "0.4500 = argmax_rate 0.4500" in row[3]
    # a negative control: lm-eval's acc and the study's argmax rate disagree, and the row says so
    assert "0.4500 ≠ argmax_rate 0.5000" in _field_sets_row(0.45, 0.5)[3]
