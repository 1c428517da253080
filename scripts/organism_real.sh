#!/usr/bin/env bash
# The real known-answer run (issue #22): SmolLM2-135M organism + negative control + validation,
# timed end to end. Writes WORK/tree, WORK/control, WORK/val and WORK/timing.json; the committed
# record is docs/organism/ + VALIDATION.md (copied from WORK/val by scripts/organism_record.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-models/smollm2-135m-instruct}
WORK=${WORK:-organism_run}
THREADS=${THREADS:-2}
[ -d "$BASE" ] || .venv/bin/interp fetch-models --dest models
mkdir -p "$WORK"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
.venv/bin/interp organism build --base "$BASE" --out "$WORK/tree" --control "$WORK/control" --threads "$THREADS"
t1=$(date +%s)
.venv/bin/interp validate "$WORK/tree" --out "$WORK/val" --threads "$THREADS"
t2=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
cat > "$WORK/timing.json" <<JSON
{"build_and_control_s": $((t1 - t0)), "validate_s": $((t2 - t1)), "total_s": $((t2 - t0)),
 "threads": $THREADS, "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)",
 "nproc": $(nproc), "loadavg_start": "$load0", "loadavg_end": "$load1",
 "commit": "$(git rev-parse HEAD)", "started": "$(date -u -d @"$t0" +%FT%TZ)"}
JSON
cat "$WORK/timing.json"
