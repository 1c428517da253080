"""Views of cache units for the tools researchers already use: pandas, xarray, numpy, torch.

Every view joins an array's rows to the table rows they belong to (the `rows_table` /
`rows_where` attributes written by cache.layout; declared layouts for files written before
those attributes existed). Arrays are stored as written (float16 by default) and returned as
float32. `import cache` never imports torch: only `as_="torch"` does, at call time.

Residual arrays come in two shapes, both handled here: [rows, d_model] with a scalar `layer`
attribute (one layer per unit), and [rows, layer, d_model] with the layer indices in an
attribute (`layers`, `layer_indices` or `layer_index`).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import h5py
import numpy as np
import pandas as pd

from cache.layout import TL_RESID_PRE, array_layout, dims_for, hook_names, layer_indices
from interp.core.errors import CacheError, ConfigError

if TYPE_CHECKING:
    from cache.unit import Unit

# the array `activations()` reads when none is named, per study
DEFAULT_ARRAY = {"pressure": "resid", "classify": "resid_five_given", "cloze": "resid"}


@dataclass(frozen=True)
class ArrayInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    dims: tuple[str, ...]
    rows_table: str | None
    rows_where: dict[str, Any]
    layers: tuple[int, ...]  # one per position of the layer axis, or the unit's single layer

    @property
    def hook_names(self) -> list[str]:
        return hook_names(self.layers)


def _str(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def array_info(unit: Unit, name: str) -> ArrayInfo:
    """Shape, axis names, aligned table and layers of one array (from its attributes)."""
    try:
        with h5py.File(unit.path, "r") as f:
            ds = f[f"arrays/{name}"]
            attrs = dict(ds.attrs)
            shape, dtype = tuple(ds.shape), str(ds.dtype)
    except KeyError:
        have = ", ".join(sorted(array_names(unit))) or "none"
        raise CacheError(f"{unit.path}: no array {name!r} (arrays: {have})") from None
    except OSError as exc:
        raise CacheError(f"{unit.path}: array {name!r} unreadable ({exc})") from None
    study = _str(unit.attrs.get("study", ""))
    layout = array_layout(study, name)
    dims = tuple(_str(d) for d in attrs["dims"]) if "dims" in attrs else tuple(dims_for(layout, len(shape)))
    if "rows_table" in attrs:
        table, where = _str(attrs["rows_table"]), json.loads(_str(attrs.get("rows_where", "{}")))
    elif layout is not None:
        table, where = layout.rows_table, dict(layout.rows_where)
    else:
        table, where = None, {}
    layers = layer_indices(attrs)
    if layers is None and "layer" in dims:  # the unit's `layers` attribute, else its identity's layer list
        layers = layer_indices(unit.attrs) or [int(x) for x in str(unit.attrs.get("layer")).split(",")]
    if layers is None:
        layers = [int(attrs.get("layer", unit.attrs.get("layer")))]
    if "layer" in dims and len(layers) != shape[dims.index("layer")]:
        raise CacheError(
            f"{unit.path}: array {name!r} has {shape[dims.index('layer')]} layers but records layer indices {layers}"
        )
    return ArrayInfo(
        name=name, shape=shape, dtype=dtype, dims=dims, rows_table=table, rows_where=where, layers=tuple(layers)
    )


def array_names(unit: Unit) -> list[str]:
    with h5py.File(unit.path, "r") as f:
        return sorted(f.get("arrays", {}).keys())


def rows_for(unit: Unit, info: ArrayInfo) -> pd.DataFrame:
    """The table rows the array's rows belong to, in array order (index reset)."""
    if info.rows_table is None:
        return pd.DataFrame(index=range(info.shape[0]))
    tables = unit.tables
    if info.rows_table not in tables:
        raise CacheError(f"{unit.path}: array {info.name!r} aligns with table {info.rows_table!r}, which is missing")
    rows = tables[info.rows_table]
    for col, value in info.rows_where.items():
        rows = rows[rows[col].astype(str) == str(value)]
    rows = rows.reset_index(drop=True)
    if len(rows) != info.shape[0]:
        raise CacheError(
            f"{unit.path}: array {info.name!r} has {info.shape[0]} rows but table "
            f"{info.rows_table!r} (where {info.rows_where}) has {len(rows)}"
        )
    return rows


def _values(unit: Unit, name: str) -> np.ndarray:
    if name in unit.arrays:
        return np.asarray(unit.arrays[name])
    with h5py.File(unit.path, "r") as f:
        return f[f"arrays/{name}"][()]


@dataclass(frozen=True)
class Activations:
    """Residuals of one layer, row-aligned with `rows` (rows[i] describes values[i])."""

    rows: pd.DataFrame
    values: Any  # numpy float32 array or torch float32 tensor: [rows, d_model] (cloze: [rows, completion, d_model])
    layer: int
    hook_name: str
    array: str


def activations(
    unit: Unit, layer: int | None = None, *, array: str | None = None, as_: Literal["numpy", "torch"] = "numpy"
) -> Activations:
    """One layer's residuals of a unit joined to their table rows (also ``unit.activations()``).

    Parameters
    ----------
    unit : Unit
        A unit read with `cache.read_unit`.
    layer : int, optional
        The layer (default: the unit's only layer).
    array : str, optional
        Which array (default: the study's main residual: pressure ``resid``, classify
        ``resid_five_given``, cloze ``resid``).
    as_ : {"numpy", "torch"}
        The type of ``values`` (torch is imported only then).

    Returns
    -------
    Activations
        ``rows`` (the table rows, in order), ``values`` float32 [rows, d_model] (cloze:
        [rows, completion, d_model]), ``layer``, ``hook_name``, ``array``.
    """
    if as_ not in ("numpy", "torch"):
        raise ConfigError(f"as_={as_!r}: choose numpy or torch")
    if array is None:
        study = _str(unit.attrs.get("study", ""))
        array = DEFAULT_ARRAY.get(study) or next(iter(array_names(unit)), None)
        if array is None:
            raise CacheError(f"{unit.path}: unit holds no arrays")
    info = array_info(unit, array)
    if layer is None:
        if len(info.layers) != 1:
            raise ConfigError(f"{unit.path}: array {array!r} holds layers {list(info.layers)}; pass layer=")
        layer = info.layers[0]
    if layer not in info.layers:
        raise ConfigError(f"{unit.path}: array {array!r} holds layer(s) {list(info.layers)}, not {layer}")
    values = _values(unit, array)
    if "layer" in info.dims:
        values = np.take(values, info.layers.index(layer), axis=info.dims.index("layer"))
    values = values.astype(np.float32)
    if as_ == "torch":
        # imported only here, by name: the cache layer never imports torch (import-linter contract)
        torch = importlib.import_module("torch")
        values = torch.from_numpy(np.ascontiguousarray(values))
    return Activations(
        rows=rows_for(unit, info),
        values=values,
        layer=int(layer),
        hook_name=TL_RESID_PRE.format(layer=int(layer)),
        array=array,
    )


def _identity_attrs(unit: Unit) -> dict:
    return {
        k: (v.decode() if isinstance(v, bytes) else v)
        for k, v in unit.attrs.items()
        if isinstance(v, (str, bytes, int, float, bool, np.generic))
    }


def _data_array(unit: Unit, name: str):
    import xarray as xr

    info = array_info(unit, name)
    rows = rows_for(unit, info)
    coords: dict[str, Any] = {"rows": np.arange(info.shape[0])}
    for col in rows.columns:
        coords[str(col)] = ("rows", rows[col].to_numpy())
    if "layer" in info.dims:
        coords["layer"] = list(info.layers)
        coords["hook_name"] = ("layer", info.hook_names)
    if "completion" in info.dims:
        coords["completion"] = ["stereotype", "anti_stereotype", "meaningless"][
            : info.shape[info.dims.index("completion")]
        ]
    attrs = {
        "array": name,
        "rows_table": info.rows_table or "",
        "rows_where": json.dumps(info.rows_where),
        "stored_dtype": info.dtype,
    }
    if "layer" not in info.dims:
        attrs["layer"] = info.layers[0]
        attrs["hook_name"] = info.hook_names[0]
    return xr.DataArray(_values(unit, name).astype(np.float32), dims=info.dims, coords=coords, name=name, attrs=attrs)


def to_xarray(unit: Unit, array: str | None = None):
    """A unit's arrays for xarray, table columns as coordinates along ``rows`` (also ``unit.to_xarray()``).

    Parameters
    ----------
    unit : Unit
        A unit read with `cache.read_unit`.
    array : str, optional
        One array's name; None: every array.

    Returns
    -------
    xarray.DataArray or xarray.DataTree
        The one array, or a tree with one node per array (arrays align with different tables, so
        each keeps its own ``rows`` axis) and the unit's attributes on the root.
    """
    import xarray as xr

    if array is not None:
        da = _data_array(unit, array)
        da.attrs.update({f"unit_{k}": v for k, v in _identity_attrs(unit).items()})
        return da
    nodes = {f"/{name}": xr.Dataset({name: _data_array(unit, name)}) for name in array_names(unit)}
    tree = xr.DataTree.from_dict({"/": xr.Dataset(attrs=_identity_attrs(unit)), **nodes})
    return tree
