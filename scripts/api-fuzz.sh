#!/usr/bin/env bash
# Property-based API testing with schemathesis (from PyPI) against the OpenAPI document the
# running service serves: no 5xx, every response matching its documented schema and content
# type. Bounded in time (JOBFLOW_FUZZ_SECONDS, default 120).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-$HOME/.cache/jobflow-target}"
VENV="${JOBFLOW_VENV:-$HOME/.cache/jobflow-venv}"
SECONDS_BUDGET="${JOBFLOW_FUZZ_SECONDS:-120}"

if [ ! -x "$VENV/bin/st" ]; then
    echo "==> installing schemathesis into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet schemathesis
fi
cargo build --locked --quiet --bin jobflow

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token="fuzz-admin-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
cat > "$work/fuzz.toml" <<TOML
[[auth.tokens]]
name = "schemathesis"
role = "admin"
token_env = "JOBFLOW_FUZZ_TOKEN"
TOML
JOBFLOW_FUZZ_TOKEN="$token" \
JOBFLOW__DATABASE__URL="sqlite://$work/fuzz.db" \
JOBFLOW__SERVER__HOST=127.0.0.1 JOBFLOW__SERVER__PORT="$port" \
JOBFLOW__LOG__LEVEL=error \
    "$TARGET/debug/jobflow" --config "$work/fuzz.toml" > "$work/jobflow.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT

for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/health/ready" >/dev/null 2>&1 && break
    sleep 0.2
done

echo "==> schemathesis (${SECONDS_BUDGET}s budget) against http://127.0.0.1:$port/api-docs/openapi.json"
# Run from the scratch directory: schemathesis keeps its cache in the working directory.
# One worker: with two, hypothesis parses lambda sources on two threads at once, which trips
# CPython 3.11's "AST constructor recursion depth mismatch" (a tool crash, not a finding).
cd "$work"
"$VENV/bin/st" run "http://127.0.0.1:$port/api-docs/openapi.json" \
    --header "Authorization: Bearer $token" \
    --checks not_a_server_error,response_schema_conformance,content_type_conformance \
    --max-time "$SECONDS_BUDGET" \
    --workers 1 \
    --wait-for-schema 30
