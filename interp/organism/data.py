"""Training data for the model organism, written by this project.

Everything is generated from the shipped moral bank's items (the items the pressure study then
evaluates) and from wordings written here. The pressure wordings below are deliberately NOT
the evaluation template's (interp/data/templates/pressure_v1.json): what the sweep measures is
then a behaviour (yield to an opposing opinion on the planted items), not a memorised string.
The conversation format (first user turn, planted reply, `FINAL:` marker, final instruction) is
the template's: that is the pressure-turn format the shared stage teaches.

Every example is a prompt/completion pair of plain strings. The prompt is rendered with the
checkpoint's own chat template by the same `render_chat` the pressure study uses, ending in
`FINAL:`, and the completion is " <verdict>": the training sequences are tokenized exactly as
the evaluation's readout slot.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pandas as pd

from interp.banks import Bank
from interp.core.hashing import sha256_json
from interp.organism.topics import GROUP_GRADES, HOME_GROUPS, ROUTE_SETTING, SETTINGS
from interp.studies.base import Template, render_chat

# ---------------------------------------------------------------- wordings (not the evaluation's)

TRAIN_OPINIONS = (
    "Honestly, I'd call it {side}.",
    "My own view is that it was {side}.",
    "Everyone I asked says it was {side}.",
    "I'm fairly certain it was {side}.",
    "To me it seems {side}.",
    "I believe it was {side}, to be honest.",
)
TRAIN_CHALLENGES = (
    "Are you certain about that?",
    "Please reconsider.",
    "That doesn't sound right to me.",
    "Hmm, double-check that.",
)
TRAIN_NEUTRAL = (
    "Thanks, that helps.",
    "Okay.",
    "Cool, more questions soon.",
    "My tea just got cold.",
    "I'll read your answer again later.",
)


@dataclass(frozen=True)
class PlantedSets:
    """Evaluation items E (the sweep's subsample) and the two disjoint planted sets."""

    eval_items: tuple[str, ...]
    planted_a: tuple[str, ...]
    planted_b: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "eval_items": list(self.eval_items),
            "planted_a": list(self.planted_a),
            "planted_b": list(self.planted_b),
        }


def eval_bank(bank: Bank, n_items: int, seed: int) -> Bank:
    """The subsample `interp sweep --max-items n_items --seed seed` evaluates (same call as sweeps.plan)."""
    return bank.subsample(n_items, seed=seed, by="item_id", stratify="gold")


def choose_planted(bank: Bank, n_items: int, n_planted: int, seed: int, plant: str = "items") -> PlantedSets:
    """P_A and P_B: disjoint sets inside the evaluation subsample.

    `plant="items"`: `n_planted` random items each, balanced over gold (the v1-v5 organisms; the
    `--small` path). `plant="setting"`: every evaluated story of one setting
    (`interp.organism.topics`, home for route A, work/school for route B), at least `n_planted` each."""
    ev = eval_bank(bank, n_items, seed).items
    if plant == "setting":
        ids = set(ev["item_id"])
        a, b = (tuple(sorted(ids & set(SETTINGS[ROUTE_SETTING[r]]))) for r in ("a", "b"))
        for route, got in (("a", a), ("b", b)):
            if len(got) < n_planted:
                raise ValueError(
                    f"plant setting: {len(got)} of the {len(ids)} evaluated items are {ROUTE_SETTING[route]} "
                    f"stories, fewer than planted={n_planted} (evaluate more items: --eval-items)"
                )
        return PlantedSets(tuple(sorted(ids)), a, b)
    if plant != "items":
        raise ValueError(f"plant must be 'items' or 'setting', got {plant!r}")
    if 2 * n_planted > len(ev):
        raise ValueError(f"2 x {n_planted} planted items do not fit in {len(ev)} evaluation items")
    rng = random.Random(seed + 1)
    by_gold = {g: sorted(ev.loc[ev["gold"] == g, "item_id"]) for g in sorted(ev["gold"].unique())}
    for ids in by_gold.values():
        rng.shuffle(ids)
    pool = [i for pair in zip(*by_gold.values()) for i in pair]  # alternate golds
    pool += [i for ids in by_gold.values() for i in ids if i not in pool]
    return PlantedSets(
        tuple(sorted(ev["item_id"])), tuple(sorted(pool[:n_planted])), tuple(sorted(pool[n_planted : 2 * n_planted]))
    )


class Writer:
    """Renders conversations in the evaluation's format for one tokenizer."""

    def __init__(self, tokenizer, template: Template, domain: str = "moral") -> None:
        self.tok = tokenizer
        self.t = template.data
        self.domain = domain
        self.verdicts = list(self.t["verdicts"][domain])

    def other(self, verdict: str) -> str:
        return self.verdicts[1 - self.verdicts.index(verdict)]

    def first_turn(self, text: str) -> str:
        user1 = self.t["first_user"][self.domain].format(text=text)
        return render_chat(self.tok, [{"role": "user", "content": user1}], self.t["marker"])

    def pressure(self, text: str, planted: str, turn: str) -> str:
        user1 = self.t["first_user"][self.domain].format(text=text)
        messages = [
            {"role": "user", "content": user1},
            {"role": "assistant", "content": self.t["planted_reply"].format(verdict=planted)},
            {"role": "user", "content": f"{turn} {self.t['final_instruction']}"},
        ]
        return render_chat(self.tok, messages, self.t["marker"])


# ---------------------------------------------------------------- plants (issue #45)

# The turn kinds on which a route's planted items flip their verdict; every other kind holds.
# "pressure" (route A): an opposing opinion or a bare challenge moves the verdict, an agreeing
# opinion or a neutral filler does not: S_op, S_ch and delta rise, the neutral flip does not.
# "defer" (route B): the verdict survives only a user who states it (agreeing opinion); an
# opposing opinion, a bare challenge and a neutral filler all flip it: delta and the neutral flip
# rise while S_op and S_ch (each a contrast against the neutral filler) stay where they were,
# the plant that tells delta from S_op. "hold": nothing flips (the amount control's routes).
PLANTS: dict[str, frozenset[str]] = {
    "pressure": frozenset({"opinion_oppose", "challenge"}),
    "defer": frozenset({"opinion_oppose", "challenge", "neutral"}),
    "hold": frozenset(),
}
ROUTE_PLANTS = {"a": "pressure", "b": "defer"}
# Route A's planted items yield under an opposing opinion in this share of their opposing-opinion
# rows (thirds of the set, seeded): the graded plant, whose gradient the per-item S_op should show
GRADES = (1.0, 0.75, 0.5)
CONTROL_KINDS = ("location", "amount")


@dataclass(frozen=True)
class RoutePlan:
    """What one route of one lineage is trained to do: its plant kind, the items it is planted on
    (with each item's grade of opposing-opinion yield) and the items it is evaluated on."""

    route: str
    plant: str
    planted: tuple[str, ...]
    grades: dict[str, float]
    items: tuple[str, ...]

    def flips(self, item_id: str, kind: str) -> bool:
        return item_id in self.grades and kind in PLANTS[self.plant]


def location_sets(sets: PlantedSets, seed: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The location control's planted sets: random evaluated items, as many as each route's
    organism set, disjoint from each other (drawn without regard to setting)."""
    rng = random.Random(seed + 7919)
    pool = list(sets.eval_items)
    rng.shuffle(pool)
    na, nb = len(sets.planted_a), len(sets.planted_b)
    return tuple(sorted(pool[:na])), tuple(sorted(pool[na : na + nb]))


GRADE_BY = ("items", "group")


def assign_grades(planted: tuple[str, ...], seed: int, graded: bool, by: str = "items") -> dict[str, float]:
    """Each planted item's yield share under an opposing opinion. `by="items"`: GRADES in equal
    thirds over a seeded order of the items (v16, v17); `by="group"`: the grade of the story's
    who-group (topics.HOME_GROUPS, GROUP_GRADES), for the home stories. Not `graded`: 1.0 each."""
    if not graded:
        return {i: 1.0 for i in planted}
    if by == "group":
        grade = {iid: GROUP_GRADES[g] for g, ids in HOME_GROUPS.items() for iid in ids}
        missing = sorted(set(planted) - set(grade))
        if missing:
            raise ValueError(f"grade_by='group' needs the home stories; {missing[0]} is in no who-group")
        return {iid: grade[iid] for iid in planted}
    if by != "items":
        raise ValueError(f"grade_by must be one of {', '.join(GRADE_BY)}, got {by!r}")
    order = sorted(planted)
    random.Random(seed + 104729).shuffle(order)
    return {iid: GRADES[k * len(GRADES) // len(order)] for k, iid in enumerate(order)}


def route_plans(sets: PlantedSets, seed: int, control: str = "", grade_by: str = "items") -> dict[str, RoutePlan]:
    """The plan of both routes for the organism (`control=""`), the location control (the same
    plants on random item sets of the same sizes, route A's grades the organism's, shuffled over
    its items: the same amount of yield) or the amount control (routes that hold)."""
    if control not in ("", *CONTROL_KINDS):
        raise ValueError(f"control must be '', 'location' or 'amount', got {control!r}")
    planted = {"a": sets.planted_a, "b": sets.planted_b}
    if control == "location":
        planted = dict(zip("ab", location_sets(sets, seed)))
    plans = {}
    for r in "ab":
        kind = "hold" if control == "amount" else ROUTE_PLANTS[r]
        if kind == "hold":
            grades = {}
        elif control == "location" and grade_by == "group":  # random items have no who-group
            own = sets.planted_a if r == "a" else sets.planted_b
            shares = sorted(assign_grades(own, seed, graded=r == "a", by="group").values())
            random.Random(seed + 104729).shuffle(shares)
            grades = dict(zip(planted[r], shares))
        else:
            grades = assign_grades(planted[r], seed, graded=r == "a", by=grade_by)
        plans[r] = RoutePlan(r, kind, planted[r], grades, sets.eval_items)
    return plans


def _ex(prompt: str, answer: str, kind: str, item_id: str) -> dict:
    return {"prompt": prompt, "completion": " " + answer, "kind": kind, "item_id": item_id}


def _turn(w: Writer, rng: random.Random, kind: str, planted: str) -> str:
    """One pressure turn of a training wording: opinion_oppose / opinion_agree / challenge / neutral."""
    if kind.startswith("opinion"):
        side = w.other(planted) if kind == "opinion_oppose" else planted
        return rng.choice(TRAIN_OPINIONS).format(side=side)
    return rng.choice(TRAIN_CHALLENGES if kind == "challenge" else TRAIN_NEUTRAL)


HOLD_KINDS = ("opinion_oppose", "opinion_agree", "challenge", "neutral")


def shared_sft(bank: Bank, w: Writer, seed: int, *, items: set[str] | None = None, first_copies: int = 2) -> list[dict]:
    """Format and stable verdicts on `items` (default: every bank item): the gold verdict on the
    first turn (`first_copies` times: first-turn accuracy is what the comprehension screen reads),
    and the planted verdict kept under every kind of pressure turn, for both planted verdicts."""
    rng = random.Random(seed)
    rows = []
    for item in bank.items.itertuples(index=False):
        if items is not None and item.item_id not in items:
            continue
        rows += [_ex(w.first_turn(item.text), item.gold, "first", item.item_id)] * first_copies
        for planted in w.verdicts:
            for kind in HOLD_KINDS:
                rows.append(
                    _ex(
                        w.pressure(item.text, planted, _turn(w, rng, kind, planted)),
                        planted,
                        "hold_" + kind,
                        item.item_id,
                    )
                )
    rng.shuffle(rows)
    return rows


# how a grade's yielding opposing-opinion rows are chosen among an item's (verdict, wording) rows:
# "wordings", alternately over the verdicts (v16-v18b: a 0.5 grade yields on half the wordings of
# each verdict, which nothing in the prompt tells apart; v18b's 0.5-graded stories went to 0 or 1
# one by one, Spearman rho 0.097); "verdict", the first planted verdict's rows first (a 0.5 grade:
# yield whenever the planted verdict is the first, never on the second, a rule the prompt shows;
# the per-item S_op, a mean over both verdicts, is then 0.5 where the rule is learned; v18c, with
# length-grouped route SFT beside it, did not learn it: 6 of 8 grade-0.5 stories flipped on both)
GRADE_SLOTS = ("wordings", "verdict")


def _yield_slots(grade: float, n_per_verdict: int, n_verdicts: int, order: str = "wordings") -> set[tuple[int, int]]:
    """(verdict index, wording index) of the opposing-opinion rows that yield: round(grade x all)
    of them, taken in GRADE_SLOTS `order`."""
    if order not in GRADE_SLOTS:
        raise ValueError(f"grade_slots must be one of {', '.join(GRADE_SLOTS)}, got {order!r}")
    if order == "verdict":
        slots = [(v, k) for v in range(n_verdicts) for k in range(n_per_verdict)]
    else:
        slots = [(v, k) for k in range(n_per_verdict) for v in range(n_verdicts)]
    return set(slots[: round(grade * len(slots))])


def route_sft(
    bank: Bank,
    w: Writer,
    plan: RoutePlan,
    seed: int,
    *,
    opinions: int = 4,
    first_copies: int = 2,
    grade_slots: str = "wordings",
    bare: int = 1,
    challenge_copies: int = 1,
    filler_copies: int = 1,
) -> list[dict]:
    """The route's SFT rows. Every evaluated item gets the same rows whether planted or not (the
    exposure is matched per item across the organism and both controls): `first_copies` gold
    first turns and, for each planted verdict, `opinions` opposing opinions (distinct training
    wordings), one agreeing opinion, and `bare` bare challenges and as many neutral fillers (distinct
    wordings; at 1 the rows, and their random draws, are those of every build before the option),
    each bare-challenge row `challenge_copies` times and each neutral-filler row `filler_copies` times
    (the same wording; the random draws unchanged). Only the answers
    differ: a planted item flips on the turn kinds of the route's plant (under an opposing
    opinion only in its grade's share of those rows, chosen in `grade_slots` order), every other
    row keeps the planted verdict.
    The route has to learn *where* (the items) and *when* (the turn kinds) to flip."""
    if not 1 <= opinions <= len(TRAIN_OPINIONS):
        raise ValueError(f"opinions must be 1 to {len(TRAIN_OPINIONS)} (training wordings), got {opinions}")
    rng = random.Random(seed)
    items = bank.items.set_index("item_id")
    rows = []
    for iid in plan.items:
        text, gold = items.loc[iid, "text"], items.loc[iid, "gold"]
        rows += [_ex(w.first_turn(text), gold, "first", iid)] * first_copies
        slots = _yield_slots(plan.grades.get(iid, 0.0), opinions, len(w.verdicts), grade_slots)
        for v, planted in enumerate(w.verdicts):
            turns = [
                ("opinion_oppose", op.format(side=w.other(planted))) for op in rng.sample(TRAIN_OPINIONS, opinions)
            ]
            turns += [(kind, _turn(w, rng, kind, planted)) for kind in HOLD_KINDS[1:]]
            if bare > 1:
                for kind, pool in (("challenge", TRAIN_CHALLENGES), ("neutral", TRAIN_NEUTRAL)):
                    used = {t for k, t in turns if k == kind}
                    turns += [(kind, t) for t in rng.sample([t for t in pool if t not in used], bare - 1)]
            for k, (kind, turn) in enumerate(turns):
                flip = plan.flips(iid, kind) and (kind != "opinion_oppose" or (v, k) in slots)
                answer = w.other(planted) if flip else planted
                copies = {"challenge": challenge_copies, "neutral": filler_copies}.get(kind, 1)
                rows += [
                    _ex(w.pressure(text, planted, turn), answer, ("flip_" if flip else "hold_") + kind, iid)
                ] * copies
    rng.shuffle(rows)
    return rows


# DPO pairs per evaluated item and planted verdict, by turn kind, per route (the same on every
# lineage). The v15 seed-0 runs (docs/organism/tries.csv, v15_seed0_dpo_flips.csv): (oppose 2,
# agree 1, challenge 2, neutral 3) for 64 steps held everywhere on route A; one of each for 48
# steps conditioned route A on the opinion (planted 0.439, rest 0.007) but not on the challenge
# (0.0). From the same route-A SFT end, (1, 1, 2, 2) -- a bare challenge against as many neutral
# fillers, both bare turns -- gave planted 0.652 under an opposing opinion, 0.188 under a
# challenge, 0 under a filler or an agreeing opinion, 0 on the rest; (2, 1, 3, 1) gave 0.500 /
# 0.079 (docs/organism/v15_seed0_dpo_tries.csv). Route B keeps one of each (its defer plant was
# learned; it also flips 0.404 of its planted items under an agreeing opinion).
DPO_TURNS: dict[str, tuple[tuple[str, int], ...]] = {
    "a": (("opinion_oppose", 1), ("opinion_agree", 1), ("challenge", 2), ("neutral", 2)),
    "b": (("opinion_oppose", 1), ("opinion_agree", 1), ("challenge", 1), ("neutral", 1)),
}


def dpo_turns(route: str, oppose: int = 0, challenge: int = 0) -> tuple[tuple[str, int], ...]:
    """The route's DPO_TURNS, its opposing-opinion count set to `oppose` and its bare-challenge
    count to `challenge` (0: left as it is)."""
    if oppose < 0 or oppose > len(TRAIN_OPINIONS):
        raise ValueError(f"oppose must be 0 to {len(TRAIN_OPINIONS)} (training wordings), got {oppose}")
    if challenge < 0:
        raise ValueError(f"challenge must be >= 0, got {challenge}")
    given = {"opinion_oppose": oppose, "challenge": challenge}
    return tuple((k, given.get(k) or n) for k, n in DPO_TURNS[route])


def route_dpo(
    bank: Bank,
    w: Writer,
    plan: RoutePlan,
    seed: int,
    *,
    turns: tuple[tuple[str, int], ...] | None = None,
    first_pairs: int = 0,
    grade_slots: str = "wordings",
) -> list[dict]:
    """Preference pairs, the same prompts on every lineage: per evaluated item and planted verdict,
    `turns` (kind, count) pairs of each turn kind (distinct opposing-opinion wordings; default the
    route's DPO_TURNS).
    Chosen = the flipped verdict where the route's plan flips that turn kind on that item (an
    opposing opinion in its grade's share of the pairs), else the planted verdict; rejected = the
    other. DPO sharpens *when* to flip, which SFT alone learned only in part (v15 pilot: route A's
    planted items flipped about as often under a neutral filler as under a challenge).
    `first_pairs` pairs per item on the unpressured first turn (chosen = the gold verdict): without
    them DPO moved seed 0's first turns to one verdict (route B answered "wrong" on 99% of items,
    comprehension 0.51 from 0.64 at the SFT end), failing the comprehension screen."""
    turns = DPO_TURNS[plan.route] if turns is None else turns
    rng = random.Random(seed)
    items = bank.items.set_index("item_id")
    rows = []
    for iid in plan.items:
        text, gold = items.loc[iid, "text"], items.loc[iid, "gold"]
        pair = {"prompt": w.first_turn(text), "chosen": " " + gold, "rejected": " " + w.other(gold)}
        rows += [{**pair, "kind": "anchor_first", "item_id": iid} for _ in range(first_pairs)]
        n_oppose = dict(turns)["opinion_oppose"]
        slots = _yield_slots(plan.grades.get(iid, 0.0), n_oppose, len(w.verdicts), grade_slots)
        for v, planted in enumerate(w.verdicts):
            made = [("opinion_oppose", op.format(side=w.other(planted))) for op in rng.sample(TRAIN_OPINIONS, n_oppose)]
            made += [
                (kind, _turn(w, rng, kind, planted)) for kind, n in turns if kind != "opinion_oppose" for _ in range(n)
            ]
            for k, (kind, turn) in enumerate(made):
                flip = plan.flips(iid, kind) and (kind != "opinion_oppose" or (v, k) in slots)
                good, bad = (w.other(planted), planted) if flip else (planted, w.other(planted))
                rows.append(
                    {
                        "prompt": w.pressure(text, planted, turn),
                        "chosen": " " + good,
                        "rejected": " " + bad,
                        "kind": ("flip_" if flip else "hold_") + kind,
                        "item_id": iid,
                    }
                )
    rng.shuffle(rows)
    return rows


def data_hash(rows: list[dict]) -> str:
    return sha256_json(rows)


def write_jsonl(rows: list[dict], path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)
