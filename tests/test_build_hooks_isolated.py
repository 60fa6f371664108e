"""The venv build's PEP 517 hook runner imports nothing of releasekit (issue 24 rehearsal).

Run from releasekit/builder/, that folder was sys.path[0] of the hook runner: its module
wheel.py shadowed the ``wheel`` package, so tokenspeed's python/ (setuptools 83 + wheel)
failed in ``from wheel.wheelfile import WheelFile`` with "No module named 'pydantic'".
The project here is a real one, built by its own in-tree backend, which refuses to build
when a module of releasekit/builder/ is importable.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from sandbox_support import WHEEL_WRITER, base_sandbox

from releasekit.builder.wheel import Log, build_wheel, unmet_requirements
from releasekit.manifest.models import BuildRecipe

BACKEND = (
    WHEEL_WRITER
    + """
import importlib.util

def _refuse_releasekit():
    # releasekit/builder/ holds wheel.py, wheelfile.py and stamp.py: none may be importable here.
    for name in ("wheel", "wheelfile", "stamp"):
        spec = importlib.util.find_spec(name)
        if spec is not None and "releasekit" in (spec.origin or ""):
            raise RuntimeError(f"releasekit's {name} module is importable in the build: {spec.origin}")

def get_requires_for_build_wheel(config_settings=None):
    _refuse_releasekit()
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _refuse_releasekit()
    return write_wheel(wheel_directory, "hookcheck", {"hookcheck/__init__.py": b""})
"""
)


@pytest.mark.docker
def test_venv_hooks_do_not_see_releasekit_modules(tmp_path: Path, docker_client, base_image):
    project = tmp_path / "src" / "python"
    (project / "_backend").mkdir(parents=True)
    (project / "_backend" / "hookcheck_backend.py").write_text(BACKEND, encoding="utf-8")
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = []
            build-backend = "hookcheck_backend"
            backend-path = ["_backend"]
            """
        ),
        encoding="utf-8",
    )
    recipe = BuildRecipe.model_validate(
        {"subdirectory": "python", "version_policy": {"policy": "static", "reason": "test"}}
    )
    log = Log(tmp_path / "build.log")
    built = build_wheel(
        tmp_path / "src",
        tmp_path / "out",
        recipe=recipe,
        commit="0" * 40,
        source_date_epoch=1_700_000_000,
        arches=[],
        log=log,
        component="hookcheck",
        builder=base_sandbox(docker_client, base_image),
    )
    assert built.filename == "hookcheck-1.0-py3-none-any.whl"
    assert "importable in the build" not in log.path.read_text(encoding="utf-8")


def test_a_requirement_named_twice_is_reported_once():
    # setuptools names wheel both in build-system.requires and from get_requires_for_build_wheel.
    assert unmet_requirements(["setuptools==83.0.0", "wheel", "wheel"], []) == [
        "setuptools==83.0.0",
        "wheel",
    ]
