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
SNAP=${1:?usage: rehearsal_seed003.sh SNAPSHOT [WORKDIR]}
SNAP=$(cd "$SNAP" && pwd) || exit 2
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${2:-$(mktemp -d "${TMPDIR:-/tmp}/rehearsal-seed003.XXXXXX")}
mkdir -p "$WORK" || exit 2
WORK=$(cd "$WORK" && pwd)
PY=${PYTHON:-python3}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export RELEASEKIT_CACHE="$WORK/cache"
URL=https://github.com/local-inference-lab/b12x
MIRROR=(--mirror "$URL=$SNAP")
PLACEHOLDER=releasekit/vllm-cpu:engine-image-tag
MANIFEST="$REPO/manifests/ff-next-b12x-rehearsal.yaml"
DOCKERFILE=python-builder.Dockerfile
cd "$WORK" || exit 2

# fail MESSAGE [EXIT]: one line on stderr, then exit (1: a finding; 2: bad input or setup).
fail() {
    echo "rehearsal: $1" >&2
    exit "${2:-1}"
}

# The helpers below print one line on failure, never a traceback: their errors are the
# rehearsal's findings, not Python's.
engine_image() {
    "$PY" - 2>engine-image.err <<'EOF'
import sys

try:
    from releasekit.builder.baseimage import DEFAULT_BASE
    from releasekit.demo.validate_stage import cpu_engine_base
    from releasekit.docker_engine import connect

    print(cpu_engine_base(connect(), DEFAULT_BASE))
except Exception as exc:  # one line for the script's message
    sys.exit(f"{type(exc).__name__}: {exc}")
EOF
}

image_id() {
    "$PY" - "$1" 2>/dev/null <<'EOF'
import json
import sys

try:
    with open(sys.argv[1], encoding="utf-8") as fh:
        print(json.load(fh).get("image_id") or "")
except (OSError, ValueError):
    print("")
EOF
}

step() {
    local name=$1 expected=$2
    shift 2
    local t0 t1 rc
    t0=$(date +%s.%N)
    "$PY" -m releasekit "$@" >"$name.out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    printf '%-16s exit %d  %6.1f s  (%s.out)\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)" "$name"
    [ "$rc" -eq "$expected" ] || fail "$name exited $rc, expected $expected: see $WORK/$name.out"
}

ENGINE=$(engine_image) || fail "no engine image: $(cat engine-image.err)" 2
[ -n "$ENGINE" ] || fail "no engine image: the helper printed no tag" 2
echo "engine image     $ENGINE"
# In a directory of its own, with the builder's Dockerfile and wheelhouse where its relative paths
# (../dockerfiles/, ../builder-wheels) point, as they would beside the committed file.
mkdir -p manifests dockerfiles builder-wheels
M="$WORK/manifests/ff-next-b12x-rehearsal.yaml"
grep -q "name: $PLACEHOLDER\$" "$MANIFEST" || fail "the manifest names no $PLACEHOLDER to replace" 2
sed "s|name: $PLACEHOLDER\$|name: $ENGINE|" "$MANIFEST" >"$M"
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
