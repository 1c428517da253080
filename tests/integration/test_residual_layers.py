"""Several residual layers per unit: `--layers` parsing, [rows, layers, d_model] storage with the
indices as an attribute, old single-layer units still read, probes and predict pick any cached
layer, and `--layer all` finds a signal planted at one depth only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cache.layers import layer_key, parse_layers, select_layer, unit_layers
from cache.store import Store, UnitIdentity, read_unit
from interp.core.errors import ConfigError
from interp.studies.base import RunConfig


@pytest.mark.parametrize(
    "spec,want",
    [
        (None, (9,)),
        ("all", tuple(range(12))),
        (7, (7,)),
        ("7", (7,)),
        ("0,4,8", (0, 4, 8)),
        ("2-5", (2, 3, 4, 5)),
        ("0-2,10", (0, 1, 2, 10)),
        ("-1", (11,)),
        ("-3--1", (9, 10, 11)),
        ("4,4,2", (2, 4)),
        ([3, 1], (1, 3)),
    ],
)
def test_parse_layers(spec, want):
    assert parse_layers(spec, 12) == want


@pytest.mark.parametrize(
    "spec,msg",
    [("12", "outside 0..11"), ("5-2", "not a layer"), ("x", "not a layer"), ("", "not a layer"), ("-13", "outside")],
)
def test_parse_layers_errors(spec, msg):
    with pytest.raises(ConfigError, match=msg):
        parse_layers(spec, 12)


def test_identity_keeps_single_layer_units_unchanged():
    assert layer_key([3]) == 3 and layer_key([3, 1, 3]) == "1,3"
    base = dict(
        checkpoint="c",
        checkpoint_fingerprint="f",
        study="pressure",
        study_version="1",
        bank="b",
        bank_hash="h",
        template_hash="t",
        settings_hash="s",
    )
    assert UnitIdentity(**base, layer=3).layers == (3,)
    assert UnitIdentity(**base, layer="0,1,2").layers == (0, 1, 2)
    assert UnitIdentity(**base, layer=3).hash != UnitIdentity(**base, layer="0,3").hash


@pytest.fixture(scope="module")
def swept(tmp_path_factory, tokenizer):
    """Three tiny 4-layer checkpoints, pressure, every layer; and the same with the default layer."""
    from interp.testing import build_tiny_model
    from sweeps.api import run_sweep

    root = tmp_path_factory.mktemp("ck")
    for i, name in enumerate(["step1", "step2", "final"]):
        build_tiny_model(root / name, "llama", n_layers=4, d_model=32, seed=i, tokenizer=tokenizer)
    out_all, out_one = tmp_path_factory.mktemp("all"), tmp_path_factory.mktemp("one")
    cfg = RunConfig(max_items=10, n_boot=10, threads=1)
    run_sweep(
        [root],
        studies=["pressure"],
        banks=["moral"],
        out=out_all,
        progress=False,
        report=False,
        cfg=RunConfig(max_items=10, n_boot=10, threads=1, layers="all"),
    )
    run_sweep([root], studies=["pressure"], banks=["moral"], out=out_one, progress=False, report=False, cfg=cfg)
    return out_all, out_one


def test_all_layers_stored_with_indices(swept):
    out_all, out_one = swept
    units = {read_unit(p).attrs["checkpoint"]: read_unit(p) for p in Store(out_all / "cache").units("pressure")}
    singles = {read_unit(p).attrs["checkpoint"]: read_unit(p) for p in Store(out_one / "cache").units("pressure")}
    assert len(units) == 3
    for ck, u in units.items():
        assert u.attrs["layer"] == "0,1,2,3" and unit_layers(u.attrs) == (0, 1, 2, 3)
        assert u.arrays["resid"].shape == (10 * 30, 4, 32) and u.arrays["resid_first"].shape == (10, 4, 32)
        one = singles[ck]
        assert unit_layers(one.attrs) == (3,) and one.arrays["resid"].shape == (300, 1, 32)
        # the layer-3 slice of the all-layer unit is the default single-layer unit's residual
        np.testing.assert_array_equal(select_layer(u.arrays["resid"], u.attrs, 3), one.arrays["resid"][:, 0])
        assert not np.array_equal(
            select_layer(u.arrays["resid"], u.attrs, 0), select_layer(u.arrays["resid"], u.attrs, 3)
        )
        pd.testing.assert_frame_equal(u.tables["trials"], one.tables["trials"])  # capture changes no score


def test_probe_per_layer_and_figure(swept):
    from sweeps.probe import run_probe

    out_all, _ = swept
    table = run_probe(out_all, study="pressure", target="planted", layer="all", n_shuffles=9)
    assert sorted(table["layer"].unique()) == [0, 1, 2, 3] and len(table) == 3 * 4
    assert (out_all / "figures" / "probe_depth_pressure_planted.png").stat().st_size > 0
    # probes.csv keeps the rows of other layers; the default run rewrote layer 3 only
    from sweeps.probe_data import probe_datasets

    assert {d.layer for d in probe_datasets(out_all, "pressure", "planted")} == {3}  # floor(3 * 4 / 4)
    assert {d.layer for d in probe_datasets(out_all, "pressure", "planted", layer=1)} == {1}
    one = run_probe(out_all, study="pressure", target="planted", layer=1, n_shuffles=9)
    assert len(one) == 12 and (one["layer"] == 1).sum() == 3
    with pytest.raises(ConfigError, match="at layer 7"):
        run_probe(out_all, study="pressure", target="planted", layer=7, n_shuffles=9)


def test_predict_picks_a_cached_layer(swept):
    from sweeps.probe import run_predict

    out_all, out_one = swept
    t0 = run_predict(out_all, target="final", layer=0, n_shuffles=5)
    t3 = run_predict(out_all, target="final", layer=3, n_shuffles=5)
    d3 = run_predict(out_one, target="final", n_shuffles=5)
    assert not np.allclose(t0["I_readout"], t3["I_readout"])
    np.testing.assert_allclose(t3["I_readout"], d3["I_readout"], atol=1e-12)  # same residuals, same readout
    with pytest.raises(ConfigError, match=r"layer 1 is not cached \(cached: 3\)"):
        run_predict(out_one, target="final", layer=1, n_shuffles=5)


def _synthetic_units(root, *, layers, signal_layer, legacy=False, n_items=40, per_item=6, d=16, seed=0):
    """Pressure units whose residual carries p_planted's log-odds at `signal_layer` only."""
    rng = np.random.default_rng(seed)
    store = Store(root / "cache")
    for c in range(2):
        n = n_items * per_item
        items = np.repeat([f"it{i:03d}" for i in range(n_items)], per_item)
        logit = rng.normal(size=n) * 2
        trials = pd.DataFrame(
            {
                "checkpoint": f"ck{c}",
                "bank": "moral",
                "item_id": items,
                "gold": "wrong",
                "planted": np.tile(["wrong", "acceptable"], n // 2),
                "turn_kind": "challenge",
                "turn_side": "",
                "turn_variant": "sure",
                "p_planted": 1 / (1 + np.exp(-logit)),
                "readout": "slot",
            }
        )
        X = rng.normal(size=(n, len(layers), d))
        if signal_layer is not None:
            X[:, layers.index(signal_layer), 0] += 3 * logit
        ident = UnitIdentity(
            checkpoint=f"ck{c}",
            checkpoint_fingerprint=f"fp{c}",
            study="pressure",
            study_version="1",
            bank="moral",
            bank_hash="b",
            template_hash="t",
            settings_hash="s",
            layer=layers[0] if legacy else layer_key(layers),
        )
        if legacy:  # written before multi-layer capture: [rows, d], no `layers` attribute
            store.write(ident, tables={"trials": trials}, arrays={"resid": X[:, 0].astype(np.float16)})
        else:
            store.write(
                ident,
                tables={"trials": trials},
                arrays={"resid": X.astype(np.float16)},
                extra_attrs={"layers": list(layers), "n_layers": 8},
            )


def test_planted_signal_found_at_its_depth_only(tmp_path):
    from sweeps.probe import run_probe

    _synthetic_units(tmp_path, layers=[0, 2, 5, 7], signal_layer=5)
    table = run_probe(tmp_path, study="pressure", target="logodds", layer="all", n_shuffles=19)
    for _, row in table.iterrows():
        if row["layer"] == 5:
            assert row["score"] > 0.8 and row["score"] > row["null_p95"]
        else:
            assert row["score"] < 0.2
    assert "null_p95" in table.columns
    assert (tmp_path / "figures" / "probe_depth_pressure_logodds.png").is_file()


def test_old_single_layer_units_still_read(tmp_path):
    from sweeps.probe import run_probe
    from sweeps.probe_data import probe_datasets

    _synthetic_units(tmp_path, layers=[6], signal_layer=6, legacy=True)
    (data, _) = probe_datasets(tmp_path, "pressure", "logodds")
    assert data.layer == 6 and data.X.shape == (240, 16)
    assert run_probe(tmp_path, study="pressure", target="logodds", layer=6, n_shuffles=9)["score"].min() > 0.8
    unit = read_unit(Store(tmp_path / "cache").units("pressure")[0])
    with pytest.raises(ConfigError, match=r"layer 2 is not cached \(cached: 6\)"):
        select_layer(unit.arrays["resid"], unit.attrs, 2, where="u")


def test_cli_probe_layer_all_and_bad_layer(swept):
    from _cli_process import run_cli_process

    out_all, _ = swept
    run = ["probe", str(out_all), "--study", "pressure", "--target", "planted", "--shuffles", "5", "--layer"]
    ok = run_cli_process(run + ["all"], timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert set(pd.read_csv(out_all / "results" / "probes.csv")["layer"]) == {0, 1, 2, 3}
    bad = run_cli_process(run + ["deep"], timeout=300)
    assert bad.returncode == 2 and "--layer 'deep'" in bad.stderr and bad.stderr.strip().count("\n") == 0
