"""The one adapter to the Docker Engine: nothing else in releasekit imports ``docker``.

- ``client``: connect (a one-line EnvironmentProblem when no engine answers), the ``Engine`` handle, and
  ``LazyEngine``, reached on first use (what a command hands a library that needs it on some paths only);
- ``images``: inspect (``ImageFacts``), exists, load, save, tag, remove, import;
- ``containers``: create from a ``ContainerSpec``, start/wait/logs/kill/remove (device requests, shm size), run with a
  timeout, sandboxed runs (component code: ``run_sandboxed``), the export stream of a never-started
  container;
- ``registry``: push, pull, credentials from the Docker config.

The SDK is imported lazily inside these functions.
"""

from __future__ import annotations

from releasekit.docker_engine.client import START_HINT, Engine, LazyEngine, connect, sdk_client
from releasekit.docker_engine.containers import Container, ContainerSpec, RunResult, Sandbox
from releasekit.docker_engine.errors import ContainerTimeout, EngineError, EngineUnreachable, NoSuchImage
from releasekit.docker_engine.images import ImageFacts
from releasekit.docker_engine.registry import config_credentials

__all__ = [
    "START_HINT",
    "Container",
    "ContainerSpec",
    "ContainerTimeout",
    "Engine",
    "EngineError",
    "EngineUnreachable",
    "ImageFacts",
    "LazyEngine",
    "NoSuchImage",
    "RunResult",
    "Sandbox",
    "config_credentials",
    "connect",
    "sdk_client",
]
