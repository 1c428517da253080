#!/usr/bin/env bash
# Run the README "Quick start" exactly as written (its bash block, then its python block) in a
# fresh directory and time it. Usage: bash scripts/quickstart.sh [MODELS_DIR (default: ./models)]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODELS=$(cd "${1:-$ROOT/models}" && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python
BIN=$(dirname "$PY")
WORK=$(mktemp -d)
ln -s "$MODELS" "$WORK/models"
"$PY" - "$ROOT/README.md" "$WORK" <<'PYEOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
bash = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
py = re.search(r"```python\n(.*?)```", section, re.S).group(1)
open(f"{sys.argv[2]}/qs.sh", "w").write("set -euo pipefail\n" + bash)
open(f"{sys.argv[2]}/qs.py", "w").write(py)
PYEOF
cd "$WORK"
export PATH="$BIN:$PATH" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
TIMEFORMAT="quick start: %R s wall, %U s user + %S s system CPU"
time { bash qs.sh; "$PY" qs.py; }
echo "in $WORK; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
