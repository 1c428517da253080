"""Name -> spec registries, one small shape for studies, bank formats, backends, executors.

In the style of lm-eval's `register_model` / `register_task`: a consumer asks the registry
for a name and never branches on names itself; an unknown name is one clear line naming the
choices.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from interp.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Ordered name -> spec mapping. `kind` names what it holds in error messages."""

    def __init__(self, kind: str):
        self.kind = kind
        self._specs: dict[str, T] = {}

    def add(self, name: str, spec: T, *, replace: bool = False) -> T:
        if name in self._specs and not replace and self._specs[name] is not spec:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._specs[name] = spec
        return spec

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """Decorator form: `@REGISTRY.register("name")`."""

        def deco(spec: T) -> T:
            return self.add(name, spec, replace=replace)

        return deco

    def remove(self, name: str) -> None:
        self._specs.pop(name, None)

    def get(self, name: str) -> T:
        try:
            return self._specs[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r} (choose one of {', '.join(self._specs)})") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def items(self) -> list[tuple[str, T]]:
        return list(self._specs.items())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)
