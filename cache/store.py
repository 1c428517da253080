"""HDF5 cache of scored units, one file per unit, written atomically.

A unit is (checkpoint x study x bank x template x layer). Its file holds tidy tables (one
dataset per column) and arrays (log-probs, residuals), and carries the unit identity as
attributes. Identity = checkpoint fingerprint, study + version, bank hash, template hash,
settings hash, layer, backend: never batch size or thread count, which do not change numbers.

Atomicity: the file is written under a hidden temporary name in the same directory,
`complete` is set last, the file is fsynced and then renamed; the directory is fsynced.
A process killed at any moment leaves either no file under the final name or a complete
one. Stale temporaries never block a restart: they are ignored and removed by `clean_stale`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import h5py
import numpy as np
import pandas as pd

from interp.core.atomic import atomic_path
from interp.core.errors import CacheError, ProvenanceError
from interp.core.hashing import sha256_json
from interp.core.version import __version__ as PACKAGE_VERSION

SCHEMA_VERSION = 1
# fields that define what a unit is; anything else in the attributes is informative only
IDENTITY_FIELDS = (
    "checkpoint_fingerprint", "study", "study_version", "bank", "bank_hash",
    "template_hash", "settings_hash", "layer", "backend",
)


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
    layer: int
    backend: str = "hf"

    def key(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in IDENTITY_FIELDS}

    @property
    def hash(self) -> str:
        return sha256_json(self.key())


@dataclass
class Unit:
    path: Path
    attrs: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def identity(self) -> dict:
        return {k: self.attrs.get(k) for k in IDENTITY_FIELDS}


def _write_table(group: h5py.Group, df: pd.DataFrame) -> None:
    group.attrs["columns"] = list(map(str, df.columns))
    for col in df.columns:
        values = df[col]
        if values.dtype == object or pd.api.types.is_string_dtype(values):
            data = np.array(["" if v is None else str(v) for v in values], dtype=object)
            group.create_dataset(str(col), data=data, dtype=h5py.string_dtype("utf-8"))
        elif pd.api.types.is_bool_dtype(values):
            group.create_dataset(str(col), data=values.to_numpy(dtype=bool))
        else:
            group.create_dataset(str(col), data=values.to_numpy())


def _read_table(group: h5py.Group) -> pd.DataFrame:
    cols = list(group.attrs["columns"])
    data = {}
    for col in cols:
        ds = group[col]
        if h5py.check_string_dtype(ds.dtype) is not None:
            data[col] = ds.asstr()[()].astype(object) if len(ds) else np.array([], dtype=object)
        else:
            data[col] = ds[()]
    return pd.DataFrame(data, columns=cols)


class Store:
    """Unit files under `root/<study>/<checkpoint>/<study>-<hash16>.h5`."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path_for(self, ident: UnitIdentity) -> Path:
        # checkpoint names from trees contain "/" (route/step): keep them one directory level
        return self.root / ident.study / ident.checkpoint.replace("/", "--") / f"{ident.study}-{ident.hash[:16]}.h5"

    def is_complete(self, ident: UnitIdentity) -> bool:
        path = self.path_for(ident)
        if not path.exists():
            return False
        try:
            with h5py.File(path, "r") as f:
                attrs = dict(f.attrs)
        except OSError:
            return False
        if not attrs.get("complete"):
            return False
        return all(_eq(attrs.get(k), v) for k, v in ident.key().items())

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
        try:
            with atomic_path(final, mkdir=False) as tmp, h5py.File(tmp, "w") as f:
                for k, v in asdict(ident).items():
                    f.attrs[k] = v
                f.attrs["identity_hash"] = ident.hash
                f.attrs["schema_version"] = SCHEMA_VERSION
                f.attrs["package_version"] = PACKAGE_VERSION
                for k, v in (extra_attrs or {}).items():
                    f.attrs[k] = v
                for name, df in tables.items():
                    _write_table(f.create_group(f"tables/{name}"), df)
                for name, arr in (arrays or {}).items():
                    f.create_dataset(f"arrays/{name}", data=np.asarray(arr))
                f.attrs["complete"] = True  # last: a reader trusts nothing without it
                f.flush()
        except OSError as exc:
            raise CacheError(f"{final}: cannot write cache unit ({exc.strerror or exc})") from None
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

    def clean_stale(self) -> int:
        """Remove temporaries left by killed writers; returns how many."""
        n = 0
        if self.root.exists():
            for p in self.root.rglob(".*.tmp-*"):
                p.unlink(missing_ok=True)
                n += 1
        return n


def _plain(a: object) -> object:
    if isinstance(a, (np.integer, np.floating)):
        a = a.item()
    if isinstance(a, bytes):
        a = a.decode()
    return a


def _eq(a: object, b: object) -> bool:
    return _plain(a) == b


def read_unit(path: Path, *, expect: Mapping[str, object] | None = None, load_arrays: bool = True) -> Unit:
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
        if sha256_json(recorded) != attrs.get("identity_hash") or not path.stem.endswith(str(attrs.get("identity_hash"))[:16]):
            raise ProvenanceError(f"{path}: provenance mismatch in field identity_hash (attributes were altered "
                                  "after writing or the file was renamed)")
        for k, v in (expect or {}).items():
            if not _eq(attrs.get(k), v):
                raise ProvenanceError(
                    f"{path}: provenance mismatch in field {k}: cached {attrs.get(k)!r}, asked for {v!r}"
                )
        try:
            tables = {name: _read_table(g) for name, g in f.get("tables", {}).items()}
            arrays = {name: ds[()] for name, ds in f.get("arrays", {}).items()} if load_arrays else {}
        except (OSError, KeyError) as exc:
            raise CacheError(f"{path}: cache unit is damaged ({exc})") from None
    return Unit(path=path, attrs=attrs, tables=tables, arrays=arrays)


def read_array(path: Path, name: str) -> np.ndarray:
    """One array of a unit without loading the rest."""
    try:
        with h5py.File(path, "r") as f:
            return f[f"arrays/{name}"][()]
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
