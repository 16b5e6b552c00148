#!/usr/bin/env bash
# The virtual environment of the Python SDK's tests and conformance sample: uvicorn and
# starlette (an ASGI server and framework to serve it from), pytest. Created on first use at
# $JOBFLOW_SDK_VENV (default ~/.cache/jobflow-py-venv); the SDK itself needs nothing beyond
# the standard library and is loaded from sdks/python/src.
set -euo pipefail
venv="${JOBFLOW_SDK_VENV:-$HOME/.cache/jobflow-py-venv}"
if [ ! -x "$venv/bin/uvicorn" ] || [ ! -x "$venv/bin/pytest" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "uvicorn>=0.23,<1" "starlette>=0.27,<1" "pytest>=7,<9"
fi
