#!/usr/bin/env bash
# The main job: start a local kmirror node, create a topic, produce and consume through it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/kmirror demo "$@"
