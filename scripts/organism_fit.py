"""How far a route has fit its own training rows: was a plant not learned, or learned and not
carried to the evaluation's wordings? (issue 45's design loop)

    python scripts/organism_fit.py TREE CK [CK ...] [--route a] [--csv PATH] [--threads N]

TREE is an `interp organism build` tree, CK its checkpoints (say route-a/a-sft-step350). The
route's SFT rows (TREE/.organism/route_<route>_sft.jsonl, written by the build) of the pressure
turn kinds are scored at each checkpoint: P(the row's trained answer), renormalized over the two
verdicts as the build wrote them (" wrong" / " acceptable", no other surface forms), read after
the row's own prompt (its training wording, not the evaluation's). One row per checkpoint, row
kind (flip_/hold_ + turn kind) and planted verdict (the first turn's verdict: the answer of a hold
row, the other verdict of a flip row): the number of distinct rows, their mean P(trained answer)
and the share above 0.5. Copies of a row (--route-challenge-copies) are scored once.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from interp.organism.data import HOLD_KINDS as KINDS  # the pressure turn kinds of route SFT rows
from interp.organism.dpo_loss import row_kind


def training_rows(tree: Path, route: str) -> pd.DataFrame:
    """The route's distinct pressure rows with their planted verdict."""
    path = tree / ".organism" / f"route_{route}_sft.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (`interp organism build` writes a lineage's route data there)")
    rows = pd.DataFrame([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line])
    rows = rows[[row_kind(r) in KINDS for r in rows.to_dict("records")]]
    rows = rows.drop_duplicates(["prompt", "completion", "kind"]).reset_index(drop=True)
    verdicts = sorted(rows["completion"].unique())
    if len(verdicts) != 2:
        raise ValueError(f"{path}: expected two verdicts among the pressure rows' answers, got {verdicts}")
    other = dict(zip(verdicts, verdicts[::-1]))
    flip = rows["kind"].str.startswith("flip_")
    rows["planted"] = rows["completion"].where(~flip, rows["completion"].map(other)).str.strip()
    rows.attrs["verdicts"] = verdicts
    return rows


def fit_table(tree: Path, checkpoints: list[str], route: str = "a") -> pd.DataFrame:
    """Per checkpoint, row kind and planted verdict: rows, mean P(trained answer), share above 0.5."""
    import interp
    from interp.runner.options import ScoringConfig
    from interp.runner.scoring import score_options

    rows = training_rows(tree, route)
    verdicts = rows.attrs["verdicts"]
    col = rows["completion"].map({v: i for i, v in enumerate(verdicts)}).to_numpy()
    out = []
    for ck in checkpoints:
        lm = interp.load(tree / ck)
        probs = score_options(lm, rows["prompt"].tolist(), verdicts, cfg=ScoringConfig(variants="exact")).probs
        scored = rows.assign(p=probs[range(len(rows)), col])
        for (kind, planted), g in scored.groupby(["kind", "planted"]):
            out.append(
                {
                    "checkpoint": ck,
                    "kind": kind,
                    "planted": planted,
                    "n_rows": len(g),
                    "mean_p_trained": g["p"].mean(),
                    "share_above_half": (g["p"] > 0.5).mean(),
                }
            )
        del lm
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--route", default="a", choices=["a", "b"])
    ap.add_argument("--csv", type=Path)
    ap.add_argument("--threads", type=int)
    a = ap.parse_args(argv)
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    table = fit_table(a.tree, a.checkpoints, a.route)
    if a.csv:
        table.to_csv(a.csv, index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
