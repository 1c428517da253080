#!/usr/bin/env bash
# The real known-answer run (issue #45) of one seed: SmolLM2-135M organism + location and amount
# control lineages + validation, timed end to end. Writes WORK/tree, WORK/control/{location,amount},
# WORK/val and WORK/timing.json; the committed record is docs/organism/ + VALIDATION.md (copied by
# scripts/organism_record.sh once every seed is validated).
# SEED=N picks the seed (route data order, LoRA init, the location control's random sets);
# TRUNK=DIR reuses the trunk of an earlier seed's tree (DIR/tree, built with seed 0), as seeds 1 and 2 do.
# REUSE_SFT=DIR copies the route SFT checkpoints of an earlier tree with the same data and SFT settings
# (only DPO is trained again; its controls' SFT from the control trees that tree recorded).
# STAGE=build or STAGE=validate runs one half (the build's seconds wait in WORK/timing_build.json).
# BUILD_ARGS="..." adds `interp organism build` options (a design try, e.g. "--grade-by group
# --route-early-steps 332"); they are recorded in each lineage's organism.json.
# VALIDATE_ARGS="..." adds `interp validate` options (e.g. "--check-file interp/organism/known_answers_v5.toml
# --history docs/organism/tries.csv").
# CONTROLS=0 builds the organism lineage alone (a design try; `RESUME=1` with CONTROLS=1, the default,
# adds its controls later).
# RESUME=1 passes --resume: the lineages an earlier run into WORK finished are kept, and an unfinished
# one keeps its route SFT if both routes finished it (its timing then covers only what this run
# built, and says so: "resumed": true).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-models/smollm2-135m-instruct}
SEED=${SEED:-0}
WORK=${WORK:-organism_run/seed$SEED}
THREADS=${THREADS:-2}
STAGE=${STAGE:-all}
# OpenMP threads that sleep at a barrier instead of spinning: on a machine shared with other jobs
# a spinning 2-thread step waited for a descheduled thread (the seed-0 shared stage: ~35 s a step
# against ~2.3 s on an idle machine)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
[ -d "$BASE" ] || .venv/bin/interp fetch-models --dest models
mkdir -p "$WORK"
if [ "$STAGE" != validate ]; then
  trunk=()
  [ -n "${TRUNK:-}" ] && trunk=(--reuse-trunk "$TRUNK/tree" --trunk-seed 0)
  [ -n "${REUSE_SFT:-}" ] && trunk+=(--reuse-sft "$REUSE_SFT")
  [ "${RESUME:-0}" = 1 ] && trunk+=(--resume)
  read -r -a extra <<< "${BUILD_ARGS:-}"
  trunk+=("${extra[@]}")
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  [ "${CONTROLS:-1}" = 0 ] || trunk+=(--control "$WORK/control")
  .venv/bin/interp organism build --base "$BASE" --out "$WORK/tree" --seed "$SEED" --threads "$THREADS" "${trunk[@]}"
  t1=$(date +%s)
  printf '{"t0": %d, "t1": %d, "load0": "%s", "commit": "%s", "resumed": %s}\n' "$t0" "$t1" "$load0" \
    "$(git rev-parse HEAD)" "$([ "${RESUME:-0}" = 1 ] && echo true || echo false)" \
    > "$WORK/timing_build.json"
fi
[ "$STAGE" = build ] && exit 0
read -r t0 t1 load0 build_commit resumed < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));
print(d["t0"], d["t1"], d["load0"].replace(" ", "_"), d["commit"], str(d.get("resumed", False)).lower())' \
  "$WORK/timing_build.json")
tv=$(date +%s)
read -r -a vargs <<< "${VALIDATE_ARGS:-}"
.venv/bin/interp validate "$WORK/tree" --out "$WORK/val" --threads "$THREADS" --quiet "${vargs[@]}"
t2=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
cat > "$WORK/timing.json" <<JSON
{"seed": $SEED, "build_and_controls_s": $((t1 - t0)), "validate_s": $((t2 - tv)), "total_s": $((t1 - t0 + t2 - tv)),
 "threads": $THREADS, "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)",
 "nproc": $(nproc), "loadavg_start": "${load0//_/ }", "loadavg_end": "$load1",
 "build_commit": "$build_commit", "resumed": $resumed, "commit": "$(git rev-parse HEAD)", "started": "$(date -u -d @"$t0" +%FT%TZ)"}
JSON
cat "$WORK/timing.json"
