"""No attribute is assigned to a class outside its body anywhere in the package: a reader of a
class sees every method and attribute it has in the class statement (issue 46, item 1).

The check reads the AST of every module. A class is named by a `class` statement of the module,
by a name imported from a module of the package that defines it there (followed through
re-exports), or by `alias.Name` after `import package.module as alias`. Flagged: `C.x = ...`,
`C.x += ...`, `C.x: T = ...` and `setattr(C, ...)` anywhere but inside the body of `class C`
itself (its methods included)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("interp", "sweeps", "cache", "analyses", "probes")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _parse(root: Path) -> dict[str, ast.Module]:
    return {
        _module_name(p, root): ast.parse(p.read_text(encoding="utf-8"), str(p))
        for pkg in PACKAGES
        if (root / pkg).is_dir()
        for p in (root / pkg).rglob("*.py")
    }


def _imports_from(tree: ast.Module) -> list[tuple[str, str, str]]:
    """(module, name, local name) of every absolute `from module import name [as local]`."""
    return [
        (node.module, a.name, a.asname or a.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        for a in node.names
    ]


def class_names(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module -> the names that are classes there: its own top-level `class` statements, and
    names it imports that are classes in the module they come from (to a fixed point)."""
    names = {m: {n.name for n in t.body if isinstance(n, ast.ClassDef)} for m, t in trees.items()}
    changed = True
    while changed:
        changed = False
        for mod, tree in trees.items():
            for src, name, local in _imports_from(tree):
                if name in names.get(src, ()) and local not in names[mod]:
                    names[mod].add(local)
                    changed = True
    return names


def assignments_outside_body(mod: str, tree: ast.Module, classes: dict[str, set[str]]) -> list[str]:
    """`module:line Class.attr` for every assignment to a class attribute outside that class's body."""
    local = set(classes.get(mod, ()))
    aliases = {
        a.asname or a.name: a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
        if a.asname or "." not in a.name
    }
    aliases |= {  # `from package import module`
        loc: f"{src}.{name}" for src, name, loc in _imports_from(tree) if f"{src}.{name}" in classes
    }

    def class_of(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name) and expr.id in local:
            return expr.id
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            module = aliases.get(expr.value.id)
            if module is not None and expr.attr in classes.get(module, ()):
                return expr.attr
        return None

    found: list[str] = []

    def visit(node: ast.AST, inside: tuple[str, ...]) -> None:
        if isinstance(node, ast.ClassDef):
            inside = (*inside, node.name)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        flat = []
        while targets:
            t = targets.pop()
            if isinstance(t, (ast.Tuple, ast.List)):
                targets += t.elts
            else:
                flat.append(t)
        hits = [(class_of(t.value), t.attr) for t in flat if isinstance(t, ast.Attribute)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
            hits.append((class_of(node.args[0]), "<setattr>"))
        found.extend(f"{mod}:{node.lineno} {cls}.{attr}" for cls, attr in hits if cls and cls not in inside)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, ())
    return found


def test_no_class_attribute_is_assigned_outside_its_body() -> None:
    trees = _parse(REPO)
    assert len(trees) > 100 and "cache.unit" in trees
    classes = class_names(trees)
    assert "Unit" in classes["cache"] and "PressureStudy" in classes["interp.studies.pressure"]  # re-exports
    found = [hit for mod, tree in trees.items() for hit in assignments_outside_body(mod, tree, classes)]
    assert found == [], "\n".join(found)


PLANTED = """
import cache.unit as cu
from cache import Unit
from interp.studies.pressure.study import PressureStudy as P


def _analyze(self, units, results_dir, cfg):
    return {}


class Local:
    count = 0

    def bump(self):
        Local.count += 1  # inside its own body: allowed


class Other:
    def touch(self):
        Local.seen = True


Local.extra = 1
P.analyze = _analyze
cu.Unit.activations = None
Unit.to_xarray, x = None, 1
setattr(Unit, "views", None)
obj = Local()
obj.attr = 1  # an instance, not a class: allowed
"""


def test_planted_assignments_are_found(tmp_path: Path) -> None:
    """Negative control: the attachments this check exists for (those cache/__init__.py and the
    studies once made), and a few other spellings, each found; the allowed ones not."""
    (tmp_path / "interp").mkdir()
    (tmp_path / "interp" / "planted.py").write_text(PLANTED)
    trees = {**_parse(REPO), **_parse(tmp_path)}
    hits = assignments_outside_body("interp.planted", trees["interp.planted"], class_names(trees))
    assert [h.split(" ", 1)[1] for h in hits] == [
        "Local.seen",
        "Local.extra",
        "P.analyze",
        "Unit.activations",
        "Unit.to_xarray",
        "Unit.<setattr>",
    ], hits
