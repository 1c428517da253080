"""Say what was dropped (issue 23): a deleted current unit, a checkpoint reached twice through a
symbolic link, an interval over too few items, a classification bank with one gold class; and
`|` / line breaks in names escaped in report.md tables."""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def test_deleted_current_unit_is_reported(earlier_out, tmp_path, cli):
    from cache.store import Store

    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    store = Store(out / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # negative control: nothing to say while the unit is there
        current, _ = store.current_units("pressure")
    assert len(current) == 1
    current[0].unlink()
    with pytest.warns(UserWarning, match=r"1 slot\(s\) have no unit \(their current unit was deleted\)"):
        assert store.current_units("pressure") == ([], [])
    with pytest.warns(UserWarning, match="their current unit was deleted"):  # probe says it before failing
        res = cli("probe", out, "--study", "pressure", "--target", "flipped", "--shuffles", "2", "--folds", "2")
    assert res.code == 2


def test_symlinked_checkpoint_says_which_name_was_dropped(bi_model, tmp_path):
    from sweeps.discover import discover

    tree = tmp_path / "run"
    shutil.copytree(bi_model, tree / "sft" / "step100")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # negative control: no link, nothing dropped
        assert [str(p.relative_to(tree)) for p in discover([tree]).checkpoints] == ["sft/step100"]
    os.symlink("step100", tree / "sft" / "step300")
    with pytest.warns(UserWarning, match="sft/step300 is the same checkpoint directory as sft/step100") as got:
        d = discover([tree])
    assert "planned once, as sft/step100; sft/step300 dropped" in str(got[0].message)
    assert list(d.names.values()) == ["sft/step100"]
    d.write(tmp_path / "OUT")
    assert "sft/step300" in json.loads((tmp_path / "OUT" / "lineage.json").read_text())["dropped"][0]


def test_one_item_bank_has_an_undefined_interval(bi_model, tmp_path):
    from analyses.bootstrap import MIN_CI_ITEMS, UndefinedCIWarning
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    out = tmp_path / "OUT"
    with pytest.warns(UndefinedCIWarning, match="over 1 item"):
        run_sweep(
            [bi_model],
            studies=["pressure"],
            banks=["moral"],
            out=out,
            cfg=RunConfig(max_items=1, threads=1, n_boot=20),
            progress=False,
        )
    summary = pd.read_csv(out / "results" / "pressure_summary.csv")
    assert (summary["n_items"] == 1).all()
    assert summary["delta"].notna().all() and summary["delta_lo"].isna().all() and summary["delta_hi"].isna().all()
    report = (out / "report.md").read_text()
    assert f"are undefined: fewer than {MIN_CI_ITEMS} items" in report


def test_one_gold_class_is_noted_beside_macro_f1(tmp_path):
    from interp.studies import get_study
    from interp.studies.classify.analysis import one_class_gold, one_class_gold_lines

    rows = [
        {"checkpoint": "ck", "bank": "all|yes", "task": "binary", "order": o, "item_id": f"i{i}", "gold": "1"}
        for i in range(4)
        for o in ("given", "reversed")
    ] + [
        {
            "checkpoint": "ck",
            "bank": "mixed",
            "task": "binary",
            "order": "given",
            "item_id": f"j{i}",
            "gold": str(i % 2),
        }
        for i in range(4)
    ]
    preds = pd.DataFrame(rows)
    assert one_class_gold(preds) == [("all|yes", "binary", "1")]  # the mixed bank is the negative control
    preds.to_csv(tmp_path / "classify_predictions.csv", index=False)
    lines = one_class_gold_lines(tmp_path)
    assert len(lines) == 1 and "all\\|yes" in lines[0] and "MCC is 0" in lines[0]
    section = next(s for s in get_study("classify").report_sections if s.file == "classify_summary.csv")
    assert section.extra is not None and section.extra(tmp_path) == lines


def _cells(row: str) -> int:
    """Columns of a Markdown table row: the unescaped `|` separators minus one."""
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def test_markdown_cells_escape_pipes_and_line_breaks():
    from sweeps.report import _fmt

    df = pd.DataFrame(
        {"checkpoint": ["a|b", "line\nbreak", "plain"], "bank": ["x", "y|z\r\nw", "q"], "v": [1.0, 2.0, np.nan]}
    )
    rows = [r for r in _fmt(df).split("\n") if r.startswith("|")]
    assert len(rows) == 2 + len(df)  # header, rule, one line per row: no row broken in two
    assert {_cells(r) for r in rows} == {3}
    assert "a\\|b" in rows[2] and "line\\nbreak" in rows[3]
    plain = _fmt(pd.DataFrame({"checkpoint": ["a", "b"]}))
    assert "\\" not in plain  # negative control: nothing to escape, nothing changed


def test_report_tables_escape_checkpoint_names(bi_model, tmp_path):
    """End to end: a checkpoint directory named with `|` keeps every report.md table row aligned."""
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    tree = tmp_path / "run"
    shutil.copytree(bi_model, tree / "a|b")
    shutil.copytree(bi_model, tree / "c")
    out = tmp_path / "OUT"
    run_sweep([tree], studies=["pressure"], banks=["moral"], out=out, cfg=RunConfig(max_items=5, threads=1, n_boot=20))
    report = (out / "report.md").read_text()
    assert "a\\|b" in report
    tables, current = [], []
    for line in report.split("\n") + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    assert tables
    for t in tables:
        assert len({_cells(r) for r in t}) == 1, t
