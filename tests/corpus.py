"""The seeds' real repositories as read-only test mirrors (``shared/corpus/`` beside the checkout).

``shared/corpus/README.md`` describes the snapshots: bare, partial (promisor packs; some blobs
absent), with ``refs/pull/N/head`` refs. A test session extracts each tar once into a temporary
directory, takes every write bit away (as CI's copy of ``shared/`` has none), and hands the
directory to releasekit through ``--mirror URL=PATH`` with the manifest's real URL.

``tree_digest`` hashes a directory's names, modes and bytes, so a test can show that nothing was
written into a mirror it was only given to read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# CI lays shared/ beside the clone; RELEASEKIT_TEST_CORPUS points elsewhere on a workstation.
CORPUS_DIR = Path(os.environ.get("RELEASEKIT_TEST_CORPUS", REPO.parent / "shared" / "corpus"))

# Snapshot name -> the repository URL the manifests name.
URLS = {
    "tokenspeed": "https://github.com/lightseekorg/tokenspeed",
    "b12x": "https://github.com/local-inference-lab/b12x",
}


@dataclass(frozen=True)
class Corpus:
    """The extracted, read-only snapshots of one test session."""

    root: Path

    def path(self, name: str) -> Path:
        return self.root / f"{name}.git"

    def url(self, name: str) -> str:
        return URLS[name]

    def mirror_args(self, *names: str) -> list[str]:
        args: list[str] = []
        for name in names:
            args += ["--mirror", f"{URLS[name]}={self.path(name)}"]
        return args

    def git(self, name: str, *args: str) -> str:
        """Run git read-only in a snapshot (no system or global config) and return its stdout."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
        }
        return subprocess.run(
            ["git", "--git-dir", str(self.path(name)), *args],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        ).stdout

    def conflicted_files(self, name: str, first: str, second: str) -> list[str]:
        """The files git's own merge of two commits conflicts in (``git merge-tree --write-tree``),
        [] when it merges cleanly. The merge's objects go to a temporary object directory that
        borrows the snapshot's: the snapshot (read-only, but not to root) is never written."""
        with tempfile.TemporaryDirectory(prefix="corpus-merge-") as scratch:
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(self.root),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_OBJECT_DIRECTORY": scratch,
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.path(name) / "objects"),
            }
            argv = ["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", first, second]
            proc = subprocess.run(
                ["git", "--git-dir", str(self.path(name)), *argv], capture_output=True, env=env
            )
        files = [entry.decode() for entry in proc.stdout.split(b"\0")[1:] if entry]
        assert proc.returncode == (1 if files else 0), proc.stderr
        return files


def corpus_tars() -> dict[str, Path]:
    return {name: CORPUS_DIR / f"{name}.git.tar" for name in URLS}


def extract(dest: Path) -> Corpus:
    """Extract every snapshot under ``dest`` and remove all write bits."""
    for name, tar in corpus_tars().items():
        with tarfile.open(tar) as archive:
            archive.extractall(dest, filter="data")
        _set_writable(dest / f"{name}.git", writable=False)
    return Corpus(dest)


def release(corpus: Corpus) -> None:
    """Give the write bits back so the temporary directory can be removed."""
    for name in URLS:
        if corpus.path(name).exists():
            _set_writable(corpus.path(name), writable=True)


def _set_writable(top: Path, *, writable: bool) -> None:
    for dirpath, dirnames, filenames in os.walk(top):
        for entry in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            mode = os.lstat(entry).st_mode
            if stat.S_ISLNK(mode):
                continue
            bits = stat.S_IMODE(mode)
            os.chmod(entry, bits | stat.S_IWUSR if writable else bits & ~0o222)


def tree_digest(top: Path) -> str:
    """sha256 over every entry's relative name, type, mode and content, in sorted order."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            info = os.lstat(full)
            digest.update(f"{os.path.relpath(full, top)}\0{info.st_mode:o}\0".encode())
            if stat.S_ISREG(info.st_mode):
                with open(full, "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
            elif stat.S_ISLNK(info.st_mode):
                digest.update(os.readlink(full).encode())
    return digest.hexdigest()


def run_rehearsal(script: Path, snapshot: Path, work: Path, steps: tuple[str, ...]) -> None:
    """Run a ``benchmarks/rehearsal_seed*.sh`` on ``snapshot`` into ``work``: it must exit 0 (every
    step's exit code as its header expects), without a traceback, running exactly ``steps``."""
    import re
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    env = {key: value for key, value in os.environ.items() if key != "RELEASEKIT_MIRRORS"}
    env |= {"PYTHON": sys.executable, "PYTHONPATH": str(repo)}
    proc = subprocess.run(
        ["bash", str(script), str(snapshot), str(work)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work.parent,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    ran = [match.group(1) for match in re.finditer(r"^(\S+) +exit \d+ ", proc.stdout, re.MULTILINE)]
    assert ran == list(steps)
    # The manifest copy names the engine image the code builds, not the committed placeholder.
    for manifest in (work / "manifests").glob("*.yaml"):
        assert "releasekit/vllm-cpu:engine-image-tag" not in manifest.read_text(encoding="utf-8")


# pip check's two lines (pip/_internal/commands/check.py): a requirement not installed, one in conflict.
_PIP_MISSING = re.compile(r"^(\S+) (\S+) requires (\S+), which is not installed\.$")
_PIP_CONFLICT = re.compile(r"^(\S+) (\S+) has requirement (.+), but you have (\S+) (\S+)\.$")


def pip_check(docker_client: Any, image: str) -> set[tuple[str, str, str]]:
    """``pip check`` run in a container of ``image`` (no network): (distribution, required name, code)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out = docker_client.containers.run(
        image,
        [],
        entrypoint=["sh", "-c", "python3 -m pip check 2>&1 || true"],
        remove=True,
        network_disabled=True,
    ).decode()
    found: set[tuple[str, str, str]] = set()
    for line in out.splitlines():
        if missing := _PIP_MISSING.match(line):
            found.add(
                (canonicalize_name(missing[1]), canonicalize_name(missing[3]), "REQUIREMENT_NOT_INSTALLED")
            )
        elif conflict := _PIP_CONFLICT.match(line):
            name = canonicalize_name(Requirement(conflict[3]).name)
            found.add((canonicalize_name(conflict[1]), name, "REQUIREMENT_CONFLICT"))
        else:
            assert line.startswith("No broken requirements") or "is not supported on this platform" in line, (
                line
            )
    return found


def summary_requirements(summary: Path) -> tuple[set[tuple[str, str, str]], set[str]]:
    """What verify-provenance's requirements check wrote into ``summary`` as pip check would say it
    (an accepted one by the code it would have had; those reached only through a requirer's extra,
    which pip check does not follow, left out), and the codes it used."""
    from packaging.utils import canonicalize_name

    data = json.loads(summary.read_text(encoding="utf-8"))
    found: set[tuple[str, str, str]] = set()
    codes: set[str] = set()
    for finding in data["predicate"]["releasekit"]["findings"]:
        code, message = finding["code"], finding["message"]
        if code not in ("REQUIREMENT_NOT_INSTALLED", "REQUIREMENT_CONFLICT", "REQUIREMENT_ACCEPTED"):
            continue
        codes.add(code)
        if "; through extra [" in message:
            continue
        if code == "REQUIREMENT_ACCEPTED":
            code = "REQUIREMENT_NOT_INSTALLED" if "(not installed" in message else "REQUIREMENT_CONFLICT"
        dist = canonicalize_name(message.split(" ", 1)[0])
        found.add((dist, finding["location"]["field"], code))
    return found, codes
