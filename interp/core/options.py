"""Typed options: frozen keyword-only dataclasses whose fields carry their own help text.

Every option is defined once, as a dataclass field with its default. From the same fields
come the command-line flags (`--max-new-tokens`, `--chat-template/--no-chat-template`), the
config-file keys (`max_new_tokens`), validation of values (type and choices) and, in the
studies, the settings that enter the unit identity.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import Field
from typing import Any, Mapping

from interp.core.errors import ConfigError


def opt(
    default: Any,
    help: str = "",
    *,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
    cli: bool = True,
    bounds: str | None = None,
) -> Any:
    """A dataclass field with metadata: help, flag (default `--name-with-dashes`; bools get a
    `--x/--no-x` pair), allowed values, whether it is offered on the command line, and for a
    number the interval it must lie in (`bounds`, e.g. "[0, 1]", "(0, 1]", "[1, inf)")."""
    meta = {"help": help, "flag": flag, "choices": choices, "cli": cli, "bounds": bounds}
    return dataclasses.field(default=default, metadata=meta)


_BOUNDS = re.compile(r"([\[(])\s*(-?inf|[-\d.e]+)\s*,\s*(-?inf|[-\d.e]+)\s*([\])])")


def in_bounds(value: float, bounds: str) -> bool:
    """Whether `value` lies in the interval `bounds` ("[lo, hi]", open ends with ( or ))."""
    m = _BOUNDS.fullmatch(bounds.strip())
    if m is None:
        raise ValueError(f"bounds {bounds!r}: expected an interval such as [0, 1] or (0, inf)")
    lo, hi = float(m.group(2)), float(m.group(3))
    above = value >= lo if m.group(1) == "[" else value > lo
    below = value <= hi if m.group(4) == "]" else value < hi
    return above and below and value == value  # NaN lies in no interval


def option_fields(cls: type) -> list[Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def field_type(cls: type, name: str) -> type:
    """The plain Python type of a field (`int | None` -> int, `Literal[...]` -> str)."""
    hint = typing.get_type_hints(cls)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and args:
        hint = args[0]
        origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return type(typing.get_args(hint)[0])
    return hint if isinstance(hint, type) else object


def choices_of(cls: type, f: Field) -> tuple | None:
    if f.metadata.get("choices"):
        return tuple(f.metadata["choices"])
    hint = typing.get_type_hints(cls)[f.name]
    for h in (hint, *typing.get_args(hint)):
        if typing.get_origin(h) is typing.Literal:
            return typing.get_args(h)
    return None


def _coerce(cls: type, f: Field, value: Any, where: str) -> Any:
    if value is None:
        return None
    want = field_type(cls, f.name)
    try:
        if want is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                value = value.lower() in ("true", "1", "yes")
            value = bool(value)
        elif want is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            value = int(value)
        elif want is float:
            value = float(value)
        elif want is str:
            value = str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}option {f.name}: expected {want.__name__}, got {value!r}") from None
    allowed = choices_of(cls, f)
    if allowed and value not in allowed:
        raise ConfigError(f"{where}option {f.name} must be one of {', '.join(map(str, allowed))}, got {value!r}")
    bounds = f.metadata.get("bounds")
    if bounds and isinstance(value, (int, float)) and not in_bounds(value, bounds):
        raise ConfigError(f"{where}option {flag_for(f).split('/')[0]} must lie in {bounds}, got {value!r}")
    return value


def build(cls: type, values: Mapping[str, Any], *, where: str = "") -> Any:
    """An instance of `cls` from a mapping of field values (unknown keys are an error)."""
    known = {f.name: f for f in option_fields(cls)}
    unknown = [k for k in values if k not in known]
    if unknown:
        raise ConfigError(f"{where}unknown option(s) {', '.join(unknown)} (known: {', '.join(known)})")
    try:
        return cls(**{k: _coerce(cls, known[k], v, where) for k, v in values.items()})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}{exc}") from None


def flag_for(f: Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")
