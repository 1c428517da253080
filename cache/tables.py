"""Tables of many units at once: `collect_tables(OUT)`, one DataFrame per table name (no arrays read)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from cache.store import Store, read_unit
from interp.core.errors import CacheError


def unit_paths(source: str | Path | Iterable[str | Path], study: str | None = None) -> list[Path]:
    """Unit files under a sweep OUT (its cache/), a cache root, one unit file, or a list of files."""
    if isinstance(source, (str, Path)):
        p = Path(source)
        if p.is_file():
            return [p]
        root = p / "cache" if (p / "cache").is_dir() else p
        if not root.is_dir():
            raise CacheError(f"{source}: no such sweep output or cache directory")
        return Store(root).units(study)
    return [Path(s) for s in source]


def collect_tables(
    source: str | Path | Iterable[str | Path], table: str | None = None, *, study: str | None = None
) -> pd.DataFrame | dict[str, pd.DataFrame]:
    """One DataFrame per table name over every unit (reads no arrays).

    Rows carry ``checkpoint`` and ``bank`` (written by the sweep) and gain ``unit`` (the file
    name), so every row traces to its file.

    Parameters
    ----------
    source : str, Path or iterable of them
        A sweep's OUT, a cache root, one unit file, or a list of unit files.
    table : str, optional
        One table's name.
    study : str, optional
        Only this study's units.

    Returns
    -------
    dict of str to pandas.DataFrame, or pandas.DataFrame
        ``collect_tables(OUT)`` -> {"trials": ..., "first_turn": ..., ...};
        ``collect_tables(OUT, "trials")`` -> that one DataFrame (empty if no unit has it).
    """
    frames: dict[str, list[pd.DataFrame]] = {}
    for path in unit_paths(source, study):
        unit = read_unit(path, load_arrays=False)
        for name, df in unit.tables.items():
            if table is None or name == table:
                frames.setdefault(name, []).append(df.assign(unit=path.name))
    out = {name: pd.concat(dfs, ignore_index=True) for name, dfs in frames.items()}
    if table is not None:
        return out.get(table, pd.DataFrame())
    return out
