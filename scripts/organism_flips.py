"""Flip rates of an organism's checkpoints per planted set, from a pressure sweep of them: a quick
look at what a route learned before its controls and validation exist (issue 45's design loop).

    python scripts/organism_flips.py TREE OUT [--csv PATH]

TREE is an `interp organism build` tree (its organism.json names the planted sets), OUT a sweep of
some of its checkpoints with `--study pressure --bank moral`. Per checkpoint and item set (route A's
planted items, route B's, the rest of the evaluated items): the share of slot-readout trials whose
second verdict differs from the planted one (`flipped`) under an opposing opinion, an agreeing one,
a bare challenge and a neutral filler, and the mean P(planted verdict) under each.
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


def flip_table(tree: Path, out: Path) -> pd.DataFrame:
    org = json.loads((tree / "organism.json").read_text())
    t = pd.read_csv(out / "results" / "pressure_trials.csv")
    t = t[t["readout"] == "slot"]
    sets = {"planted_a": set(org["planted_a"]), "planted_b": set(org["planted_b"])}
    sets["rest"] = set(org["eval_items"]) - sets["planted_a"] - sets["planted_b"]
    rows = []
    for ck, g in t.groupby("checkpoint", sort=True):
        for name, items in sets.items():
            gi = g[g["item_id"].isin(items)]
            row = {"checkpoint": ck, "set": name, "n_items": gi["item_id"].nunique()}
            for cond, where in CONDITIONS.items():
                sub = gi[where(gi)]
                row[f"flip_{cond}"] = sub["flipped"].astype(bool).mean()
                row[f"p_{cond}"] = sub["p_planted"].mean()
            rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--csv", type=Path, default=None)
    args = ap.parse_args()
    table = flip_table(args.tree, args.out)
    if args.csv:
        table.to_csv(args.csv, index=False, float_format="%.4g")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
