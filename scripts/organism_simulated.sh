#!/usr/bin/env bash
# The simulated lineages' record (no model): interp.organism.simulate writes an organism whose
# answers are known, its two controls and their cached sweeps under ROOT; `interp validate
# --no-run --mutations` decides the frozen checks on them and applies every named metric bug.
# The CSVs it wrote and its validation.md go to docs/organism/simulated/ (the numbers quoted in
# docs/known-answers.md). SHUFFLES/BOOT: the CI's sizes by default (the tests' settings).
# CHECK_FILE=interp/organism/known_answers_v2.toml D=docs/organism/simulated_v2 (or _v4.toml, simulated_v4;
# _v5.toml, simulated_v5): the same under check file version 2 (4, 5).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${ROOT:-organism_sim}
SHUFFLES=${SHUFFLES:-249}
BOOT=${BOOT:-200}
D=${D:-docs/organism/simulated}
check=()
[ -n "${CHECK_FILE:-}" ] && check=(--check-file "$CHECK_FILE")
rm -rf "$ROOT"
.venv/bin/python -c "import sys; from interp.organism.simulate import simulate; simulate(sys.argv[1])" "$ROOT"
.venv/bin/interp validate "$ROOT/tree" --out "$ROOT/out" --no-run --quiet --shuffles "$SHUFFLES" --boot "$BOOT" --mutations \
  "${check[@]}"
mkdir -p "$D"
for f in validation_checks organism_predictive lineages validation_groups validation_settings validation_misses mutations; do
  cp "$ROOT/out/results/$f.csv" "$D/$f.csv"
done
cp "$ROOT/out/figures/organism_trajectory.png" "$D/"
sed -e 's#(figures/#(#g' -e "s#\`results/#\`$D/#g" "$ROOT/out/validation.md" > "$D/validation.md"
echo "$D/ updated from $ROOT/out"
