"""One sweep's output directory as the viewer reads it: results tables, lineage, current units, bank texts.

Everything here is read, never computed: tables come from `OUT/results/*.csv` (through the
report's own reader), unit attributes and tables from the current units of `OUT/cache`, and the
texts of items from the bank file a unit names (`bank_source`), shown only when the bank still
hashes to the unit's `bank_hash`.
"""

from __future__ import annotations

import json
import re
import threading
from functools import cached_property
from pathlib import Path

import pandas as pd

from analyses.figures import lineage_order, trajectory_groups
from cache.columns import current_slots, unit_header
from interp.banks import bank_hash
from interp.core.errors import ConfigError, InterpError
from sweeps.report import read_results

# results tables whose `checkpoint` column lists the checkpoints a sweep measured
# (small tables: item_maps.csv, millions of rows in a long sweep, is read only for the item map)
_CHECKPOINT_TABLES = (
    "pressure_summary.csv",
    "classify_summary.csv",
    "cloze_abs_by_loss.csv",
    "ab_summary.csv",
    "sycophancy_eval_summary.csv",
)
_SUBSAMPLE = re.compile(r"\[n=\d+,seed=\d+\]$")


def bank_base(name: str) -> str:
    """`moral[n=6,seed=0]` -> `moral`: the bank a subsample was drawn from."""
    return _SUBSAMPLE.sub("", str(name))


class SweepFiles:
    """The files of one sweep (`interp sweep ... --out OUT`), read once and kept (thread-safe)."""

    def __init__(self, out: str | Path, label: str | None = None, *, index_dir: Path | None = None):
        out = Path(out)
        if not (out / "results").is_dir():
            raise ConfigError(f"{out}: no results/ directory (run `interp sweep ... --out {out}` first)")
        self.out = out
        self.label = label or out.resolve().name
        self.index_dir = index_dir  # where the trials of many units are kept between servers (None: not kept)
        self._lock = threading.Lock()
        self._memo: dict[object, object] = {}
        self._building: dict[object, threading.Lock] = {}

    def memo(self, key: object, build):
        """`build()` once per `key` for the life of this object (pages reuse what they read). Server
        threads building different keys do not wait for each other; the same key is built once."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._memo:
                    return self._memo[key]
            value = build()
            with self._lock:
                self._memo[key] = value
            return value

    # ------------------------------------------------------------ results tables
    def table(self, name: str) -> pd.DataFrame | None:
        """`OUT/results/<name>` as pandas reads it (None when the sweep did not write it)."""
        path = self.out / "results" / name
        return self.memo(("table", name), lambda: read_results(path) if path.exists() else None)

    def result_files(self) -> list[str]:
        return sorted(p.name for p in (self.out / "results").glob("*.csv"))

    # ------------------------------------------------------------ checkpoints and lineage
    @cached_property
    def lineage_file(self) -> dict:
        path = self.out / "lineage.json"
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
            data.get("lineage"), list(data.get("checkpoints", []))
        except (ValueError, AttributeError, TypeError):
            raise ConfigError(f"{path}: not a lineage file a sweep writes; rerun the sweep") from None
        return data

    @cached_property
    def checkpoints(self) -> list[str]:
        """Every checkpoint the sweep measured: lineage.json's, then any other a results table names."""
        names = [str(c["name"]) for c in self.lineage_file.get("checkpoints", [])]
        for name in _CHECKPOINT_TABLES:
            df = self.table(name)
            if df is not None and "checkpoint" in df.columns:
                names += [str(c) for c in df["checkpoint"].dropna().unique() if str(c) != "all"]
        return list(dict.fromkeys(names))

    @cached_property
    def columns(self) -> list[dict]:
        """Checkpoints in display order (base, then each route's own; training order within), each
        with its route: one entry per checkpoint, so a column of a map is one checkpoint."""
        seen: dict[str, dict] = {}
        base = set((self.lineage_file.get("lineage") or {}).get("base", []))
        for label, cks in lineage_order(self.checkpoints, self.lineage_file.get("lineage")):
            for c in cks:
                route = "base" if c in base else label.removeprefix("base→")
                seen.setdefault(c, {"name": c, "route": route})
        return list(seen.values())

    @cached_property
    def groups(self) -> list[dict]:
        """Lines of a trajectory: each route from the base, joined only along a lineage."""
        return [
            {"label": label, "checkpoints": cks, "joined": joined}
            for label, cks, joined in trajectory_groups(self.checkpoints, self.lineage_file.get("lineage"))
        ]

    def column_index(self) -> dict[str, int]:
        return {c["name"]: i for i, c in enumerate(self.columns)}

    # ------------------------------------------------------------ cache units
    def units(self, study: str) -> pd.DataFrame:
        """The current units of `study`, one row each: path, checkpoint, bank_base (from the cache's
        current.json: no unit is opened)."""

        def build() -> pd.DataFrame:
            root = self.out / "cache"
            rows = current_slots(root, study) if root.is_dir() else []
            return pd.DataFrame(rows, columns=["study", "checkpoint", "bank_base", "backend", "layer", "path"])

        return self.memo(("units", study), build)

    def unit_headers(self, study: str) -> pd.DataFrame:
        """units() with every unit's attributes and the names of its tables (one open per unit)."""

        def build() -> pd.DataFrame:
            rows = []
            for p in self.units(study)["path"]:
                a, tables = unit_header(p)
                rows.append({k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in a.items()} | {"tables": tables})
            units = self.units(study).reset_index(drop=True)
            attrs = pd.DataFrame(rows, index=units.index)
            return pd.concat([units, attrs.drop(columns=[c for c in units.columns if c in attrs])], axis=1)

        return self.memo(("headers", study), build)

    # ------------------------------------------------------------ bank texts
    def bank_items(self, study: str, bank: str) -> pd.DataFrame | None:
        """The items of `bank` as the units of `study` ran them (text and every field the bank has),
        or None when no unit names a readable bank file that still hashes to the unit's bank_hash."""
        return self.memo(("bank", study, bank), lambda: self._read_bank(study, bank))

    def _read_bank(self, study: str, bank: str) -> pd.DataFrame | None:
        from interp.studies import get_study

        units = self.units(study)
        units = units[units["bank_base"] == bank_base(bank)]
        if units.empty:
            return None
        attrs, _ = unit_header(units["path"].iloc[0])
        if attrs.get("bank") != bank or "bank_source" not in attrs:
            return None
        spec = get_study(study)
        source, want = attrs["bank_source"], attrs["bank_hash"]
        try:
            loaded = spec.load_bank(source)
        except (InterpError, OSError):
            return None
        m = re.search(r"\[n=(\d+),seed=(\d+)\]$", str(bank))
        items = spec.subsample(loaded, int(m[1]), seed=int(m[2])).items if m else loaded.items
        return items if bank_hash(items) == want else None
