"""Studies, one folder each (interp/studies/<name>/), found through the entry-point group
`interp.studies` at start-up.

Everything outside a study's folder reaches it through this registry: planning, execution,
the report, `probe`, `predict`, the shipped-bank list and the demo. A study in another
installed package declares `[project.entry-points."interp.studies"] NAME = "module:Class"`
(a `StudySpec` subclass) and runs with `interp sweep --study NAME` like the built-in ones,
which this package declares the same way in its pyproject.toml. `register_study` adds one from
your own code (a notebook, a test). A broken entry point stops start-up with one line naming
its distribution and entry point.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from interp.core.errors import ConfigError
from interp.core.registry import Registry
from interp.studies.base import StudySpec, options_from, option_names

if TYPE_CHECKING:
    from interp.banks import Bank

GROUP = "interp.studies"
# The built-in studies in report order, as pyproject.toml declares them in GROUP (a test holds the
# two equal). Read from here only when this package's installed metadata lacks them: an editable
# install made before the group existed, or a source tree on PYTHONPATH.
BUILTIN: Mapping[str, str] = {
    "pressure": "interp.studies.pressure.study:PressureStudy",
    "classify": "interp.studies.classify.study:ClassifyStudy",
    "cloze": "interp.studies.cloze.study:ClozeStudy",
    "ab_sycophancy": "interp.studies.ab_sycophancy.study:AbSycophancyStudy",
    "sycophancy_eval": "interp.studies.sycophancy_eval.study:SycophancyEvalStudy",
}

STUDIES: Registry[StudySpec] = Registry("study")


def register_study(cls: type[StudySpec]) -> type[StudySpec]:
    """Register one instance of a study spec under ``cls.name`` (usable as a class decorator).

    Its shipped banks are registered too. Installed studies are registered from the
    ``interp.studies`` entry points; this is for a study defined in a script or a test.

    Parameters
    ----------
    cls : type[StudySpec]
        A concrete StudySpec subclass.

    Returns
    -------
    type[StudySpec]
        ``cls`` itself.
    """
    from interp.banks import SHIPPED

    STUDIES.add(cls.name, cls(), replace=True)
    for bank, file in cls.shipped_banks.items():
        SHIPPED.add(bank, file, replace=True)
    return cls


def get_study(name: str) -> StudySpec:
    _load_studies()
    return STUDIES.get(name)


def resolve_bank(ref: str | Path, kind: str) -> Bank:
    """`interp.banks.resolve` once every study is registered: a shipped bank's name (``moral``,
    ``cloze``, ...) is known only after its study registered it, so a loader called before any
    study was looked up would read the name as a missing file."""
    from interp.banks import resolve

    _load_studies()
    return resolve(ref, kind)


def all_studies() -> list[StudySpec]:
    """Every registered study: the built-in ones in BUILTIN order (whatever was imported first),
    then others in registration order. This order is the report's."""
    _load_studies()
    items = STUDIES.items()
    rank = {name: i for i, name in enumerate(BUILTIN)}
    return [spec for _, (name, spec) in sorted(enumerate(items), key=lambda e: (rank.get(e[1][0], len(rank)), e[0]))]


def study_names() -> tuple[str, ...]:
    return tuple(spec.name for spec in all_studies())


def broadcast_options(flat: Mapping[str, Any], per_study: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Typed options per study from flat keys (each set on every study that declares it)
    and per-study tables ({study: {key: value}} or {study: options instance})."""
    _load_studies()
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
        raise ConfigError(f"options for unknown study {', '.join(per_study)} (choose one of {', '.join(STUDIES)})")
    unknown = [k for k in flat if k not in claimed]
    if unknown:
        raise ConfigError(f"option(s) {', '.join(unknown)} unknown to every study")
    return out


_LOADED = False


def _distribution(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "interp (source tree)"


def study_entry_points() -> list[tuple[metadata.EntryPoint, str]]:
    """(entry point, distribution) of every study: the installed ones in group `interp.studies`,
    then a built-in one from BUILTIN where no installed entry point provides it."""
    found: dict[str, tuple[metadata.EntryPoint, str]] = {}
    for ep in metadata.entry_points(group=GROUP):
        if ep.name in found and found[ep.name][0].value != ep.value:
            raise ConfigError(
                f"study {ep.name!r} is declared twice in entry-point group {GROUP}: by {found[ep.name][1]} "
                f"({found[ep.name][0].value}) and by {_distribution(ep)} ({ep.value}); uninstall one"
            )
        found.setdefault(ep.name, (ep, _distribution(ep)))
    for name, value in BUILTIN.items():
        if name not in found:
            found[name] = (metadata.EntryPoint(name, value, GROUP), "interp (source tree)")
    order = [*BUILTIN, *sorted(n for n in found if n not in BUILTIN)]
    return [found[name] for name in order]


def load_entry_point(ep: metadata.EntryPoint, distribution: str) -> type[StudySpec]:
    """The StudySpec subclass an entry point names, registered; any failure is one ConfigError
    line naming the distribution and the entry point."""
    where = f"study entry point {ep.name} = {ep.value} (distribution {distribution}, group {GROUP})"
    try:
        cls = ep.load()
    except Exception as exc:  # whatever the other package raises: one line, not its traceback
        raise ConfigError(f"{where} does not load: {type(exc).__name__}: {' '.join(str(exc).split())}") from None
    if not (isinstance(cls, type) and issubclass(cls, StudySpec)):
        raise ConfigError(f"{where} names {cls!r}, not a subclass of interp.studies.base.StudySpec")
    if getattr(cls, "name", None) != ep.name:
        raise ConfigError(f"{where}: the class's name is {getattr(cls, 'name', None)!r}, not {ep.name!r}")
    try:
        return register_study(cls)
    except TypeError as exc:  # abstract methods left unimplemented
        raise ConfigError(f"{where}: {' '.join(str(exc).split())}") from None


def _load_studies() -> None:
    """Register every study once per process (again after a failure, which is raised each time)."""
    global _LOADED
    if not _LOADED:
        for ep, distribution in study_entry_points():
            load_entry_point(ep, distribution)
        _LOADED = True


__all__ = [
    "BUILTIN",
    "GROUP",
    "STUDIES",
    "StudySpec",
    "all_studies",
    "broadcast_options",
    "get_study",
    "register_study",
    "resolve_bank",
    "study_entry_points",
    "study_names",
]
