"""Why a known answer was missed: figures that locate each miss, computed from the organism's own
results by `interp validate` (results/validation_misses.csv, the record's "Misses" section).

A diagnosis is not a check and never changes a status. It answers the first question a reader of
a miss asks, "was the plant not learned, or did the metric not see it?", with the numbers that
tell these apart:
- the graded plant (`a_graded`): each grade's mean S_op at every swept checkpoint of route A, the
  rest beside it. Equal means near 1 say every graded item yields fully (the grades were trained
  but not kept); equal means near the rest say the plant had not formed.
- I own > I sibling (`a_i_own`): S_op planted - rest at the own (early) source and at the target,
  and the own and best sibling I. An own source whose planted items do not yet stand out carries
  no map for I to find.
- the cloze cell (`cloze_*`): every cell's change in the planted language on the organism and on
  each control; a control whose own training (another cell) moved the planted cell too passes
  the organism - control check.
- the classify gaps (`classify_*`): accuracy on the planted and the other half at the trunk end and
  the route final, and how many of the five labels each predicts. Planted accuracy no higher than
  the rest's says the labels were not learned.
- the other pressure checks of a route (`a_*`, `b_*`): the flip rate under each turn (opposing and
  agreeing opinion, bare challenge, neutral filler) on the route's planted items and on the rest at
  its final. A challenge that flips planted items no more than the filler says S_ch's plant was not
  learned, whatever the metric.
- any check that passes on its location control: that control's flip rate under an opposing
  opinion on its own planted items and elsewhere at the route final. A control that yields on no
  item yet passes says the check reads item structure any training leaves, not where the yield is.
Every other miss is listed with its own figure and reason only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from interp.organism import checks as C
from interp.organism.config import CONTROL_DIRS
from interp.organism.stats import NOT_RECOVERED

COLUMNS = ("id", "subject", "figure", "value", "note")
MISSES_FILE = "validation_misses.csv"


def _d(cid: str, subject: str, figure: str, value: float, note: str = "") -> dict:
    return {"id": cid, "subject": subject, "figure": figure, "value": float(value), "note": note}


def _values(out: Path) -> pd.DataFrame:
    return C.item_values(pd.read_csv(out / "results" / "pressure_trials.csv"))


# (turn_kind, turn_side, label) of each pressure turn, in the order the diagnosis lists them
_TURNS = (
    ("opinion", "oppose", "opposing opinion"),
    ("opinion", "agree", "agreeing opinion"),
    ("challenge", "", "challenge"),
    ("neutral", "", "neutral filler"),
)


def _flips(out: Path, ck: str, items: set[str]) -> dict[str, tuple[float, float]]:
    """Flip rate under each turn at `ck`, (on `items`, on the other evaluated items)."""
    t = pd.read_csv(out / "results" / "pressure_trials.csv")
    t = t[(t["checkpoint"] == ck) & (t["turn_kind"] != "first")]
    on = t["item_id"].astype(str).isin(items)
    side = t["turn_side"].fillna("").astype(str)
    rates = {}
    for kind, s, label in _TURNS:
        x = t[(t["turn_kind"] == kind) & (side == s)]
        if not x.empty:
            rates[label] = (x.loc[on, "flipped"].mean(), x.loc[~on, "flipped"].mean())
    return rates


def turn_flips(out: Path, known: dict, cid: str) -> list[dict]:
    """At the check's route final: the flip rate under each turn, planted items and the rest."""
    r = C.route_name(known, cid[0])
    final = known["routes"][r][-1]
    planted = set(known["route_planted"][r])
    rows = []
    for label, (p, rest) in _flips(out, final, planted).items():
        rows.append(_d(cid, final, f"flip rate under {label}, planted items", p, f"{len(planted)} items"))
        rows.append(_d(cid, final, f"flip rate under {label}, other items", rest))
    return rows


def control_yield(out: Path, control: dict, cid: str) -> list[dict]:
    """The location control's own yield at the check's route final: flips under an opposing
    opinion on the items it was trained to yield on, and elsewhere."""
    r = C.route_name(control, cid[0])
    final = control["routes"][r][-1]
    own = set(control["trained"][r]["planted"])  # its route_planted are the organism's sets
    sub = out / CONTROL_DIRS["location"]
    if not (sub / "results" / "pressure_trials.csv").is_file():
        return []
    p, rest = _flips(sub, final, own).get("opposing opinion", (float("nan"),) * 2)
    note = "the location control: check passes on it"
    return [
        _d(cid, f"location control {final}", "flip rate under opposing opinion, its own planted items", p, note),
        _d(cid, f"location control {final}", "flip rate under opposing opinion, its other items", rest, note),
    ]


def graded(out: Path, known: dict, cid: str) -> list[dict]:
    grades = pd.Series(known.get("grades") or {}, dtype=float)
    if grades.empty:
        return []
    v = _values(out)
    r = C.route_name(known, "a")
    rest = set(known["eval_items"]) - set(known["route_planted"][r])
    rows = []
    for ck in [c for c in known["routes"][r] if c in v.index.get_level_values(0)]:
        s = v.loc[ck, "s_op"]
        for g in sorted(grades.unique(), reverse=True):
            ids = s.index.intersection(grades.index[grades == g])
            rows.append(_d(cid, ck, f"mean S_op, grade {g:g} items", s[ids].mean(), f"{len(ids)} items"))
        ids = s.index.intersection(sorted(rest))
        rows.append(_d(cid, ck, "mean S_op, unplanted items", s[ids].mean(), f"{len(ids)} items"))
    return rows


def i_own(out: Path, known: dict, cid: str) -> list[dict]:
    r = C.route_name(known, "a")
    own, target = C.early_checkpoint(known, r), known["routes"][r][-1]
    planted = sorted(known["route_planted"][r])
    v = _values(out)
    rows = []
    for ck, role in ((own, "own source"), (target, "target")):
        if ck in v.index.get_level_values(0):
            s = v.loc[ck, "s_op"]
            is_p = s.index.isin(planted)
            rows.append(_d(cid, ck, f"S_op planted - rest ({role})", s[is_p].mean() - s[~is_p].mean()))
    path = out / "results" / "organism_predictive.csv"
    if path.is_file():
        p = pd.read_csv(path)
        p = p[(p["lineage"] == "organism") & p["I"].notna()]
        for rel, pick in (("own", "first"), ("sibling", "max")):
            q = p[p["route_relation"] == rel]
            if not q.empty:
                best = q.iloc[0] if pick == "first" else q.loc[q["I"].idxmax()]
                rows.append(_d(cid, best["source"], f"I ({rel}{'' if rel == 'own' else ', best'})", best["I"]))
    return rows


def classify(out: Path, known: dict, cid: str) -> list[dict]:
    pr = C.classify_predictions(out, known)
    if pr is None:
        return []
    c = known["classify"]
    rows = []
    for ck in (known["trunk_end"], known["routes"][c["route"]][-1]):
        g = pr[pr["checkpoint"] == C.short(ck)]
        if g.empty:
            continue
        right = g["gold"].astype(str) == g["pred"].astype(str)
        for half in ("planted", "rest"):
            on = g["item_id"].astype(str).isin(c[half]).to_numpy()
            rows.append(_d(cid, ck, f"accuracy, {half} half", right[on].mean(), f"{int(on.sum())} items"))
        counts = g["pred"].astype(str).value_counts()
        rows.append(
            _d(cid, ck, "labels predicted (of 5)", len(counts), f"most often {counts.index[0]}: {counts.iloc[0]} items")
        )
    return rows


def cloze(out: Path, known: dict, cid: str) -> list[dict]:
    """Each cell's mean change (nats, base -> the cloze route's final) in the planted language, on
    the organism and on each control lineage validated beside it: a control passes the planted
    cell's check when its own training moved that cell too."""
    from interp.organism.cloze_plant import CELLS

    c = known.get("cloze") or {}
    lang, cell = c.get("language"), c.get("axis")
    rows = []
    for lineage, sub in (("organism", "."), *((f"{k} control", d) for k, d in CONTROL_DIRS.items())):
        ch = C.cloze_changes(out / sub, known) if (out / sub / "aux").is_dir() else None
        if ch is None or lang not in ch.index.get_level_values("language"):
            continue
        trained = CELLS[lineage.split()[0] if lineage != "organism" else "organism"]
        for axis, v in ch.loc[lang].groupby(level="axis").mean().items():
            note = "planted cell" if axis == cell else ""
            note += ("; " if note else "") + "this lineage's trained cell" if axis == trained else ""
            rows.append(_d(cid, lineage, f"{lang}/{axis} change (nats)", v, note))
    return rows


# check id -> its diagnosis; the checks of one group share one
DIAGNOSES: dict[str, Callable[[Path, dict, str], list[dict]]] = {
    "a_graded": graded,
    "a_i_own": i_own,
    "a_i_own_located": i_own,
    "cloze_cell_vs_control": cloze,
    "cloze_cell_moves_most": cloze,
    "classify_macro_f1_gap": classify,
    "classify_kappa_gap": classify,
}
# every other check of a route's pressure plant: the flips by turn at that route's final
for _cid in ("a_s_op_rises", "a_delta_rises", "a_s_op_gap", "a_precision_at_k", "a_s_ch_rises", "a_s_ch_gap") + (
    "b_delta_rises",
    "b_delta_beyond_s_op",
    "b_neutral_flip_rises",
    "b_neutral_flip_gap",
):
    DIAGNOSES[_cid] = turn_flips


def miss_table(out: Path, known: dict, checks: pd.DataFrame, controls: dict | None = None) -> pd.DataFrame:
    """One row per diagnostic figure of each check not recovered on the organism (COLUMNS);
    a miss without a diagnosis gets one row with its reason. `controls`: the control lineages'
    organism.json by kind; a check that passes on the location control gets that control's yield."""
    rows: list[dict] = []
    done: dict[tuple, list[dict]] = {}
    for r in checks[checks["status"] == NOT_RECOVERED].itertuples(index=False):
        on_control = getattr(r, "control_passed", None)
        if r.control == "location" and isinstance(on_control, (bool, np.bool_)) and on_control:
            if "location" in (controls or {}):
                rows += control_yield(out, controls["location"], r.id)
        f = DIAGNOSES.get(r.id)
        if f is None:
            rows.append(_d(r.id, "", str(r.figure), r.value, f"no diagnosis computed; {r.reason}"))
            continue
        key = (f, r.id[0])  # one diagnosis per function and route
        if key in done:  # a diagnosis shared by several checks is shown once, under the first
            rows.append(_d(r.id, "", "see", float("nan"), f"the rows of {done[key][0]['id']}"))
            continue
        got = f(out, known, r.id)
        done[key] = got or [_d(r.id, "", "", float("nan"))]
        rows += got or [_d(r.id, "", str(r.figure), r.value, f"no input for a diagnosis; {r.reason}")]
    return pd.DataFrame(rows, columns=list(COLUMNS))
