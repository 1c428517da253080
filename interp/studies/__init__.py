"""Studies, one folder each (interp/studies/<name>/), registered once with `@register_study`.

Everything outside a study's folder reaches it through this registry: planning, execution,
the report, `probe`, `predict`, the shipped-bank list and the demo. Adding a study is one new
folder and one import line below (or `register_study` from your own code).
"""

from __future__ import annotations

from typing import Any, Mapping

from interp.core.registry import Registry
from interp.studies.base import StudySpec, options_from, option_names

STUDIES: Registry[StudySpec] = Registry("study")


def register_study(cls: type[StudySpec]) -> type[StudySpec]:
    """Class decorator: register one instance of the spec under `cls.name`."""
    from interp.banks import SHIPPED

    STUDIES.add(cls.name, cls(), replace=True)
    for bank, file in cls.shipped_banks.items():
        SHIPPED.add(bank, file, replace=True)
    return cls


def get_study(name: str) -> StudySpec:
    _load_builtin()
    return STUDIES.get(name)


def all_studies() -> list[StudySpec]:
    """Every registered study: the built-in ones in BUILTIN order (whatever was imported first),
    then others in registration order. This order is the report's."""
    _load_builtin()
    items = STUDIES.items()
    rank = {name: i for i, name in enumerate(BUILTIN)}
    return [spec for _, (name, spec) in sorted(enumerate(items), key=lambda e: (rank.get(e[1][0], len(rank)), e[0]))]


def study_names() -> tuple[str, ...]:
    return tuple(spec.name for spec in all_studies())


def broadcast_options(flat: Mapping[str, Any], per_study: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Typed options per study from flat keys (each set on every study that declares it)
    and per-study tables ({study: {key: value}} or {study: options instance})."""
    _load_builtin()
    out: dict[str, Any] = {}
    per_study = dict(per_study or {})
    claimed: set[str] = set()
    for name, spec in STUDIES.items():
        names = option_names(spec)
        values = {k: v for k, v in flat.items() if k in names}
        claimed |= set(values)
        given = per_study.pop(name, None)
        if given is not None and not isinstance(given, Mapping):
            if not values:
                out[name] = given
                continue
            from dataclasses import asdict

            given = asdict(given)
        values.update(given or {})
        out[name] = options_from(spec, values)
    if per_study:
        from interp.core.errors import ConfigError

        raise ConfigError(f"options for unknown study {', '.join(per_study)} (choose one of {', '.join(STUDIES)})")
    unknown = [k for k in flat if k not in claimed]
    if unknown:
        from interp.core.errors import ConfigError

        raise ConfigError(f"option(s) {', '.join(unknown)} unknown to every study")
    return out


BUILTIN = ("pressure", "classify", "cloze")  # registry order = report order
_LOADED = False


def _load_builtin() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        import importlib

        for name in BUILTIN:
            importlib.import_module(f"interp.studies.{name}")


__all__ = ["STUDIES", "StudySpec", "all_studies", "broadcast_options", "get_study", "register_study", "study_names"]
