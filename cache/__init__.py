"""HDF5 cache: atomic unit files with provenance; readers need no model (layout: docs/cache.md)."""

from cache.store import Store, UnitIdentity, read_array, read_unit
from cache.tables import collect_tables
from cache.unit import Unit
from cache.views import Activations, activations, array_info, to_xarray

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
