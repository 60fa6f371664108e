#!/usr/bin/env bash
# The test command (the README names this file).
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check releasekit tests benchmarks
ruff format --check --quiet .
mypy  # configured in pyproject.toml: the whole releasekit package
# The CLI start benchmark: releasekit --help/--version no slower than pip --version.
python3 benchmarks/bench_cli_start.py --repeat 5 --max-ratio 1.0
exec python3 -m pytest -q -p no:cacheprovider --durations=30 "$@"
