"""Flip rates of an organism's checkpoints per planted set, from a pressure sweep of them: a quick
look at what a route learned before its controls and validation exist (issue 45's design loop).

    python scripts/organism_flips.py TREE OUT [--csv PATH] [--by-planted]

TREE is an `interp organism build` tree (its organism.json names the planted sets), OUT a sweep of
some of its checkpoints with `--study pressure --bank moral`. Per checkpoint and item set (route A's
planted items, route B's, the rest of the evaluated items): the share of slot-readout trials whose
second verdict differs from the planted one (`flipped`) under an opposing opinion, an agreeing one,
a bare challenge and a neutral filler, the mean P(planted verdict) under each, and the checkpoint's
comprehension (first-turn accuracy over every evaluated item), and (`--gold-csv`) that accuracy per
gold verdict (a checkpoint that answers one verdict to everything reads 1 and 0).

    python scripts/organism_flips.py TREE OUT --trunk VAL [--check-file FILE] [--checks-csv PATH]
    python scripts/organism_flips.py TREE OUT --sweep [--threads N] [--check-file FILE] [--checks-csv PATH]

also scores the sweep's route finals with `interp validate`'s own pressure checks, guards and graded
check (interp.organism.checks.pressure_rows, graded_rows; thresholds from the check file): VAL is
a validation OUT of a lineage with the same trunk (e.g. organism_run/v19_seed3/val) or a sweep
that includes the trunk end itself (it may be OUT), whose trunk end supplies the rises' starting
point. A try that retrains only the routes' DPO (`--reuse-sft`) is read as validate would read its
organism lineage, without its controls. `--sweep` first runs
validate's own pressure sweep (its settings and lite template) of TREE's trunk end and route finals
into OUT, which then also serves as VAL.

    python scripts/organism_flips.py TREE OUT --sweep --only CK [CK ...] [--wordings train]

sweeps the named checkpoints instead (say a route's SFT end: did SFT or DPO learn it?).
`--wordings train` swaps the lite template's bare challenge and neutral fillers for the build's own
training wordings (interp.organism.data.TRAIN_CHALLENGES, TRAIN_NEUTRAL): a route that does not flip
even on the wordings it was trained on has not learned the turn kind, whatever the evaluation's
wordings. A diagnostic only: its trials are not validate's, so --trunk is not taken from it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

CONDITIONS = {
    "oppose": lambda t: (t["turn_kind"] == "opinion") & (t["turn_side"] == "oppose"),
    "agree": lambda t: (t["turn_kind"] == "opinion") & (t["turn_side"] == "agree"),
    "challenge": lambda t: t["turn_kind"] == "challenge",
    "neutral": lambda t: t["turn_kind"] == "neutral",
}


def flip_table(tree: Path, out: Path, by_planted: bool = False) -> pd.DataFrame:
    """One row per checkpoint and item set; `by_planted`: one per planted verdict too (a route that
    flips one verdict only, say "wrong" to "acceptable", shows as 1 and 0 where the pooled row says 0.5)."""
    org = json.loads((tree / "organism.json").read_text())
    t = pd.read_csv(out / "results" / "pressure_trials.csv")
    t = t[t["readout"] == "slot"]
    sets = {"planted_a": set(org["planted_a"]), "planted_b": set(org["planted_b"])}
    sets["rest"] = set(org["eval_items"]) - sets["planted_a"] - sets["planted_b"]
    keys = ["checkpoint", "planted"] if by_planted else ["checkpoint"]
    rows = []
    for key, g in t.groupby(keys, sort=True):
        for name, items in sets.items():
            gi = g[g["item_id"].isin(items)]
            row = {**dict(zip(keys, key)), "set": name, "n_items": gi["item_id"].nunique()}
            for cond, where in CONDITIONS.items():
                sub = gi[where(gi)]
                row[f"flip_{cond}"] = sub["flipped"].astype(bool).mean()
                row[f"p_{cond}"] = sub["p_planted"].mean()
            rows.append(row)
    table = pd.DataFrame(rows)
    # first-turn accuracy over every evaluated item (the comprehension screen), per checkpoint
    summ = pd.read_csv(out / "results" / "pressure_summary.csv")
    comp = summ[summ["readout"] == "slot"].groupby("checkpoint")["comprehension"].first()
    return table.assign(comprehension=table["checkpoint"].map(comp))


def comprehension_by_gold(first_turn: pd.DataFrame) -> pd.DataFrame:
    """First-turn accuracy per checkpoint and gold verdict (analyses' `comprehension` on each gold's
    items): a checkpoint that gives one verdict to every first turn scores 1 and 0 where the pooled
    screen reads 0.5."""
    from analyses.pressure_metrics import comprehension

    parts = [comprehension(g).assign(gold=gold) for gold, g in first_turn.groupby("gold", sort=True)]
    return pd.concat(parts, ignore_index=True)[["checkpoint", "gold", "comprehension", "n_items"]]


def first_turn_table(out: Path) -> pd.DataFrame:
    """The first-turn readings of a sweep's current pressure units (its cache)."""
    from cache.store import Store, collect_tables

    current, _ = Store(out / "cache").current_units("pressure", warn=False)
    return collect_tables(current, "first_turn")


def train_wordings_template(dest: Path) -> Path:
    """Validate's lite template with the organism build's own training wordings in place of its
    bare challenge and neutral fillers (every one of them; the opinions stay the evaluation's)."""
    from interp.organism.data import TRAIN_CHALLENGES, TRAIN_NEUTRAL
    from interp.organism.validate import lite_template, lite_template_data

    data = lite_template_data()
    data["version"] = "pressure-v1-lite-train-wordings"
    data["notes"] = "A diagnostic of scripts/organism_flips.py: the organism build's training challenges and fillers."
    data["challenges"] = {f"train{i}": t for i, t in enumerate(TRAIN_CHALLENGES)}
    data["neutral"] = {f"train{i}": t for i, t in enumerate(TRAIN_NEUTRAL)}
    return lite_template(dest, data)


def sweep_finals(
    tree: Path,
    out: Path,
    check_file: Path | None = None,
    threads: int | None = None,
    only: list[str] | None = None,
    wordings: str = "eval",
) -> None:
    """`interp validate`'s own pressure sweep (its settings, lite template, seed and bootstrap size)
    of TREE's trunk end and route finals only (or the checkpoints `only` names), into OUT: what a
    try is judged on, in minutes. `wordings="train"`: the template of `train_wordings_template`."""
    from interp.organism.config import ValidateConfig
    from interp.organism.validate import _run_settings, _template_ref
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    known = json.loads((tree / "organism.json").read_text())
    cfg = ValidateConfig(check_file=str(check_file) if check_file else None, threads=threads)
    if wordings not in ("eval", "train"):
        raise ValueError(f"wordings must be eval or train, got {wordings!r}")
    template = train_wordings_template(out / "pressure_train_wordings.json") if wordings == "train" else None
    run_sweep(
        [tree],
        only=only or [known["trunk_end"], *(cks[-1] for cks in known["routes"].values())],
        studies=["pressure"],
        out=out,
        banks=[known.get("eval_bank", "moral")],
        template=str(template) if template else _template_ref(cfg, out),
        cfg=RunConfig(max_items=len(known["eval_items"]), **_run_settings(known, cfg)),
    )


def try_checks(tree: Path, out: Path, trunk_val: Path, check_file: Path | None = None) -> pd.DataFrame:
    """The rows `interp validate` computes from pressure trials (rises, gaps, guards, comprehension
    gates, the graded check) for TREE's route finals swept in OUT, the trunk end's trials taken from
    TRUNK_VAL (the same trunk: its item values are the rises' start)."""
    import tempfile

    from interp.organism.checks import graded_rows, pressure_rows
    from interp.organism.frozen import load_check_file, with_seed

    known = json.loads((tree / "organism.json").read_text())
    st = with_seed((load_check_file(check_file) if check_file else load_check_file()).settings, int(known["seed"]))
    te = known["trunk_end"]
    # a sweep of checkpoint directories names each by its last path part: back to the tree's names
    full = {ck.split("/")[-1]: ck for ck in [te, *(c for cks in known["routes"].values() for c in cks)]}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results").mkdir()
        for name in ("pressure_trials.csv", "pressure_summary.csv"):
            base, new = (pd.read_csv(d / "results" / name) for d in (trunk_val, out))
            for t in (base, new):
                t["checkpoint"] = t["checkpoint"].map(lambda c: full.get(c, c))
            both = pd.concat([base[base["checkpoint"] == te], new[new["checkpoint"] != te]], ignore_index=True)
            both.to_csv(Path(tmp) / "results" / name, index=False)
        rows = pressure_rows(Path(tmp), known, st) + graded_rows(Path(tmp), known, st)
    cols = ["id", "kind", "check", "subject", "figure", "value", "lo", "hi", "threshold", "p", "passed"]
    return pd.DataFrame(rows).reindex(columns=cols)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--by-planted", action="store_true", help="a row per planted verdict too")
    ap.add_argument("--trunk", type=Path, default=None, help="a validation OUT or sweep with this tree's trunk end")
    ap.add_argument("--check-file", type=Path, default=None)
    ap.add_argument("--checks-csv", type=Path, default=None)
    ap.add_argument("--sweep", action="store_true", help="first sweep the trunk end and route finals into OUT")
    ap.add_argument("--threads", type=int, default=None, help="the sweep's threads")
    ap.add_argument("--only", nargs="+", default=None, help="the checkpoints to sweep (default: trunk end, finals)")
    ap.add_argument("--gold-csv", type=Path, default=None, help="first-turn accuracy per gold verdict")
    ap.add_argument("--wordings", choices=("eval", "train"), default="eval", help="train: the build's own wordings")
    args = ap.parse_args()
    if args.wordings == "train" and args.trunk:
        ap.error("--wordings train is a diagnostic: its trials are not validate's, so no checks are scored (--trunk)")
    if args.sweep:
        sweep_finals(args.tree, args.out, args.check_file, args.threads, args.only, args.wordings)
        if not args.only and args.wordings == "eval":
            args.trunk = args.trunk or args.out
    table = flip_table(args.tree, args.out, args.by_planted)
    if args.csv:
        table.to_csv(args.csv, index=False, float_format="%.4g")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    first = first_turn_table(args.out)
    if not first.empty:  # an OUT of results tables alone (no cache) still gets its flip table
        gold = comprehension_by_gold(first)
        if args.gold_csv:
            gold.to_csv(args.gold_csv, index=False, float_format="%.4g")
        print(gold.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    elif args.gold_csv:
        ap.error(f"--gold-csv: {args.out / 'cache'} holds no first-turn readings of a pressure sweep")
    if args.trunk:
        checks = try_checks(args.tree, args.out, args.trunk, args.check_file)
        if args.checks_csv:
            checks.to_csv(args.checks_csv, index=False, float_format="%.4g")
        print(checks.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
