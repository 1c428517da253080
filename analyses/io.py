"""Results tables on disk: declared column order, stable row order, atomic replace.

Spreadsheet safety: a text cell starting with `=`, `+`, `-`, `@`, tab or carriage return
(that is not a number) is written with a leading `'`, so a spreadsheet shows it as text
instead of running it as a formula (CSV injection). Numbers, including negative ones, are
written as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from interp.core.atomic import atomic_write
from interp.core.errors import CacheError


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def defuse_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """Copy of df with formula-like text cells prefixed by `'` (see the module docstring)."""
    out = None
    for col in df.columns:
        if not (df[col].dtype == object or pd.api.types.is_string_dtype(df[col])):
            continue
        values = df[col]
        risky = values.map(lambda v: isinstance(v, str) and v.startswith(_FORMULA_START) and not _is_number(v))
        if risky.any():
            out = df.copy() if out is None else out
            out[col] = values.where(~risky, "'" + values.astype(str))
    return df if out is None else out


def write_table(
    df: pd.DataFrame, path: Path, *, columns: Sequence[str] | None = None, sort: Sequence[str] | None = None
) -> Path:
    """Write CSV via a temporary file and rename, so a crash never leaves half a table."""
    if columns is not None:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise ValueError(f"{path.name}: missing declared column(s) {', '.join(missing)}")
        df = df[list(columns) + [c for c in df.columns if c not in columns]]
    if sort:
        df = df.sort_values(list(sort), kind="mergesort", ignore_index=True)
    df = defuse_formulas(df)
    path = Path(path)
    try:
        atomic_write(path, lambda tmp: df.to_csv(tmp, index=False, float_format="%.10g", lineterminator="\n"))
    except OSError as exc:
        raise CacheError(f"{path}: cannot write results table ({exc.strerror or exc})") from None
    return path


def md_cell(value: object) -> str:
    """A value safe inside a Markdown table cell: `|` escaped, line breaks shown as \\n (a raw
    one ends the row; a raw `|` starts a new column: checkpoint, bank and item names may hold both)."""
    text = str(value)
    return (
        text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    )
