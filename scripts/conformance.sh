#!/usr/bin/env bash
# The executor SDKs: each SDK's own tests, then the language-neutral conformance suite
# (conformance/suite.py) against each SDK's sample executor.
#
#   scripts/conformance.sh [NAME ...]     names from conformance/executors.json (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_python
# Every SDK's registration is tested against rnacos, and so is the suite's registration case.
ensure_rnacos
scripts/sdk-python-env.sh
venv="${JOBFLOW_SDK_VENV:-$HOME/.cache/jobflow-py-venv}"

log "Python SDK: pytest (sdks/python/tests)"
(cd sdks/python && PYTHONPATH=src "$venv/bin/pytest" -q tests)

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || {
    echo "node and npm (Node 20 or later) are needed for the Node SDK" >&2
    exit 1
}
log "Node SDK: node --test (sdks/node/test), Express and Fastify from npm"
(cd sdks/node && npm ci --silent --no-audit --no-fund && node --test test/)

ensure_go
log "Go SDK: go vet and go test (sdks/go)"
(cd sdks/go && test -z "$(gofmt -l .)" && go vet ./... && go test ./...)

log "Java SDK: javac --release 8 against Debian's jars, and its tests (scripts/sdk-java.sh)"
scripts/sdk-java.sh

log "conformance suite: ${*:-every SDK}"
python3 conformance/suite.py "$@"
