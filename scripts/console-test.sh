#!/usr/bin/env bash
# The operations console in a real browser: builds `jobflow` and the demo executor, then runs
# tests/console (pytest + Playwright for Python, from PyPI, in a virtualenv under ~/.cache)
# against Debian's chromium, headless. Playwright never downloads a browser here.
# Screenshots of failed tests and both processes' logs land in target/console-test.
#
# JOBFLOW_CONSOLE_DOCS=1 also refreshes docs/console-*.png. Extra arguments go to pytest
# (e.g. `-k viewer`).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_python
ensure_chromium
VENV="${JOBFLOW_CONSOLE_VENV:-$HOME/.cache/jobflow-console-venv}"
if ! "$VENV/bin/python" -c 'import playwright, pytest' >/dev/null 2>&1; then
    log "installing playwright and pytest into $VENV"
    python3 -m venv "$VENV"
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$VENV/bin/pip" install --quiet playwright pytest
fi

# Two builds with the feature sets scripts/api-fuzz.sh and the demo alone use, so both stay
# cached (one combined build would unify features differently and rebuild).
cargo build --locked --quiet --bin jobflow
cargo build --locked --quiet -p jobflow-demo-executor

log "console browser tests (chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}'))"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PYTHONDONTWRITEBYTECODE=1 \
JOBFLOW_BIN_DIR="$CARGO_TARGET_DIR/debug" \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/console "$@"
