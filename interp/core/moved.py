"""Old import paths of modules that moved, kept working for one release with a DeprecationWarning.

`interp/__init__.py` puts `MovedModuleFinder` on `sys.meta_path`, so `import interp.loading`
(or `from interp.loading import load`) gives the module now at `interp.model.loading`, the same
object, and warns once (the old name then stays in `sys.modules`). The project's own code uses
the new paths only: tests/unit/test_moved_paths.py fails on an import of an old one. Remove an
entry when its release is past; the map also serves anyone rebasing onto the new layout
(docs/architecture.md, "Module map").
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

MOVED: dict[str, str] = {
    "interp.loading": "interp.model.loading",
    "interp.checkpoint": "interp.model.checkpoint",
    "interp.fingerprint": "interp.model.fingerprint",
    "interp.hooksites": "interp.model.hooksites",
    "interp.devices": "interp.model.devices",
    "interp.wrapping": "interp.integrations.wrapping",
    "interp.lm_eval_model": "interp.integrations.lm_eval_model",
    "interp.lm_eval_tasks": "interp.integrations.lm_eval_tasks",
    "interp.lm_eval_hook": "interp.integrations.lm_eval_hook",
    # an lm-eval start-up hook installed before the move names interp.lm_eval_model (above)
    "interp.lm_eval_startup": "interp.integrations.lm_eval_startup",
    "interp.demo": "interp.tools.demo",
    "interp.fetch": "interp.tools.fetch",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; import it from there", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system has just set the old name's spec on the (already loaded) module:
        # put its own back, so that reload, pickling by module and `inspect` see the real path
        module.__spec__ = self._spec


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds only the old names in MOVED; every other import passes through untouched."""

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put the finder on `sys.meta_path` once per process."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
