"""One docstring style across the public API: numpy (mkdocs.yml's `docstring_style`), parsed the
way the API reference parses it (griffe). Every function of docs/api.md documents each of its
parameters under "Parameters" and what it returns under "Returns" (or "Yields"), and griffe
has nothing to warn about; a class that lists parameters lists its own."""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path

import griffe
import pytest

REPO = Path(__file__).resolve().parents[2]


def api_objects(page: Path) -> list[str]:
    """The dotted paths the API reference renders (`::: path`, with `members: [...]` expanded)."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"^::: (\S+)(?:\n    options:\n      members: \[([^\]]*)\])?", text, re.M):
        path, members = m.group(1), m.group(2)
        out += [f"{path}.{name.strip()}" for name in members.split(",")] if members else [path]
    return out


def style_problems(obj: griffe.Object) -> list[str]:
    """What keeps one object's docstring from being numpy style, read as mkdocstrings reads it."""
    if obj.docstring is None:
        return ["no docstring"]
    warnings: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("griffe")
    logger.addHandler(handler)
    try:
        sections = obj.docstring.parse("numpy")
    finally:
        logger.removeHandler(handler)
    problems = [f"griffe: {w}" for w in warnings]
    kinds = {s.kind.value: s for s in sections}
    documented = [p.name for p in kinds["parameters"].value] if "parameters" in kinds else []
    if obj.is_function:
        method = obj.parent is not None and obj.parent.is_class
        wanted = [p.name for p in obj.parameters if not (method and p.name in ("self", "cls"))]
        if documented != wanted:
            problems.append(f"Parameters {documented} != signature {wanted}")
        if obj.returns not in (None, "None") and not ({"returns", "yields"} & set(kinds)):
            problems.append("no Returns section")
    elif obj.is_class and documented:
        init = obj.members.get("__init__")
        fields = [p.name for p in init.parameters if p.name != "self"] if init is not None else None
        if fields is None:  # a dataclass: its annotated class attributes, in order
            fields = [n for n, m in obj.members.items() if m.is_attribute and m.annotation is not None]
            fields = [n for n in fields if not n.startswith("_")][: len(documented)]
        if documented != fields:
            problems.append(f"Parameters {documented} != fields {fields}")
    return problems


@functools.cache
def _package(name: str, search: Path) -> griffe.Object:
    return griffe.load(name, search_paths=[str(search)], docstring_parser="numpy")


def _load(path: str, search: Path) -> griffe.Object:
    package = _package(path.split(".")[0], search)
    return package[path.split(".", 1)[1]] if "." in path else package


def test_the_api_reference_is_numpy_style() -> None:
    paths = api_objects(REPO / "docs" / "api.md")
    assert len(paths) >= 30
    problems = {}
    for path in paths:
        obj = _load(path, REPO)
        found = style_problems(obj.final_target if obj.is_alias else obj)
        if found:
            problems[path] = found
    assert problems == {}, "\n".join(f"{p}: {v}" for p, v in problems.items())


PLANTED = '''
def google(a, b):
    """Google style.

    Args:
        a: one.
        b: two.

    Returns:
        their sum.
    """
    return a + b


def missing(a, b) -> int:
    """Numpy style, one parameter short and no Returns.

    Parameters
    ----------
    a : int
        One.
    """
    return a + b


def fine(a, b) -> int:
    """Numpy style.

    Parameters
    ----------
    a : int
        One.
    b : int
        Two.

    Returns
    -------
    int
        Their sum.
    """
    return a + b
'''


@pytest.mark.parametrize(
    "name, expect",
    [
        ("google", "Parameters [] != signature ['a', 'b']"),
        ("missing", "Parameters ['a'] != signature ['a', 'b']"),
        ("missing", "no Returns section"),
    ],
)
def test_other_styles_are_caught(tmp_path: Path, name: str, expect: str) -> None:
    (tmp_path / "planted.py").write_text(PLANTED)
    assert expect in style_problems(_load(f"planted.{name}", tmp_path))
    assert style_problems(_load("planted.fine", tmp_path)) == []
