"""Errors in their documented form (issue 44): one line on stderr and exit 2, never an internal error
or another error's hint.

- ``stage --image <absent>``: a Docker Engine on 127.0.0.1 (an HTTP server speaking the Engine API's
  ping and image inspect) that has no such image;
- ``audit release-only --repo <absent path>``: "no such repository", not the local-path hint;
- a rehearsal script run with a ``PYTHON`` that cannot import releasekit: said so before any Docker work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import Release

REPO = Path(__file__).resolve().parent.parent


class _NoImagesEngine(BaseHTTPRequestHandler):
    """The Engine API's answers to ping (OK) and to every image inspect (404: no such image)."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if path.endswith("/_ping"):
            self._answer(200, b"OK", "text/plain")
        elif path.endswith("/version"):
            self._answer(
                200, json.dumps({"ApiVersion": "1.44", "Version": "25.0.0"}).encode(), "application/json"
            )
        elif "/images/" in path and path.endswith("/json"):
            name = path.split("/images/", 1)[1][: -len("/json")]
            self._answer(404, json.dumps({"message": f"No such image: {name}"}).encode(), "application/json")
        else:
            self._answer(404, b'{"message": "page not found"}', "application/json")

    do_HEAD = do_GET  # noqa: N815 - http.server's name

    def _answer(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Api-Version", "1.44")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def empty_engine() -> Iterator[str]:
    """DOCKER_HOST of an engine on 127.0.0.1 that holds no image."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoImagesEngine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_stage_of_an_absent_image_is_one_line_exit_2(tmp_path: Path, empty_engine: str) -> None:
    release = Release(tmp_path / "rel", "sha256:" + "1" * 64)
    r = invoke(
        *("stage", "--image", "releasekit/absent:1", "--lock", str(release.lock)),
        *("--staging", "127.0.0.1:9/team/a"),
        env={"DOCKER_HOST": empty_engine, "DOCKER_TLS_VERIFY": None, "DOCKER_CERT_PATH": None},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in r.stderr, r.stderr
    assert "no image 'releasekit/absent:1'" in lines[0], r.stderr


@pytest.mark.parametrize("script", ["rehearsal_seed000.sh", "rehearsal_seed003.sh"])
@pytest.mark.parametrize("python", ["isolated", "false"])
def test_a_rehearsal_with_a_python_that_lacks_releasekit_says_so(
    tmp_path: Path, script: str, python: str
) -> None:
    """The script's process is the subject: ``PYTHON`` names an interpreter that cannot import releasekit
    (``python -I -S`` ignores the PYTHONPATH the script sets; ``/usr/bin/false`` is no Python at all).
    It says so in one line, exit 2, before any Docker work (DOCKER_HOST names no engine)."""
    if python == "isolated":
        wrapper = tmp_path / "python-without-releasekit"
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n', encoding="utf-8")
        wrapper.chmod(0o755)
        interpreter = str(wrapper)
    else:
        interpreter = "false"
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    env = {**os.environ, "PYTHON": interpreter, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    r = subprocess.run(
        ["bash", str(REPO / "benchmarks" / script), str(snapshot), str(tmp_path / "work")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"releasekit cannot be imported by PYTHON={interpreter}" in lines[0], r.stderr
    assert "engine image" not in r.stdout + r.stderr
