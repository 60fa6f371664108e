"""The one Docker adapter against the real engine: facts, runs with a timeout, export streams, errors.

Uses only the shared base image (tests/conftest.py) and a one-file image made here with
``docker import``; nothing is pulled. Every image and container made here is removed.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from releasekit.docker_engine import (
    ContainerSpec,
    ContainerTimeout,
    Engine,
    EngineUnreachable,
    LazyEngine,
    NoSuchImage,
    Sandbox,
    connect,
)
from releasekit.errors import EnvironmentProblem

pytestmark = pytest.mark.docker

LABEL = "io.releasekit.suites.docker-engine"


@pytest.fixture(scope="module")
def engine(docker_client) -> Engine:
    return Engine(docker_client)


@pytest.fixture
def tiny_image(engine: Engine, tmp_path: Path):
    """A one-file image (no shell, nothing runnable): ``/hello.txt``."""
    rootfs = tmp_path / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        data = b"hello from a tiny image\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tag = f"t{os.getpid()}-{time.monotonic_ns()}"
    image_id = engine.import_rootfs(rootfs, "releasekit-test/docker-engine-tiny", tag)
    yield image_id, f"releasekit-test/docker-engine-tiny:{tag}"
    engine.remove(image_id, force=True)


def _leftovers(docker_client) -> list:
    return docker_client.containers.list(all=True, filters={"label": LABEL})


def test_inspect_gives_the_engines_facts(engine: Engine, base_image, docker_client) -> None:
    facts = engine.inspect(base_image.name)
    assert facts.id == base_image.image_id == docker_client.images.get(base_image.name).id
    assert base_image.name in facts.tags
    config = docker_client.images.get(base_image.name).attrs.get("Config") or {}
    assert facts.env == dict(e.partition("=")[::2] for e in config.get("Env") or [])
    assert facts.labels == (config.get("Labels") or {}) and facts.cmd == list(config.get("Cmd") or [])
    assert facts.repo_digests == []  # made with docker import: no registry has seen it
    assert engine.exists(base_image.image_id) and engine.image_id(base_image.name) == facts.id
    assert engine.find("releasekit-test/surely-not-here:0") is None
    with pytest.raises(NoSuchImage):
        engine.inspect("releasekit-test/surely-not-here:0")


def test_a_run_past_its_timeout_is_killed_and_removed(engine: Engine, base_image, docker_client) -> None:
    started = time.monotonic()
    result = engine.run(
        base_image.image_id,
        ["sleep", "60"],
        entrypoint=["/usr/bin/env"],
        timeout=2,
        labels={LABEL: "timeout"},
    )
    assert result.timed_out and result.exit_code == -1
    assert time.monotonic() - started < 30
    assert not _leftovers(docker_client)


def test_a_run_reports_exit_code_and_output(engine: Engine, base_image, docker_client) -> None:
    result = engine.run(
        base_image.image_id,
        ["-c", "echo out; echo err >&2; exit 3"],
        entrypoint=["/bin/sh"],
        timeout=60,
        labels={LABEL: "exit"},
    )
    assert not result.timed_out and result.exit_code == 3
    assert "out" in result.output and "err" in result.output
    assert not _leftovers(docker_client)


def test_a_sandbox_runs_as_nobody_exports_within_its_cap_and_leaves_no_process(
    engine: Engine, base_image, docker_client, tmp_path: Path
) -> None:
    """``run_sandboxed`` (issue 43): its writable directories are the user's, a daemon it started is
    gone with it, and an export over its cap is not read at all."""
    script = (
        "id -u > /box/out/uid; head -c 4096 /dev/zero > /box/out/big; "
        "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started"
    )
    spec = ContainerSpec(
        base_image.image_id,
        entrypoint=["/bin/sh", "-c", script],
        command=[],
        user="65534:65534",
        network=False,
        labels={LABEL: "sandbox"},
        cap_drop=["ALL"],
    )
    kept, capped = tmp_path / "kept.tar", tmp_path / "capped.tar"
    ran = engine.run_sandboxed(spec, Sandbox(writable=["/box/out"], export="/box/out", export_to=kept))
    assert ran.exit_code == 0 and "started" in ran.output, ran.output
    with tarfile.open(kept) as tar:
        assert tar.extractfile("out/uid").read() == b"65534\n"  # type: ignore[union-attr]
    small = Sandbox(writable=["/box/out"], export="/box/out", export_to=capped, max_export_bytes=1024)
    assert engine.run_sandboxed(spec, small).exit_code == 0
    assert not capped.exists()
    assert not _leftovers(docker_client)


def test_container_lifecycle_with_shm_size_and_no_network(engine: Engine, base_image, docker_client) -> None:
    container = engine.create(
        ContainerSpec(
            base_image.image_id,
            entrypoint=["/bin/sh", "-c"],
            command=[
                "df -k /dev/shm | tail -1; cat /sys/class/net/*/operstate 2>/dev/null | sort -u; sleep 60"
            ],
            shm_size="64m",
            network=False,
            labels={LABEL: "lifecycle"},
        )
    )
    try:
        assert container.state()[0] == "created"
        container.start()
        with pytest.raises(ContainerTimeout):
            container.wait(timeout=3)
        status, code = container.state()
        assert status == "running" and code is None
        out = container.logs().decode()
        assert " 65536 " in out.splitlines()[0]  # 64 MiB of /dev/shm, in KiB
        container.kill()
        assert container.wait(timeout=30) != 0
        assert container.state()[0] == "exited"
    finally:
        container.remove()
    assert not _leftovers(docker_client)


def test_export_stream_of_a_never_started_container(engine: Engine, tiny_image, docker_client) -> None:
    image_id, _ = tiny_image
    data = b"".join(engine.export_stream(image_id, deadline=time.monotonic() + 60, labels={LABEL: "export"}))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.getmember("hello.txt")
        assert tar.extractfile(member).read() == b"hello from a tiny image\n"
    assert not _leftovers(docker_client)


def test_save_load_and_tag_round_trip(engine: Engine, tiny_image, tmp_path: Path) -> None:
    image_id, name = tiny_image
    archive = tmp_path / "image.tar"
    with archive.open("wb") as fh:
        for chunk in engine.save(image_id):
            fh.write(chunk)
    second = name + "-again"
    engine.tag(image_id, second)
    try:
        assert engine.inspect(second).id == image_id
    finally:
        engine.remove(second)
    assert engine.find(second) is None
    assert engine.load(archive) == [image_id]


def test_a_wrong_socket_is_a_one_line_environment_problem(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    with pytest.raises(EngineUnreachable) as caught:
        connect(timeout=5)
    assert isinstance(caught.value, EnvironmentProblem) and caught.value.exit_code == 2
    line = caught.value.one_line()
    assert line.startswith("cannot reach the Docker Engine: ") and "\n" not in line and "DOCKER_HOST" in line

    from releasekit.manifest import TO_BE_LOCKED
    from releasekit.plan.locking import resolve_base_image

    locked = resolve_base_image(
        "releasekit/base-python:bookworm", TO_BE_LOCKED, engine=LazyEngine(timeout=60)
    )
    assert locked.digest is None and locked.note and "Docker Engine not reachable" in locked.note


def test_the_cli_does_not_import_the_docker_sdk_for_help() -> None:
    code = "import sys\nfrom releasekit.cli import app\nprint('docker' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path.cwd()
    )
    assert out.stdout.strip() == "False"


def test_create_takes_one_spec_and_the_spec_is_frozen() -> None:
    import dataclasses
    import inspect

    assert list(inspect.signature(Engine.create).parameters) == ["self", "spec"]
    spec = ContainerSpec("img", network=False, read_only_mounts={"/h": "/c"}, writable_volumes={"v": "/w"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.image = "other"  # type: ignore[misc]
    from releasekit.docker_engine.containers import sdk_create_kwargs

    kwargs = sdk_create_kwargs(spec)
    assert kwargs["network_mode"] == "none"
    assert kwargs["volumes"] == {"/h": {"bind": "/c", "mode": "ro"}, "v": {"bind": "/w", "mode": "rw"}}
    assert sdk_create_kwargs(ContainerSpec("img")) == {"detach": True}


def _untagged(engine: Engine, image_id: str, tagged: str, tmp_path: Path) -> None:
    """Leave ``image_id`` in the engine with no name at all (as ``build`` without ``--tag`` does)."""
    import json

    archive = tmp_path / "named.tar"
    with archive.open("wb") as fh:
        for chunk in engine.save(image_id):
            fh.write(chunk)
    nameless = tmp_path / "nameless.tar"
    with tarfile.open(archive) as src, tarfile.open(nameless, "w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name == "manifest.json":
                entries = json.loads(data)
                for entry in entries:
                    entry["RepoTags"] = None
                data = json.dumps(entries).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    engine.remove(tagged)
    assert engine.load(nameless) == [image_id]
    assert engine.inspect(image_id).tags == []


def test_a_push_never_deletes_the_image_it_pushed(engine: Engine, tiny_image, tmp_path: Path) -> None:
    """The push's temporary tag goes again, unless it was the image's only name: removing it would
    delete the image itself (the release workflow's build makes no tag; stage pushed it, and the
    next job on the host found no image under the build's ID: found running it under act)."""
    from releasekit.demo.localregistry import start_local_registry

    image_id, name = tiny_image
    with start_local_registry(tmp_path / "registry") as reg:
        engine.push(image_id, f"{reg.host}/t/tagged", "v1", where=reg.host)
        assert engine.inspect(image_id).tags == [name]  # a named image: the push's tag is gone again
        _untagged(engine, image_id, name, tmp_path)
        digest = engine.push(image_id, f"{reg.host}/t/untagged", "v1", where=reg.host)
    assert digest.startswith("sha256:")
    facts = engine.find(image_id)
    assert facts is not None, "pushing an untagged image deleted it"
    assert facts.tags == [f"{reg.host}/t/untagged:v1"]
