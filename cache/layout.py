"""What each cached array's axes mean and which table rows its rows belong to (see docs/cache.md).

Written onto every array at write time as plain HDF5 attributes, so any HDF5 reader (h5py,
h5netcdf, HDFView, MATLAB) understands a unit file without importing interp:

  dims        axis names, e.g. ["rows", "d_model"] or ["rows", "layer", "d_model"]
  rows_table  the table under /tables whose rows (after `rows_where`) are the array's rows
  rows_where  JSON object {column: value}: the table rows kept, in table order
  hook_name   TransformerLens name of the captured site, "blocks.{L}.hook_resid_pre"
              (a list, one per layer, when the array has a layer axis)
  layer       the resid_pre layer (one int) or `layers` (a list) when the array has a layer axis

The same axis names are also set as HDF5 dimension labels (`H5DSset_label`), which h5py shows
as `ds.dims[i].label`. Nothing here imports torch or interp: cache sits below both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

TL_RESID_PRE = "blocks.{layer}.hook_resid_pre"
# attribute names another writer may use for the layer indices of a [rows, layer, d_model] array
LAYER_ATTRS = ("layers", "layer_indices", "layer_index")


@dataclass(frozen=True)
class ArrayLayout:
    base_dims: tuple[str, ...]  # axes without a layer axis
    rows_table: str
    rows_where: Mapping[str, str] = field(default_factory=dict)


def array_layout(study: str, name: str) -> ArrayLayout | None:
    """The declared layout of a study's array, or None for an array nobody declared."""
    if study == "pressure" and name == "resid":
        return ArrayLayout(("rows", "d_model"), "trials", {"readout": "slot"})
    if study == "pressure" and name == "resid_first":
        return ArrayLayout(("rows", "d_model"), "first_turn")
    if study == "classify":
        m = re.fullmatch(r"resid_(binary|five)_(given|reversed)", name)
        if m:
            return ArrayLayout(("rows", "d_model"), "predictions", {"task": m.group(1), "order": m.group(2)})
    if study == "cloze" and name == "resid":
        return ArrayLayout(("rows", "completion", "d_model"), "scores")
    return None


def dims_for(layout: ArrayLayout | None, ndim: int) -> list[str]:
    """Axis names for an array of `ndim` axes: the declared ones, plus a layer axis before
    d_model when the array has one more axis than declared ([rows, layers, d_model])."""
    base = list(layout.base_dims) if layout else []
    if len(base) == ndim:
        return base
    if base and ndim == len(base) + 1:
        return base[:-1] + ["layer", base[-1]]
    if ndim == 1:
        return ["rows"]
    return ["rows"] + [f"dim_{i}" for i in range(1, ndim - 1)] + ["d_model"]


def layer_indices(attrs: Mapping[str, object]) -> list[int] | None:
    """Layer indices of a layer axis, from whichever attribute the writer used."""
    for key in LAYER_ATTRS:
        if key in attrs:
            v = np.atleast_1d(np.asarray(attrs[key]))
            return [int(x) for x in v]
    return None


def hook_names(layers: Sequence[int]) -> list[str]:
    return [TL_RESID_PRE.format(layer=int(L)) for L in layers]


def annotate_array(ds, *, study: str, name: str, layer: int | str, layers: object = None) -> None:
    """Write dims / rows / hook attributes on one h5py dataset (called by Store.write).

    `layer` is the unit's identity value (an int, or a comma list "0,4,8" for several layers);
    `layers` the unit's layer-indices attribute when the writer set one."""
    layout = array_layout(study, name)
    dims = dims_for(layout, ds.ndim)
    ds.attrs["dims"] = dims
    for i, d in enumerate(dims):
        ds.dims[i].label = d
    if layout is not None:
        ds.attrs["rows_table"] = layout.rows_table
        ds.attrs["rows_where"] = json.dumps(dict(layout.rows_where), sort_keys=True)
    if "layer" in dims:
        found = layer_indices(ds.attrs)
        if found is None and layers is not None:
            found = [int(x) for x in np.atleast_1d(np.asarray(layers))]
        if found is None:
            found = [int(x) for x in str(layer).split(",")]
        if len(found) == ds.shape[dims.index("layer")]:  # indices nobody can match to the axis stay unwritten
            ds.attrs["layers"] = found
            ds.attrs["hook_name"] = hook_names(found)
    elif name.startswith("resid") and "," not in str(layer):
        ds.attrs["layer"] = int(layer)
        ds.attrs["hook_name"] = TL_RESID_PRE.format(layer=int(layer))
