"""Which residual layers a unit holds, and how to pick one. No torch: probes read this.

A unit captures resid_pre at one or more layers. Its identity field `layer` is the layer
index (an int) when there is one, and the canonical comma list ("0,1,2,5") when there are
several, so single-layer units keep the identity they always had. Every unit written now
stores residual arrays as [..., layers, d_model] and the attribute `layers` (the indices,
in that axis's order). Units written before multi-layer capture have arrays [..., d_model]
and no `layers` attribute; `select_layer` reads both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from interp.core.errors import CacheError, ConfigError


def default_layer(n_layers: int) -> int:
    """Three-quarter depth, as resid_pre: the input of block floor(3 n / 4)."""
    return (3 * n_layers) // 4


def parse_layers(spec: str | int | Sequence[int] | None, n_layers: int, *, where: str = "--layers") -> tuple[int, ...]:
    """`None` -> (floor(3n/4),); `all`; `7`; `0,4,8`; `2-5`; `0-3,10` (ranges inclusive; negative
    indices count from the end, -1 = the last block). Sorted, without duplicates."""
    if spec is None:
        return (default_layer(n_layers),)
    if isinstance(spec, int):
        parts: list[str] = [str(spec)]
    elif isinstance(spec, str):
        if spec.strip().lower() == "all":
            return tuple(range(n_layers))
        parts = [p.strip() for p in spec.split(",")]
    else:
        parts = [str(int(p)) for p in spec]
    out: set[int] = set()
    for part in parts:
        try:
            if "-" in part.lstrip("-"):
                lo, hi = part.lstrip("-").split("-", 1)
                lo = ("-" if part.startswith("-") else "") + lo
                a, b = int(lo), int(hi)
                a, b = (a + n_layers if a < 0 else a), (b + n_layers if b < 0 else b)
                if a > b:
                    raise ValueError
                idx = range(a, b + 1)
            else:
                k = int(part)
                idx = range(k + n_layers if k < 0 else k, (k + n_layers if k < 0 else k) + 1)
        except ValueError:
            raise ConfigError(f"{where}: {part!r} is not a layer, a range a-b or 'all'") from None
        for k in idx:
            if not 0 <= k < n_layers:
                raise ConfigError(f"{where}: layer {k} outside 0..{n_layers - 1}")
            out.add(k)
    if not out:
        raise ConfigError(f"{where}: no layer given")
    return tuple(sorted(out))


def layer_key(layers: Sequence[int]) -> int | str:
    """The identity value: the int for one layer (as before), the comma list for several."""
    layers = tuple(sorted({int(k) for k in layers}))
    return layers[0] if len(layers) == 1 else ",".join(map(str, layers))


def key_layers(key: int | str | np.integer) -> tuple[int, ...]:
    if isinstance(key, (int, np.integer)):
        return (int(key),)
    return tuple(int(k) for k in str(key).split(","))


def stack_layers(resid: Mapping[int, np.ndarray], layers: Sequence[int]) -> np.ndarray:
    """{layer: [..., d]} -> [..., layers, d] in the order of `layers`."""
    return np.stack([np.asarray(resid[k]) for k in layers], axis=-2)


def unit_layers(attrs: Mapping[str, object]) -> tuple[int, ...]:
    if attrs.get("layers") is not None:
        return tuple(int(k) for k in np.asarray(attrs["layers"]).ravel())
    return key_layers(attrs["layer"])  # a unit written before multi-layer capture


def has_layer_axis(attrs: Mapping[str, object]) -> bool:
    return attrs.get("layers") is not None


def primary_layer(attrs: Mapping[str, object]) -> int:
    """The layer a reader uses when none is asked for: floor(3n/4) if cached, else the deepest cached."""
    layers = unit_layers(attrs)
    n = attrs.get("n_layers")
    if n is not None and default_layer(int(n)) in layers:
        return default_layer(int(n))
    return layers[-1] if len(layers) > 1 else layers[0]


def select_layer(arr: np.ndarray, attrs: Mapping[str, object], layer: int, *, where: str = "") -> np.ndarray:
    """The [..., d] slice of a residual array at `layer`; one clear error when not cached."""
    layers = unit_layers(attrs)
    if layer not in layers:
        raise ConfigError(
            f"{where}: layer {layer} is not cached (cached: {', '.join(map(str, layers))}); "
            "rerun the sweep with --layers including it"
        )
    if not has_layer_axis(attrs):
        return arr
    k = layers.index(layer)
    if arr.ndim < 2 or arr.shape[-2] != len(layers):
        raise CacheError(
            f"{where}: residual array of shape {arr.shape} does not have the {len(layers)} cached "
            "layers on its second-to-last axis"
        )
    return arr[..., k, :]


def unit_at_layer(unit, layer: int):
    """A view of a unit whose residual arrays (names starting with "resid") are sliced at
    `layer`, in the layout readers always knew ([..., d_model]); tables and attributes shared.
    Readers written for one layer per unit read any cached layer through this."""
    from dataclasses import replace

    cached = unit_layers(unit.attrs)
    if layer not in cached:
        raise ConfigError(
            f"{unit.path}: layer {layer} is not cached (cached: {', '.join(map(str, cached))}); "
            "rerun the sweep with --layers including it"
        )
    arrays = {
        name: (
            select_layer(arr, unit.attrs, layer, where=f"{unit.path}: array {name}")
            if name.startswith("resid")
            else arr
        )
        for name, arr in unit.arrays.items()
    }
    return replace(unit, arrays=arrays)
