#!/usr/bin/env bash
# Copy the real known-answer runs (scripts/organism_real.sh, one WORK per seed) into the committed
# record: seed 0's validation rechecked from its finished sweeps (--no-run) with the other seeds'
# finished validations beside it (the seeds table), its CSVs, figure and build files into
# docs/organism/, each other seed's validation_checks.csv as docs/organism/seed<N>_validation_checks.csv,
# and validation.md as VALIDATION.md (paths rewritten to docs/organism/, nothing else changed).
# Only the first seed is rechecked, so it needs its WORK's sweeps; the others may be records rebuilt
# by scripts/organism_seed_records.sh.
# SEEDS="0 1 2" lists the seeds whose WORK=organism_run/seed<N> exist (the first is the record's);
# ROOT=DIR looks for them as DIR/seed<N> instead (links to one design's WORKs, e.g. organism_run/v19).
# A record under another check file: CHECK_FILE=FILE (passed to the recheck), each seed's validation in
# WORK/$VAL (VAL=val_v2), written to D=docs/organism/v2 with its page as MD=docs/organism/v2/validation.md.
# Version 3 (seed 3 only; its first validation made with --mutations into WORK/val_v3): SEEDS=3 VAL=val_v3
# CHECK_FILE=interp/organism/known_answers_v3.toml D=docs/organism/v3 MD=docs/organism/v3/validation.md.
# Version 4 likewise: SEEDS=3 VAL=val_v4 CHECK_FILE=interp/organism/known_answers_v4.toml D=docs/organism/v4
# MD=docs/organism/v4/validation.md RECHECK=0 (ROOT=organism_run/records).
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"0 1 2"}
ROOT=${ROOT:-organism_run}
D=${D:-docs/organism}
MD=${MD:-VALIDATION.md}
VAL=${VAL:-val}
check=()
[ -n "${CHECK_FILE:-}" ] && check=(--check-file "$CHECK_FILE")
mkdir -p "$D"
read -r first rest <<<"$SEEDS"
with=()
for s in $rest; do
  with+=(--with-seed "$ROOT/seed$s/$VAL")
  cp "$ROOT/seed$s/$VAL/results/validation_checks.csv" "$D/seed${s}_validation_checks.csv"
  [ -f "$ROOT/seed$s/timing.json" ] && cp "$ROOT/seed$s/timing.json" "$D/seed${s}_run_timing.json"
done
W="$ROOT/seed$first"
# RECHECK=0: the validation in WORK/val was already run with --history docs/organism/tries.csv (and the
# seeds): copy it as it is instead of deciding every check once more
[ "${RECHECK:-1}" = 0 ] || .venv/bin/interp validate "$W/tree" --out "$W/$VAL" --no-run --quiet --history docs/organism/tries.csv \
  "${check[@]}" "${with[@]}"
# a record whose seed changes (a newer seed with its sweeps first): the files of the seed it held until
# now that no other file keeps (its build, controls, timing, mutation run, predictions) stay, renamed
# seed<N>_*, as the other seeds' do; its checks are already seed<N>_validation_checks.csv (above)
if [ -f "$D/organism.json" ]; then
  old=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["seed"])' "$D/organism.json")
  if [ "$old" != "$first" ]; then
    for f in organism.json build.json control_location_build.json control_amount_build.json run_timing.json \
      mutations.csv organism_predictive.csv lineages.csv; do
      [ -f "$D/$f" ] && mv "$D/$f" "$D/seed${old}_$f"
    done
  fi
fi
for f in validation_checks organism_predictive lineages validation_groups validation_headline validation_settings validation_misses seeds mutations frozen_before; do
  [ -f "$W/$VAL/results/$f.csv" ] && cp "$W/$VAL/results/$f.csv" "$D/$f.csv"
done
cp "$W/$VAL/figures/organism_trajectory.png" "$D/"
cp "$W/tree/organism.json" "$D/organism.json"
cp "$W/tree/build.json" "$D/build.json"
# a control still building has no build.json yet: the record then says its checks are undetermined
for k in location amount; do
  if [ -f "$W/control/$k/build.json" ]; then cp "$W/control/$k/build.json" "$D/control_${k}_build.json"
  else rm -f "$D/control_${k}_build.json"; fi
done
[ -f "$W/timing.json" ] && cp "$W/timing.json" "$D/run_timing.json"
# figure links relative to the page; file names in backticks from the repository root
rel=$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], os.path.dirname(sys.argv[2]) or "."))' "$D" "$MD")
sed -e "s#(figures/#($rel/#g" -e "s#\`results/#\`$D/#g" "$W/$VAL/validation.md" > "$MD"
echo "$MD and $D/ updated from $W/$VAL (seeds: $SEEDS)"
