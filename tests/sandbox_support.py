"""The build sandbox of a venv recipe, for tests that call ``build_wheel`` directly: the shared base image."""

from __future__ import annotations

from releasekit.builder.wheel import Builder
from releasekit.docker_engine import Engine


def base_sandbox(docker_client, base_image, *, native: bool = False) -> Builder:
    """What ``releasekit build`` builds a ``kind: venv`` recipe in: a fresh venv in the base image."""
    return Builder(
        engine=Engine(docker_client),
        name=base_image.name,
        image_id=base_image.image_id,
        venv=True,
        host_toolchain=native,
    )
