#!/usr/bin/env bash
# The one command that proves the package: lint, format, types, tests.
# Run from clients/python inside a fresh virtual environment (python3 -m venv .venv && . .venv/bin/activate).
# The tests start `sluice serve` from SLUICE_BIN (else <repo>/target/debug/sluice) and use RabbitMQ on
# 127.0.0.1:5672; with CI set, a missing binary or broker fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")"
pip install -r requirements-dev.txt -e . && ruff check . && ruff format --check . && mypy --strict src tests && pytest
