#!/usr/bin/env bash
# The real known-answer run (issue #22): SmolLM2-135M organism + negative control + validation,
# timed end to end. Writes WORK/tree, WORK/control, WORK/val and WORK/timing.json; the committed
# record is docs/organism/ + VALIDATION.md (copied from WORK/val by scripts/organism_record.sh).
# STAGE=build or STAGE=validate runs one half (the build's seconds wait in WORK/timing_build.json
# for the validate half, so the two can run from different checkouts); the default runs both.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-models/smollm2-135m-instruct}
WORK=${WORK:-organism_run}
THREADS=${THREADS:-2}
STAGE=${STAGE:-all}
[ -d "$BASE" ] || .venv/bin/interp fetch-models --dest models
mkdir -p "$WORK"
if [ "$STAGE" != validate ]; then
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  .venv/bin/interp organism build --base "$BASE" --out "$WORK/tree" --control "$WORK/control" --threads "$THREADS"
  t1=$(date +%s)
  printf '{"t0": %d, "t1": %d, "load0": "%s", "commit": "%s"}\n' "$t0" "$t1" "$load0" "$(git rev-parse HEAD)" \
    > "$WORK/timing_build.json"
fi
[ "$STAGE" = build ] && exit 0
read -r t0 t1 load0 build_commit < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));
print(d["t0"], d["t1"], d["load0"].replace(" ", "_"), d["commit"])' "$WORK/timing_build.json")
tv=$(date +%s)
.venv/bin/interp validate "$WORK/tree" --out "$WORK/val" --threads "$THREADS"
t2=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
cat > "$WORK/timing.json" <<JSON
{"build_and_control_s": $((t1 - t0)), "validate_s": $((t2 - tv)), "total_s": $((t1 - t0 + t2 - tv)),
 "threads": $THREADS, "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)",
 "nproc": $(nproc), "loadavg_start": "${load0//_/ }", "loadavg_end": "$load1",
 "build_commit": "$build_commit", "commit": "$(git rev-parse HEAD)", "started": "$(date -u -d @"$t0" +%FT%TZ)"}
JSON
cat "$WORK/timing.json"
