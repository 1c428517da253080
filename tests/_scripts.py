"""Load a file of the checkout that is not in a package (scripts/, bench/) as a module, for tests."""

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath: str) -> ModuleType:
    """The module at ROOT/relpath (e.g. "scripts/organism_flips.py"), executed once per call."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
