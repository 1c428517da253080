#!/usr/bin/env bash
# Debian's headless Chromium for the `interp view` browser tests (tests/integration/test_view.py),
# driven by Playwright as /usr/bin/chromium (Playwright's own browser download is never used).
#
#   bash scripts/chromium-local.sh install   # as root with apt: the chromium package; quiet no-op otherwise
set -euo pipefail

install() {
    if [[ -x /usr/bin/chromium ]]; then
        echo "chromium-local: /usr/bin/chromium already installed"
        return 0
    fi
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
        echo "chromium-local: not root or no apt-get: chromium not installed (the browser tests will skip)"
        return 0
    fi
    echo "chromium-local: installing chromium with apt-get"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"${TMPDIR:-/tmp}/chromium-local-apt.log" 2>&1; then
        echo "chromium-local: apt-get failed (see ${TMPDIR:-/tmp}/chromium-local-apt.log): the browser tests will skip"
    fi
    return 0
}

case "${1:-}" in
    install) install ;;
    *) echo "usage: bash scripts/chromium-local.sh install" >&2; exit 2 ;;
esac
