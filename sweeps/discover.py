"""Find checkpoints in directories and trees; order them by step; group them into lineages.

A directory with a config.json is a checkpoint. Anything else given on the command line is
walked (up to 4 levels). Checkpoints directly under a tree root form the base (pretraining)
sequence; checkpoints under a subdirectory form that subdirectory's route (e.g. `sft/`,
`dpo/`). Steps come from trainer_state.json (global_step) or the name (`step1000`,
`checkpoint-500`); `final` sorts last. An optional `lineage.toml` at the tree root declares
base, routes and finals explicitly and wins over the layout.
Directories that hold no checkpoint are reported in a warning, never silently skipped.
"""

from __future__ import annotations

import json
import logging
import re
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from interp.core.atomic import atomic_write_text
from interp.core.errors import ConfigError
from interp.core.files import regular_file

log = logging.getLogger("interp.sweep")
_STEP = re.compile(r"(?:step|checkpoint|ckpt|iter)[-_]?(\d+)", re.IGNORECASE)
MAX_DEPTH = 4


@dataclass
class Discovery:
    checkpoints: list[Path] = field(default_factory=list)
    names: dict[Path, str] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)
    lineage: dict = field(default_factory=lambda: {"base": [], "routes": {}, "final": {}})
    not_checkpoints: list[Path] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)  # checkpoints reached twice: which name was dropped, why

    def restricted(self, names: Sequence[str]) -> "Discovery":
        """Only the named checkpoints, the lineage cut to them (order kept; a route keeps its final
        only if it is named). An unknown name is a ConfigError."""
        keep = set(names)
        unknown = sorted(keep - set(self.names.values()))
        if unknown:
            raise ConfigError(f"no checkpoint named {', '.join(map(repr, unknown))} in this tree")
        lin = self.lineage
        return Discovery(
            checkpoints=[p for p in self.checkpoints if self.names[p] in keep],
            names={p: n for p, n in self.names.items() if n in keep},
            steps={n: s for n, s in self.steps.items() if n in keep},
            lineage={
                "base": [c for c in lin["base"] if c in keep],
                "routes": {r: [c for c in cks if c in keep] for r, cks in lin["routes"].items()},
                "final": {r: c for r, c in lin["final"].items() if c in keep},
            },
            not_checkpoints=list(self.not_checkpoints),
            aliases=list(self.aliases),
        )

    def write(self, out: Path, *, keep: set[str] = frozenset()) -> None:
        """OUT/lineage.json for this discovery; `keep`: names of checkpoints of earlier sweeps whose
        rows stay in OUT's results, kept listed (and in their routes, where this sweep has none of
        that name) from the lineage.json those sweeps wrote."""
        out.mkdir(parents=True, exist_ok=True)
        data = {
            "checkpoints": [
                {"name": self.names[p], "path": str(p.resolve()), "step": self.steps.get(self.names[p])}
                for p in self.checkpoints
            ],
            "lineage": self.lineage,
            **({"dropped": self.aliases} if self.aliases else {}),
        }
        keep = set(keep) - set(self.names.values())
        if keep:
            _keep_earlier(data, out / "lineage.json", keep)
        atomic_write_text(out / "lineage.json", json.dumps(data, indent=2, default=str))


def _keep_earlier(data: dict, path: Path, keep: set[str]) -> None:
    """Add the `keep` checkpoints of an earlier lineage.json to `data` (in place)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        entries = [c for c in old["checkpoints"] if c["name"] in keep]
        lin = old.get("lineage") or {}
    except (OSError, ValueError, KeyError, TypeError):
        return  # no readable earlier lineage: the kept rows are plotted outside any lineage
    data["checkpoints"] = data["checkpoints"] + entries
    new = data["lineage"] = {k: (dict(v) if isinstance(v, dict) else list(v)) for k, v in data["lineage"].items()}
    if not new.get("base"):
        new["base"] = [c for c in lin.get("base", []) if c in keep]
    for route, cks in (lin.get("routes") or {}).items():
        if route not in new.setdefault("routes", {}) and any(c in keep for c in cks):
            new["routes"][route] = [c for c in cks if c in keep]
            final = (lin.get("final") or {}).get(route)
            if final in keep:
                new.setdefault("final", {})[route] = final


def is_checkpoint(path: Path) -> bool:
    # any config.json entry, regular or not: a FIFO or directory there is refused by name when the
    # checkpoint is inspected, never taken for "no config.json" (nothing is opened here)
    cfg = path / "config.json"
    return cfg.exists() or cfg.is_symlink()


def step_of(path: Path) -> float:
    state = path / "trainer_state.json"
    if state.is_file():
        try:
            return float(json.loads(state.read_text())["global_step"])
        except (ValueError, KeyError, OSError):
            pass
    if path.name.lower() in ("final", "last", "main"):
        return float("inf")
    m = _STEP.search(path.name)
    return float(m.group(1)) if m else float("nan")


def _order(paths: list[Path]) -> list[Path]:
    # unknown steps (nan) keep name order after the numbered ones, before `final`
    def key(p: Path):
        s = step_of(p)
        return (0 if s == s else 1, s if s == s else 0.0, p.name) if s != float("inf") else (2, 0.0, p.name)

    return sorted(paths, key=key)


def _walk(
    root: Path,
    depth: int,
    found: list[Path],
    empty: list[Path],
    *,
    top: Path | None = None,
    seen: dict[Path, Path] | None = None,
    skipped: list[Path] | None = None,
    aliases: list[tuple[Path, Path]] | None = None,
) -> None:
    """Checkpoints below `root`. Symbolic links are followed only when they point inside the
    tree given on the command line, and every directory is visited once (a link loop, or a
    link to a sibling, never plans a checkpoint twice). Links out of the tree are skipped
    and reported: they would pick up unrelated checkpoints. A checkpoint reached under a second
    name (`sft/step300 -> ../step100`) goes to `aliases` as (dropped name, kept name)."""
    top = top or root.resolve()
    seen = {} if seen is None else seen
    real = root.resolve()
    if real in seen:
        if aliases is not None and is_checkpoint(root):
            aliases.append((root, seen[real]))
        return
    if real != top and top not in real.parents:
        if skipped is not None:
            skipped.append(root)
        return
    seen[real] = root
    if is_checkpoint(root):
        found.append(root)
        return
    if depth >= MAX_DEPTH:
        return
    children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    before = len(found)
    for child in children:
        _walk(child, depth + 1, found, empty, top=top, seen=seen, skipped=skipped, aliases=aliases)
    if len(found) == before:
        empty.append(root)


def _looks_like_checkpoint(path: Path) -> bool:
    """Weights or tokenizer files but no config: a broken checkpoint, not a tree."""
    return any(path.glob("*.safetensors")) or any(path.glob("*.bin")) or (path / "tokenizer.json").is_file()


def _from_toml(root: Path, names: dict[Path, str]) -> dict:
    regular_file(root / "lineage.toml", limit=16 << 20, error=ConfigError)
    try:
        spec = tomllib.loads((root / "lineage.toml").read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{root / 'lineage.toml'}: invalid TOML ({exc})") from None
    known = set(names.values())
    lineage = {
        "base": list(spec.get("base", [])),
        "routes": dict(spec.get("routes", {})),
        "final": dict(spec.get("final", {})),
    }
    for field_name, values in (("base", lineage["base"]), *((f"routes.{k}", v) for k, v in lineage["routes"].items())):
        for v in values:
            if v not in known:
                raise ConfigError(f"{root / 'lineage.toml'}: field {field_name} names unknown checkpoint {v!r}")
    for route, ck in lineage["routes"].items():
        lineage["final"].setdefault(route, ck[-1] if ck else None)
    return lineage


def discover(paths: Sequence[Path]) -> Discovery:
    d = Discovery()
    for given in paths:
        given = Path(given)
        if not given.exists():
            raise ConfigError(f"{given}: checkpoint path does not exist")
        if not given.is_dir():
            raise ConfigError(f"{given}: not a checkpoint directory (a file)")
        if is_checkpoint(given):
            if given not in d.names:
                d.checkpoints.append(given)
                d.names[given] = given.name
                d.steps[given.name] = step_of(given)
            continue
        found: list[Path] = []
        empty: list[Path] = []
        skipped: list[Path] = []
        aliases: list[tuple[Path, Path]] = []
        _walk(given, 0, found, empty, skipped=skipped, aliases=aliases)
        for dropped, kept in aliases:
            msg = (
                f"{dropped.relative_to(given).as_posix()} is the same checkpoint directory as "
                f"{kept.relative_to(given).as_posix()} (a symbolic link): planned once, as "
                f"{kept.relative_to(given).as_posix()}; {dropped.relative_to(given).as_posix()} dropped"
            )
            warnings.warn(msg, stacklevel=2)
            log.warning(msg)
            d.aliases.append(msg)
        if skipped:
            msg = f"links out of {given} not followed: {', '.join(str(p) for p in skipped)}"
            warnings.warn(msg, stacklevel=2)
            log.warning(msg)
        if not found and _looks_like_checkpoint(given):
            raise ConfigError(f"{given}: no config.json (not a Hugging Face checkpoint directory)")
        if not found:
            raise ConfigError(f"{given}: no checkpoints found (no directory with a config.json below it)")
        if empty:
            msg = f"not checkpoints (no config.json below): {', '.join(str(p) for p in empty)}"
            warnings.warn(msg, stacklevel=2)
            log.warning(msg)
            d.not_checkpoints.extend(empty)
        by_parent: dict[Path, list[Path]] = {}
        for ck in found:
            by_parent.setdefault(ck.parent, []).append(ck)
        tree_names: dict[Path, str] = {}
        for cks in by_parent.values():
            for ck in _order(cks):
                name = ck.relative_to(given).as_posix()
                tree_names[ck] = name
                d.checkpoints.append(ck)
                d.names[ck] = name
                d.steps[name] = step_of(ck)
        if (given / "lineage.toml").exists():  # a FIFO is refused by _from_toml, not skipped
            d.lineage = _from_toml(given, tree_names)
        else:
            for parent, cks in by_parent.items():
                ordered = [tree_names[c] for c in _order(cks)]
                if parent == given:
                    d.lineage["base"].extend(ordered)
                else:
                    route = parent.relative_to(given).as_posix()
                    d.lineage["routes"][route] = ordered
                    d.lineage["final"][route] = ordered[-1]
    if not d.checkpoints:
        raise ConfigError(f"no checkpoints found in {', '.join(map(str, paths))}")
    names = list(d.names.values())
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"two checkpoints share the name {dup[0]!r}; pass their common parent directory instead")
    return d
