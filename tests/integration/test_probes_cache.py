"""probe / predict read only the cache: they work with the checkpoints deleted and loading blocked."""

import shutil

import numpy as np
import pandas as pd
import pytest

import interp.model.loading
from interp.core.errors import ConfigError
from interp.studies.base import RunConfig


@pytest.fixture(scope="module")
def swept(tmp_path_factory, tokenizer):
    from interp.testing import build_tiny_model
    from sweeps.api import run_sweep

    root = tmp_path_factory.mktemp("lineage")
    for i, name in enumerate(["base-step1", "sft/step1", "sft/final", "dpo/final"]):
        build_tiny_model(root / name, "llama", n_layers=2, d_model=32, seed=i, tokenizer=tokenizer)
    out = tmp_path_factory.mktemp("out")
    run_sweep(
        [root],
        studies=["pressure"],
        banks=["moral"],
        out=out,
        progress=False,
        report=False,
        cfg=RunConfig(max_items=10, n_boot=20, threads=1),
    )
    shutil.rmtree(root)  # from here on no checkpoint exists
    return out


@pytest.fixture(autouse=True)
def no_model_loading(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(interp.model.loading, "load", refuse)
    monkeypatch.setattr(interp.model.loading, "load_hf_model", refuse)


def test_probe_from_cache(swept):
    from sweeps.probe import run_probe

    table = run_probe(swept, study="pressure", target="planted", n_shuffles=19)
    assert list(table.columns[:11]) == [
        "checkpoint",
        "study",
        "layer",
        "target",
        "metric",
        "score",
        "null_mean",
        "null_p95",
        "p_value",
        "n_items",
        "folds",
    ]
    assert len(table) == 4 and (table["n_items"] == 10).all() and (table["layer"] == 1).all()
    assert table["p_value"].between(1 / 20, 1).all()
    assert (swept / "figures" / "probe_null_pressure_planted.png").is_file()
    run_probe(swept, study="pressure", target="logodds", n_shuffles=9)
    both = pd.read_csv(swept / "results" / "probes.csv")
    assert set(both["target"]) == {"planted", "logodds"} and len(both) == 8


def test_predict_from_cache(swept):
    from sweeps.probe import run_predict

    table = run_predict(swept, target="sft/final", n_shuffles=9)
    rel = dict(zip(table["source"], table["route_relation"]))
    assert rel == {"base-step1": "base", "sft/step1": "own", "dpo/final": "sibling"}
    assert np.isfinite(table["I"]).all() and np.isfinite(table["I_readout"]).all()
    assert (swept / "results" / "predictive.csv").is_file() and (swept / "figures" / "predictive_I.png").is_file()
    for stem in ("I_readout_only", "I_readout_increment"):
        assert np.isfinite(table[stem]).all() and table[f"{stem}_p"].between(0.1, 1).all()
    assert (table["readout_trials"] == "pressured").all()
    every = run_predict(swept, target="sft/final", n_shuffles=0, readout_trials="all")
    assert (every["I"] == table["I"]).all() and not np.allclose(every["I_readout_only"], table["I_readout_only"])
    with pytest.raises(ConfigError, match="readout_trials"):
        run_predict(swept, target="sft/final", n_shuffles=0, readout_trials="neutral")


def test_bad_requests_are_clear(swept):
    from sweeps.probe import run_predict, run_probe

    with pytest.raises(ConfigError, match="unknown target"):
        run_probe(swept, study="pressure", target="nope")
    with pytest.raises(ConfigError, match="no cached cloze units"):
        run_probe(swept, study="cloze", target="delta")
    with pytest.raises(ConfigError, match="has no cached pressure unit"):
        run_predict(swept, target="ghost")


def test_probe_saves_weights_that_reproduce_the_readout(swept):
    from sweeps.probe import run_probe
    from sweeps.probe_data import probe_datasets
    from probes.readouts import LinearReadout

    run_probe(swept, study="pressure", target="planted", n_shuffles=0)
    d = [x for x in probe_datasets(swept, "pressure", "planted") if x.checkpoint == "sft/final"][0]
    (path,) = (swept / "results" / "probe_weights").glob("pressure_planted_L1_sft--final_moral*.npz")
    w = np.load(path)
    assert str(w["checkpoint"]) == "sft/final" and int(w["layer"]) == 1 and w["direction"].shape == (32,)
    ref = LinearReadout("logistic").fit(d.X, d.y).decision_function(d.X)
    raw = d.X @ w["direction"] - (w["mean"] / w["scale"]) @ w["coef"] + w["intercept"]
    np.testing.assert_allclose(raw, ref, atol=1e-8)
