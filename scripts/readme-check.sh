#!/usr/bin/env bash
# The README's promise to a newcomer, on a fresh clone of the committed tree:
# 1. `cargo run` starts JobFlow on the embedded default (SQLite in ./data/, standalone) and it
#    answers ready on port 8080;
# 2. the quick start's block, run as it is written, gives a job whose executions succeed on
#    the demo executor with its message.
# (The other command, scripts/test.sh, is the one running this.) Needs ports 8080 and 9001
# free, as the README's commands do; reuses $CARGO_TARGET_DIR when set, so only the clone's own
# crates are built again.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

for port in 8080 9001; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port is in use; the README's commands need it free" >&2
        exit 1
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/jobflow-readme.XXXXXX")
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        # Each command ran in its own process group: cargo and what it started.
        kill -- "-$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

git clone --quiet --no-local . "$work/jobflow"
cd "$work/jobflow"

# Waits up to $2 seconds for $1 to answer 2xx.
await() {
    local deadline=$((SECONDS + $2))
    until curl -sf "$1" >/dev/null; do
        if ((SECONDS > deadline)); then
            echo "no answer from $1 after $2 s" >&2
            return 1
        fi
        sleep 2
    done
}

log "README: cargo run (the embedded default) on a fresh clone"
setsid cargo run > "$work/run.log" 2>&1 &
pids+=($!)
if ! await http://127.0.0.1:8080/health/ready 900; then
    tail -n 30 "$work/run.log" >&2
    exit 1
fi
[ -f data/jobflow.db ] || { echo "cargo run kept no SQLite database in ./data/" >&2; ls data >&2; exit 1; }
kill -- "-${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
pids=()
rm -rf data

log "README: the quick start, as written"
awk '/^## Quick start/ { on = 1 } on && /^```sh$/ { block = 1; next } block && /^```$/ { exit } block { print }' \
    README.md > "$work/quickstart.sh"
grep -q 'cargo run -p jobflow-demo-executor' "$work/quickstart.sh" \
    || { echo "the quick start block was not found in README.md" >&2; exit 1; }
setsid bash -euo pipefail "$work/quickstart.sh" > "$work/quickstart.log" 2>&1 &
pids+=($!)
# The block ends after reading the history; its two servers go on in its process group.
deadline=$((SECONDS + 900))
while kill -0 "${pids[0]}" 2>/dev/null && [ -z "$(grep -o '"status":"SUCCESS"' "$work/quickstart.log" | head -n 1)" ]; do
    ((SECONDS < deadline)) || { echo "the quick start did not finish" >&2; tail -n 30 "$work/quickstart.log" >&2; exit 1; }
    sleep 2
done
# Its executions, as the README's last command reads them: a SUCCESS with the executor's message.
await http://127.0.0.1:8080/health/ready 60
deadline=$((SECONDS + 60))
until curl -s 'http://127.0.0.1:8080/api/v1/jobs/hello/executions?size=5' \
    | python3 -c 'import json, sys; items = json.load(sys.stdin)["content"]; sys.exit(0 if any(e["status"] == "SUCCESS" and e.get("resultMessage") for e in items) else 1)'; do
    ((SECONDS < deadline)) || {
        echo "no successful execution of the quick start's job" >&2
        curl -s 'http://127.0.0.1:8080/api/v1/jobs/hello/executions?size=5' >&2
        tail -n 30 "$work/quickstart.log" >&2
        exit 1
    }
    sleep 2
done
log "README: both commands work on a fresh clone"
