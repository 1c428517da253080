"""The field's sycophancy sets (issue 49) in the viewer: model-written-evals A/B files
(`ab_sycophancy`) and sycophancy-eval files (`sycophancy_eval`), item map and item pages read
from the tables their analyses write (no unit is opened but to find the bank file's text).

The two studies' item maps point opposite ways, as their tables define them: an A/B map value is
the log-odds of the answer that agrees with the user (> 0: the item draws the model to the user's
side), a sycophancy-eval map value is the pressure study's log-odds against the neutral line
(< 0: the item yields). Each payload says which (`toward_user`), and the map orders items by it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from interp.view.encode import f32, records
from interp.view.sweep_files import SweepFiles
from interp.view.tables import by_column, item_matrix, order_rows, rows_of_item


@dataclass(frozen=True)
class FieldSet:
    study: str
    summary: str  # the headline table (results/)
    summary_keys: tuple[str, ...]  # its columns that name a row
    maps: str  # the item map table
    kind: str  # the map table's column that splits it into maps (an A/B order; a turn kind)
    toward_user: int  # +1: map_value > 0 sides with the user; -1: < 0 does
    readings: str  # the per-item table
    reading_keys: tuple[str, ...]  # its columns that name one reading of an item
    values: tuple[str, ...]  # the numbers of a reading shown per checkpoint
    group: str  # the column a map is filtered by (which file of the set; which dataset)
    gold: str  # the column shown as the item's label
    note: str


FIELD_SETS = {
    "ab_sycophancy": FieldSet(
        study="ab_sycophancy",
        summary="ab_summary.csv",
        summary_keys=("checkpoint", "bank", "set", "order"),
        maps="ab_item_maps.csv",
        kind="order",
        toward_user=1,
        readings="ab_scores.csv",
        reading_keys=("set", "order"),
        values=("p_match", "logp_match", "logp_not"),
        group="set",
        gold="matching",
        note="map_value = logp_match − logp_not (results/ab_item_maps.csv): > 0, the answer that agrees "
        "with the user's stated view is the likelier; order `averaged` averages the given and reversed "
        "letter orders.",
    ),
    "sycophancy_eval": FieldSet(
        study="sycophancy_eval",
        summary="sycophancy_eval_summary.csv",
        summary_keys=("checkpoint", "bank", "domain", "readout"),
        maps="sycophancy_eval_item_maps.csv",
        kind="turn_kind",
        toward_user=-1,
        readings="sycophancy_eval_trials.csv",
        reading_keys=("readout", "planted", "turn_kind", "turn_side", "turn_variant"),
        values=("p_planted", "logodds"),
        group="dataset",
        gold="gold",
        note="map_value (results/sycophancy_eval_item_maps.csv) is the pressure study's: the log-odds of "
        "the planted answer after the challenge (are_you_sure) or the opposing stated opinion (answer, "
        "feedback) against the neutral line; < 0, the item yields.",
    ),
}


def field_set(study: str) -> FieldSet:
    if study not in FIELD_SETS:
        raise KeyError(study)
    return FIELD_SETS[study]


def _maps(sw: SweepFiles, fs: FieldSet, bank: str) -> pd.DataFrame:
    def build() -> pd.DataFrame:
        maps = sw.table(fs.maps)
        if maps is None:
            raise KeyError(fs.maps)
        sub = maps[maps["bank"].astype(str) == bank]
        return sub.assign(item_id=sub["item_id"].astype(str), checkpoint=sub["checkpoint"].astype(str))

    return sw.memo(("field_maps", fs.study, bank), build)


def banks(sw: SweepFiles, study: str) -> list[dict]:
    """[{bank, kinds}] of `study` in this sweep (from its item map table)."""
    fs = FIELD_SETS[study]
    maps = sw.table(fs.maps)
    if maps is None:
        return []
    return [
        {"bank": str(b), "kinds": sorted(g[fs.kind].astype(str).unique())}
        for b, g in maps.groupby(maps["bank"].astype(str), sort=True)
    ]


def items(sw: SweepFiles, fs: FieldSet, bank: str) -> list[str]:
    return sw.memo(("field_items", fs.study, bank), lambda: sorted(_maps(sw, fs, bank)["item_id"].unique()))


def _readings(sw: SweepFiles, fs: FieldSet, bank: str) -> pd.DataFrame:
    def build() -> pd.DataFrame:
        t = sw.table(fs.readings)
        if t is None:
            return pd.DataFrame(columns=["item_id", "checkpoint", *fs.reading_keys, *fs.values])
        t = t[t["bank"].astype(str) == bank]
        keys = {k: t[k].fillna("").astype(str) for k in fs.reading_keys}
        return t.assign(item_id=t["item_id"].astype(str), checkpoint=t["checkpoint"].astype(str), **keys)

    return sw.memo(("field_readings", fs.study, bank), build)


def _text(fs: FieldSet, row: pd.Series) -> str:
    """The item as the set's file states it: the A/B question with its answers; the sycophancy-eval
    conversation (role: content per message)."""
    if fs.study == "ab_sycophancy":
        answers = json.loads(row["answers"]) if row.get("answers") else []
        return str(row["question"]) + ("\n\nanswers: " + " / ".join(answers) if answers else "")
    messages = json.loads(row["messages"]) if row.get("messages") else []
    return "\n\n".join(f"{m.get('role', '')}: {m.get('content', '')}" for m in messages)


def item_fields(sw: SweepFiles, fs: FieldSet, bank: str) -> pd.DataFrame:
    """gold and group (from the readings table) and text (from the bank file, when it still hashes
    to the units' bank_hash) of every item, indexed by item_id."""

    def build() -> pd.DataFrame:
        ids = items(sw, fs, bank)
        out = pd.DataFrame("", index=pd.Index(ids, name="item_id"), columns=["gold", "group", "text"], dtype=object)
        r = _readings(sw, fs, bank).drop_duplicates("item_id").set_index("item_id")
        for col, src in (("gold", fs.gold), ("group", fs.group)):
            if src in r.columns:
                out[col] = r[src].reindex(ids).fillna("").astype(str).str.strip().to_numpy()
        bank_items = sw.bank_items(fs.study, bank)
        if bank_items is not None:
            b = bank_items.assign(item_id=bank_items["item_id"].astype(str)).drop_duplicates("item_id")
            text = {i: _text(fs, row) for i, row in b.set_index("item_id").iterrows()}
            out["text"] = [text.get(i, "") for i in ids]
        return out

    return sw.memo(("field_fields", fs.study, bank), build)


def map_payload(sw: SweepFiles, study: str, bank: str, kind: str) -> dict:
    """Item x checkpoint matrix of the study's map_value for one kind, the items most on the user's
    side first (by their mean over the checkpoints)."""
    fs = field_set(study)
    sub = _maps(sw, fs, bank)
    if kind not in set(sub[fs.kind].astype(str)):
        raise KeyError(kind)
    sub = sub[sub[fs.kind].astype(str) == kind]
    ids = items(sw, fs, bank)
    z = item_matrix(sub, ids, [c["name"] for c in sw.columns], sw.out / "results" / fs.maps)
    fields = item_fields(sw, fs, bank)
    return {
        "study": study,
        "bank": bank,
        "kind": kind,
        "toward_user": fs.toward_user,
        "note": fs.note,
        "items": ids,
        "gold": fields["gold"].tolist(),
        "group": fields["group"].tolist(),
        "text": [t[:200] for t in fields["text"].tolist()],
        "order": order_rows(z, fs.toward_user).tolist(),
        "z": f32(z),
    }


def item_payload(sw: SweepFiles, study: str, bank: str, index: int) -> dict:
    """One item along the checkpoints: every reading of its readings table (one row per reading
    and value, one column per checkpoint) and its map value per kind."""
    fs = field_set(study)
    ids = items(sw, fs, bank)
    item_id = ids[index]
    table = rows_of_item(sw, ("field_by_item", fs.study, bank), lambda: _readings(sw, fs, bank), item_id)
    rows, values = [], []
    if len(table):
        for key, g in table.groupby(list(fs.reading_keys), sort=True):
            key = key if isinstance(key, tuple) else (key,)
            for value in fs.values:
                rows.append(dict(zip(fs.reading_keys, key)) | {"value": value})
                values.append(by_column(sw, g["checkpoint"], g[value]))
    mine = rows_of_item(sw, ("field_maps_by_item", fs.study, bank), lambda: _maps(sw, fs, bank), item_id)
    map_rows = {
        kind: by_column(sw, g["checkpoint"], g["map_value"])
        for kind, g in mine.groupby(mine[fs.kind].astype(str), sort=True)
    }
    fields = item_fields(sw, fs, bank).loc[item_id]
    return {
        "study": study,
        "bank": bank,
        "index": index,
        "item_id": item_id,
        "n_items": len(ids),
        "gold": fields["gold"],
        "group": fields["group"],
        "text": fields["text"],
        "toward_user": fs.toward_user,
        "note": fs.note,
        "reading_keys": list(fs.reading_keys),
        "readings": rows,
        "values": values,
        "map": map_rows,
        "source": fs.readings,
        "maps_source": fs.maps,
    }


def summary_payload(sw: SweepFiles) -> dict:
    """Each field-set study's headline table as written."""
    return {
        study: {"rows": records(sw.table(fs.summary)), "keys": list(fs.summary_keys), "file": fs.summary}
        for study, fs in FIELD_SETS.items()
        if sw.table(fs.summary) is not None
    }
