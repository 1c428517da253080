"""One figure style for every plot: matplotlib `Figure` objects (no pyplot, so no global
backend or figure state), constrained layout, 110 dpi, written atomically."""

from __future__ import annotations

import re
from pathlib import Path

from interp.core.atomic import atomic_write

DPI = 110


def new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_figure(fig, path: str | Path, *, dpi: int = DPI) -> Path:
    """Write `fig` to `path` (format from the suffix) through a temporary file and rename."""
    path = Path(path)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png"))


def safe_name(name: str) -> str:
    """A file-name-safe version of a checkpoint or bank name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "x"


def lineage_order(checkpoints: list[str], lineage: dict | None) -> list[tuple[str, list[str]]]:
    """[(route label, ordered checkpoints)]: base then each route continuing from it."""
    if not lineage or not (lineage.get("base") or lineage.get("routes")):
        return [("checkpoints", checkpoints)]
    base = [c for c in lineage.get("base", []) if c in checkpoints]
    seqs = [
        (f"base→{route}", base + [c for c in cks if c in checkpoints])
        for route, cks in lineage.get("routes", {}).items()
    ]
    listed = set(base) | {c for _, s in seqs for c in s}
    rest = [c for c in checkpoints if c not in listed]
    out = seqs or [("base", base)]
    return out + ([("other", rest)] if rest else [])


# groups lineage_order returns that are not a lineage: their checkpoints are unrelated models
UNRELATED = ("checkpoints", "other")


def trajectory_groups(checkpoints: list[str], lineage: dict | None) -> list[tuple[str, list[str], bool]]:
    """[(label, checkpoints in order, joined by a line?)]: only a lineage's checkpoints are joined,
    so two unrelated models are never drawn as if one grew into the other."""
    out = []
    for route, cks in lineage_order(checkpoints, lineage):
        cks = [k for k in cks if k in checkpoints]
        if cks:
            out.append((route, cks, route not in UNRELATED and len(cks) > 1))
    return out
