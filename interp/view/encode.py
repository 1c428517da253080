"""JSON for the pages: NaN as null, numpy scalars as numbers, large float matrices as float32 base64."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd


def plain(obj: object) -> object:
    """`obj` with numpy and pandas values made JSON values; NaN and infinities become None."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (str, int)):
        return obj
    if obj is pd.NA or obj is pd.NaT:
        return None
    return str(obj)


def records(df: pd.DataFrame | None, columns: list[str] | None = None) -> list[dict]:
    """Rows of `df` (only `columns` it has, in that order) as JSON objects."""
    if df is None or df.empty:
        return []
    cols = [c for c in columns if c in df.columns] if columns else list(df.columns)
    return plain(df[cols].to_dict(orient="records"))  # type: ignore[return-value]


def f32(values: np.ndarray) -> dict:
    """A float matrix as little-endian float32 base64 (NaN kept): {"shape", "f32"}; the page
    decodes it with a Float32Array. Used for drawing only (heatmaps): tables show float64 values."""
    a = np.ascontiguousarray(np.asarray(values, dtype="<f4"))
    return {"shape": list(a.shape), "f32": base64.b64encode(a.tobytes()).decode("ascii")}


def dumps(obj: object) -> str:
    return json.dumps(plain(obj), allow_nan=False, ensure_ascii=False, separators=(",", ":"))
