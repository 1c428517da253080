#!/usr/bin/env bash
# GPU check: `interp selftest` on CUDA at float32 and bfloat16 (backends vs plain HF within
# derived tolerances, residuals, cache, sweep resume), then tokens/s + peak memory of both
# default models at float32 and bfloat16 -> bench/results/gpu_check.json.
# Skips cleanly (exit 0, one line) on a machine without CUDA.
#
#   bash bench/gpu_check.sh                     # ~5 min on one GPU with the models in models/
#   ITEMS=2 REPEATS=1 bash bench/gpu_check.sh   # quicker
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
if [[ -z "${PYTHON:-}" && -x .venv/bin/python ]]; then PY=.venv/bin/python; fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "gpu_check: $PY cannot import torch (set PYTHON=...)" >&2
  exit 2
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: skipped: torch $("$PY" -c 'import torch; print(torch.__version__)') sees no CUDA device on $(hostname)"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
# issue 25's open question: does "medium" round matmul operands to bf16 on this host's CPU (AMX?) and GPU
grep -m1 "model name" /proc/cpuinfo || true
"$PY" - <<'PYEOF' || true
from interp.runner.mixed import medium_operand_error as m

print(f"medium probe: cpu {m('cpu'):.1e}, cuda {m('cuda'):.1e} (bf16 operands ~1e-3, float32 ~1e-6)")
PYEOF
exec "$PY" -m bench gpu_check --models "${MODELS:-smollm2,gemma3}" --items "${ITEMS:-8}" \
  --repeats "${REPEATS:-3}" --threads "${THREADS:-4}" "$@"
