"""Crashes and concurrency (issue 27): build, publish and promote SIGKILLed at many points, then rerun;
two builds and two plan locks at once on one ``RELEASEKIT_CACHE``.

Everything is real: ``releasekit`` runs as its own process group and is killed with SIGKILL
(what a cancelled CI job does to it and to its git and pip children), the build uses the Docker
Engine, publish and promote a real registry. Each series kills a command at spread-out times
after it started and at named instants (``releasekit.atomic.failpoint``: the process kills itself
there, e.g. half-way through writing a cache file), checks the invariants after every kill, and
ends with one rerun that must complete and give what an uninterrupted run gives:

- the build cache never holds a visible entry that is not complete (byte for byte what the
  uninterrupted build stored), so it never serves a partial file;
- the registry never shows a release tag whose digest lacks its attached evidence;
- the rerun's records are those of an uninterrupted run (apart from the cache fields of
  ``build.json``, which say hit instead of miss).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
import pytest
from crash_support import (
    LATER,
    Run,
    assert_interrupted,
    finish,
    interrupt_in_write,
    plant_later_records,
    remove_leftover_containers,
    run,
    run_tree,
    start,
    work_dirs,
)
from publish_support import Release, build_image, publish_args

from releasekit.builder.cache import CacheEntry
from releasekit.demo.example import make_example
from releasekit.publish.attachments import fetch_attachments
from releasekit.records.release_dir import refuse_mixed_runs
from releasekit.registry import RegistryClient

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _env(root: Path, cache: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELEASEKIT_TEST_")}
    env.update(
        RELEASEKIT_CACHE=str(cache),
        RELEASEKIT_ALLOW_LOCAL_REPOS="1",
        TMPDIR=str(root / "tmp"),  # a killed run's temporary directories stay in the test's own
    )
    env.update(extra or {})
    (root / "tmp").mkdir(exist_ok=True)
    return env


def spread(first: float, last: float, count: int) -> list[float]:
    """``count`` kill times from ``first`` to ``last`` seconds, geometrically spaced."""
    ratio = (last / first) ** (1 / (count - 1))
    return [round(first * ratio**i, 3) for i in range(count)]


def kill_series(launch: Callable[[float], Run], first: float, last: float, count: int) -> int:
    """``launch(delay)`` runs the command and kills it ``delay`` s after its start; it is called at
    ``count`` spread-out delays. A run that finished before its delay (a loaded machine runs at
    another speed) is followed by one more at half that delay, so the series makes ``count`` real
    kills whatever the load. Returns how many runs were killed."""
    pending = spread(first, last, count)
    kills = attempts = 0
    while pending and attempts < 2 * count:
        delay = pending.pop(0)
        attempts += 1
        if launch(delay).killed:
            kills += 1
        else:
            pending.append(delay / 2)
    return kills


# -- the build: one small release (the demo's pure-Python component), locked and built alone ----------


@dataclass
class Example:
    root: Path
    manifest: Path
    lock: Path
    reference: Path  # an uninterrupted build's output directory
    reference_cache: Path
    build_seconds: float
    killed_pids: set[int] = field(default_factory=set)

    def build_args(self, out: Path) -> list[str]:
        return ["build", str(self.manifest), "--lock", str(self.lock), "-o", str(out)]

    def lock_args(self, out: Path) -> list[str]:
        return ["plan", "lock", str(self.manifest), "-o", str(out), "--no-forge"]


@pytest.fixture(scope="module")
def example(tmp_path_factory, base_image, docker_client):
    root = tmp_path_factory.mktemp("crash")
    made = make_example(root / "example", base_image=base_image.name, native=False)
    manifest = Path(made.manifest)
    cache = root / "reference-cache"
    env = _env(root, cache)  # every run of the module: the same TMPDIR (a build records $BUILD_TMP's use)
    locked = run(["plan", "lock", str(manifest), "-o", str(root / "lock.json"), "--no-forge"], env, root)
    assert locked.returncode == 0, locked.stderr
    began = time.monotonic()
    built = run(
        ["build", str(manifest), "--lock", str(root / "lock.json"), "-o", str(root / "ref")], env, root
    )
    assert built.returncode == 0, built.stderr
    ex = Example(root, manifest, root / "lock.json", root / "ref", cache / "build", time.monotonic() - began)
    yield ex
    remove_leftover_containers(docker_client, ex.killed_pids)
    image_id = json.loads((ex.reference / "build.json").read_text())["image_id"]
    with contextlib.suppress(docker.errors.APIError):  # this example's image (every build made the same)
        docker_client.images.remove(image_id, force=True, noprune=False)


def visible_entries(cache: Path) -> list[Path]:
    """Every file a reader of the build cache could be served: not a temporary name, not a lock."""
    out = []
    for path in sorted(cache.rglob("*")):
        rel = path.relative_to(cache)
        if any(part.startswith(".") and part.endswith(".tmp") for part in rel.parts):
            continue
        if path.is_file() and not path.name.endswith(".lock"):
            out.append(path)
    return out


def assert_cache_complete(cache: Path, reference: Path) -> int:
    """Every visible entry is complete: content-keyed files are the reference's bytes, wheel entries
    hold a wheel whose bytes are the reference's and the record that names it. Returns how many."""
    entries = visible_entries(cache)
    for path in entries:
        rel = path.relative_to(cache)
        kind = rel.parts[0]
        if kind == "wheels":
            entry_dir = path.parent
            assert (entry_dir / "entry.json").is_file(), f"{rel}: a wheel entry is visible without its record"
            record = CacheEntry.model_validate_json((entry_dir / "entry.json").read_text())
            wheel = entry_dir / record.wheel.filename
            assert wheel.read_bytes() == (reference / rel.parent / record.wheel.filename).read_bytes(), rel
        else:  # layers/<k>/<key>/{layer.tar,smoke.json}, bases/<id>.json: the same inputs, the same bytes
            assert (reference / rel).is_file(), f"{rel}: an entry the uninterrupted build never made"
            assert path.read_bytes() == (reference / rel).read_bytes(), f"{rel} is served incomplete"
        if kind == "layers":
            assert {p.name for p in path.parent.iterdir()} == {"layer.tar", "smoke.json"}, rel
    return len(entries)


def comparable_build(out: Path) -> dict:
    """build.json without what says whether the cache answered (documented to differ, and only there)."""
    record = json.loads((out / "build.json").read_text())
    record.pop("cache")
    for comp in record["components"]:
        comp.pop("cache")
    return record


def assert_same_build(out: Path, reference: Path) -> None:
    assert comparable_build(out) == comparable_build(reference)
    for name in ("archive.json", "Dockerfile"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    for wheel in (reference / "wheels").iterdir():
        assert (out / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()


def test_build_killed_at_many_points_never_serves_a_partial_cache_entry(example: Example, docker_client):
    root, cache = example.root / "kill-build", example.root / "kill-build" / "cache"
    root.mkdir()
    env = _env(example.root, cache)
    # Named instants, in the order a cold build reaches them, each on what the kills before left:
    # the git mirror made but not yet in place; the wheel half-copied into its entry; the wheel
    # entry complete but not yet renamed in; the layer half-copied into its entry.
    points = ["git-mirror-init", "cache-partial:*.whl", "cache-publish:wheels", "cache-partial:layer.tar"]
    for point in points:
        r = run(example.build_args(root / "out"), {**env, "RELEASEKIT_TEST_KILL_AT": point}, root)
        example.killed_pids.add(r.pid)
        remove_leftover_containers(docker_client, {r.pid})
        assert r.killed, f"{point}: the build was not killed there (rc {r.returncode}): {r.stderr[-400:]}"
        assert_cache_complete(cache / "build", example.reference_cache)

    # Real kills from outside (the whole process group), at spread-out times after the start.
    def launch(delay: float) -> Run:
        r = run(example.build_args(root / "out"), env, root, after=delay)
        example.killed_pids.add(r.pid)
        remove_leftover_containers(docker_client, {r.pid})
        assert r.killed or r.returncode == 0, r.stderr[-400:]
        assert_cache_complete(cache / "build", example.reference_cache)
        return r

    assert kill_series(launch, 0.3, max(1.0, example.build_seconds * 0.6), 6) == 6
    final = run(example.build_args(root / "out"), env, root)
    assert final.returncode == 0, final.stderr
    assert_same_build(root / "out", example.reference)
    assert assert_cache_complete(cache / "build", example.reference_cache) >= 6  # wheel x3, layer x2, base


def test_a_killed_git_leaves_no_lock_that_fails_the_rerun(example: Example):
    """A git killed while it held its ref locks (a fetch into the mirror when the job died) leaves
    ``refs/heads/main.lock``; git refuses every later fetch until it is gone. The mirror's own lock
    proves no git of ours is running, so releasekit clears it."""
    root = example.root / "git-lock"
    root.mkdir()
    env = _env(example.root, root / "cache")
    assert run(example.lock_args(root / "lock.json"), env, root).returncode == 0
    mirror = next((root / "cache" / "git").glob("*.git"))
    head = subprocess.run(
        ["git", "--git-dir", str(mirror), "rev-parse", "refs/heads/main"], capture_output=True, text=True
    ).stdout.strip()
    git = subprocess.Popen(
        ["git", "--git-dir", str(mirror), "update-ref", "--stdin"], stdin=subprocess.PIPE, text=True
    )
    assert git.stdin is not None
    git.stdin.write(f"start\nupdate refs/heads/main {head}\nprepare\n")
    git.stdin.flush()
    deadline = time.monotonic() + 10
    while not (mirror / "refs/heads/main.lock").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    git.kill()  # SIGKILL, with the transaction prepared: its lock stays behind
    git.wait()
    assert (mirror / "refs/heads/main.lock").exists()
    again = run(example.lock_args(root / "lock2.json"), env, root)
    assert again.returncode == 0, again.stderr
    assert (root / "lock2.json").read_bytes() == example.lock.read_bytes()


# -- one run per release directory (issue 44): a failed, killed or interrupted stage leaves the directory
#    as it was, or holds nothing of the run that did not finish -------------------------------------


def test_a_failed_killed_or_interrupted_build_leaves_the_release_directory_as_it_was(
    example: Example, docker_client
):
    """The issue's directory: an earlier complete run (build and the later stages' records) that a new
    build into it must either leave as it was or replace whole. Before the fix a failing build deleted
    build.json and left the earlier verification summary, SBOM and archive; Ctrl-C printed nothing."""
    root = example.root / "one-run"
    root.mkdir()
    out = root / "out"
    shutil.copytree(example.reference, out)
    plant_later_records(out)
    before = run_tree(out)
    env = _env(example.root, example.reference_cache.parent)  # warm: the reference build's cache

    def killed(r: Run) -> Run:
        example.killed_pids.add(r.pid)
        remove_leftover_containers(docker_client, {r.pid})
        return r

    # A locked commit the repository lacks: the build fails, the directory is as it was.
    lock = json.loads(example.lock.read_text())
    name = next(n for n, c in lock["components"].items() if "commit" in c)
    lock["components"][name]["commit"] = "f" * 40
    bad_lock = example.lock.with_name("bad-lock.json")  # beside the lock: the manifest path it names holds
    bad_lock.write_text(json.dumps(lock, indent=2))
    failed = run(["build", str(example.manifest), "--lock", str(bad_lock), "-o", str(out)], env, root)
    assert failed.returncode in (1, 2), failed.stderr[-600:]
    assert run_tree(out) == before
    # Killed inside the run (its records half-written in the work directory), then interrupted there.
    r = killed(
        run(example.build_args(out), {**env, "RELEASEKIT_TEST_KILL_AT": "release-partial:build.json"}, root)
    )
    assert r.killed, r.stderr[-600:]
    assert run_tree(out) == before
    # (SIGTERM, the other interrupt, is the verify-provenance run's: tests/test_release_dir_hostile.py)
    r = killed(
        interrupt_in_write(example.build_args(out), env, root, (out, "build", "RELEASE.md"), signal.SIGINT)
    )
    assert_interrupted(r, "build")
    assert run_tree(out) == before
    assert [d for d in work_dirs(out) if f".{r.pid}." in d] == []  # its work directory went with it
    # Killed inside the commit: the earlier build and the later records are gone, build.json not yet in.
    r = killed(run(example.build_args(out), {**env, "RELEASEKIT_TEST_KILL_AT": "run-commit:logs"}, root))
    assert r.killed, r.stderr[-600:]
    assert not (out / "build.json").exists() and not [n for n in LATER if (out / n).exists()]
    refuse_mixed_runs(out)
    final = run(example.build_args(out), env, root)
    assert final.returncode == 0, final.stderr[-600:]
    assert_same_build(out, example.reference)
    assert not [n for n in LATER if (out / n).exists()]  # the later stages' records of the earlier run
    assert work_dirs(out) == []  # what the killed runs left, removed by the next build


def test_stage_killed_or_interrupted_leaves_one_run(
    tmp_path, registry, registry_names_forgotten, small_image
):
    """stage killed after its push and inside its commit, interrupted writing staging.json, then rerun.
    After each the directory holds the earlier run or nothing of the unfinished one; the rerun's
    staging.json names the image and the summary, and an earlier publish's records are gone.
    (verify-provenance's kills: tests/test_release_dir_hostile.py, before its full run.)"""
    release = Release(tmp_path / "release", small_image)  # verify-provenance's PASSED summary for it
    out, root = release.evidence, tmp_path
    verified = run_tree(out)
    env = _env(root, root / "cache")
    stage = [
        "stage", "--image", small_image, "--lock", str(release.lock), "--staging",
        f"{registry.host}/crash/staging", "--json",
    ]  # fmt: skip
    for point in ("stage-pushed", "run-commit:staging.json"):
        r = run(stage, {**env, "RELEASEKIT_TEST_KILL_AT": point}, root)
        assert r.killed, f"{point}: {r.stderr[-600:]}"
        assert run_tree(out) == verified, point
    r = interrupt_in_write(stage, env, root, (out, "stage", "staging.json"), signal.SIGINT)
    assert_interrupted(r, "stage")
    assert run_tree(out) == verified
    (out / "published").mkdir()  # an earlier publish: the stage's commit removes it with its own
    (out / "published" / "publish.json").write_text('{"earlier": "publish"}\n')
    staged = run(stage, env, root)
    assert staged.returncode == 0, staged.stderr[-600:]
    record = json.loads((out / "staging.json").read_text())
    raw = (out / "verification_summary.json").read_bytes()
    assert record["image_id"] == small_image
    assert record["verification_summary_sha256"] == hashlib.sha256(raw).hexdigest()
    assert not (out / "published").exists() and work_dirs(out) == []
    refuse_mixed_runs(out)


# -- concurrency: two builds and two plan locks at once on one cache ----------------------------------


def test_two_locks_and_two_builds_at_once_on_one_cache_give_what_one_alone_gives(example: Example):
    root = example.root / "together"
    root.mkdir()
    # Each process pauses inside every cache write (after the entry is complete in its temporary
    # name, before it is renamed in): without a lock per entry the two overlap there every time.
    env = _env(
        example.root,
        root / "cache",
        {
            "RELEASEKIT_TEST_PAUSE_AT": "git-mirror-init,cache-publish:*,cache-partial:*.json",
            "RELEASEKIT_TEST_PAUSE_S": "0.5",
        },
    )
    locks = [start(example.lock_args(root / f"lock{i}.json"), env, root) for i in (1, 2)]
    for proc in locks:
        r = finish(proc)
        assert r.returncode == 0, r.stderr
    for i in (1, 2):
        assert (root / f"lock{i}.json").read_bytes() == example.lock.read_bytes()

    builds = [start(example.build_args(root / f"out{i}"), env, root) for i in (1, 2)]
    for proc in builds:
        r = finish(proc)
        assert r.returncode == 0, r.stderr
    for i in (1, 2):
        assert_same_build(root / f"out{i}", example.reference)
    # Each entry was made once: one build made it, the other waited on its lock and was served it.
    records = [json.loads((root / f"out{i}" / "build.json").read_text())["cache"] for i in (1, 2)]
    assert sorted(len(r["misses"]) for r in records) == [0, 1], records
    assert sorted(r["layer"] for r in records) == ["hit", "miss"], records
    assert_cache_complete(root / "cache" / "build", example.reference_cache)


# -- publish and promote ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry_names_forgotten(registry, docker_client):
    """Requested by the publish series, so the names they leave go when the module ends."""
    yield
    # What publish left in the engine: pull-back references (REGISTRY/REPO@digest) and the staging
    # tags of runs killed before they untagged it. Only names: the image stays.
    for image in docker_client.images.list():
        for ref in [*(image.attrs.get("RepoDigests") or []), *(image.attrs.get("RepoTags") or [])]:
            if ref.startswith(f"{registry.host}/"):
                with contextlib.suppress(docker.errors.APIError):
                    docker_client.images.remove(ref, noprune=True)


@pytest.fixture(scope="module")
def small_image(docker_client) -> str:
    return build_image(docker_client, "releasekit-test/crash-small:1", {"hello.txt": b"crash tests\n"})


RELEASE_TAGS = ("crash", "beta")


def release_tags(tags: list[str]) -> list[str]:
    """Tags a user pulls: not the staging tag of a push in progress, not an attachment's tag."""
    return [
        t for t in tags if not t.startswith("releasekit-staging-") and not t.endswith((".releasekit", ".att"))
    ]


def assert_every_release_tag_has_its_evidence(registry, repository: str, files: set[str]) -> list[str]:
    with RegistryClient(registry.host) as client:
        shown = release_tags(client.tags(repository))
        for tag in shown:
            blob = client.get_manifest(repository, tag)
            assert blob is not None, tag
            attached = fetch_attachments(client, repository, blob.digest)
            assert attached is not None, f"{repository}:{tag} is shown without its evidence"
            assert set(attached.files) == files, f"{repository}:{tag}: evidence incomplete"
    return shown


@dataclass
class Published:
    """One uninterrupted publish (the reference), and what every later run needs."""

    root: Path
    release: Release
    image: str
    env: dict[str, str]
    repo: str
    seconds: float
    records: dict[str, str]  # publish.json, RELEASE.md as it wrote them
    attached: dict[str, str]  # title -> text of the evidence it attached
    digest: str

    def args(self, repo: str, registry) -> list[str]:
        return publish_args(self.release, self.image, f"{registry.host}/{repo}", *RELEASE_TAGS)


@pytest.fixture(scope="module")
def reference_publish(tmp_path_factory, registry, registry_names_forgotten, small_image) -> Published:
    root = tmp_path_factory.mktemp("crash-publish")
    release = Release(root / "release", small_image)
    env = _env(root, root / "cache")
    repo = "crash/reference"
    began = time.monotonic()
    ref = run(publish_args(release, small_image, f"{registry.host}/{repo}", *RELEASE_TAGS), env, root)
    seconds = time.monotonic() - began
    assert ref.returncode == 0, ref.stderr
    published = release.evidence / "published"
    records = {name: (published / name).read_text() for name in ("publish.json", "RELEASE.md")}
    digest = json.loads(records["publish.json"])["digest"]
    with RegistryClient(registry.host) as client:
        attached = fetch_attachments(client, repo, digest)
    assert attached is not None
    return Published(root, release, small_image, env, repo, seconds, records, attached.files, digest)


def assert_rerun_completes_as_uninterrupted(ref: Published, registry, repo: str) -> None:
    """The rerun exits 0 and writes and attaches what the uninterrupted run did, apart from the
    repository's name (which the release notes name, so the attachment's digest differs by it)."""
    final = run(ref.args(repo, registry), ref.env, ref.root)
    assert final.returncode == 0, final.stderr
    files = set(ref.attached)
    assert sorted(assert_every_release_tag_has_its_evidence(registry, repo, files)) == sorted(RELEASE_TAGS)
    published = ref.release.evidence / "published"
    assert (published / "RELEASE.md").read_text() == ref.records["RELEASE.md"].replace(ref.repo, repo)
    record = json.loads((published / "publish.json").read_text())
    expected = json.loads(ref.records["publish.json"].replace(ref.repo, repo))
    record["attachment"].pop("digest"), expected["attachment"].pop("digest")
    assert record == expected
    with RegistryClient(registry.host) as client:
        attached = fetch_attachments(client, repo, ref.digest)
    assert attached is not None
    assert attached.files == {k: v.replace(ref.repo, repo) for k, v in ref.attached.items()}


def assert_one_publish(published: Path) -> None:
    """``published/`` holds one publish's pair (RELEASE.md naming the repository publish.json names) or
    no publish.json at all: never an earlier run's publish.json beside a later run's notes."""
    if (published / "publish.json").exists():
        record = json.loads((published / "publish.json").read_text())
        assert record["repository"] in (published / "RELEASE.md").read_text(), record["repository"]


def test_publish_killed_at_many_points_never_shows_a_tag_without_evidence(reference_publish, registry):
    """Each kill is of a first publish into a repository of its own: only there could a tag
    precede its evidence (a rerun finds the evidence the killed run attached)."""
    ref = reference_publish
    files = set(ref.attached)
    repos: list[str] = []

    def killed_publish(point: str | None, delay: float | None) -> Run:
        repo = f"crash/killed-{len(repos)}"
        repos.append(repo)
        env = {**ref.env, "RELEASEKIT_TEST_KILL_AT": point} if point else ref.env
        r = run(ref.args(repo, registry), env, ref.root, after=delay)
        assert r.killed or (point is None and r.returncode == 0), r.stderr[-400:]
        assert_every_release_tag_has_its_evidence(registry, repo, files)
        assert_one_publish(ref.release.evidence / "published")
        return r

    # After the push was checked; after the evidence was attached; between the two release tags;
    # inside the commit of RELEASE.md and publish.json into the release directory.
    points = (
        "publish-pushed",
        "publish-attached",
        f"publish-tagged:{RELEASE_TAGS[0]}",
        "run-commit:RELEASE.md",
    )
    for point in points:
        killed_publish(point, None)
    named = list(repos)
    kills = len(points) + kill_series(
        lambda delay: killed_publish(None, delay), 0.4, max(1.0, ref.seconds * 0.7), 7
    )
    assert kills >= 10
    # The staging tag is the one tag a killed publish may leave without evidence; it names an image
    # that passed the gate, is never a release tag, and the rerun completes its evidence.
    for repo in [*named, repos[-1]]:
        assert_rerun_completes_as_uninterrupted(ref, registry, repo)


def test_promote_killed_at_many_points_moves_the_tag_only_to_evidence(reference_publish, registry):
    ref = reference_publish
    files = set(ref.attached)
    source = f"{registry.host}/{ref.repo}:beta"

    def promote(to: str) -> list[str]:
        return ["promote", "--from", source, "--to", f"{registry.host}/{ref.repo}:{to}", "--json"]

    began = time.monotonic()
    alone = run(promote("stable-alone"), ref.env, ref.root)
    seconds = time.monotonic() - began
    assert alone.returncode == 0, alone.stderr

    def check(r: Run) -> Run:
        assert r.killed or r.returncode == 0, r.stderr[-400:]
        shown = assert_every_release_tag_has_its_evidence(registry, ref.repo, files)
        if "stable" in shown:
            with RegistryClient(registry.host) as client:
                blob = client.get_manifest(ref.repo, "stable")
            assert blob is not None and blob.digest == ref.digest
        return r

    # After the gate passed, before the tag; after the tag, before it was read back.
    for point in ("promote-judged", "promote-tagged"):
        r = check(run(promote("stable"), {**ref.env, "RELEASEKIT_TEST_KILL_AT": point}, ref.root))
        assert r.killed, f"{point}: not killed there (rc {r.returncode})"
    kills = 2 + kill_series(
        lambda d: check(run(promote("stable"), ref.env, ref.root, after=d)), 0.3, max(0.6, seconds * 0.8), 8
    )
    assert kills >= 10
    done = check(run(promote("stable"), ref.env, ref.root))
    assert done.returncode == 0, done.stderr
    assert done.stdout == alone.stdout.replace("stable-alone", "stable")
