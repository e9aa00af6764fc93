#!/usr/bin/env bash
# The whole default test suite: lint, type checks, unit/property/scenario/integration tests.
# Extra arguments go to pytest (e.g. `-m slow` for the slow suites). Test modules run on
# KMIRROR_TEST_WORKERS pytest-xdist workers (default 3; 0 runs in this process), a module's
# tests on one worker (`--dist loadfile`: a module's shared cluster starts once, where `load` or
# `worksteal` would start it on every worker; tests/conftest.py hands out the longest modules
# first, by tests/module_durations.txt, so the workers end within seconds of each other and
# little is gained by splitting modules); real-process tests reserve their ports
# machine-wide, so workers never collide. Three workers on two cores: the integration tests
# mostly wait on processes and the network (a 2-worker run used about a third of the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check src tests bench scripts
.venv/bin/mypy
(cd src && ../.venv/bin/lint-imports ../pyproject.toml)
workers=${KMIRROR_TEST_WORKERS:-3}
if [ "$workers" = 0 ]; then
  exec .venv/bin/python -m pytest -q --durations=25 "$@"
fi
exec .venv/bin/python -m pytest -q --durations=25 -n "$workers" --dist loadfile "$@"
