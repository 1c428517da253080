"""Fixtures of the bad-input suite: one earlier successful sweep, an in-process CLI runner."""

from __future__ import annotations

import pytest

from ._util import run_cli


@pytest.fixture(scope="session")
def bi_model(tiny_models):
    """The good checkpoint every sweep-level case runs with (broken copies are made from it)."""
    return tiny_models["llama"]


@pytest.fixture(scope="session")
def earlier_out(tmp_path_factory, bi_model):
    """OUT holding an earlier successful sweep (pressure, moral, 2 items): bad inputs run into it."""
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    out = tmp_path_factory.mktemp("earlier") / "OUT"
    run_sweep(
        [bi_model],
        studies=["pressure"],
        banks=["moral"],
        out=out,
        cfg=RunConfig(max_items=2, threads=1),
        progress=False,
    )
    assert (out / "results" / "pressure_trials.csv").is_file()
    assert len(list((out / "cache").rglob("*.h5"))) == 1
    return out


@pytest.fixture
def cli(capsys, monkeypatch):
    """cli(*args) -> Result: `interp ARGS` in this process (milliseconds for input errors)."""

    def run(*args):
        return run_cli(capsys, monkeypatch, *args)

    return run
