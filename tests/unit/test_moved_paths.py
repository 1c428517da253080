"""Modules that moved (interp.core.moved.MOVED): the old path gives the same module with a
DeprecationWarning, and none of the project's own files imports an old path (or a removed alias)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from interp.core.moved import MOVED

REPO = Path(__file__).resolve().parents[2]
REMOVED = ("interp.errors", "interp.hashing")  # deprecated aliases, gone: interp.core.errors / .hashing
# bench/ is left to its own change (it still runs: the old paths warn)
SCANNED = ("interp", "sweeps", "cache", "analyses", "probes", "tests", "scripts")


def old_imports(path: Path) -> list[str]:
    """`file:line old.path` for every import of a moved or removed module in one file."""
    old = set(MOVED) | set(REMOVED)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        found += [f"{path}:{node.lineno} {n}" for n in names if n in old]
    return found


def test_no_project_file_imports_an_old_path() -> None:
    files = [p for d in SCANNED for p in (REPO / d).rglob("*.py")]
    assert len(files) > 150
    bad = [hit for p in files for hit in old_imports(p)]
    assert bad == [], "\n".join(bad)


def test_the_scan_finds_a_planted_old_import(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text(
        "import interp.loading\nfrom interp import devices\nfrom interp.core import errors\n"
        "def f():\n    from interp.errors import ConfigError\n"
    )
    hits = old_imports(planted)
    assert [h.split(" ")[1] for h in hits] == ["interp.loading", "interp.devices", "interp.errors"]


_PROBE = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import interp.loading as old
    from interp.checkpoint import fingerprint
    from interp.lm_eval_startup import TARGET
import interp.model.loading as new
import interp.model.checkpoint as ck
assert old is new, (old, new)
assert fingerprint is ck.fingerprint
assert new.__spec__.name == "interp.model.loading", new.__spec__
assert TARGET == "interp.integrations.lm_eval_model:InterpLM", TARGET
with warnings.catch_warnings(record=True) as again:
    import interp.loading
msgs = [(w.category.__name__, str(w.message)) for w in caught]
assert [c for c, _ in msgs] == ["DeprecationWarning"] * 3, msgs
assert "interp.loading moved to interp.model.loading" in msgs[0][1], msgs
assert again == [], again  # once per process
import sys
# an editable install of another checkout (a venv shared between worktrees) would serve its files
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
try:
    import interp.errors
except ModuleNotFoundError:
    print("ok")
"""


def test_old_path_is_the_new_module_and_warns_once() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, capture_output=True, text=True, timeout=120, env=_env()
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def _env() -> dict[str, str]:
    import os

    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
