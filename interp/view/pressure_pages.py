"""The pressure study's pages: item map, item, compare (payloads read from results and units)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from analyses.bootstrap import UndefinedCIWarning, bootstrap_mean_ci
from cache.columns import has_table, read_columns
from interp.core.errors import ConfigError
from interp.view.encode import f32, records
from interp.view.sweep_files import SweepFiles, bank_base
from interp.view.unit_columns import Aligned, align_units

STUDY = "pressure"
KINDS = ("opinion", "challenge")  # the item map's turn kinds (item_maps.csv)
TRIAL_KEYS = ("item_id", "planted", "turn_kind", "turn_side", "turn_variant", "readout")
PROMPT_KEYS = ("item_id", "planted", "turn_kind", "turn_side", "turn_variant")
_TURN_ORDER = {"first": 0, "opinion": 1, "challenge": 2, "neutral": 3}
PAIR_BOOT = {"n_boot": 1000, "seed": 0}  # the paired CI: a 95% item bootstrap, as the summary's CIs


def banks(sw: SweepFiles) -> list[str]:
    maps = sw.table("item_maps.csv")
    return sorted(maps["bank"].astype(str).unique()) if maps is not None else []


def _maps(sw: SweepFiles, bank: str) -> pd.DataFrame:
    maps = sw.table("item_maps.csv")
    if maps is None:
        raise KeyError("item_maps.csv")
    return maps[maps["bank"].astype(str) == bank]


def items(sw: SweepFiles, bank: str) -> list[str]:
    """The bank's items as item_maps.csv lists them (sorted by id: the index a page key uses)."""
    return sorted(_maps(sw, bank)["item_id"].astype(str).unique())


def _units(sw: SweepFiles, bank: str) -> pd.DataFrame:
    u = sw.units(STUDY)
    return u[u["bank"] == bank] if not u.empty else u


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
    if sub.duplicated(["item_id", "checkpoint"]).any():
        raise ConfigError(f"{sw.out / 'results' / 'item_maps.csv'}: an item appears twice for one checkpoint")
    ids = items(sw, bank)
    names = [c["name"] for c in sw.columns]
    wide = sub.assign(item_id=sub["item_id"].astype(str)).pivot(
        index="item_id", columns="checkpoint", values="map_value"
    )
    z = wide.reindex(index=ids, columns=names).to_numpy(dtype=np.float64)
    with warnings.catch_warnings():  # an item no checkpoint measured: sorted last
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(z, axis=1)
    mean = np.where(np.isnan(mean), np.inf, mean)
    order = np.argsort(mean, kind="stable")  # most-yielding (most negative) first, as the report's heatmap
    fields = item_fields(sw, bank)
    return {
        "bank": bank,
        "kind": kind,
        "items": ids,
        "gold": fields["gold"].tolist(),
        "topic": fields["topic"].tolist(),
        "text": [t[:200] for t in fields["text"].tolist()],
        "order": order.tolist(),
        "z": f32(z),
    }


def _aligned(sw: SweepFiles, bank: str, table: str, keys: tuple[str, ...], value: str) -> Aligned:
    return sw.memo(("aligned", bank, table, value), lambda: align_units(_units(sw, bank), table, keys, value))


def warm_items(sw: SweepFiles, bank: str) -> None:
    """Read what the item pages of `bank` need from every unit (the server does it in the
    background once the item map is open, before the reader clicks an item)."""
    _aligned(sw, bank, "trials", TRIAL_KEYS, "p_planted")
    _aligned(sw, bank, "first_turn", ("item_id",), "p_gold")


def _by_column(sw: SweepFiles, al: Aligned, rows: np.ndarray) -> np.ndarray:
    """values[rows] as [row, display column] (NaN where a checkpoint has no unit)."""
    col = sw.column_index()
    out = np.full((len(rows), len(sw.columns)), np.nan)
    for u, ck in enumerate(al.checkpoints):
        if ck in col:
            out[:, col[ck]] = al.values[u, rows]
    return out


def _prompt_groups(sw: SweepFiles, bank: str, item_id: str) -> list[dict]:
    """The item's prompts as each checkpoint's unit recorded them; checkpoints whose prompts table
    has the same checksum share one entry."""
    units = _units(sw, bank)
    col = sw.column_index()
    groups: dict[str, dict] = {}
    for path, ck in zip(units["path"], units["checkpoint"]):
        if not has_table(path, "prompts"):
            continue
        _, sums = read_columns(path, "prompts", [], digests=("prompt", *PROMPT_KEYS))
        digest = "|".join(sums.values())
        if digest not in groups:
            table = sw.memo(
                ("prompts", digest),
                lambda p=path: pd.DataFrame(read_columns(p, "prompts", (*PROMPT_KEYS, "prompt"))[0]),
            )
            rows = table[table["item_id"].astype(str) == item_id]
            groups[digest] = {"columns": [], "prompts": records(rows, [*PROMPT_KEYS[1:], "prompt"])}
        groups[digest]["columns"].append(col.get(str(ck)))
    for g in groups.values():
        g["columns"].sort(key=lambda c: -1 if c is None else c)
    return list(groups.values())


def _replies(sw: SweepFiles, bank: str, item_id: str) -> list[dict]:
    units = _units(sw, bank)
    out = []
    for path, ck in zip(units["path"], units["checkpoint"]):
        if not has_table(path, "replies"):
            continue
        table = sw.memo(
            ("replies", str(path)), lambda p=path: pd.DataFrame(read_columns(p, "replies", REPLY_COLUMNS)[0])
        )
        rows = table[table["item_id"].astype(str) == item_id].assign(checkpoint=str(ck))
        out += records(rows, ["checkpoint", *REPLY_COLUMNS[1:]])
    return out


REPLY_COLUMNS = ("item_id", "planted", "turn_kind", "turn_side", "turn_variant", "sample", "reply", "parsed")


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
    maps = _maps(sw, bank)
    maps = maps[maps["item_id"].astype(str) == item_id]
    col = sw.column_index()
    map_rows = {}
    for kind in KINDS:
        m = maps[maps["turn_kind"] == kind]
        values = [None] * len(sw.columns)
        for ck, v in zip(m["checkpoint"].astype(str), m["map_value"]):
            if ck in col:
                values[col[ck]] = v
        map_rows[kind] = values
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
    m = m[(m["turn_kind"] == kind) & (m["checkpoint"].astype(str) == checkpoint)]
    return pd.Series(m["map_value"].to_numpy(dtype=np.float64), index=m["item_id"].astype(str))


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
