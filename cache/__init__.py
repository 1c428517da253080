"""HDF5 cache: atomic unit files with provenance; readers need no model (layout: docs/cache.md)."""

from cache.store import Store, Unit, UnitIdentity, read_array, read_unit
from cache.views import Activations, activations, array_info, collect_tables, to_xarray

# The method forms `unit.activations(layer, array=, as_=)` and `unit.to_xarray(array)`: the
# functions of cache.views, attached here (the package always loads before cache.store), so
# that cache.store never imports cache.views and the dependency runs one way.
Unit.activations = activations  # type: ignore[attr-defined]
Unit.to_xarray = to_xarray  # type: ignore[attr-defined]

__all__ = [
    "Activations",
    "Store",
    "Unit",
    "UnitIdentity",
    "activations",
    "array_info",
    "collect_tables",
    "read_array",
    "read_unit",
    "to_xarray",
]
