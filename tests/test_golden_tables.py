"""Golden tables: a tiny-model sweep of every study, plus probe and predict, must write the
same results tables as the recorded copy in tests/golden/ (to float rounding).

Recorded before the architecture refactor (issue 11) so that moving code cannot change a
number, a column or a row. The sweep goes through the command line (`interp.cli.app`), whose
commands and options are stable, so the test does not depend on where the Python API lives.
Re-record only on purpose, when a result is meant to change:
    INTERP_GOLDEN_RECORD=1 python -m pytest tests/test_golden_tables.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

GOLDEN = Path(__file__).parent / "golden"
RTOL, ATOL = 1e-5, 1e-8


def _cli(*args: str) -> None:
    from interp.cli import app

    app(list(args), standalone_mode=False)


@pytest.fixture(scope="module")
def golden_out(tmp_path_factory, tokenizer) -> Path:
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("golden")
    tree = root / "run"
    for i, name in enumerate(("step100", "final")):
        build_tiny_model(tree / name, "llama", n_layers=2, d_model=32, seed=10 + i, tokenizer=tokenizer)
    config = root / "run.toml"
    config.write_text("n_boot = 40\nthreads = 1\n")
    out = root / "out"
    for study, extra in (
        ("pressure", ["--bank", "moral", "--max-items", "10"]),
        ("classify", ["--max-items", "6"]),
        ("cloze", ["--max-items", "4"]),
    ):
        _cli("sweep", str(tree), "--study", study, *extra, "--out", str(out), "--config", str(config), "--quiet")
    return out


def _tables(out: Path) -> dict[str, pd.DataFrame]:
    return {p.name: pd.read_csv(p, keep_default_na=True) for p in sorted((out / "results").glob("*.csv"))}


def _assert_same(name: str, got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns), f"{name}: columns differ"
    assert len(got) == len(want), f"{name}: {len(got)} rows, recorded {len(want)}"
    for col in want.columns:
        g, w = got[col], want[col]
        if pd.api.types.is_numeric_dtype(w) and pd.api.types.is_numeric_dtype(g):
            np.testing.assert_allclose(
                g.to_numpy(float),
                w.to_numpy(float),
                rtol=RTOL,
                atol=ATOL,
                equal_nan=True,
                err_msg=f"{name}: column {col}",
            )
        else:
            assert g.fillna("").astype(str).tolist() == w.fillna("").astype(str).tolist(), f"{name}: column {col}"


def test_golden_tables(golden_out: Path) -> None:
    out = golden_out
    _cli("probe", str(out), "--study", "pressure", "--target", "flipped", "--shuffles", "5", "--folds", "2")
    _cli("probe", str(out), "--study", "cloze", "--target", "delta", "--shuffles", "5", "--folds", "2")
    _cli("probe", str(out), "--study", "classify", "--target", "five_index", "--shuffles", "5", "--folds", "2")
    _cli("predict", str(out), "--target", "final", "--shuffles", "5")
    got = _tables(out)
    if os.environ.get("INTERP_GOLDEN_RECORD"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        GOLDEN.mkdir(parents=True)
        for name in got:
            shutil.copy(out / "results" / name, GOLDEN / name)
        pytest.skip(f"recorded {len(got)} tables in {GOLDEN}")
    want = {p.name: pd.read_csv(p, keep_default_na=True) for p in sorted(GOLDEN.glob("*.csv"))}
    assert want, f"no recorded tables in {GOLDEN}"
    assert sorted(got) == sorted(want), "the set of results tables differs from the recorded one"
    for name in want:
        _assert_same(name, got[name], want[name])
