#!/usr/bin/env bash
# The whole default test suite: lint, type checks, unit/property/scenario/integration tests.
# Extra arguments go to pytest (e.g. `-m slow` for the slow suites).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check src tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest -q "$@"
