#!/usr/bin/env bash
# Run every benchmark behind BENCHMARKS.md and SCALE.md, then regenerate BENCHMARKS.md from
# bench/results/*.json. The runs are bench/catalog.py's; `python -m bench --list` names them.
#
#   bash bench/run_all.sh                     # the full run, 2 threads (hours on 2 quiet cores)
#   REPEATS=7 THREADS=2 bash bench/run_all.sh
#   bash bench/run_all.sh --quick             # small sizes: checks that every benchmark works
#   bash bench/run_all.sh --only crash_suite,scale_workload
#   PRELIMINARY="reason" bash bench/run_all.sh   # adds a "preliminary" banner to BENCHMARKS.md
#
# Needs the converted models in models/ (interp fetch-models) and lm-eval in the venv
# (pip install -e '.[bench]'). Run it on an otherwise idle machine: the figures are wall-clock times.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${VIRTUAL_ENV:-}" && -f .venv/bin/activate ]]; then
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
args=(--all --threads "${THREADS:-2}" --repeats "${REPEATS:-5}" --report "$@")
[[ -n "${PRELIMINARY:-}" ]] && args+=(--preliminary "$PRELIMINARY")
exec python -m bench "${args[@]}"
