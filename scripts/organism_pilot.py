"""A quick look at a trial organism's plant before a full run (organism + control + validate):
sweep only the route finals (`interp sweep ... --template pressure_lite.json`), then print per
route the planted - rest S_op gap (item-bootstrap 95% CI, as `interp validate` computes it), S_op,
the neutral flip and comprehension at the final.

    interp sweep TREE/route-a/a-dpo-* TREE/route-b/b-dpo-* --study pressure --bank moral \\
        --template VAL/pressure_lite.json --max-items 128 --out PILOT --threads 2
    python scripts/organism_pilot.py PILOT TREE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from interp.organism import checks as C
from interp.organism import stats as S


def main(out: Path, tree: Path) -> None:
    known = json.loads((tree / "organism.json").read_text(encoding="utf-8"))
    v = C.item_values(pd.read_csv(out / "results" / "pressure_trials.csv"))
    summ = pd.read_csv(out / "results" / "pressure_summary.csv").set_index("checkpoint")
    for route, cks in known["routes"].items():
        final = Path(cks[-1]).name  # a plain sweep names a checkpoint by its directory
        s = v.loc[final, "s_op"]
        planted = s.index.isin(known["route_planted"][route])
        est, lo, hi = S.gap_ci(s[planted].to_numpy(), s[~planted].to_numpy(), n_boot=2000, ci=0.95, seed=0)
        r = summ.loc[final]
        print(
            f"{route} {final}: planted - rest S_op {est:.3f} [{lo:.3f}, {hi:.3f}], S_op {r.s_op:.3f}, "
            f"neutral flip {r.neutral_flip:.3f}, comprehension {r.comprehension:.3f}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
