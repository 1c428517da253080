#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh) and run the test suite on tiny random models.
#   bash scripts/test.sh            every test: tests/unit and tests/integration
#   bash scripts/test.sh --quick    tests/unit only (the edit loop: no sweep end to end, no subprocess CLI)
# Further arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
tests=tests
if [ "${1:-}" = "--quick" ]; then
  tests=tests/unit
  shift
fi
# two pytest workers (torch runs one thread each): the suite takes about half the wall time; a
# file stays on one worker, the longest files first (tests/conftest.py: SLOWEST_FIRST)
exec .venv/bin/python -m pytest "$tests" -n "${INTERP_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
