#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh) and run the whole test suite on tiny random models.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
exec .venv/bin/python -m pytest tests "$@"
