"""The viewer's reads of many units: columns aligned on their keys whatever each unit's row order,
the decode shared only by units whose key columns have the same checksums, damage refused."""

from __future__ import annotations

import h5py
import numpy as np
import pandas as pd
import pytest

from cache.columns import read_columns
from cache.store import Store
from interp.core.errors import CacheError
from interp.view.unit_columns import align_units
from _scripts import ROOT, load_script
from _units import ident

KEYS = ("item_id", "turn")


def _unit(store: Store, ck: str, rows: pd.DataFrame):
    return store.write(
        ident(checkpoint=ck, checkpoint_fingerprint=ck.encode().hex().ljust(64, "0")), tables={"trials": rows}
    )


def test_align_units_by_key_not_by_position(tmp_path):
    store = Store(tmp_path / "cache")
    keys = pd.DataFrame({"item_id": ["a", "a", "b", "b"], "turn": ["x", "y", "x", "y"]})
    truth = {"A": [1.0, 2.0, 3.0, 4.0], "B": [10.0, 20.0, 30.0, 40.0], "C": [5.0, 6.0, 7.0, 8.0]}
    paths = {
        "A": _unit(store, "A", keys.assign(p=truth["A"])),
        # B: the same rows in another order, and one row fewer: its key columns have other checksums
        "B": _unit(store, "B", keys.assign(p=truth["B"]).iloc[[3, 1, 0]].reset_index(drop=True)),
        "C": _unit(store, "C", keys.assign(p=truth["C"])),  # A's layout: decoded once, reused
    }
    units = pd.DataFrame({"path": list(paths.values()), "checkpoint": list(paths)})
    al = align_units(units, "trials", KEYS, "p")
    got = {ck: dict(zip(map(tuple, al.keys.to_numpy()), al.values[u])) for u, ck in enumerate(al.checkpoints)}
    for ck, values in truth.items():
        for key, v in zip(map(tuple, keys.to_numpy()), values):
            if ck == "B" and key == ("b", "x"):
                assert np.isnan(got[ck][key])  # B has no such row
            else:
                assert got[ck][key] == v, (ck, key)
    # the control: reading B by position (as if its layout were A's) puts its values on other keys
    positional = read_columns(paths["B"], "trials", ["p"])[0]["p"]
    assert [got["B"][k] for k in map(tuple, keys.to_numpy()[:3])] != positional.tolist()
    _, sums_a = read_columns(paths["A"], "trials", [], digests=KEYS)
    _, sums_c = read_columns(paths["C"], "trials", [], digests=KEYS)
    _, sums_b = read_columns(paths["B"], "trials", [], digests=KEYS)
    assert sums_a == sums_c and sums_a != sums_b


def test_read_columns_refuses_a_damaged_column(tmp_path):
    store = Store(tmp_path / "cache")
    path = _unit(store, "A", pd.DataFrame({"item_id": ["a", "b"], "turn": ["x", "x"], "p": [0.25, 0.75]}))
    assert read_columns(path, "trials", ["p"])[0]["p"].tolist() == [0.25, 0.75]
    with h5py.File(path, "r+") as f:
        f["tables/trials/p"][0] = 0.5  # the body changed after writing; its checksum did not
    with pytest.raises(CacheError, match="damaged"):
        read_columns(path, "trials", ["p"])
    with pytest.raises(CacheError, match="lacks"):
        read_columns(path, "nope", ["p"])


def test_docs_scale_section_is_the_benchmark_file():
    """docs/view.md's Scale section is rendered from bench/results/view.json (view_pages.render_docs):
    every number it quotes is the file's."""
    import json

    bench = load_script("bench/view_pages.py")
    result = json.loads((ROOT / "bench" / "results" / "view.json").read_text())
    text = (ROOT / "docs" / "view.md").read_text()
    assert text[text.index(bench.MARK) :] == bench.render_docs(result)
    # the control: another figure in the file gives another section
    result["served"]["item_next.drawn_s"]["median"] += 1.0
    assert text[text.index(bench.MARK) :] != bench.render_docs(result)
