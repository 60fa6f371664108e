#!/usr/bin/env bash
# The test command (the README names this file).
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check releasekit tests benchmarks
ruff format --check --quiet .
mypy  # configured in pyproject.toml: the whole releasekit package
# The CLI start benchmark: releasekit --help/--version no slower than pip --version.
python3 benchmarks/bench_cli_start.py --repeat 5 --max-ratio 1.0
# Four workers (pytest-xdist; PYTEST_WORKERS overrides), on two cores too: most of a worker's time
# is spent waiting on the Docker Engine, servers and git, not on a core (pytest, quiet: 12 min 56 s
# and 13 min 47 s on four; 13 min 38 s and 16 min 39 s on three the round before: docs/benchmarks.md). A module's tests stay on one
# worker, and the modules sharing the demo run too (tests/conftest.py groups them); the demo release
# is built once per run whichever worker asks first. Every test's duration goes to the log (--durations=0) and to
# the JUnit XML, whose summary (benchmarks/suite_durations.py) ends the log; docs/benchmarks.md's
# suite row is made from that file.
junit="${JUNIT_XML:-build/test-junit.xml}"
mkdir -p "$(dirname "$junit")"
rm -f "$junit"  # a summary of this run only
workers=(-n "${PYTEST_WORKERS:-4}" --dist loadgroup)
if ! python3 -c "import xdist" 2>/dev/null; then
  echo "pytest-xdist is not installed (pip install -e '.[test]'): the tests run in one process" >&2
  workers=()
fi
set +e
python3 -m pytest -q -p no:cacheprovider "${workers[@]}" --durations=0 --junit-xml="$junit" "$@"
rc=$?
set -e
if [ -s "$junit" ]; then
  python3 benchmarks/suite_durations.py "$junit" || true
fi
exit "$rc"
