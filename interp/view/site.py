"""The site's data: one JSON payload per key, the same for the static site and the server.

Keys name what a page asks for with indices only (sweep, checkpoint column, bank, item), so
they are safe as file names and URLs:

    site                                  the sweeps, their checkpoints in display order, banks
    overview                              each sweep's headline tables
    map/S/B/KIND                          item x checkpoint map of sweep S, pressure bank B
    item/S/B/I                            item I of that bank along the checkpoints
    pair/SA/CA/SB/CB/BB/KIND              two checkpoints' maps item by item, the paired CI
    cloze/S  cloze/S/C                    ABS by language x axis; checkpoint C's sentence triples
    classify/S  classify/S/C              confusion matrices; checkpoint C's predictions
    setmap/S/STUDY/B/KIND                 a field-set study's item map (interp.view.field_set_pages)
    setitem/S/STUDY/B/I                   item I of that study's bank B along the checkpoints
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from interp.core.errors import ConfigError
from interp.core.version import __version__
from interp.view import field_set_pages as field_sets
from interp.view import pressure_pages as pressure
from interp.view.cloze_classify import classify_payload, classify_rows, cloze_payload, cloze_rows
from interp.view.overview import overview_payload, provenance
from interp.view.sweep_files import SweepFiles, bank_base

# a static site holds every pair of checkpoints up to this many columns over all sweeps; beyond
# it, neighbours along each sweep and same-named checkpoints across sweeps (`--serve`: any pair)
ALL_PAIRS_UP_TO = 16
INDEX_DIR = ".view-index"


def _labels(outs: Sequence[Path]) -> list[str]:
    names = [Path(o).resolve().name for o in outs]
    return [n if names.count(n) == 1 else f"{n} ({i + 1})" for i, n in enumerate(names)]


class Site:
    """The sweeps a site shows (`interp view OUT [OUT2 ...]`) and the payload of every key."""

    def __init__(self, outs: Sequence[str | Path], *, mode: str = "files"):
        self.mode = mode  # "files": a static site read by file://; "api": served (`interp view --serve`)
        if not outs:
            raise ConfigError("interp view: name at least one sweep output directory")
        # served: the trials of a long sweep's units are kept in OUT/.view-index for the next server
        kept = {"api": lambda o: Path(o) / INDEX_DIR}.get(mode, lambda o: None)
        self.sweeps = [
            SweepFiles(o, label, index_dir=kept(o)) for o, label in zip(outs, _labels([Path(o) for o in outs]))
        ]

    # ------------------------------------------------------------ the index of everything
    def pair_banks(self) -> list[str]:
        return sorted({bank_base(b) for sw in self.sweeps for b in pressure.banks(sw)})

    def meta(self, mode: str) -> dict:
        sweeps = []
        for sw in self.sweeps:
            pbanks = pressure.banks(sw)
            sweeps.append(
                {
                    "label": sw.label,
                    "out": str(sw.out.resolve()),
                    "columns": sw.columns,
                    "groups": sw.groups,
                    "pressure_banks": pbanks,
                    "pressure_bases": [bank_base(b) for b in pbanks],
                    "cloze": sw.table("cloze_abs.csv") is not None,
                    "classify": sw.table("classify_confusion.csv") is not None,
                    "field_sets": {study: field_sets.banks(sw, study) for study in field_sets.FIELD_SETS},
                }
            )
        return {
            "mode": mode,
            "version": __version__,
            "sweeps": sweeps,
            "kinds": list(pressure.KINDS),
            "pair_banks": self.pair_banks(),
            "pairs": None if mode == "api" else [list(p) for p in self.static_pairs()],
        }

    def static_pairs(self) -> list[tuple[int, int, int, int]]:
        cols = [(s, c) for s, sw in enumerate(self.sweeps) for c in range(len(sw.columns))]
        if len(cols) <= ALL_PAIRS_UP_TO:
            return [(*a, *b) for a in cols for b in cols if a != b]
        out: set[tuple[int, int, int, int]] = set()
        for s, sw in enumerate(self.sweeps):
            n = len(sw.columns)
            for c in range(n - 1):
                out |= {(s, c, s, c + 1), (s, c + 1, s, c)}
            if n > 1:
                out |= {(s, 0, s, n - 1), (s, n - 1, s, 0)}
        for s, sw in enumerate(self.sweeps):
            for t, other in enumerate(self.sweeps):
                idx = other.column_index()
                for c, col in enumerate(sw.columns):
                    if s != t and col["name"] in idx:
                        out.add((s, c, t, idx[col["name"]]))
        return sorted(out)

    def static_keys(self) -> list[str]:
        keys = ["overview", "provenance"]
        for s, sw in enumerate(self.sweeps):
            for b, bank in enumerate(pressure.banks(sw)):
                keys += [f"map/{s}/{b}/{k}" for k in pressure.KINDS]
                keys += [f"item/{s}/{b}/{i}" for i in range(len(pressure.items(sw, bank)))]
            if sw.table("cloze_abs.csv") is not None:
                keys += [f"cloze/{s}"] + [f"cloze/{s}/{c}" for c in range(len(sw.columns))]
            if sw.table("classify_confusion.csv") is not None:
                keys += [f"classify/{s}"] + [f"classify/{s}/{c}" for c in range(len(sw.columns))]
            for study in field_sets.FIELD_SETS:
                for b, bank in enumerate(field_sets.banks(sw, study)):
                    keys += [f"setmap/{s}/{study}/{b}/{k}" for k in bank["kinds"]]
                    n = len(field_sets.items(sw, field_sets.FIELD_SETS[study], bank["bank"]))
                    keys += [f"setitem/{s}/{study}/{b}/{i}" for i in range(n)]
        for bb in range(len(self.pair_banks())):
            for sa, ca, sb, cb in self.static_pairs():
                keys += [f"pair/{sa}/{ca}/{sb}/{cb}/{bb}/{k}" for k in pressure.KINDS]
        return keys

    # ------------------------------------------------------------ payloads
    def _sweep(self, s: str) -> SweepFiles:
        return self.sweeps[_index(s, len(self.sweeps))]

    def warm(self, key: str) -> None:
        """After `key` was served: read ahead what the next page needs (the server calls it in a
        thread): after an item map, the trials of its items."""
        parts = key.split("/")
        if parts[0] == "map" and len(parts) == 4:
            sw = self._sweep(parts[1])
            banks = pressure.banks(sw)
            pressure.warm_items(sw, banks[_index(parts[2], len(banks))])

    def payload(self, key: str) -> dict:
        """The payload of `key`; KeyError when the key names nothing (the server answers 404)."""
        parts = key.split("/")
        head, args = parts[0], parts[1:]
        if head == "site" and not args:
            return self.meta(self.mode)
        if head == "overview" and not args:
            return {"sweeps": [overview_payload(sw) for sw in self.sweeps]}
        if head == "provenance" and not args:
            return {"sweeps": [provenance(sw) for sw in self.sweeps]}
        if head == "map" and len(args) == 3:
            sw = self._sweep(args[0])
            banks = pressure.banks(sw)
            return pressure.map_payload(sw, banks[_index(args[1], len(banks))], args[2])
        if head == "item" and len(args) == 3:
            sw = self._sweep(args[0])
            banks = pressure.banks(sw)
            bank = banks[_index(args[1], len(banks))]
            return pressure.item_payload(sw, bank, _index(args[2], len(pressure.items(sw, bank))))
        if head == "pair" and len(args) == 6:
            a, b = self._sweep(args[0]), self._sweep(args[2])
            bases = self.pair_banks()
            return pressure.pair_payload(
                (a, _index(args[1], len(a.columns))),
                (b, _index(args[3], len(b.columns))),
                bases[_index(args[4], len(bases))],
                args[5],
            )
        if head in ("setmap", "setitem") and len(args) == 4:
            sw = self._sweep(args[0])
            banks = field_sets.banks(sw, args[1]) if args[1] in field_sets.FIELD_SETS else []
            bank = banks[_index(args[2], len(banks))]["bank"]
            if head == "setmap":
                return field_sets.map_payload(sw, args[1], bank, args[3])
            n = len(field_sets.items(sw, field_sets.FIELD_SETS[args[1]], bank))
            return field_sets.item_payload(sw, args[1], bank, _index(args[3], n))
        if head in ("cloze", "classify") and len(args) in (1, 2):
            sw = self._sweep(args[0])
            if len(args) == 1:
                return (cloze_payload if head == "cloze" else classify_payload)(sw)
            return (cloze_rows if head == "cloze" else classify_rows)(sw, _index(args[1], len(sw.columns)))
        raise KeyError(key)


def _index(text: str, n: int) -> int:
    if not text.isdigit() or int(text) >= n:
        raise KeyError(text)
    return int(text)
