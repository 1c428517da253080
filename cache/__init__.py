"""HDF5 cache: atomic unit files with provenance; readers need no model."""
from cache.store import Store, Unit, UnitIdentity, collect_tables, read_array, read_unit

__all__ = ["Store", "Unit", "UnitIdentity", "collect_tables", "read_array", "read_unit"]
