#!/usr/bin/env bash
# Run every benchmark, then regenerate BENCHMARKS.md from bench/results/*.json.
#
#   bash bench/run_all.sh                # the full run: 5 repeats, 2 threads (~25 min on 2 quiet cores)
#   REPEATS=7 THREADS=2 bash bench/run_all.sh
#   bash bench/run_all.sh --quick        # small sizes, 2 repeats: checks that every script works (~10 min)
#   PRELIMINARY="reason" bash bench/run_all.sh   # adds a "preliminary" banner to BENCHMARKS.md
#
# Needs the converted models in models/ (interp fetch-models) and lm-eval in the venv:
#   pip install lm-eval==0.4.13 -c <(echo torch==2.13.0)
# Run it on an otherwise idle machine: the figures are wall-clock times.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${VIRTUAL_ENV:-}" && -f .venv/bin/activate ]]; then
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

REPEATS=${REPEATS:-5}
THREADS=${THREADS:-2}
KILLS=${KILLS:-20}
QUICK=0
[[ "${1:-}" == "--quick" ]] && QUICK=1

if [[ $QUICK == 1 ]]; then
  REPEATS=${QUICK_REPEATS:-2}
  NAIVE=(--items 2)            # the naive loop needs >= 2 items to represent the whole bank
  LMEVAL=(--items 1 --cloze-prompts 2)
  LMMODEL=(--items 2)
  CAPTURE=(--items 1)
  FLOPS=(--items 2 --variants exact,space_case)
  PROBES=(--checkpoints 4 --items 240)
  SCALING=(--base-items 1 --factors 1,2,4)
  CRASH=(--kills 4 --checkpoints 3)
else
  NAIVE=(--items 2)
  LMEVAL=(--items 2 --cloze-prompts 8)
  LMMODEL=(--items 8)
  CAPTURE=(--items 2)
  FLOPS=(--items 2 --variants exact,space_case)
  PROBES=(--checkpoints 20 --items 240 --conditions 16 --d-model 576)
  SCALING=(--base-items 2 --factors 1,2,4)
  CRASH=(--kills "$KILLS" --checkpoints 6 --items 2 --parallel 2)
fi

run() {
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name: python $*" >&2
  python "$@"
  echo "== $name: $((SECONDS - t0)) s" >&2
}

T0=$SECONDS
if [[ $QUICK == 1 ]]; then
  TREE=(--items 2 --compare-items 1 --cloze-prompts 2 --sample-items 1 --conditions 4 --lm-eval-batch-sizes 8,16)
else
  # the issue's sizes: 40 items x 31 conditions, the whole cloze bank, 21 samples for 40 items x 16
  # conditions; lm-eval / naive / HF generate timed on a subset and extrapolated per prompt (labelled)
  TREE=(--items 40 --compare-items 4 --pilot-items 1 --full-repeats 1 --sample-items 40 --conditions 16
        --n-samples 21 --sample-hf-prompts 16 --sample-repeats 1)
fi
if [[ $QUICK == 1 ]]; then
  BANK=(--items 2 --naive-repeats 1 --lm-eval-batch-sizes 8,16)
else
  # issue 25: 40 items x all 31 conditions, float32 / mixed-bf16 / bfloat16 / lm-eval interleaved,
  # the naive loop measured at full size once (about 25 minutes on two quiet cores)
  BANK=(--items 40 --naive-repeats 1)
fi
run bank bench/bench_bank.py --repeats 3 --threads "$THREADS" "${BANK[@]}"
run tree bench/bench_tree.py --repeats "$REPEATS" --threads "$THREADS" "${TREE[@]}"
run sweep_overhead bench/bench_sweep_overhead.py --threads "$THREADS" --study pressure --max-items 16
run runner_vs_naive bench/bench_runner_vs_naive.py --repeats "$REPEATS" --threads "$THREADS" "${NAIVE[@]}"
run vs_lm_eval bench/bench_vs_lm_eval.py --repeats "$REPEATS" --threads "$THREADS" "${LMEVAL[@]}"
run lm_eval_model bench/bench_lm_eval_model.py --repeats "$REPEATS" --threads "$THREADS" "${LMMODEL[@]}"
run residual_capture bench/bench_residual_capture.py --repeats "$REPEATS" --threads "$THREADS" "${CAPTURE[@]}"
run flops bench/bench_flops.py --repeats "$REPEATS" --threads "$THREADS" "${FLOPS[@]}"
run probes bench/bench_probes.py --repeats "$REPEATS" --threads "$THREADS" "${PROBES[@]}"
run scaling bench/bench_scaling.py --repeats "$REPEATS" --threads "$THREADS" "${SCALING[@]}"
run crash_suite bench/crash_suite.py "${CRASH[@]}"
run layers bench/bench_layers.py --repeats "$REPEATS" --threads "$THREADS" "${CAPTURE[@]}"
run scale bench/scale_workload.py --threads "$THREADS"   # counts, not timings: SCALE.md's tables
bash bench/gpu_check.sh                                     # skips cleanly without CUDA
echo "== all benchmarks: $((SECONDS - T0)) s" >&2

if [[ -n "${PRELIMINARY:-}" ]]; then
  python bench/report.py --preliminary "$PRELIMINARY"
else
  python bench/report.py
fi
