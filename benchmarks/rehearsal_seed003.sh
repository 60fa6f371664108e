#!/usr/bin/env bash
# Issue 37's rehearsal (docs/rehearsal.md, "Seed 003"): seed 003's B12X part cut by releasekit
# from a bare snapshot of local-inference-lab/b12x, every stage in order, each exit code and wall time.
#
#   bash benchmarks/rehearsal_seed003.sh SNAPSHOT [WORKDIR]
#
# SNAPSHOT: a copy of https://github.com/local-inference-lab/b12x (bare or with .git), only read.
# WORKDIR: where lock, builder wheels, release directories and outputs go (default: a new temp dir).
# Needs: the Docker Engine, pip reaching PyPI (the builder image's four pinned build requirements).
# The engine image is found (or built) the way `releasekit demo` makes it, and a copy of the
# manifest in WORKDIR/manifests/ names its tag (the committed manifest holds a placeholder: the tag
# is a hash of the image's inputs), beside a copy of the builder's Dockerfile in WORKDIR/dockerfiles/.
# PYTHON: the interpreter that runs releasekit (default python3).
#
# Expected exit codes, in order:
#   lock 0, plan-check 0 (every B12X PR as planned; the forge checks not run, info only),
#   build 0, verify 0, build-nocache 0 (and the same image ID), reproduce 0.
# The script stops at the first step whose exit code differs, names it, and exits 1; 0 means
# every step matched. Bad arguments, a missing engine image or builder wheels: exit 2.
set -u
NAME=seed003
URL=https://github.com/local-inference-lab/b12x
# shellcheck source=benchmarks/rehearsal_common.sh
source "$(dirname "$0")/rehearsal_common.sh" "$@"
MANIFEST="$REPO/manifests/ff-next-b12x-rehearsal.yaml"
DOCKERFILE=python-builder.Dockerfile
# In a directory of its own, with the builder's Dockerfile and wheelhouse where its relative paths
# (../dockerfiles/, ../builder-wheels) point, as they would beside the committed file.
mkdir -p dockerfiles builder-wheels
M=$(rehearsal_manifest "$MANIFEST") || exit 2
cp "$REPO/dockerfiles/$DOCKERFILE" dockerfiles/ || exit 2
# Exactly the builder Dockerfile's ARG defaults, so the wheelhouse holds its pins and nothing else.
PINS=$(sed -n 's/^ARG \([A-Z_]*\)_VERSION=\(.*\)$/\1==\2/p' "dockerfiles/$DOCKERFILE" |
    tr 'A-Z_' 'a-z-')
[ -n "$PINS" ] || fail "no pinned versions in $DOCKERFILE" 2
# shellcheck disable=SC2086 # one word per pin
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest builder-wheels \
    --python-version 3.11 --platform manylinux2014_x86_64 --implementation cp $PINS \
    >builder-wheels.out 2>&1 || fail "cannot fetch the builder's pins ($(echo $PINS)): see $WORK/builder-wheels.out" 2

rm -rf rel rel-nocache repro
step lock 0 plan lock "$M" -o lock.json --no-forge "${MIRROR[@]}"
step plan-check 0 plan check "$M" --lock lock.json --no-forge --output plan-check.json "${MIRROR[@]}"
step build 0 build "$M" --lock lock.json -o rel "${MIRROR[@]}"
IMAGE=$(image_id rel/build.json)
[ -n "$IMAGE" ] || fail "build wrote no image ID in $WORK/rel/build.json"
step verify 0 verify-provenance "$IMAGE" --lock lock.json --artifacts rel --manifest "$M" "${MIRROR[@]}"
step build-nocache 0 build "$M" --lock lock.json -o rel-nocache --no-cache "${MIRROR[@]}"
AGAIN=$(image_id rel-nocache/build.json)
[ "$IMAGE" = "$AGAIN" ] || fail "no-cache rebuild: a different image ID '$AGAIN' (first $IMAGE)"
echo "no-cache rebuild: same image ID $IMAGE"
# Reproduce with the mirror removed: no --mirror, an empty cache, only the release archive.
mkdir -p repro
RELEASEKIT_CACHE="$WORK/cache-reproduce" step reproduce 0 reproduce --from rel --workdir repro
echo "every exit code as expected; outputs in $WORK"
