"""HDF5 cache of scored units, one file per unit, written atomically.

A unit is (checkpoint x study x bank x template x layer). Its file holds tidy tables (one
dataset per column) and arrays (log-probs, residuals), and carries the unit identity as
attributes. Identity = checkpoint fingerprint, study + version, bank hash, template hash,
settings hash, layer, backend: never batch size or thread count, which do not change numbers.

Atomicity: the file is written under a hidden temporary name in the same directory,
`complete` is set last, the file is fsynced and then renamed; the directory is fsynced.
A process killed at any moment leaves either no file under the final name or a complete
one. Stale temporaries never block a restart: they are ignored and removed by `clean_stale`.

Integrity: every dataset carries a blake2b checksum of its contents (attribute `blake2b`;
file attribute `checksums` = 1), verified on every read. A unit whose body was damaged on
disk is refused with one line naming the dataset; the sweep moves it aside
(`.<name>.damaged`) and recomputes it.

Current and stale units: a unit's slot is (study, checkpoint name, bank, backend, layer).
After a checkpoint (or its tokenizer, bank, template, settings) changes, the slot gets a new
unit and the old one is stale. `current.json` in the cache root records each slot's unit as
of the latest sweep; readers (probe, predict) use only current units and report stale ones
(`interp sweep --prune` deletes them). A slot absent from current.json (a cache written
before it existed) is served by its newest unit (file mtime), stated in the warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Mapping

import h5py
import numpy as np
import pandas as pd

from cache.layout import annotate_array
from cache.unit import IDENTITY_FIELDS, Unit
from interp.core.atomic import atomic_path, writer_gone
from interp.core.errors import CacheError, InterpError, ProvenanceError
from interp.core.files import regular_file
from interp.core.hashing import sha256_json
from interp.core.version import __version__ as PACKAGE_VERSION

SCHEMA_VERSION = 1
# informative attributes checked when a unit is reused (not identity: the sampled fingerprint
# stays the planning key): the content fingerprint of every byte the unit ran on, and how
# checkpoint_fingerprint was taken ("sampled", "full", "wrapped")
CONTENT_ATTR = "content_fingerprint"
MODE_ATTR = "fingerprint_mode"
# fields besides the checkpoint fingerprint that must agree for a --full-hash unit to stay current
_SAME_INPUTS = ("study", "study_version", "bank_hash", "template_hash", "settings_hash", "layer", "backend")
MAX_MANIFEST_BYTES = 256 << 20


@dataclass(frozen=True, kw_only=True)
class UnitIdentity:
    checkpoint: str  # display name (directory name); not part of the hash
    checkpoint_fingerprint: str
    study: str
    study_version: str
    bank: str
    bank_hash: str
    template_hash: str
    settings_hash: str
    layer: int | str  # one layer index, or the comma list of several (cache.layers.layer_key)
    backend: str = "hf"

    @property
    def layers(self) -> tuple[int, ...]:
        from cache.layers import key_layers

        return key_layers(self.layer)

    def key(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in IDENTITY_FIELDS}

    @property
    def hash(self) -> str:
        return sha256_json(self.key())


CHECKSUM = "blake2b"


def checksum(data: np.ndarray) -> str:
    """Digest of a dataset's contents: dtype, shape and bytes (strings: length-prefixed UTF-8)."""
    h = hashlib.blake2b(digest_size=16)
    if data.dtype == object:
        h.update(f"str|{data.shape}|".encode())
        for v in data.ravel():
            b = str(v).encode("utf-8")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
    else:
        a = np.ascontiguousarray(data)
        h.update(f"{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class DamagedUnit(CacheError):
    """A unit's body does not match its checksums (damaged on disk after writing)."""


def _put(group: h5py.Group, name: str, data: np.ndarray, **kw) -> None:
    ds = group.create_dataset(name, data=data, **kw)
    ds.attrs[CHECKSUM] = checksum(data)


def _get(ds: h5py.Dataset, path: Path, verify: bool) -> np.ndarray:
    if h5py.check_string_dtype(ds.dtype) is not None:
        data = ds.asstr()[()].astype(object) if ds.shape and len(ds) else np.array([], dtype=object)
    else:
        data = ds[()]
    if verify:
        want = ds.attrs.get(CHECKSUM)
        if want is None or checksum(np.asarray(data)) != _plain(want):
            raise DamagedUnit(
                f"{path}: dataset {ds.name} is damaged (checksum mismatch); "
                "the next sweep into this directory recomputes the unit"
            )
    return data


def _write_table(group: h5py.Group, df: pd.DataFrame) -> None:
    group.attrs["columns"] = list(map(str, df.columns))
    for col in df.columns:
        values = df[col]
        if values.dtype == object or pd.api.types.is_string_dtype(values):
            data = np.array(["" if v is None else str(v) for v in values], dtype=object)
            _put(group, str(col), data, dtype=h5py.string_dtype("utf-8"))
        elif pd.api.types.is_bool_dtype(values):
            _put(group, str(col), values.to_numpy(dtype=bool))
        else:
            _put(group, str(col), values.to_numpy())


def _read_table(group: h5py.Group, path: Path, verify: bool = False) -> pd.DataFrame:
    cols = list(group.attrs["columns"])
    data = {col: _get(group[col], path, verify) for col in cols}
    return pd.DataFrame(data, columns=cols)


IN_MEMORY_BYTES = 1 << 30  # units estimated up to this size are built in memory, then written


def _fill(
    f: h5py.File,
    ident: UnitIdentity,
    tables: Mapping[str, pd.DataFrame],
    arrays: Mapping[str, np.ndarray],
    extra_attrs: Mapping[str, object],
) -> None:
    for k, v in asdict(ident).items():
        f.attrs[k] = v
    f.attrs["identity_hash"] = ident.hash
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["package_version"] = PACKAGE_VERSION
    f.attrs["checksums"] = 1
    for k, v in extra_attrs.items():
        f.attrs[k] = v
    for name, df in tables.items():
        _write_table(f.create_group(f"tables/{name}"), df)
    for name, arr in arrays.items():
        _put(f.require_group("arrays"), name, np.asarray(arr))
        # axis names, aligned table rows, TransformerLens hook names (docs/cache.md)
        annotate_array(
            f[f"arrays/{name}"], study=ident.study, name=name, layer=ident.layer, layers=f.attrs.get("layers")
        )
    f.attrs["complete"] = True  # last: a reader trusts nothing without it


def _estimate_bytes(tables: Mapping[str, pd.DataFrame], arrays: Mapping[str, np.ndarray]) -> int:
    """A generous size of a unit file: array bytes, table bytes (strings at their length), 1 MiB."""
    n = sum(np.asarray(a).nbytes for a in arrays.values())
    for df in tables.values():
        n += int(df.memory_usage(index=False, deep=True).sum())
    return int(n * 1.2) + (1 << 20)


def slot_of(attrs: Mapping[str, object]) -> str:
    """What a unit stands for, whatever its inputs' content: study|checkpoint|bank|backend|layer.

    The bank's subsample (`moral[n=20,seed=0]`) is not part of the slot: a sweep with another
    `--max-items` replaces the unit of the same bank, and the earlier subsample becomes stale.
    """
    parts = {k: str(_plain(attrs.get(k))) for k in ("study", "checkpoint", "bank", "backend", "layer")}
    parts["bank"] = re.sub(r"\[n=\d+,seed=\d+\]$", "", parts["bank"])
    return "|".join(parts.values())


class Store:
    """The cache root: unit files under ``root/<study>/<checkpoint>/<study>-<hash16>.h5``.

    Parameters
    ----------
    root : str or Path
        The cache directory (a sweep's OUT/cache).
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def slot_dir(self, study: str, checkpoint: str) -> Path:
        # checkpoint names from trees contain "/" (route/step): keep them one directory level
        return self.root / study / checkpoint.replace("/", "--")

    def path_for(self, ident: UnitIdentity) -> Path:
        return self.slot_dir(ident.study, ident.checkpoint) / f"{ident.study}-{ident.hash[:16]}.h5"

    def is_complete(self, ident: UnitIdentity) -> bool:
        return self.attrs(ident) is not None

    def attrs(self, ident: UnitIdentity) -> dict | None:
        """The attributes of this identity's unit file when it is complete and matches; else None."""
        path = self.path_for(ident)
        if not path.exists():
            return None
        regular_file(path, error=CacheError)  # a FIFO at a unit's path would hang h5py's open
        attrs = _attrs(path)
        if attrs is None or not attrs.get("complete"):
            return None
        return attrs if all(_eq(attrs.get(k), v) for k, v in ident.key().items()) else None

    def write(
        self,
        ident: UnitIdentity,
        *,
        tables: Mapping[str, pd.DataFrame],
        arrays: Mapping[str, np.ndarray] | None = None,
        extra_attrs: Mapping[str, object] | None = None,
    ) -> Path:
        final = self.path_for(ident)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"{final.parent}: cannot create cache directory ({exc.strerror or exc})") from None
        need = _estimate_bytes(tables, arrays or {})
        free = shutil.disk_usage(final.parent).free
        if free < need:
            raise CacheError(f"{final}: cannot write cache unit (needs about {need} bytes, {free} free on the disk)")
        # Units up to IN_MEMORY_BYTES are built in memory and written with plain file I/O: a
        # full disk is then a clean OSError. HDF5 writing to a full disk itself prints from
        # destructors and has crashed the process (segmentation fault) later, at collection.
        try:
            with atomic_path(final, mkdir=False) as tmp:
                if need <= IN_MEMORY_BYTES:
                    with h5py.File(f"{tmp.name}.mem", "w", driver="core", backing_store=False) as f:
                        _fill(f, ident, tables, arrays or {}, extra_attrs or {})
                        f.flush()
                        image = f.id.get_file_image()
                    with open(tmp, "wb") as out:
                        out.write(image)
                    del image
                else:
                    with h5py.File(tmp, "w") as f:
                        _fill(f, ident, tables, arrays or {}, extra_attrs or {})
                        f.flush()
        except Exception as exc:  # noqa: BLE001 - h5py raises more than OSError when the disk is full
            why = getattr(exc, "strerror", None) or " ".join(str(exc).split())[:200] or type(exc).__name__
            raise CacheError(f"{final}: cannot write cache unit ({why})") from None
        return final

    def read(self, ident_or_path: UnitIdentity | Path, *, expect: Mapping[str, object] | None = None) -> Unit:
        """Read one unit; refuse it if any field in `expect` (or the identity) differs."""
        if isinstance(ident_or_path, UnitIdentity):
            path = self.path_for(ident_or_path)
            expect = {**ident_or_path.key(), **(expect or {})}
        else:
            path = Path(ident_or_path)
        return read_unit(path, expect=expect)

    def units(self, study: str | None = None) -> list[Path]:
        base = self.root / study if study else self.root
        if not base.exists():
            return []
        return sorted(p for p in base.rglob("*.h5") if not p.name.startswith("."))

    def verify(self, ident: UnitIdentity) -> str | None:
        """None if the unit's body matches its checksums; else the one-line problem."""
        try:
            read_unit(self.path_for(ident), expect=ident.key())
        except CacheError as exc:
            return str(exc)
        return None

    def set_aside(self, path: Path) -> Path:
        """Move a damaged unit out of the way (kept for inspection, never read again)."""
        dest = path.with_name(f".{path.name}.damaged-{int(time.time())}")
        os.replace(path, dest)
        return dest

    # ------------------------------------------------------------ current vs stale units
    @property
    def manifest_path(self) -> Path:
        return self.root / "current.json"

    def _manifest(self) -> dict[str, str]:
        if not self.manifest_path.exists() and not self.manifest_path.is_symlink():
            return {}
        # a FIFO here would hang every sweep and probe; a directory or device is refused too
        regular_file(self.manifest_path, limit=MAX_MANIFEST_BYTES, error=CacheError)
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def record_current(self, idents: Iterable[UnitIdentity]) -> list[str]:
        """Mark these (complete) units as their slots' current ones (the latest sweep wins), except
        that a `--full-hash` unit is not displaced by a sampled one computed from the same bytes
        with the same inputs. Returns one line per slot where the full-hash unit was kept."""
        data = self._manifest()
        kept = []
        for ident in idents:
            new = self.attrs(ident)
            if new is None:
                continue
            slot, rel = slot_of(asdict(ident)), str(self.path_for(ident).relative_to(self.root))
            old_rel = data.get(slot)
            if old_rel and old_rel != rel and _keeps_full(self.root / old_rel, new):
                kept.append(f"{slot}: --full-hash unit {old_rel} stays current (same bytes as {rel})")
                continue
            data[slot] = rel
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            from interp.core.atomic import atomic_write_text

            atomic_write_text(self.manifest_path, json.dumps(data, indent=1, sort_keys=True))
        except OSError as exc:
            raise CacheError(
                f"{self.manifest_path}: cannot write the list of current units ({exc.strerror or exc}); "
                "the units themselves are complete, and the previous list is unchanged"
            ) from None
        return kept

    def current_units(self, study: str | None = None, *, warn: bool = True) -> tuple[list[Path], list[Path]]:
        """(current, stale) unit files: one current unit per slot; see the module docstring."""
        manifest = self._manifest()
        recorded = {self.root / rel for rel in manifest.values()}
        if warn:
            prefix = f"{study}|" if study else ""
            gone = sorted(
                (slot, rel)
                for slot, rel in manifest.items()
                if slot.startswith(prefix) and not (self.root / rel).exists()
            )
            if gone:
                warnings.warn(
                    f"{self.root}: {len(gone)} slot(s) have no unit (their current unit was deleted): "
                    + ", ".join(f"{slot} ({rel})" for slot, rel in gone[:5])
                    + (" ..." if len(gone) > 5 else "")
                    + "; rerun the sweep to recompute them",
                    stacklevel=2,
                )
        by_slot: dict[str, list[Path]] = {}
        for p in self.units(study):
            if p in recorded:
                by_slot.setdefault(f"manifest:{p}", []).append(p)
                continue
            attrs = _attrs(p) if p.is_file() else None  # a FIFO is never opened (it would hang)
            slot = slot_of(attrs) if attrs is not None else f"unreadable:{p}"  # read_unit reports it
            by_slot.setdefault(slot, []).append(p)
        current, stale, newest_rule = [], [], []
        for slot, paths in by_slot.items():
            if slot.startswith("manifest:") or slot.startswith("unreadable:"):
                current.extend(paths)
            elif slot in manifest:
                stale.extend(paths)  # the slot's current unit is another file
            else:
                paths = sorted(paths, key=lambda q: q.stat().st_mtime_ns)
                current.append(paths[-1])
                stale.extend(paths[:-1])
                if len(paths) > 1:
                    newest_rule.append(slot)
        if warn and stale:
            how = " (newest file per slot: no current.json entry)" if newest_rule else ""
            warnings.warn(
                f"{self.root}: {len(stale)} stale unit(s) left out{how}: "
                f"{', '.join(str(p.relative_to(self.root)) for p in sorted(stale)[:5])}"
                f"{' ...' if len(stale) > 5 else ''} (remove them with `interp sweep ... --prune`)",
                stacklevel=2,
            )
        return sorted(current), sorted(stale)

    def prune(self) -> list[Path]:
        """Delete stale units; returns them."""
        _, stale = self.current_units(warn=False)
        for p in stale:
            p.unlink(missing_ok=True)
        return stale

    def clean_stale(self) -> int:
        """Remove temporaries left by killed writers, never a live writer's (a concurrent sweep
        into the same OUT, here or on another node: `interp.core.atomic.writer_gone`); returns how many."""
        n = 0
        if self.root.exists():
            for p in self.root.rglob(".*.tmp-*"):
                if writer_gone(p):
                    p.unlink(missing_ok=True)
                    n += 1
        return n


def _attrs(path: Path) -> dict | None:
    try:
        with h5py.File(path, "r") as f:
            return {k: _plain(v) for k, v in f.attrs.items()}
    except OSError:
        return None


def _keeps_full(old_path: Path, new: Mapping[str, object]) -> bool:
    """Whether the --full-hash unit at `old_path` stays current against the sampled unit `new`:
    same content fingerprint (the bytes that ran) and the same inputs otherwise."""
    if new.get(MODE_ATTR) == "full" or not old_path.exists():
        return False
    try:
        regular_file(old_path, error=CacheError)
    except InterpError:
        return False
    old = _attrs(old_path)
    return bool(
        old
        and old.get("complete")
        and old.get(MODE_ATTR) == "full"
        and old.get(CONTENT_ATTR)
        and old.get(CONTENT_ATTR) == new.get(CONTENT_ATTR)
        and all(old.get(k) == new.get(k) for k in _SAME_INPUTS)
    )


def _plain(a: object) -> object:
    if isinstance(a, (np.integer, np.floating)):
        a = a.item()
    if isinstance(a, bytes):
        a = a.decode()
    return a


def _eq(a: object, b: object) -> bool:
    return _plain(a) == b


def read_unit(
    path: str | Path, *, expect: Mapping[str, object] | None = None, load_arrays: bool = True, verify: bool = True
) -> Unit:
    """Read one unit file, checking its identity and checksums.

    Parameters
    ----------
    path : str or Path
        A unit file (``*.h5`` under a cache).
    expect : mapping, optional
        Attributes the unit must have (e.g. an identity); a mismatch is a ProvenanceError.
    load_arrays : bool
        Read the arrays too (tables are always read).
    verify : bool
        Verify every dataset's checksum.

    Returns
    -------
    Unit
        Its path, attributes, tables and arrays.

    Raises
    ------
    CacheError
        A missing, incomplete, truncated or damaged file.
    ProvenanceError
        Attributes altered after writing, a renamed file, or a mismatch with ``expect``.
    """
    path = Path(path)  # a glob result or a notebook string is as good as a Path
    if path.exists():
        regular_file(path, error=CacheError)  # a FIFO would hang h5py's open
    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        raise CacheError(f"{path}: cache unit does not exist") from None
    except OSError as exc:
        raise CacheError(f"{path}: not a readable HDF5 cache unit (truncated or corrupt: {exc})") from None
    with f:
        attrs = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in f.attrs.items()}
        if not attrs.get("complete"):
            raise CacheError(f"{path}: cache unit is incomplete (writer did not finish)")
        if attrs.get("schema_version") != SCHEMA_VERSION:
            raise CacheError(f"{path}: schema_version {attrs.get('schema_version')} != {SCHEMA_VERSION}")
        recorded = {k: _plain(attrs.get(k)) for k in IDENTITY_FIELDS}
        if sha256_json(recorded) != attrs.get("identity_hash") or not path.stem.endswith(
            str(attrs.get("identity_hash"))[:16]
        ):
            raise ProvenanceError(
                f"{path}: provenance mismatch in field identity_hash (attributes were altered "
                "after writing or the file was renamed)"
            )
        for k, v in (expect or {}).items():
            if not _eq(attrs.get(k), v):
                raise ProvenanceError(
                    f"{path}: provenance mismatch in field {k}: cached {attrs.get(k)!r}, asked for {v!r}"
                )
        verify = verify and bool(attrs.get("checksums"))  # units written before checksums existed: none
        try:
            tables = {name: _read_table(g, path, verify) for name, g in f.get("tables", {}).items()}
            arrays = {name: _get(ds, path, verify) for name, ds in f.get("arrays", {}).items()} if load_arrays else {}
        except (OSError, KeyError, ValueError) as exc:
            raise CacheError(f"{path}: cache unit is damaged ({exc})") from None
    return Unit(path=path, attrs=attrs, tables=tables, arrays=arrays)


def read_array(path: Path, name: str) -> np.ndarray:
    """One array of a unit without loading the rest."""
    regular_file(path, error=CacheError)
    try:
        with h5py.File(path, "r") as f:
            return _get(f[f"arrays/{name}"], path, bool(f.attrs.get("checksums")))
    except (OSError, KeyError) as exc:
        raise CacheError(f"{path}: array {name!r} unreadable ({exc})") from None


def collect_tables(paths: Iterable[Path], table: str) -> pd.DataFrame:
    """Concatenate one named table over units (reads no arrays)."""
    frames = []
    for p in paths:
        unit = read_unit(p, load_arrays=False)
        if table in unit.tables:
            frames.append(unit.tables[table])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
