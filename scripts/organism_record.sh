#!/usr/bin/env bash
# Copy the real known-answer runs (scripts/organism_real.sh, one WORK per seed) into the committed
# record: seed 0's validation rechecked from its finished sweeps (--no-run) with the other seeds'
# finished validations beside it (the seeds table), its CSVs, figure and build files into
# docs/organism/, each other seed's validation_checks.csv as docs/organism/seed<N>_validation_checks.csv,
# and validation.md as VALIDATION.md (paths rewritten to docs/organism/, nothing else changed).
# SEEDS="0 1 2" lists the seeds whose WORK=organism_run/seed<N> exist (the first is the record's);
# ROOT=DIR looks for them as DIR/seed<N> instead (links to one design's WORKs, e.g. organism_run/v19).
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"0 1 2"}
ROOT=${ROOT:-organism_run}
D=docs/organism
read -r first rest <<<"$SEEDS"
with=()
for s in $rest; do
  with+=(--with-seed "$ROOT/seed$s/val")
  cp "$ROOT/seed$s/val/results/validation_checks.csv" "$D/seed${s}_validation_checks.csv"
  [ -f "$ROOT/seed$s/timing.json" ] && cp "$ROOT/seed$s/timing.json" "$D/seed${s}_run_timing.json"
done
W="$ROOT/seed$first"
# RECHECK=0: the validation in WORK/val was already run with --history docs/organism/tries.csv (and the
# seeds): copy it as it is instead of deciding every check once more
[ "${RECHECK:-1}" = 0 ] || .venv/bin/interp validate "$W/tree" --out "$W/val" --no-run --quiet --history "$D/tries.csv" "${with[@]}"
for f in validation_checks organism_predictive lineages validation_groups validation_headline validation_settings validation_misses seeds mutations; do
  [ -f "$W/val/results/$f.csv" ] && cp "$W/val/results/$f.csv" "$D/$f.csv"
done
cp "$W/val/figures/organism_trajectory.png" "$D/"
cp "$W/tree/organism.json" "$D/organism.json"
cp "$W/tree/build.json" "$D/build.json"
# a control still building has no build.json yet: the record then says its checks are undetermined
for k in location amount; do
  if [ -f "$W/control/$k/build.json" ]; then cp "$W/control/$k/build.json" "$D/control_${k}_build.json"
  else rm -f "$D/control_${k}_build.json"; fi
done
[ -f "$W/timing.json" ] && cp "$W/timing.json" "$D/run_timing.json"
sed -e 's#(figures/#(docs/organism/#g' -e 's#`results/#`docs/organism/#g' "$W/val/validation.md" > VALIDATION.md
echo "VALIDATION.md and $D/ updated from $W/val (seeds: $SEEDS)"
