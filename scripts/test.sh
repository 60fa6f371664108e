#!/usr/bin/env bash
# The test command (the README names this file).
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check releasekit tests benchmarks
exec python3 -m pytest -q -p no:cacheprovider "$@"
