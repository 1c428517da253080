"""One figure style for every plot: matplotlib `Figure` objects (no pyplot, so no global
backend or figure state), constrained layout, 110 dpi, written atomically.

A plot function decorated with `redraw_on_change` is drawn only when its PNG is missing or was
drawn from other inputs: every sweep rewrites the report of the whole OUT, and a checkpoint
added to a finished OUT should cost its own figures, not all of them again."""

from __future__ import annotations

import contextvars
import functools
import hashlib
import inspect
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from interp.core.atomic import atomic_write
from interp.core.hashing import sha256_file

DPI = 110
# the PNG text chunk that records what a figure was drawn from (figure_key)
KEY_CHUNK = "interp-figure-key"
_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("interp_figure_key", default=None)
F = TypeVar("F", bound=Callable[..., Any])


def new_figure(width: float, height: float):
    """A matplotlib `Figure` in the project's style (constrained layout), not registered with pyplot.

    Parameters
    ----------
    width, height : float
        Size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        The empty figure.
    """
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_figure(fig, path: str | Path, *, dpi: int = DPI) -> Path:
    """Write a figure through a temporary file and rename (format from the suffix).

    Inside a `redraw_on_change` plot, a PNG records the key of its inputs in a text chunk.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : str or Path
        Where it goes.
    dpi : int
        Resolution.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    key = _key.get()
    meta = {KEY_CHUNK: key} if key is not None and fmt == "png" else None
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=fmt, metadata=meta))


def _digest(value: object, h) -> None:
    """Feed `value` into hash `h`: frames, arrays and containers by content, the rest by repr
    (an object whose repr is not its content, e.g. one with an address, only costs a redraw)."""
    import numpy as np
    import pandas as pd

    if isinstance(value, (pd.DataFrame, pd.Series)):
        frame = value.to_frame() if isinstance(value, pd.Series) else value
        h.update(repr((type(value).__name__, frame.shape, list(frame.columns), list(frame.index.names))).encode())
        h.update(repr([str(t) for t in frame.dtypes]).encode())
        try:
            h.update(pd.util.hash_pandas_object(value, index=True).to_numpy().tobytes())
        except TypeError:  # unhashable cells (lists): their text
            h.update(value.to_csv().encode())
    elif isinstance(value, np.ndarray):
        h.update(repr((value.dtype.str, value.shape)).encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value, key=repr):
            _digest(k, h)
            _digest(value[k], h)
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[" if isinstance(value, list) else b"(")
        for v in value:
            _digest(v, h)
        h.update(b"]")
    else:
        h.update(repr(value).encode())
    h.update(b";")


@functools.cache
def _source_digest(filename: str) -> str:
    """The plotting code's bytes: a changed plot function (or this style) redraws."""
    return sha256_file(filename)


def figure_key(fn: Callable[..., Any], inputs: dict[str, object]) -> str:
    """What a figure is drawn from, hashed: the plot function's module source, this module's style,
    matplotlib's version and every input but the output path.

    Parameters
    ----------
    fn : callable
        The plot function.
    inputs : dict
        Its arguments by name.

    Returns
    -------
    str
        A sha256 hex digest.
    """
    import matplotlib

    h = hashlib.sha256()
    h.update(f"{fn.__module__}.{fn.__qualname__} {matplotlib.__version__}".encode())
    h.update(_source_digest(inspect.getsourcefile(fn) or "").encode())
    h.update(_source_digest(__file__).encode())
    _digest(inputs, h)
    return h.hexdigest()


def png_text(path: str | Path) -> dict[str, str]:
    """The tEXt chunks of a PNG before its image data.

    Parameters
    ----------
    path : str or Path
        A PNG file.

    Returns
    -------
    dict of str to str
        Keyword -> text ({} for a missing or non-PNG file).
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        return {}
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return {}
    out, pos = {}, 8
    while pos + 8 <= len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind in (b"IDAT", b"IEND") or len(body) < n:
            break
        if kind == b"tEXt" and b"\0" in body:  # what matplotlib writes for a latin-1 key and value
            k, v = body.split(b"\0", 1)
            out[k.decode("latin-1")] = v.decode("latin-1")
        pos += 12 + n
    return out


def redraw_on_change(fn: F) -> F:
    """Decorate a plot function that takes a ``path``: draw only when its inputs changed.

    When ``path`` is a PNG that records the key of the same inputs (`figure_key`), it is returned
    without drawing; otherwise the figure is drawn with that key recorded. A figure's bytes are a
    function of its inputs, so a skipped draw leaves the file a draw would write
    (tests/unit/test_figures.py). Helpers the plot function calls from other modules are not in
    the key: a change there needs the PNGs deleted.

    Parameters
    ----------
    fn : callable
        The plot function; it returns the path it wrote.

    Returns
    -------
    callable
        The decorated function, same signature and return value (``path`` when skipped).
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def draw(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        inputs = dict(bound.arguments)
        path = Path(inputs.pop("path"))
        key = figure_key(fn, inputs)
        if path.suffix.lower() == ".png" and png_text(path).get(KEY_CHUNK) == key:
            return path
        token = _key.set(key)
        try:
            return fn(*args, **kwargs)
        finally:
            _key.reset(token)

    return draw  # type: ignore[return-value]


def safe_name(name: str) -> str:
    """A file-name-safe version of a checkpoint or bank name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "x"


def lineage_order(checkpoints: list[str], lineage: dict | None) -> list[tuple[str, list[str]]]:
    """The base, then each route continuing from it, in training order.

    Parameters
    ----------
    checkpoints : list of str
        Checkpoint names present.
    lineage : dict, optional
        The sweep's lineage (lineage.json); None gives one group "checkpoints" in the given
        order, and checkpoints on no route form a last group "other".

    Returns
    -------
    list of (str, list of str)
        (route label, ordered checkpoints).
    """
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
    """Groups of checkpoints to plot, and whether a line may join each group's points.

    Only a lineage's checkpoints are joined, so two unrelated models are never drawn as if one
    grew into the other.

    Parameters
    ----------
    checkpoints : list of str
        Checkpoint names present.
    lineage : dict, optional
        The sweep's lineage (lineage.json).

    Returns
    -------
    list of (str, list of str, bool)
        (label, checkpoints in order, joined by a line).
    """
    out = []
    for route, cks in lineage_order(checkpoints, lineage):
        cks = [k for k in cks if k in checkpoints]
        if cks:
            out.append((route, cks, route not in UNRELATED and len(cks) > 1))
    return out
