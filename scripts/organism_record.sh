#!/usr/bin/env bash
# Copy the real known-answer run (scripts/organism_real.sh, WORK=organism_run) into the committed
# record: the CSVs, figure and build files into docs/organism/, validation.md as VALIDATION.md
# (paths rewritten to docs/organism/, nothing else changed). Rechecks from the finished sweeps
# (--no-run) so that the earlier tries (docs/organism/tries.csv) are listed.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-organism_run}
D=docs/organism
.venv/bin/interp validate "$WORK/tree" --out "$WORK/val" --no-run --quiet --history "$D/tries.csv"
cp "$WORK"/val/results/{validation_checks,organism_predictive,lineages}.csv "$D/"
cp "$WORK/val/figures/organism_trajectory.png" "$D/"
cp "$WORK/tree/organism.json" "$D/organism.json"
cp "$WORK/tree/build.json" "$D/build.json"
cp "$WORK/control/build.json" "$D/control_build.json"
[ -f "$WORK/timing.json" ] && cp "$WORK/timing.json" "$D/run_timing.json"
sed -e 's#(figures/#(docs/organism/#g' -e 's#`results/#`docs/organism/#g' "$WORK/val/validation.md" > VALIDATION.md
echo "VALIDATION.md and $D/ updated from $WORK/val"
