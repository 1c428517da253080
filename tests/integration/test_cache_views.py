"""Open cache: dims / rows / hook attributes, views joined to table rows, docs/cache.md example runs."""

import json
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from cache import Store, collect_tables, read_unit
from _units import ident
from interp.core.errors import CacheError, ConfigError

ROOT = Path(__file__).resolve().parents[2]


def pressure_unit(tmp_path, n=5, d=8):
    """Slot and sampled rows interleaved; resid row i carries the slot row's `k` in column 0."""
    readout = ["slot", "sampled"] * n
    k = np.arange(2 * n)
    trials = pd.DataFrame(
        {"item_id": [f"i{j // 2}" for j in k], "readout": readout, "k": k, "p_planted": np.linspace(0, 1, 2 * n)}
    )
    slot_k = k[np.array(readout) == "slot"]
    resid = np.zeros((n, d), np.float16)
    resid[:, 0] = slot_k
    first = pd.DataFrame({"item_id": [f"i{j}" for j in range(n)], "p_gold": np.full(n, 0.5)})
    resid_first = np.tile(np.arange(n, dtype=np.float16)[:, None], (1, d))
    path = Store(tmp_path).write(
        ident(), tables={"trials": trials, "first_turn": first}, arrays={"resid": resid, "resid_first": resid_first}
    )
    return path


def test_attributes_name_axes_rows_and_hook(tmp_path):
    path = pressure_unit(tmp_path)
    with h5py.File(path, "r") as f:
        ds = f["arrays/resid"]
        assert list(ds.attrs["dims"]) == ["rows", "d_model"]
        assert [ds.dims[i].label for i in range(2)] == ["rows", "d_model"]
        assert ds.attrs["hook_name"] == "blocks.3.hook_resid_pre" and ds.attrs["layer"] == 3
        assert ds.attrs["rows_table"] == "trials" and json.loads(ds.attrs["rows_where"]) == {"readout": "slot"}
        assert f["arrays/resid_first"].attrs["rows_table"] == "first_turn"


def test_activations_join_the_right_rows(tmp_path):
    unit = read_unit(pressure_unit(tmp_path))
    acts = unit.activations()
    assert acts.hook_name == "blocks.3.hook_resid_pre" and acts.layer == 3 and acts.array == "resid"
    assert acts.values.dtype == np.float32
    # planted: column 0 of each residual row is the `k` of the slot row it belongs to
    np.testing.assert_array_equal(acts.values[:, 0], acts.rows["k"].to_numpy())
    assert set(acts.rows["readout"]) == {"slot"}
    first = unit.activations(array="resid_first")
    np.testing.assert_array_equal(first.values[:, 0], np.arange(5))
    assert list(first.rows["item_id"]) == [f"i{j}" for j in range(5)]
    with pytest.raises(ConfigError, match="not 7"):
        unit.activations(7)
    with pytest.raises(CacheError, match="no array 'nope'"):
        unit.activations(array="nope")


def test_activations_as_torch_imports_torch_only_then():
    code = (
        "import sys, cache, cache.views; assert 'torch' not in sys.modules, 'cache imported torch'; "
        "import interp.core.errors; assert 'torch' not in sys.modules, 'interp.core.errors imported torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_activations_torch(tmp_path):
    torch = pytest.importorskip("torch")
    acts = read_unit(pressure_unit(tmp_path)).activations(as_="torch")
    assert isinstance(acts.values, torch.Tensor) and acts.values.dtype == torch.float32
    np.testing.assert_array_equal(acts.values[:, 0].numpy(), acts.rows["k"].to_numpy())


def test_three_d_residuals_with_layer_indices(tmp_path):
    """[rows, layers, d_model] with the layer indices in an attribute (another writer's layout)."""
    n, layers, d = 4, [1, 3], 6
    resid = np.zeros((n, len(layers), d), np.float32)
    for j, L in enumerate(layers):
        resid[:, j, :] = L * 100 + np.arange(n)[:, None]
    trials = pd.DataFrame({"item_id": list("abcd"), "readout": "slot"})
    path = Store(tmp_path).write(
        ident(), tables={"trials": trials, "first_turn": trials[["item_id"]]}, arrays={"resid": resid}
    )
    with h5py.File(path, "r+") as f:  # as a writer that records indices after creating the dataset
        f["arrays/resid"].attrs["layer_indices"] = layers
        assert "hook_name" not in f["arrays/resid"].attrs  # unknown until the indices are recorded
    unit = read_unit(path)
    for L in layers:
        acts = unit.activations(L)
        np.testing.assert_array_equal(acts.values[:, 0], L * 100 + np.arange(n))
        assert acts.hook_name == f"blocks.{L}.hook_resid_pre"
    with pytest.raises(ConfigError, match="pass layer="):
        unit.activations()
    da = unit.to_xarray("resid")
    assert da.dims == ("rows", "layer", "d_model") and list(da["layer"].values) == layers
    assert list(da["hook_name"].values) == ["blocks.1.hook_resid_pre", "blocks.3.hook_resid_pre"]
    assert float(da.sel(layer=3).isel(rows=2, d_model=0)) == 302


def test_to_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    unit = read_unit(pressure_unit(tmp_path))
    da = unit.to_xarray("resid")
    assert da.dims == ("rows", "d_model") and da.attrs["hook_name"] == "blocks.3.hook_resid_pre"
    np.testing.assert_array_equal(da.isel(d_model=0).values, da["k"].values)
    assert da.attrs["unit_checkpoint"] == "ck"
    tree = unit.to_xarray()
    assert isinstance(tree, xr.DataTree) and set(tree.children) == {"resid", "resid_first"}
    assert tree["resid_first"]["resid_first"].shape == (5, 8) and tree.attrs["study"] == "pressure"


def test_collect_tables(tmp_path):
    out = tmp_path / "out"
    store = Store(out / "cache")
    for ck in ("a", "b"):
        store.write(
            ident(checkpoint=ck, checkpoint_fingerprint=ck * 64),
            tables={
                "trials": pd.DataFrame({"checkpoint": ck, "x": [1, 2]}),
                "first_turn": pd.DataFrame({"checkpoint": ck, "y": [0.5]}),
            },
        )
    tables = collect_tables(out)
    assert set(tables) == {"trials", "first_turn"}
    assert len(tables["trials"]) == 4 and sorted(set(tables["trials"]["checkpoint"])) == ["a", "b"]
    assert tables["trials"]["unit"].str.endswith(".h5").all()
    assert len(collect_tables(out, "first_turn")) == 2
    assert len(collect_tables(store.units(), "trials")) == 4  # the older (paths, table) form
    with pytest.raises(CacheError, match="no such sweep output"):
        collect_tables(tmp_path / "missing")


def test_cache_md_example_runs_without_interp(tmp_path):
    path = pressure_unit(tmp_path)
    text = (ROOT / "docs" / "cache.md").read_text()
    block = re.search(r"```python\n(import json, h5py.*?)```", text, re.DOTALL).group(1)
    assert "interp" not in block and "cache" not in block.split("path =")[0]
    assert len(block.strip().splitlines()) <= 10
    code = block.replace(re.search(r'path = "(.*?)"', block).group(1), str(path))
    code += "\nimport sys; assert 'interp' not in sys.modules and 'torch' not in sys.modules\n"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "blocks.3.hook_resid_pre" in res.stdout and "(5, 8)" in res.stdout


def test_sweep_units_are_self_describing(tiny_models, tmp_path):
    """A real (tiny) pressure sweep: the views return exactly the cached rows, aligned."""
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    out = tmp_path / "out"
    run_sweep(
        [tiny_models["gpt2"]],
        studies=["pressure"],
        banks=["factual"],
        out=out,
        cfg=RunConfig(max_items=2, n_boot=10),
        progress=False,
        report=False,
    )
    unit = read_unit(Store(out / "cache").units("pressure")[0])
    acts = unit.activations()
    resid = unit.arrays["resid"]  # [rows, layers, d_model] since multi-layer capture
    assert resid.ndim == 3 and acts.layer == int(unit.attrs["layer"])
    np.testing.assert_array_equal(acts.values, resid[:, 0, :].astype(np.float32))
    with h5py.File(unit.path, "r") as f:
        ds = f["arrays/resid"]
        assert list(ds.attrs["dims"]) == ["rows", "layer", "d_model"]
        assert list(ds.attrs["hook_name"]) == [f"blocks.{acts.layer}.hook_resid_pre"]
    pd.testing.assert_frame_equal(acts.rows, unit.tables["trials"].query("readout == 'slot'").reset_index(drop=True))
    da = unit.to_xarray("resid_first")
    assert list(da["item_id"].values) == list(unit.tables["first_turn"]["item_id"])
