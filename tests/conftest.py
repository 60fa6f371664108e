"""Shared fixtures: the real Docker Engine and a locally made base image.

``docker_client``: the engine at DOCKER_HOST (default unix:///var/run/docker.sock).
Without one the test is skipped on a workstation, but fails under CI=true: CI
installs and starts the engine (scripts/setup.sh), so a missing engine there is a
broken set-up, not a reason to skip.

``base_image``: Debian bookworm + python3 + pip, bootstrapped with mmdebstrap and
``docker import``-ed once per machine, found by tag afterwards (about a minute the
first time).
"""

from __future__ import annotations

import os

import pytest


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
    from releasekit.build.baseimage import DEFAULT_BASE, ensure_base_image
    from releasekit.docker_engine import Engine

    return ensure_base_image(Engine(docker_client), DEFAULT_BASE)
