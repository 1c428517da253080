"""HDF5 cache: atomic unit files with provenance; readers need no model (layout: CACHE.md)."""

from cache.store import Store, Unit, UnitIdentity, read_array, read_unit
from cache.views import Activations, activations, array_info, collect_tables, to_xarray

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
