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


# The wheel writer of the tests' in-tree PEP 517 backends (source text: each backend file starts with it).
WHEEL_WRITER = """
import base64, hashlib, zipfile


def write_wheel(wheel_directory, dist, files):
    \"\"\"``files`` (path -> bytes) and the dist-info of ``dist`` 1.0 as a py3 wheel; its file name.\"\"\"
    name = f"{dist}-1.0-py3-none-any.whl"
    files = {
        **files,
        f"{dist}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\\nName: {dist}\\nVersion: 1.0\\n".encode(),
        f"{dist}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    with zipfile.ZipFile(f"{wheel_directory}/{name}", "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{dist}-1.0.dist-info/RECORD,,")
        zf.writestr(f"{dist}-1.0.dist-info/RECORD", "\\n".join(record) + "\\n")
    return name
"""
