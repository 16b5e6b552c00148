#!/usr/bin/env bash
# Runs every JobFlow check and test suite: formatting, clippy, unit tests, the integration
# suites on SQLite and MySQL/MariaDB, the executor SDK, and the multi-process cluster suite on
# rnacos, the deployment files' checks and the console in headless chromium. Brings up what the
# tests need: MariaDB (installed if missing when running as root, started if stopped), a second,
# TLS-only MariaDB on a free port (tests/it/mysql_tls.rs), rnacos (cargo install rnacos --locked
# when missing), python3 (the protocol docs' Python executor), a JDK (the Java executor
# example), promtool and kubernetes-validate (scripts/check-deploy.sh), chromium (apt) and
# Playwright (PyPI) for the console, uvicorn, starlette and pytest (PyPI) for the Python SDK.
#
# JOBFLOW_TEST_MYSQL_URL overrides the server the MySQL suite uses
# (default mysql://root@127.0.0.1:3306; every test creates and drops its own database).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_mariadb
ensure_rnacos
ensure_python
ensure_java
export JOBFLOW_TEST_MYSQL_URL="$MYSQL_URL"
start_tls_mariadb
trap stop_tls_mariadb EXIT

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "cargo test (unit, SQLite and MySQL integration suites, SDK, cluster on rnacos, doc tests)"
cargo test --workspace --locked -- --test-threads="${JOBFLOW_TEST_THREADS:-4}"

log "executor SDKs: their own tests and the conformance suite (scripts/conformance.sh)"
scripts/conformance.sh

log "the README's two commands and quick start on a fresh clone (scripts/readme-check.sh)"
scripts/readme-check.sh

log "deployment files (scripts/check-deploy.sh): Dockerfile's cargo command, promtool, Kubernetes schemas"
scripts/check-deploy.sh

log "schemathesis against the served OpenAPI document (scripts/api-fuzz.sh)"
JOBFLOW_FUZZ_SECONDS="${JOBFLOW_FUZZ_SECONDS:-90}" scripts/api-fuzz.sh

log "a Python client generated from the OpenAPI document: create -> trigger -> history (scripts/client-roundtrip.sh)"
scripts/client-roundtrip.sh

log "console in a real browser (scripts/console-test.sh)"
scripts/console-test.sh
