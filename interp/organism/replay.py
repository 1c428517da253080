"""Results tables again from a validation's cache, without a model: each study's own analysis
(`StudySpec.analyze`, the code a sweep runs after scoring) over the current units of a lineage's
OUT/cache and OUT/aux/cache, into a results directory of one's choice.

`interp.organism.simulate` writes a simulated lineage's results this way; the mutation testing
(`interp.organism.mutations`) re-analyzes a real or simulated validation into a scratch copy with
one function of the analysis broken.
"""

from __future__ import annotations

import shutil
from contextlib import nullcontext
from pathlib import Path
from typing import Callable, Collection, ContextManager

from cache.store import Store, read_unit
from interp.core.errors import ConfigError
from interp.studies import get_study
from interp.studies.base import RunConfig

# the caches of one lineage's OUT (relative folders), each with its results/ beside it
CACHES = (".", "aux")


def studies_in(cache: Path) -> list[str]:
    """The studies with units under a cache root (folder names, as `Store` lays them out)."""
    return sorted(p.name for p in cache.iterdir() if p.is_dir()) if cache.is_dir() else []


def reanalyze(
    out: Path,
    dest: Path,
    *,
    n_boot: int,
    seed: int,
    only: Collection[str] | None = None,
    around: Callable[[str], ContextManager] | None = None,
) -> list[str]:
    """Each study's results of `out`'s current cached units into dest/results (and
    dest/aux/results for OUT/aux/cache), with the validation sweeps' bootstrap size and seed
    (`validate._run_settings`); returns the analyses run, named "pressure", "aux/cloze", ...
    `only`: just these analyses; `around(name)`: a context each analysis runs in. `dest` may be
    `out` itself."""
    cfg = RunConfig(n_boot=n_boot, seed=seed)
    done = []
    for sub in CACHES:
        store = Store(Path(out) / sub / "cache")
        for study in studies_in(store.root):
            name = f"{sub}/{study}" if sub != "." else study
            paths, _stale = store.current_units(study, warn=False)
            if not paths or (only is not None and name not in only):
                continue
            results = Path(dest) / sub / "results"
            results.mkdir(parents=True, exist_ok=True)
            with around(name) if around is not None else nullcontext():
                get_study(study).analyze([read_unit(p) for p in paths], results, cfg)
            done.append(name)
    return done


def scratch_lineage(out: Path, dest: Path) -> Path:
    """A scratch copy of one lineage's OUT for re-analysis: its caches linked (read, never
    written), lineage.json copied, results/ left to be written anew."""
    out, dest = Path(out).resolve(), Path(dest)
    if not (out / "cache").is_dir():
        raise ConfigError(f"{out}: no cache/ (not a validation OUT of `interp validate`)")
    for sub in CACHES:
        if (out / sub / "cache").is_dir():
            (dest / sub).mkdir(parents=True, exist_ok=True)
            link = dest / sub / "cache"
            if not link.exists():
                link.symlink_to(out / sub / "cache", target_is_directory=True)
        # the figures too: a plot whose inputs did not change is then not drawn again
        # (analyses.figures.redraw_on_change); copies, as a changed one is rewritten
        if (out / sub / "figures").is_dir() and not (dest / sub / "figures").exists():
            shutil.copytree(out / sub / "figures", dest / sub / "figures")
    if (out / "lineage.json").is_file():
        shutil.copy2(out / "lineage.json", dest / "lineage.json")
    return dest
