#!/usr/bin/env bash
# Proves the OpenAPI document usable by a client generator: openapi-python-client (from PyPI,
# into a virtualenv) generates a Python client from the document the running service serves,
# and tests/client/roundtrip.py drives create -> trigger -> history through it, against the
# real scheduler and the demo executor.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-$HOME/.cache/jobflow-target}"
VENV="${JOBFLOW_VENV:-$HOME/.cache/jobflow-venv}"
GENERATOR_VERSION=0.29.1

if ! "$VENV/bin/openapi-python-client" --version 2>/dev/null | grep -q "$GENERATOR_VERSION"; then
    echo "==> installing openapi-python-client $GENERATOR_VERSION into $VENV"
    [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "openapi-python-client==$GENERATOR_VERSION"
fi
cargo build --locked --quiet --bin jobflow && cargo build --locked --quiet -p jobflow-demo-executor

work=$(mktemp -d)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
demo_port=$(free_port)
token="client-admin-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
secret="client-secret-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
cat > "$work/jobflow.toml" <<TOML
[[auth.tokens]]
name = "client"
role = "admin"
token_env = "JOBFLOW_CLIENT_TOKEN"
[executors.static]
demo-executor = ["127.0.0.1:$demo_port"]
TOML
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
JOBFLOW_SIGNING_SECRET="$secret" DEMO_BIND="127.0.0.1:$demo_port" RUST_LOG=warn \
    "$TARGET/debug/jobflow-demo-executor" > "$work/demo.log" 2>&1 &
pids+=($!)
JOBFLOW_CLIENT_TOKEN="$token" \
JOBFLOW__EXECUTOR__SIGNING_SECRET="$secret" \
JOBFLOW__DATABASE__URL="sqlite://$work/jobflow.db" \
JOBFLOW__SERVER__HOST=127.0.0.1 JOBFLOW__SERVER__PORT="$port" \
JOBFLOW__LOG__LEVEL=warn \
    "$TARGET/debug/jobflow" --config "$work/jobflow.toml" > "$work/jobflow.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/health/ready" >/dev/null 2>&1 && break
    sleep 0.2
done

echo "==> generating a Python client from http://127.0.0.1:$port/api-docs/openapi.json"
curl -fsS "http://127.0.0.1:$port/api-docs/openapi.json" -o "$work/openapi.json"
printf 'project_name_override: jobflow-client\npackage_name_override: jobflow_client\npost_hooks: []\n' > "$work/generator.yaml"
# Warnings are failures too: a piece the generator skipped is a piece of the API clients lack.
"$VENV/bin/openapi-python-client" generate --path "$work/openapi.json" \
    --config "$work/generator.yaml" --output-path "$work/client" --meta none > "$work/generate.log" 2>&1 \
    || { cat "$work/generate.log"; exit 1; }
if grep -qi "warning" "$work/generate.log"; then
    cat "$work/generate.log"
    echo "openapi-python-client reported warnings" >&2
    exit 1
fi
mkdir -p "$work/pkg" && mv "$work/client" "$work/pkg/jobflow_client"

echo "==> create -> trigger -> history through the generated client"
PYTHONPATH="$work/pkg" "$VENV/bin/python" tests/client/roundtrip.py "http://127.0.0.1:$port" "$token" \
    || { echo "--- jobflow log"; tail -20 "$work/jobflow.log"; echo "--- demo executor log"; tail -20 "$work/demo.log"; exit 1; }
