"""Probe datasets straight from the HDF5 cache: residual rows, targets, item groups.

No model is loaded here: everything comes from cache units written by the studies. The
targets of each study are declared by its spec (`StudySpec.probe_targets`, in the study's
folder, probe.py); this module only finds the units and applies the target's extractor.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cache.layers import primary_layer, unit_at_layer, unit_layers
from cache.store import Store, read_unit
from interp.core.errors import ConfigError
from interp.studies import all_studies, get_study


def probe_targets() -> dict[str, dict[str, str]]:
    """{study: {target: kind}} over the registered studies (kind: ridge or logistic)."""
    found = {s.name: {t: p.kind for t, p in s.probe_targets().items()} for s in all_studies()}
    return {name: targets for name, targets in found.items() if targets}


@dataclass
class ProbeData:
    checkpoint: str
    bank: str
    layer: int
    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    kind: str


def probe_datasets(out: Path, study: str, target: str, *, layer: int | str | None = None) -> list[ProbeData]:
    """One dataset per cached unit of `study` and layer.

    `layer`: None -> each unit's primary layer (floor(3 n_layers / 4) when cached); an int ->
    that layer in every unit caching it (units without it are skipped; none at all is an
    error); "all" -> every cached layer of every unit. The study's extractor sees the unit
    sliced at one layer (cache.layers.unit_at_layer), as units were before multi-layer capture.
    """
    targets = probe_targets()
    if study not in targets:
        raise ConfigError(f"unknown study {study!r} (choose one of {', '.join(targets)})")
    if target not in targets[study]:
        raise ConfigError(f"unknown target {target!r} for {study} (choose one of {', '.join(targets[study])})")
    spec = get_study(study).probe_targets()[target]
    paths, _stale = Store(Path(out) / "cache").current_units(study)  # stale units are reported, not read
    if not paths:
        raise ConfigError(f"{out}: no cached {study} units (run `interp sweep ... --study {study} --out {out}`)")
    data = []
    for path in paths:
        unit = read_unit(path)
        cached = unit_layers(unit.attrs)
        if layer is None:
            chosen = [primary_layer(unit.attrs)]
        elif layer == "all":
            chosen = list(cached)
        else:
            chosen = [int(layer)] if int(layer) in cached else []
        for lay in chosen:
            X, y, groups = spec.extract(unit_at_layer(unit, lay), target)
            ok = np.isfinite(y) & np.isfinite(X.astype(np.float32)).all(axis=1)
            data.append(
                ProbeData(
                    checkpoint=str(unit.attrs["checkpoint"]),
                    bank=str(unit.attrs["bank"]),
                    layer=lay,
                    X=X[ok].astype(np.float64),
                    y=y[ok],
                    groups=groups[ok],
                    kind=spec.kind,
                )
            )
    if not data:
        raise ConfigError(f"{out}: no cached {study} units at layer {layer}")
    return data
