"""One cache unit as read back (`cache.store.read_unit`): its file, attributes, tables and arrays,
and the views other tools read it through (`unit.activations()`, `unit.to_xarray()`, in
cache.views: pandas, xarray, numpy, torch; docs/cache.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from cache import views

# fields that define what a unit is; anything else in the attributes is informative only
IDENTITY_FIELDS = (
    "checkpoint_fingerprint",
    "study",
    "study_version",
    "bank",
    "bank_hash",
    "template_hash",
    "settings_hash",
    "layer",
    "backend",
)


@dataclass
class Unit:
    """One cache unit as read back (`cache.read_unit`).

    Parameters
    ----------
    path : Path
        Its file.
    attrs : dict
        Its attributes: the identity (checkpoint fingerprint, study, bank, template, settings,
        layer, backend) and provenance.
    tables : dict of str to pandas.DataFrame
        Tidy tables by name (e.g. ``trials``).
    arrays : dict of str to numpy.ndarray
        Arrays by name (e.g. ``resid``), as stored.
    """

    path: Path
    attrs: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def identity(self) -> dict:
        return {k: self.attrs.get(k) for k in IDENTITY_FIELDS}

    def activations(
        self, layer: int | None = None, *, array: str | None = None, as_: Literal["numpy", "torch"] = "numpy"
    ) -> views.Activations:
        """One layer's residuals joined to their table rows (`cache.views.activations`)."""
        return views.activations(self, layer, array=array, as_=as_)

    def to_xarray(self, array: str | None = None):
        """One array as an `xarray.DataArray`, or every array as a `DataTree` (`cache.views.to_xarray`)."""
        return views.to_xarray(self, array)
