"""Results tables on disk: declared column order, stable row order, atomic replace."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from interp.core.atomic import atomic_write
from interp.core.errors import CacheError


def write_table(df: pd.DataFrame, path: Path, *, columns: Sequence[str] | None = None,
                sort: Sequence[str] | None = None) -> Path:
    """Write CSV via a temporary file and rename, so a crash never leaves half a table."""
    if columns is not None:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise ValueError(f"{path.name}: missing declared column(s) {', '.join(missing)}")
        df = df[list(columns) + [c for c in df.columns if c not in columns]]
    if sort:
        df = df.sort_values(list(sort), kind="mergesort", ignore_index=True)
    path = Path(path)
    try:
        atomic_write(path, lambda tmp: df.to_csv(tmp, index=False, float_format="%.10g", lineterminator="\n"))
    except OSError as exc:
        raise CacheError(f"{path}: cannot write results table ({exc.strerror or exc})") from None
    return path
