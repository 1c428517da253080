"""Copy a real sweep's figures into the user guide (docs/img/), redrawn from its tables first.

    python scripts/guide_figures.py OUT [--checkpoint NAME]

OUT is a sweep output with pressure (moral bank, two checkpoints, `--layers all`), cloze and
`interp probe OUT --study pressure --target flipped --layer all` (how the guide's were made: see
docs/figures.md). `interp report OUT` redraws every figure from OUT/results; this script does
the same, then copies the three the guide shows under fixed names (the fourth, δ and S_op
along a lineage, is the model organism's docs/organism/organism_trajectory.png).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeps.report import write_report  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--checkpoint", default="smollm2-135m-instruct", help="checkpoint of the ABS heatmap")
    args = ap.parse_args()
    write_report(args.out)
    figures = args.out / "figures"
    chosen = {
        "item_map_heatmap.png": sorted(figures.glob("item_map_heatmap_moral*.png")),
        "cloze_abs.png": [figures / f"cloze_abs_{args.checkpoint}.png"],
        "probe_depth.png": [figures / "probe_depth_pressure_flipped.png"],
    }
    dest = ROOT / "docs" / "img"
    dest.mkdir(exist_ok=True)
    for name, found in chosen.items():
        found = [p for p in found if p.is_file()]
        if not found:
            print(
                f"{args.out}: no figure for {name} (see the module docstring for the sweep it needs)", file=sys.stderr
            )
            return 2
        shutil.copyfile(found[0], dest / name)
        print(f"{found[0]} -> docs/img/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
