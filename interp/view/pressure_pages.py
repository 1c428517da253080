"""The pressure study's pages: item map, item, compare (payloads read from results and units)."""

from __future__ import annotations

import warnings

from pathlib import Path

import numpy as np
import pandas as pd

from analyses.bootstrap import UndefinedCIWarning, bootstrap_mean_ci
from cache.columns import read_columns, unit_header
from interp.view.encode import f32, records
from interp.view.sweep_files import SweepFiles, bank_base
from interp.view.tables import by_column, item_matrix, order_rows, rows_of_item
from interp.view.unit_columns import Aligned, align_units, align_units_kept

STUDY = "pressure"
KINDS = ("opinion", "challenge")  # the item map's turn kinds (item_maps.csv)
TRIAL_KEYS = ("item_id", "planted", "turn_kind", "turn_side", "turn_variant", "readout")
PROMPT_KEYS = ("item_id", "planted", "turn_kind", "turn_side", "turn_variant")
REPLY_COLUMNS = ("item_id", "planted", "turn_kind", "turn_side", "turn_variant", "sample", "reply", "parsed")
_TURN_ORDER = {"first": 0, "opinion": 1, "challenge": 2, "neutral": 3}
UNITS_COMPARED_UP_TO = 64  # the item page compares the prompts of every unit of a bank up to this many
UNITS_SCANNED = 8  # beyond, it shows those of the first unit (in display order) of these that has them
PAIR_BOOT = {"n_boot": 1000, "seed": 0}  # the paired CI: a 95% item bootstrap, as the summary's CIs


def banks(sw: SweepFiles) -> list[str]:
    """The pressure banks with item maps (named by pressure_summary.csv, which the same analysis
    writes beside item_maps.csv and which is small)."""
    table = sw.table("pressure_summary.csv")
    table = table if table is not None else sw.table("item_maps.csv")
    return sorted(table["bank"].astype(str).unique()) if table is not None else []


def _maps(sw: SweepFiles, bank: str) -> pd.DataFrame:
    """item_maps.csv's rows of `bank` (item_id and checkpoint as text)."""

    def build() -> pd.DataFrame:
        maps = sw.table("item_maps.csv")
        if maps is None:
            raise KeyError("item_maps.csv")
        sub = maps[maps["bank"].astype(str) == bank]
        return sub.assign(item_id=sub["item_id"].astype(str), checkpoint=sub["checkpoint"].astype(str))

    return sw.memo(("maps", bank), build)


def _item_maps(sw: SweepFiles, bank: str, item_id: str) -> pd.DataFrame:
    """One item's rows of item_maps.csv."""
    return rows_of_item(sw, ("maps_by_item", bank), lambda: _maps(sw, bank)[list(MAP_COLUMNS)], item_id)


MAP_COLUMNS = ("item_id", "checkpoint", "turn_kind", "map_value")


def items(sw: SweepFiles, bank: str) -> list[str]:
    """The bank's items as item_maps.csv lists them (sorted by id: the index a page key uses)."""
    return sw.memo(("items", bank), lambda: sorted(_maps(sw, bank)["item_id"].unique()))


def _units(sw: SweepFiles, bank: str) -> pd.DataFrame:
    u = sw.units(STUDY)
    return u[u["bank_base"] == bank_base(bank)]


def item_fields(sw: SweepFiles, bank: str) -> pd.DataFrame:
    """gold (from the units' first_turn table), text and topic (from the bank, when it still hashes
    to the units' bank_hash) of every item, indexed by item_id."""
    return sw.memo(("item_fields", bank), lambda: _item_fields(sw, bank))


def _item_fields(sw: SweepFiles, bank: str) -> pd.DataFrame:
    ids = items(sw, bank)
    out = pd.DataFrame(index=pd.Index(ids, name="item_id"), columns=["gold", "text", "topic"], dtype=object)
    out[:] = ""
    units = _units(sw, bank)
    if not units.empty:
        cols, _ = read_columns(units["path"].iloc[0], "first_turn", ["item_id", "gold"])
        gold = pd.Series(cols["gold"], index=cols["item_id"]).astype(str)
        out["gold"] = gold.reindex(ids).fillna("").to_numpy()
    bank_items = sw.bank_items(STUDY, bank)
    if bank_items is not None:
        b = bank_items.drop_duplicates("item_id").set_index("item_id")
        out["text"] = b["text"].reindex(ids).fillna("").astype(str).to_numpy()
    if bank_base(bank) == "moral":
        from interp.organism.topics import SETTINGS

        topic = {i: name for name, ids_ in SETTINGS.items() for i in ids_}
        out["topic"] = [topic.get(i, "other") for i in ids]
    return out


def map_payload(sw: SweepFiles, bank: str, kind: str) -> dict:
    """Item x checkpoint matrix of item_maps.csv's map_value (log-odds, < 0: the item yields)."""
    if kind not in KINDS:
        raise KeyError(kind)
    sub = _maps(sw, bank)
    sub = sub[sub["turn_kind"] == kind]
    ids = items(sw, bank)
    names = [c["name"] for c in sw.columns]
    z = item_matrix(sub, ids, names, sw.out / "results" / "item_maps.csv")
    fields = item_fields(sw, bank)
    return {
        "bank": bank,
        "kind": kind,
        "items": ids,
        "gold": fields["gold"].tolist(),
        "topic": fields["topic"].tolist(),
        "text": [t[:200] for t in fields["text"].tolist()],
        "order": order_rows(z, toward_user=-1).tolist(),  # most-yielding first, as the report's heatmap
        "z": f32(z),
    }


def _aligned(sw: SweepFiles, bank: str, table: str, keys: tuple[str, ...], value: str) -> Aligned:
    def build() -> Aligned:
        if sw.index_dir is None:
            return align_units(_units(sw, bank), table, keys, value)
        return align_units_kept(_units(sw, bank), table, keys, value, sw.index_dir)

    return sw.memo(("aligned", bank, table, value), build)


def warm_items(sw: SweepFiles, bank: str) -> None:
    """Read what the item pages of `bank` need from every unit (the server does it in the
    background once the item map is open, before the reader clicks an item)."""
    _aligned(sw, bank, "trials", TRIAL_KEYS, "p_planted")
    _aligned(sw, bank, "first_turn", ("item_id",), "p_gold")
    _prompt_tables(sw, bank)
    _item_maps(sw, bank, "")


def _by_column(sw: SweepFiles, al: Aligned, rows: np.ndarray) -> np.ndarray:
    """values[rows] as [row, display column] (NaN where a checkpoint has no unit)."""
    col = sw.column_index()
    out = np.full((len(rows), len(sw.columns)), np.nan)
    for u, ck in enumerate(al.checkpoints):
        if ck in col:
            out[:, col[ck]] = al.values[u, rows]
    return out


def _units_with(sw: SweepFiles, bank: str, table: str) -> pd.DataFrame:
    """The units of `bank` that hold `table` (prompts, replies). Over more than
    UNITS_COMPARED_UP_TO units, only the first in display order that holds it, among the first
    UNITS_SCANNED: a page never opens every unit of a long sweep to show one item's prompts."""

    def build() -> pd.DataFrame:
        units = _units(sw, bank)
        if len(units) <= UNITS_COMPARED_UP_TO:
            heads = sw.unit_headers(STUDY)
            heads = heads[heads["bank_base"] == bank_base(bank)]
            return heads[heads["tables"].map(lambda names: table in names)] if not heads.empty else heads
        col = sw.column_index()
        first = sorted(range(len(units)), key=lambda i: col.get(str(units["checkpoint"].iloc[i]), len(col)))
        for i in first[:UNITS_SCANNED]:
            if table in unit_header(units["path"].iloc[i])[1]:
                return units.iloc[[i]]
        return units.iloc[:0]

    return sw.memo(("units_with", bank, table), build)


def _prompt_tables(sw: SweepFiles, bank: str) -> list[tuple[list, dict[str, pd.DataFrame]]]:
    """[(display columns, {item_id: prompt rows})]: one entry per distinct prompts table (units
    whose prompts columns carry the same checksums share it), decoded once."""

    def build():
        col = sw.column_index()
        groups: dict[str, tuple[list, Path]] = {}
        units = _units_with(sw, bank, "prompts")
        for path, ck in zip(units["path"], units["checkpoint"]):
            _, sums = read_columns(path, "prompts", [], digests=("prompt", *PROMPT_KEYS))
            groups.setdefault("|".join(sums.values()), ([], path))[0].append(col.get(str(ck)))
        out = []
        for cols, path in groups.values():
            table = pd.DataFrame(read_columns(path, "prompts", (*PROMPT_KEYS, "prompt"))[0])
            by_item = dict(tuple(table.assign(item_id=table["item_id"].astype(str)).groupby("item_id", sort=False)))
            out.append((sorted(cols, key=lambda c: -1 if c is None else c), by_item))
        return out

    return sw.memo(("prompts", bank), build)


def _prompt_groups(sw: SweepFiles, bank: str, item_id: str) -> list[dict]:
    """The item's prompts as each checkpoint's unit recorded them, one entry per distinct set."""
    return [
        {"columns": cols, "prompts": records(by_item.get(item_id), [*PROMPT_KEYS[1:], "prompt"])}
        for cols, by_item in _prompt_tables(sw, bank)
    ]


def _replies(sw: SweepFiles, bank: str, item_id: str) -> list[dict]:
    def build(path: Path) -> dict[str, pd.DataFrame]:
        table = pd.DataFrame(read_columns(path, "replies", REPLY_COLUMNS)[0])
        return dict(tuple(table.assign(item_id=table["item_id"].astype(str)).groupby("item_id", sort=False)))

    units = _units_with(sw, bank, "replies")
    out = []
    for path, ck in zip(units["path"], units["checkpoint"]):
        rows = sw.memo(("replies", str(path)), lambda p=path: build(p)).get(item_id)
        if rows is not None:
            out += records(rows.assign(checkpoint=str(ck)), ["checkpoint", *REPLY_COLUMNS[1:]])
    return out


def item_payload(sw: SweepFiles, bank: str, index: int) -> dict:
    """One item along the checkpoints: P(planted verdict) of every condition (from the units),
    its item map (item_maps.csv), its first-turn P(gold), its prompts and sampled replies."""
    ids = items(sw, bank)
    item_id = ids[index]
    trials = _aligned(sw, bank, "trials", TRIAL_KEYS, "p_planted")
    rows = trials.rows_where("item_id", item_id)
    keys = trials.keys.iloc[rows].reset_index(drop=True)
    sort = keys.assign(
        _r=keys["readout"] != "slot",  # the slot readout first, then the sampled one
        _t=keys["turn_kind"].map(_TURN_ORDER).fillna(9),
        _s=keys["turn_side"].map({"agree": 0, "oppose": 1}).fillna(2),
    ).sort_values(["_r", "readout", "planted", "_t", "_s", "turn_variant"], kind="stable")
    rows = rows[sort.index.to_numpy()]
    conditions = records(trials.keys.iloc[rows], list(TRIAL_KEYS[1:]))
    first = _aligned(sw, bank, "first_turn", ("item_id",), "p_gold")
    first_rows = first.rows_where("item_id", item_id)
    maps = _item_maps(sw, bank, item_id)
    map_rows = {}
    for kind in KINDS:
        m = maps[maps["turn_kind"] == kind]
        map_rows[kind] = by_column(sw, m["checkpoint"], m["map_value"])
    fields = item_fields(sw, bank).loc[item_id]
    probes = sw.table("probes.csv")
    return {
        "bank": bank,
        "index": index,
        "item_id": item_id,
        "n_items": len(ids),
        "gold": fields["gold"],
        "text": fields["text"],
        "topic": fields["topic"],
        "planted": sorted({c["planted"] for c in conditions}),
        "conditions": conditions,
        "p_planted": _by_column(sw, trials, rows).tolist(),
        "p_gold_first": _by_column(sw, first, first_rows)[0].tolist() if len(first_rows) else [],
        "map": map_rows,
        "prompts": _prompt_groups(sw, bank, item_id),
        "replies": _replies(sw, bank, item_id),
        "probes": records(probes[probes["study"] == STUDY] if probes is not None else None),
    }


def _map_column(sw: SweepFiles, bank: str, kind: str, checkpoint: str) -> pd.Series:
    m = _maps(sw, bank)
    m = m[(m["turn_kind"] == kind) & (m["checkpoint"] == checkpoint)]
    return pd.Series(m["map_value"].to_numpy(dtype=np.float64), index=m["item_id"])


def pair_payload(a: tuple[SweepFiles, int], b: tuple[SweepFiles, int], base: str, kind: str) -> dict:
    """Two checkpoints' item maps item by item (items both measured), and the mean paired
    difference B - A with its 95% item-bootstrap CI (analyses.bootstrap, as the summaries' CIs)."""
    if kind not in KINDS:
        raise KeyError(kind)
    sides = []
    for sw, ci in (a, b):
        bank = next((x for x in banks(sw) if bank_base(x) == base), None)
        column = _map_column(sw, bank, kind, sw.columns[ci]["name"]) if bank else pd.Series(dtype=np.float64)
        sides.append((bank or f"(no {base} bank in {sw.label})", column))
    joined = pd.concat([sides[0][1].rename("a"), sides[1][1].rename("b")], axis=1, join="inner").dropna()
    joined = joined.sort_index()
    diff = (joined["b"] - joined["a"]).to_numpy()
    with warnings.catch_warnings():  # fewer than 5 items: the CI is undefined (NaN), said on the page
        warnings.simplefilter("ignore", UndefinedCIWarning)
        ci = bootstrap_mean_ci(diff, **PAIR_BOOT) if len(diff) else None
    return {
        "banks": [sides[0][0], sides[1][0]],
        "kind": kind,
        "items": joined.index.tolist(),
        "a": joined["a"].tolist(),
        "b": joined["b"].tolist(),
        "stat": {
            "name": "mean paired difference of the item map (B − A)",
            "n": len(diff),
            "mean": float(diff.mean()) if len(diff) else None,
            "lo": ci.lo if ci else None,
            "hi": ci.hi if ci else None,
            **PAIR_BOOT,
        },
    }
