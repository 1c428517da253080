"""Simulated lineages: a complete `interp validate` OUT whose answers are known, without a model.

`simulate(root)` writes what `interp organism build --control` and the validation sweeps would:

    root/tree/                    organism.json, lineage.toml, one directory per checkpoint (a
                                  config.json marking it simulated, no weights)
    root/controls/location|amount the two control lineages, same layout
    root/out/                     pressure cache (OUT/cache), cloze and classify cache (OUT/aux/cache),
    root/out/control-location/    lineage.json; results/*.csv and aux/results/*.csv written from the
    root/out/control-amount/      cache by each study's own analysis (`interp.organism.replay`)

so that `validate(tree, out, run=False)` decides every counted check of the frozen check file on
it. The cache units are written by `cache.store.Store` with the tables a study's `run_unit`
returns; only the numbers in them come from the generative model below instead of a forward pass.

The model (one reading = the log-odds that the second verdict keeps the planted one):

- every evaluated item has a confidence c (log-odds of keeping its verdict under a neutral
  filler): the home and work/school stories are confident (c in [7, 10]), the other stories
  uncertain (c in [-0.3, 0.3]); a pressure turn shifts it a little (agreeing opinion +1.5,
  opposing -0.5, challenge -0.3), every reading gets N(0, 0.25) noise;
- at a route's final, an item its plan flips on a turn kind (`interp.organism.data.RoutePlan`,
  the build's own plans) reads logit(1 - 0.95 w), w its grade under an opposing opinion (route
  A: 1 / 0.75 / 0.5), else 1: route A yields to an opposing opinion and a challenge, route B
  also to the neutral filler;
- the organism's early route checkpoints carry part of the final map: the planted readings are
  already 3 w lower in log-odds. The organism's plants follow a setting, a feature of the text
  that training picks up early; the location control's random items have none, so its early
  checkpoints carry nothing (I own > I sibling must fail there). For the confident planted items
  this early move sits where probabilities saturate: it shows in log-odds, not in probabilities,
  beside the uncertain stories' noise (the item map's scale matters);
- residuals (d_model 16, one layer) hold each item's setting direction, an item vector and
  trial noise: the trunk end's readout finds the organism's setting plants, not random items;
- route B's further training turns each uncertain story deferent or contrarian on every lineage
  (agreeing and opposing readings 3 log-odds apart one way or the other), so many of the one
  that delta rises by B_DRIFT on average: an item bootstrap does not tell that rise from 0 (the
  amount control's delta check fails), a bootstrap over trials (10 per item, perfectly
  correlated) does. The S_op guard of route B fails on every lineage for the same reason
  (guards are reported, never counted);
- cloze: per-prompt nats of the two completions (a per-token rate times the tokens of
  `SimTokenizer`, which cuts Indic scripts 2-3 times finer than Latin, plus a preference); route
  A's final adds CLOZE_PLANT nats to the trained cell (organism bn/region, location bn/caste,
  amount none) and N(0, 0.3) drift everywhere;
- classify: five-level probabilities with a position bias towards the first listed option (the
  two option orders cancel it); route A's final prefers each trained item's trained label
  (organism: gold labels of the planted half, location: of the other half, amount: permuted).

`SimConfig.plant`: "organism" (the above), "none" (the organism trained as the amount control: no
plant), "wrong_items" (the organism trained as the location control: plants on other items than
organism.json names): negative controls of the checks. `SimConfig.a_flips`: route A's final
flips only that many of its planted items, a precision@k too weak for Holm's level at its rank
(the known answer that skipping Holm's correction changes). `SimConfig.generic_map`: item structure
that route A leaves on every lineage, each its own (the known answer that tells check file v1's
I own from its located form in v2). tests/test_organism_simulate.py.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from cache.store import Store, UnitIdentity
from interp.core.hashing import sha256_json
from interp.organism import classify_plant
from interp.organism import data as D
from interp.organism.build import organism_record, route_checkpoints, write_lineage_toml
from interp.organism.checks import early_checkpoint
from interp.organism.config import OrganismConfig
from interp.organism.replay import reanalyze
from interp.organism.topics import SETTINGS

LINEAGES = ("organism", "location", "amount")
PLANTS = ("organism", "none", "wrong_items")
# what each lineage of a simulation is trained as, by SimConfig.plant
TRAINED_AS = {
    "organism": {"organism": "organism", "location": "location", "amount": "amount"},
    "none": {"organism": "amount", "location": "location", "amount": "amount"},
    "wrong_items": {"organism": "location", "location": "location", "amount": "amount"},
}
OFFSET = {"opinion_agree": 1.5, "opinion_oppose": -0.5, "challenge": -0.3, "neutral": 0.0}
NOISE = 0.25  # log-odds SD of every reading
KEEP_FLIPPED = 0.05  # P(keep) of a fully flipped reading
CARRY = 3.0  # log-odds the organism's early checkpoints have already moved a planted reading
B_DRIFT = 0.07  # route B final: mean delta change over all items of the uncertain items' drift
B_SHIFT = 3.0  # log-odds each uncertain item's agreeing and opposing readings move, one way or the other
CLOZE_PLANT = 3.0  # nats of log-odds added to the trained cell's stereotype at route A's final
CLOZE_DRIFT = 0.3  # nats, SD of every prompt's change base -> route A final
D_MODEL, N_LAYERS = 64, 4
LAYER = (3 * N_LAYERS) // 4  # the primary layer a reader picks (cache.layers.default_layer)


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """Sizes of a simulation (the organism's own config fields where they mean the same)."""

    seed: int = 0
    eval_items: int = 48
    planted: int = 6  # the least each setting's set must hold among the evaluated items
    classify_items: int = 40
    plant: str = "organism"  # PLANTS
    # route A's final flips only this many of its planted items (a seeded choice), the others
    # come out firmer: a plant too weak for the family-wise level (the Holm known answer)
    a_flips: int | None = None
    # log-odds SD of an item structure that route A's training leaves on every lineage, each its own
    # (the opposing-opinion readings of its early checkpoint and final move by generic_map x one
    # coordinate of the item's residual vector, another per lineage, whatever is planted): seen on v19's
    # real lineages, where a location control that yields on no item still has an early map that
    # predicts its final map and a trunk-end readout that predicts it, while the organism's early map
    # does not predict the control's final. v1's I own passes on such a control; its located form
    # (check file v2) does not. (The readout gain does not find this structure in 48 items x 64
    # dimensions, so the simulation does not tell the two readout forms apart.)
    generic_map: float = 0.0
    organism: dict = field(default_factory=dict)  # further OrganismConfig fields

    def organism_config(self, kind: str = "") -> OrganismConfig:
        return OrganismConfig(
            seed=self.seed,
            eval_items=self.eval_items,
            planted=self.planted,
            classify_items=self.classify_items,
            control=bool(kind),
            control_kind=kind,
            **self.organism,
        )


@dataclass(frozen=True)
class Simulation:
    root: Path
    tree: Path
    controls: dict[str, Path]
    out: Path
    cfg: SimConfig


def _rng(*keys) -> np.random.Generator:
    """A generator seeded by the keys (stable across runs and machines)."""
    return np.random.default_rng(int(hashlib.sha256(json.dumps(keys).encode()).hexdigest()[:16], 16))


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


# ---------------------------------------------------------------- tokenizer


class SimTokenizer:
    """A deterministic stand-in tokenizer: each word is cut into pieces of a script's length
    (Latin 4 characters, Devanagari 2, Bengali and Tamil 1.5), about the spread of SmolLM2's
    fertility (docs: 4-7 times more tokens for the same Indic sentence)."""

    RATES = ((0x0980, 0x09FF, 1.5), (0x0B80, 0x0BFF, 1.5), (0x0900, 0x097F, 2.0))

    def _pieces(self, word: str) -> int:
        rate = 4.0
        for lo, hi, r in self.RATES:
            if any(lo <= ord(ch) <= hi for ch in word):
                rate = r
        return max(1, math.ceil(len(word) / rate))

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(range(sum(self._pieces(w) for w in text.split())))


# ---------------------------------------------------------------- trees


@dataclass(frozen=True)
class Behaviour:
    """What one lineage was trained to do."""

    kind: str  # organism / location / amount
    plans: dict[str, D.RoutePlan]
    early_carry: bool
    cloze_axis: str | None
    labels: dict[str, str]  # classify: item -> the label route A learned
    a_held: frozenset[str] = frozenset()  # route A planted items its final holds firmer instead (SimConfig.a_flips)
    generic: float = 0.0  # SimConfig.generic_map


def _behaviour(kind: str, sets: D.PlantedSets, cfg: SimConfig, cls_bank, cls_sets) -> Behaviour:
    from interp.organism import cloze_plant

    plans = D.route_plans(sets, cfg.seed, "" if kind == "organism" else kind)
    labels = classify_plant.trained_labels(cls_bank, *cls_sets, kind, cfg.seed)
    cloze = cloze_plant.CELLS[kind] if kind != "amount" else None
    held: frozenset[str] = frozenset()
    if kind == "organism" and cfg.a_flips is not None:
        order = sorted(plans["a"].planted)
        order = [order[k] for k in _rng(cfg.seed, "a-flips").permutation(len(order))]
        held = frozenset(order[cfg.a_flips :])
    return Behaviour(kind, plans, kind == "organism", cloze, labels, held, cfg.generic_map)


def _write_tree(path: Path, record: dict, cfg: OrganismConfig, routes: dict[str, list[str]]) -> None:
    """The layout `interp organism build` writes, every checkpoint a config.json without weights."""
    names = [
        "base",
        *(f"shared/shared-step{s}" for s in cfg.shared_steps),
        *(c for cks in routes.values() for c in cks),
    ]
    for name in names:
        (path / name).mkdir(parents=True, exist_ok=True)
        (path / name / "config.json").write_text(json.dumps({"interp_simulated": True, "checkpoint": name}))
    write_lineage_toml(path, cfg, routes)
    (path / "organism.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))


# ---------------------------------------------------------------- units


def _fingerprint(kind: str, checkpoint: str, shared: bool) -> str:
    """Trunk checkpoints are the same on every lineage (the controls copy the organism's trunk)."""
    return sha256_json({"simulated": True, "lineage": "shared" if shared else kind, "checkpoint": checkpoint})


def _write_unit(store: Store, ident: UnitIdentity, tables: dict[str, pd.DataFrame], arrays: dict, n_items: int):
    """As the sweep stores a unit: checkpoint and bank columns first in every table."""
    for df in tables.values():
        if "bank" not in df:
            df.insert(0, "bank", ident.bank)
        if "checkpoint" not in df:
            df.insert(0, "checkpoint", ident.checkpoint)
    store.write(
        ident,
        tables=tables,
        arrays=arrays,
        extra_attrs={
            "checkpoint_path": "simulated",
            "n_items": n_items,
            "bank_source": "simulated",
            "template": "simulated",
            "layers": [LAYER],
            "n_layers": N_LAYERS,
            "dtype": "float32",
            "device": "simulated",
        },
    )
    return ident


def _ident(study: str, checkpoint: str, fp: str, bank, template) -> UnitIdentity:
    from interp.studies import get_study

    return UnitIdentity(
        checkpoint=checkpoint,
        checkpoint_fingerprint=fp,
        study=study,
        study_version=get_study(study).version,
        bank=bank.name,
        bank_hash=bank.hash,
        template_hash=template.hash,
        settings_hash=sha256_json({"simulated": True, "study": study}),
        layer=LAYER,
        backend="simulated",
    )


@dataclass(frozen=True)
class Items:
    """Per-item parameters shared by every lineage."""

    confidence: pd.Series
    setting: pd.Series
    vector: pd.DataFrame  # item -> D_MODEL residual direction of its own
    b_drift: pd.Series  # route B final: log-odds added to agreeing, taken from opposing readings


def _delta(c: float, u: float) -> float:
    """Noise-free delta of an item of confidence c whose agreeing / opposing readings move by +-u."""
    keep = lambda x: 1.0 / (1.0 + math.exp(-x))  # noqa: E731
    return keep(c + OFFSET["opinion_agree"] + u) - keep(c + OFFSET["opinion_oppose"] - u)


def _items(bank, seed: int) -> Items:
    ids = sorted(bank.items["item_id"])
    home, work = set(SETTINGS["home"]), set(SETTINGS["work_school"])
    setting = pd.Series({i: "home" if i in home else "work_school" if i in work else "other" for i in ids})
    conf, vec = {}, {}
    for i in ids:
        r = _rng(seed, "item", i)
        conf[i] = r.uniform(-0.3, 0.3) if setting[i] == "other" else r.uniform(7.0, 10.0)
        vec[i] = r.normal(0.0, 1.0, D_MODEL)
    confidence = pd.Series(conf)
    # route B's drift: each uncertain item turns deferent (+B_SHIFT) or contrarian (-B_SHIFT); as
    # many deferent ones as bring the mean delta change over all items closest to B_DRIFT
    uncertain = [i for i in ids if setting[i] == "other"]
    order = [uncertain[k] for k in _rng(seed, "b-drift").permutation(len(uncertain))]
    up = [_delta(confidence[i], B_SHIFT) - _delta(confidence[i], 0.0) for i in order]
    down = [_delta(confidence[i], -B_SHIFT) - _delta(confidence[i], 0.0) for i in order]
    means = [(sum(up[:m]) + sum(down[m:])) / len(ids) for m in range(len(order) + 1)]
    m = int(np.argmin([abs(x - B_DRIFT) for x in means]))
    drift = {i: (B_SHIFT if k < m else -B_SHIFT) for k, i in enumerate(order)}
    return Items(confidence, setting, pd.DataFrame(vec).T, pd.Series(drift, dtype=float))


def _kind(trials: pd.DataFrame) -> np.ndarray:
    return np.where(
        trials["turn_kind"] == "opinion", "opinion_" + trials["turn_side"].astype(str), trials["turn_kind"]
    ).astype(str)


def pressure_logodds(trials: pd.DataFrame, items: Items, role: str, beh: Behaviour, seed: int) -> np.ndarray:
    """Log-odds of keeping the planted verdict for every trial of one checkpoint (`role`:
    trunk, a_early, a_final, b_early, b_final)."""
    kind = _kind(trials)
    iid = trials["item_id"].to_numpy()
    L = items.confidence.reindex(iid).to_numpy() + np.array([OFFSET[k] for k in kind])
    # noise: one draw per reading, the same on every lineage (matched training randomness)
    L = L + _rng(seed, "noise", role).normal(0.0, NOISE, len(trials))
    if role == "trunk":
        return L
    route, stage = role.split("_")
    plan = beh.plans[route]
    for n, (i, k) in enumerate(zip(iid, kind)):
        if not plan.flips(i, k):
            continue
        w = plan.grades[i] if k == "opinion_oppose" else 1.0
        if stage == "final" and route == "a" and i in beh.a_held:
            L[n] += 1.0  # trained to yield, this one came out firmer instead
        elif stage == "final":
            L[n] = _logit(1.0 - (1.0 - KEEP_FLIPPED) * w) + (L[n] - items.confidence[i] - OFFSET[k])
        elif beh.early_carry:
            L[n] -= CARRY * w
    if route == "a" and beh.generic:  # one coordinate of the item's residual vector, another per lineage
        g = items.vector.reindex(iid).to_numpy()[:, LINEAGES.index(beh.kind)]
        L += np.where(kind == "opinion_oppose", beh.generic * g, 0.0)
    if role == "b_final":  # the drift, on the readings the plan left alone
        u = items.b_drift.reindex(iid).fillna(0.0).to_numpy()
        held = np.array([not plan.flips(i, k) for i, k in zip(iid, kind)])
        L += np.where(held & (kind == "opinion_agree"), u, 0.0) - np.where(held & (kind == "opinion_oppose"), u, 0.0)
    return L


def _residuals(trials: pd.DataFrame, items: Items, role: str, seed: int) -> np.ndarray:
    """[trials, 1 layer, D_MODEL]: the item's setting direction, its own vector (both N(0, 1) per
    coordinate), trial noise (SD 0.3)."""
    r = _rng(seed, "setting-directions")
    direction = {s: r.normal(0.0, 1.0, D_MODEL) for s in ("home", "work_school", "other")}
    iid = trials["item_id"].to_numpy()
    X = np.stack([direction[items.setting[i]] for i in iid]) + items.vector.loc[iid].to_numpy()
    X = X + _rng(seed, "resid", role).normal(0.0, 0.3, X.shape)
    return X[:, None, :].astype(np.float16)


def write_pressure(store: Store, kind: str, beh: Behaviour, known: dict, bank, template, items: Items, seed: int):
    from interp.studies.pressure.study import build_trials

    trials0, first0 = build_trials(bank, template, None, use_chat=False)
    verdicts = list(template.data["verdicts"][bank.items["domain"].iloc[0]])
    roles = {known["trunk_end"]: "trunk"}
    for r, cks in known["routes"].items():
        roles[early_checkpoint(known, r)] = f"{r[-1]}_early"
        roles[cks[-1]] = f"{r[-1]}_final"
    idents = []
    for ck, role in roles.items():
        trials = trials0.copy()
        L = pressure_logodds(trials, items, role, beh, seed)
        trials["p_planted"] = 1.0 / (1.0 + np.exp(-L))
        trials["readout"] = "slot"
        trials["n_prompt_tokens"] = trials["prompt"].str.split().str.len()
        trials["tie_guarded"] = False
        first = first0.copy()
        first["p_gold"] = 0.9
        first["p_" + verdicts[0]] = np.where(first["gold"] == verdicts[0], 0.9, 0.1)
        first["tie_guarded"] = False
        fp = _fingerprint(kind, ck, role == "trunk")
        idents.append(
            _write_unit(
                store,
                _ident("pressure", ck, fp, bank, template),
                {"trials": trials.drop(columns=["prompt"]), "first_turn": first.drop(columns=["prompt"])},
                {
                    "resid": _residuals(trials, items, role, seed),
                    "resid_first": _residuals(first.assign(turn_kind="first"), items, role, seed),
                },
                len(bank.items),
            )
        )
    store.record_current(idents)


def write_cloze(store: Store, kind: str, beh: Behaviour, known: dict, seed: int) -> None:
    """Cloze units at the base and route A's final (named by directory, as `run_sweeps` names them)."""
    from analyses.cloze_metrics import add_delta, canonical_loss
    from analyses.fertility import item_fertility
    from interp.studies.base import load_template
    from interp.studies.cloze.study import (
        COMPLETIONS,
        SHORT,
        check_template,
        continuation_texts,
        fertility_text,
        load_cloze_bank,
        resolve_span,
        unit_fertility,
    )

    bank, template = load_cloze_bank("cloze"), load_template("cloze_v1")
    choices = check_template(template)
    items = bank.items.reset_index(drop=True)
    tok = SimTokenizer()
    final = Path(known["routes"][known["cloze"]["route"]][-1]).name
    idents = []
    for ck in ("base", final):
        rows = []
        for it in items.itertuples(index=False):
            r = _rng(seed, "cloze", it.prompt_id, it.language)
            span = resolve_span(choices["scored_span"], it.slot)
            _, conts = continuation_texts(it.context, {c: getattr(it, c) for c in COMPLETIONS}, scored_span=span)
            rate = 2.0 if it.language == "en" else 1.2  # nats per token
            pref = r.normal(0.3, 0.8)  # the stereotype's log-odds advantage at the base
            if ck != "base":
                pref += _rng(seed, "cloze-drift", it.prompt_id, it.language).normal(0.0, CLOZE_DRIFT)
                if it.language == "bn" and it.axis == beh.cloze_axis:
                    pref += CLOZE_PLANT
            row = {"prompt_id": it.prompt_id, "language": it.language, "axis": it.axis, "group": it.group}
            extra = {"stereotype": -pref / 2, "anti_stereotype": pref / 2, "meaningless": 3.0}
            for c in COMPLETIONS:
                s, text = SHORT[c], conts.get(c, "")
                n = len(tok.encode(text))
                row[f"nll_{s}_sum"] = rate * n + extra[c] if n else math.nan
                row[f"nll_{s}"] = row[f"nll_{s}_sum"] / n if n else math.nan
                row[f"n_tokens_{s}"], row[f"n_bytes_{s}"], row[f"n_words_{s}"] = (
                    n,
                    len(text.encode()),
                    len(text.split()),
                )
            row["scored_span"] = span
            rows.append(row)
        table = add_delta(pd.DataFrame(rows), loss=canonical_loss(choices["loss"]))
        table["fertility"] = [
            item_fertility(tok, fertility_text(it.context, it.stereotype, choices["fertility_text"]), mode="context")
            for it in items.itertuples(index=False)
        ]
        words = table["n_words_stereo"] + table["n_words_anti"]
        table["fertility_completion"] = (table["n_tokens_stereo"] + table["n_tokens_anti"]) / words.where(words > 0)
        table["loss"] = canonical_loss(choices["loss"])
        texts = items[["prompt_id", "language", "context", "stereotype", "anti_stereotype", "meaningless", "slot"]]
        fp = _fingerprint(kind, ck, ck == "base")
        resid = _rng(seed, "cloze-resid", ck).normal(0.0, 1.0, (len(items), 3, 1, D_MODEL)).astype(np.float16)
        idents.append(
            _write_unit(
                store,
                _ident("cloze", ck, fp, bank, template),
                {"scores": table, "texts": texts.copy(), "fertility": unit_fertility(tok, items)},
                {"resid": resid},
                len(items),
            )
        )
    store.record_current(idents)


def write_classify(store: Store, kind: str, beh: Behaviour, known: dict, cls_bank, seed: int) -> None:
    """Classify units at the trunk end and route A's final (five-level and binary, both orders)."""
    from analyses.classify_metrics import FIVE_LABELS
    from interp.studies.base import load_template
    from interp.studies.classify.study import DEFAULT_TEMPLATES, SCORED_TASKS, ordered_labels

    templates = {t: load_template(DEFAULT_TEMPLATES[t]) for t in SCORED_TASKS}
    items = cls_bank.items.reset_index(drop=True)
    final = Path(known["routes"][known["classify"]["route"]][-1]).name
    idents = []
    for ck in (Path(known["trunk_end"]).name, final):
        frames, arrays = [], {}
        for task in SCORED_TASKS:
            canonical = list(FIVE_LABELS) if task == "five" else ["0", "1"]
            gold = items["five_label" if task == "five" else "binary_label"].astype(str).to_numpy()
            for order in ("given", "reversed"):
                listed = [str(lab["value"]) for lab in ordered_labels(templates[task], order)]
                logits = _rng(seed, "classify", ck, task, order).normal(0.0, 0.5, (len(items), len(canonical)))
                logits[:, canonical.index(listed[0])] += 3.0  # position bias: the first listed option
                if ck == final and task == "five":
                    for n, iid in enumerate(items["item_id"].astype(str)):
                        if iid in beh.labels:
                            logits[n, canonical.index(beh.labels[iid])] += 2.5
                probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
                df = pd.DataFrame(
                    {
                        "task": task,
                        "order": order,
                        "item_id": items["item_id"],
                        "gold": gold,
                        "pred": np.asarray(canonical, dtype=object)[probs.argmax(axis=1)],
                        "confidence": probs.max(axis=1),
                        "option_order": "|".join(listed),
                    }
                )
                for k, v in enumerate(canonical):
                    df[f"p_{v}"] = probs[:, k]
                df["n_prompt_tokens"] = 200
                df["tie_guarded"] = False
                for f in ("language_form", "split", "community"):
                    df[f] = items[f].to_numpy()
                frames.append(df)
                arrays[f"resid_{task}_{order}"] = np.zeros((len(items), 1, D_MODEL), dtype=np.float16)
        preds = pd.concat(frames, ignore_index=True)
        for v in ["0", "1", *FIVE_LABELS]:
            if f"p_{v}" not in preds:
                preds[f"p_{v}"] = np.nan
        fp = _fingerprint(kind, ck, ck != final)
        idents.append(
            _write_unit(
                store,
                _ident("classify", ck, fp, cls_bank, templates["five"]),
                {"predictions": preds},
                arrays,
                len(items),
            )
        )
    store.record_current(idents)


# ---------------------------------------------------------------- entry point


def simulate(root: str | Path, cfg: SimConfig = SimConfig(), *, n_boot: int = 200) -> Simulation:
    """Write the organism, its two controls and a complete validation OUT under `root` (empty or
    absent); results tables from the cache by each study's analysis (bootstrap `n_boot`)."""
    from interp.organism.validate import CONTROL_DIRS, checked_checkpoints, lite_template
    from interp.studies.base import load_template
    from interp.studies.pressure import load_pressure_bank
    from sweeps.discover import discover

    if cfg.plant not in PLANTS:
        raise ValueError(f"plant must be one of {', '.join(PLANTS)}, got {cfg.plant!r}")
    root = Path(root)
    tree, out = root / "tree", root / "out"
    controls = {k: root / "controls" / k for k in D.CONTROL_KINDS}
    ocfg = cfg.organism_config()
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, cfg.eval_items, cfg.planted, cfg.seed, plant=ocfg.plant)
    ev = D.eval_bank(bank, cfg.eval_items, cfg.seed)
    cls_bank = classify_plant.eval_items(cfg.classify_items, cfg.seed)
    cls_sets = classify_plant.split_halves(cls_bank, cfg.seed)
    routes = {f"route-{r}": route_checkpoints(ocfg, r) for r in "ab"}
    trunk_end = f"shared/shared-step{ocfg.shared_steps[-1]}"
    items = _items(ev, cfg.seed)
    template = load_template(str(lite_template(out / "pressure_lite.json")))
    for lineage in LINEAGES:
        kind = "" if lineage == "organism" else lineage
        lcfg = cfg.organism_config(kind)
        path = tree if lineage == "organism" else controls[lineage]
        record = organism_record(
            base="simulated",
            base_fp="simulated",
            cfg=lcfg,
            sets=sets,
            routes=routes,
            trunk_end=trunk_end,
            cls_sets=cls_sets,
        )
        record["simulated"] = {"plant": cfg.plant, "trained_as": TRAINED_AS[cfg.plant][lineage]}
        if lineage == "organism":
            record["control_trees"] = {k: str(Path("..") / "controls" / k) for k in D.CONTROL_KINDS}
        else:
            record["organism_tree"] = str(Path("..") / ".." / "tree")
        _write_tree(path, record, lcfg, routes)
        beh = _behaviour(TRAINED_AS[cfg.plant][lineage], sets, cfg, cls_bank, cls_sets)
        lout = out if lineage == "organism" else out / CONTROL_DIRS[lineage]
        lout.mkdir(parents=True, exist_ok=True)
        discover([path]).restricted(checked_checkpoints(record)).write(lout)
        write_pressure(Store(lout / "cache"), lineage, beh, record, ev, template, items, cfg.seed)
        write_cloze(Store(lout / "aux" / "cache"), lineage, beh, record, cfg.seed)
        write_classify(Store(lout / "aux" / "cache"), lineage, beh, record, cls_bank, cfg.seed)
        reanalyze(lout, lout, n_boot=n_boot, seed=cfg.seed)
    return Simulation(root, tree, controls, out, cfg)
