"""Bank files: read, validate, normalize, hash. Errors name the file, row and field.

Rows are read from JSON Lines or CSV (UTF-8, a BOM and CRLF line ends accepted). A bank's
hash is taken over its normalized rows, so the same items in another layout hash the same
and any edit to an item gives a new hash (and new cache units).

Two registries, filled by the studies (each in its own folder):
  BANK_FORMATS: layout name -> BankFormat (which study reads it, how a file is recognised,
                the reader). `read_bank(path, kind)` tries the study's formats in order.
  SHIPPED:      bank name -> file under interp/data/banks (StudySpec.shipped_banks).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from interp.core.errors import BankError
from interp.core.hashing import sha256_json
from interp.core.registry import Registry

MAX_FIELD_CHARS = 20_000  # a field longer than this is a broken file, not a bank item
MAX_BANK_BYTES = 256 << 20  # a bank file bigger than this is not a bank (or /dev/zero behind a link)
SHIPPED: Registry[str] = Registry("shipped bank")  # name -> file name; filled by register_study


@dataclass(frozen=True)
class Bank:
    name: str
    kind: str  # what the rows are: the study's own word ("pressure", "conversational", "cloze", ...)
    items: pd.DataFrame
    hash: str
    source: str

    def __len__(self) -> int:
        return len(self.items)

    def counts(self, by: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.items[by].value_counts().sort_index().items()}

    def subsample(self, n: int | None, *, seed: int = 0, by: str = "item_id", stratify: str | None = None) -> "Bank":
        """A deterministic subset of n units (items, or prompt_ids for cloze), balanced over `stratify`."""
        units = self.items[by].drop_duplicates()
        if n is None or n >= len(units):
            return self
        if stratify:
            first = self.items.drop_duplicates(by).set_index(by)[stratify]
            groups = [g.sample(frac=1.0, random_state=seed).index.tolist() for _, g in first.groupby(first)]
            keep: list = []
            i = 0
            while len(keep) < n:
                for g in groups:
                    if i < len(g) and len(keep) < n:
                        keep.append(g[i])
                i += 1
        else:
            keep = units.sample(n=n, random_state=seed).tolist()
        items = self.items[self.items[by].isin(set(keep))].reset_index(drop=True)
        return Bank(
            name=f"{self.name}[n={n},seed={seed}]",
            kind=self.kind,
            items=items,
            hash=bank_hash(items),
            source=self.source,
        )


def bank_hash(items: pd.DataFrame) -> str:
    return sha256_json(items.astype(str).to_dict(orient="records"))


def shipped_bank_path(name: str) -> Path:
    return Path(str(resources.files("interp") / "data" / "banks" / SHIPPED.get(name)))


def _decode(path: Path) -> str:
    from interp.core.files import regular_file

    if path.exists():  # a FIFO or device would block or never end: refuse before opening
        regular_file(path, limit=MAX_BANK_BYTES, error=BankError)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BankError(f"{path}: bank file does not exist") from None
    except OSError as exc:
        raise BankError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BankError(f"{path}: row {line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_rows(path: str | Path) -> list[tuple[int, dict]]:
    """(row number, record) pairs from JSONL or CSV; row numbers are 1-based file lines/records."""
    path = Path(path)
    text = _decode(path)
    rows: list[tuple[int, dict]] = []
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for n, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise BankError(f"{path}: row {n}: invalid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise BankError(f"{path}: row {n}: expected a JSON object")
            rows.append((n, rec))
    else:
        reader = csv.DictReader(io.StringIO(text))
        n = 1
        try:
            if not reader.fieldnames:
                raise BankError(f"{path}: empty file (no header row)")
            for n, rec in enumerate(reader, start=2):
                if None in rec:
                    raise BankError(f"{path}: row {n}: more fields than the header has")
                short = [k.strip() for k, v in rec.items() if v is None]  # DictReader fills them with None
                if short:
                    raise BankError(
                        f"{path}: row {n}: fewer fields than the header has (no value for {', '.join(short)})"
                    )
                rows.append((n, {k.strip(): v for k, v in rec.items()}))
        except csv.Error as exc:  # e.g. a field over the csv module's 131072-character limit
            raise BankError(
                f"{path}: row {n + 1}: unreadable CSV ({exc}; fields are limited to {MAX_FIELD_CHARS} characters)"
            ) from None
    if not rows:
        raise BankError(f"{path}: no rows")
    return rows


def require_columns(path: Path, rows: list[tuple[int, dict]], columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in rows[0][1]]
    if missing:
        raise BankError(
            f"{path}: missing column(s) {', '.join(missing)} (row {rows[0][0]} has {', '.join(rows[0][1])})"
        )


def text_field(path: Path, n: int, rec: dict, field: str, *, optional: bool = False) -> str:
    value = rec.get(field)
    if value is None or (isinstance(value, float) and value != value):
        value = ""
    value = str(value).strip()
    if not value and not optional:
        raise BankError(f"{path}: row {n}: field {field} is empty")
    if len(value) > MAX_FIELD_CHARS:
        raise BankError(f"{path}: row {n}: field {field} is {len(value)} characters (limit {MAX_FIELD_CHARS})")
    bad = next((c for c in value if c in _CONTROL), None)
    if bad is not None:  # NUL cannot be stored in the cache's strings; other controls are never text
        raise BankError(f"{path}: row {n}: field {field} contains control character U+{ord(bad):04X}")
    return value


# C0 controls except tab, newline and carriage return (which text may hold), plus DEL
_CONTROL = frozenset(chr(c) for c in (*range(0, 9), 11, 12, *range(14, 32), 127))


def choice_field(path: Path, n: int, rec: dict, field: str, allowed: Mapping[str, str]) -> str:
    """Value normalized through `allowed` (case-insensitive keys -> canonical value)."""
    raw = text_field(path, n, rec, field)
    key = raw.lower()
    if key not in allowed:
        raise BankError(
            f"{path}: row {n}: field {field} has unknown value {raw!r} (expected {', '.join(sorted(set(allowed.values())))})"
        )
    return allowed[key]


def unique_ids(path: Path, rows: Sequence[tuple[int, dict]], ids: Sequence[str], field: str = "item_id") -> None:
    seen: dict[str, int] = {}
    for (n, _), i in zip(rows, ids):
        if i in seen:
            raise BankError(f"{path}: row {n}: duplicate {field} {i!r} (first at row {seen[i]})")
        seen[i] = n


# ---------------------------------------------------------------- bank formats


@dataclass
class Sniffed:
    """What a reader needs to recognise a file, read once: its rows (JSONL/CSV) or JSON object."""

    path: Path
    _rows: list[tuple[int, dict]] | None = field(default=None, repr=False)
    _json: Any = field(default=None, repr=False)
    _json_read: bool = False

    @property
    def rows(self) -> list[tuple[int, dict]]:
        if self._rows is None:
            self._rows = read_rows(self.path)
        return self._rows

    @property
    def columns(self) -> set[str]:
        return set(self.rows[0][1])

    @property
    def json(self) -> Any:
        """The whole file as one JSON value (None when it is not one, e.g. JSON Lines)."""
        if not self._json_read:
            self._json_read = True
            try:
                self._json = json.loads(self.path.read_text(encoding="utf-8-sig"))
            except FileNotFoundError:
                raise BankError(f"{self.path}: bank file does not exist") from None
            except (ValueError, UnicodeDecodeError, OSError):
                self._json = None
        return self._json


@dataclass(frozen=True)
class BankFormat:
    """A bank layout: the study (kind) that reads it, how a file is recognised, the reader."""

    name: str
    kind: str  # the name of the study that reads it
    recognise: Callable[[Sniffed], bool]
    read: Callable[[Sniffed], "Bank"]
    describe: str  # for the unknown-layout message, e.g. "ETHICS label,input"


BANK_FORMATS: Registry[BankFormat] = Registry("bank format")


def register_format(fmt: BankFormat) -> BankFormat:
    return BANK_FORMATS.add(fmt.name, fmt, replace=True)


def formats_for(kind: str) -> list[BankFormat]:
    return [f for _, f in BANK_FORMATS.items() if f.kind == kind]


def read_bank(path: str | Path, kind: str) -> "Bank":
    """Read a bank file with the first of `kind`'s registered formats that recognises it."""
    sniffed = Sniffed(Path(path))
    fmts = formats_for(kind)
    for fmt in fmts:
        if fmt.recognise(sniffed):
            return fmt.read(sniffed)
    raise BankError(
        f"{path}: unknown layout (columns {', '.join(sorted(sniffed.columns))}); expected "
        + " or ".join(f.describe for f in fmts)
    )


def resolve(ref: str | Path, kind: str) -> "Bank":
    """A shipped bank by name, or a user's file (layout recognised by the formats of `kind`)."""
    ref = str(ref)
    if ref in SHIPPED and not Path(ref).exists():
        return read_bank(shipped_bank_path(ref), kind)
    return read_bank(Path(ref), kind)
