# Sourced by benchmarks/rehearsal_seed*.sh, with their arguments, after they set NAME (seed000,
# seed003) and URL (the repository the snapshot copies): the set-up and the helpers every
# rehearsal shares. It leaves SNAP, REPO, WORK, PY, MIRROR and ENGINE set, the working directory
# WORK, and the functions fail, step, image_id and rehearsal_manifest.
SNAP=${1:?usage: rehearsal_$NAME.sh SNAPSHOT [WORKDIR]}
SNAP=$(cd "$SNAP" && pwd) || exit 2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${2:-$(mktemp -d "${TMPDIR:-/tmp}/rehearsal-$NAME.XXXXXX")}
mkdir -p "$WORK" || exit 2
WORK=$(cd "$WORK" && pwd)
PY=${PYTHON:-python3}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export RELEASEKIT_CACHE="$WORK/cache"
MIRROR=(--mirror "$URL=$SNAP")
PLACEHOLDER=releasekit/vllm-cpu:engine-image-tag
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

# The interpreter first, before any Docker work: a PYTHON that cannot import releasekit (another
# virtual environment, /usr/bin/false) is said as such, not as a missing engine image.
if ! "$PY" -c 'import releasekit.cli' >/dev/null 2>python-import.err; then
    why=$(tail -n 1 python-import.err)
    fail "releasekit cannot be imported by PYTHON=$PY: ${why:-it failed with no message}" 2
fi

ENGINE=$(engine_image) || fail "no engine image: $(cat engine-image.err)" 2
[ -n "$ENGINE" ] || fail "no engine image: the helper printed no tag" 2
echo "engine image     $ENGINE"

# rehearsal_manifest FILE: a copy of the committed manifest FILE in WORK/manifests/ (so that its
# relative paths resolve as they would beside it) naming the engine image; prints the copy's path.
rehearsal_manifest() {
    local copy
    mkdir -p manifests
    copy="$WORK/manifests/$(basename "$1")"
    grep -q "name: $PLACEHOLDER\$" "$1" || fail "the manifest names no $PLACEHOLDER to replace" 2
    sed "s|name: $PLACEHOLDER\$|name: $ENGINE|" "$1" >"$copy"
    echo "$copy"
}
