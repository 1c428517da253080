#!/usr/bin/env bash
# With-seed directories rebuilt from a committed record, for seeds whose validation OUT is gone (a
# fresh checkout holds docs/, not organism_run/). ROOT/seed<N>/VAL/results/ gets the seed's
# validation_checks.csv and the record's frozen_before.csv: what `interp validate --with-seed` and
# scripts/organism_record.sh read (the seeds table, and blind or post hoc from the first sweep that
# seed's own validation recorded). Nothing is recomputed: the seed's decisions are the committed ones.
# D=docs/organism (or docs/organism/v2), SEEDS="0 1 2", ROOT=organism_run/records, VAL=val.
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-docs/organism}
SEEDS=${SEEDS:-"0 1 2"}
ROOT=${ROOT:-organism_run/records}
VAL=${VAL:-val}
for s in $SEEDS; do
  dst="$ROOT/seed$s/$VAL/results"
  mkdir -p "$dst"
  # the seed's own CSV, or the record's main one when that is this seed's
  .venv/bin/python - "$D" "$s" "$dst" <<'PY'
import shutil, sys
from pathlib import Path
import pandas as pd
d, seed, dst = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
for f in (d / f"seed{seed}_validation_checks.csv", d / "validation_checks.csv"):
    if f.is_file():
        t = pd.read_csv(f)
        if set(t.loc[t["kind"] == "check", "seed"]) == {seed}:
            shutil.copyfile(f, dst / "validation_checks.csv")
            break
else:
    sys.exit(f"{d}: no validation_checks.csv of seed {seed}")
shutil.copyfile(d / "frozen_before.csv", dst / "frozen_before.csv")
print(f"{dst}: seed {seed} from {f}")
PY
done
