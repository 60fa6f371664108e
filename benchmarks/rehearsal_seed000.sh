#!/usr/bin/env bash
# Issue 24's dress rehearsal (docs/rehearsal.md): seed 000 cut by releasekit from a bare
# snapshot of lightseekorg/tokenspeed, every stage in order, each exit code and wall time.
#
#   bash benchmarks/rehearsal_seed000.sh SNAPSHOT [WORKDIR]
#
# SNAPSHOT: a copy of https://github.com/lightseekorg/tokenspeed (bare or with .git), only read.
# WORKDIR: where lock, wheels, release directories and outputs go (default: a new temp dir).
# Needs: the Docker Engine, pip reaching PyPI (the two wheel pins). The engine image is found
# (or built) the way `releasekit demo` makes it, and a copy of the manifest in WORKDIR names
# its tag (the committed manifest holds a placeholder: the tag is a hash of the image's inputs).
# PYTHON: the interpreter that runs releasekit (default python3).
#
# Expected exit codes, in order:
#   lock 0, plan-check 1 (the qualification PRs are open and main's pins have moved on),
#   pins-640 1 (#640's continuation-line cap and old wheel pins), build 0, verify 0,
#   build-nocache 0 (and the same image ID), reproduce 0, validate-dry 1 (the model is not pinned).
# The script stops at the first step whose exit code differs, names it, and exits 1; 0 means
# every step matched. Bad arguments or a missing engine image: exit 2.
set -u
NAME=seed000
URL=https://github.com/lightseekorg/tokenspeed
# shellcheck source=benchmarks/rehearsal_common.sh
source "$(dirname "$0")/rehearsal_common.sh" "$@"
M=$(rehearsal_manifest "$REPO/manifests/ds4-sm120-rehearsal.yaml") || exit 2

rm -rf wheels rel rel-nocache repro
step lock 0 plan lock "$M" -o lock.json --download-dir wheels --no-forge "${MIRROR[@]}"
step plan-check 1 plan check "$M" --lock lock.json --no-forge --output plan-check.json "${MIRROR[@]}"
# #640's head, where the release workflow's apache-tvm-ffi cap sat on a continuation line.
step pins-640 1 audit pins "$M" --repo "$SNAP" --commit refs/pull/640/head --component tokenspeed
step build 0 build "$M" --lock lock.json -o rel --wheelhouse wheels "${MIRROR[@]}"
IMAGE=$(image_id rel/build.json)
[ -n "$IMAGE" ] || fail "build wrote no image ID in $WORK/rel/build.json"
step verify 0 verify-provenance "$IMAGE" --lock lock.json --artifacts rel --manifest "$M" "${MIRROR[@]}"
step build-nocache 0 build "$M" --lock lock.json -o rel-nocache --no-cache --wheelhouse wheels "${MIRROR[@]}"
AGAIN=$(image_id rel-nocache/build.json)
[ "$IMAGE" = "$AGAIN" ] || fail "no-cache rebuild: a different image ID '$AGAIN' (first $IMAGE)"
echo "no-cache rebuild: same image ID $IMAGE"
# Reproduce with the mirror removed: no --mirror, an empty cache, only the release archive.
mkdir -p repro
RELEASEKIT_CACHE="$WORK/cache-reproduce" step reproduce 0 reproduce --from rel --workdir repro
step validate-dry 1 validate "$M" --image "$IMAGE" --dry-run --json
echo "every exit code as expected; outputs in $WORK"
