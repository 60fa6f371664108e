"""Objects checked by content: each object a commit's checkout reads hashes to its own name.

git does not check a loose object's hash when it reads it: whoever can write a repository's
``objects/`` (a mirror the build filled, on the runner the verifier shares) can put other bytes
under a locked blob's or tree's name, and ``cat-file``, ``ls-tree`` and ``checkout`` return them.
``verify_commit_objects`` reads the commit, its root tree and every tree (and, with ``blobs``,
every blob) below it through one ``git cat-file --batch`` and hashes each one here: the object
id is the hash of ``<type> <size>\\0<content>``, so a commit whose id is locked proves its tree,
each verified tree the ids it lists, down to every blob.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile

from releasekit.errors import InputError
from releasekit.git.runner import Git, GitFailed, git_env

_CHUNK = 1 << 20


class ObjectMismatch(InputError):
    """An object's content does not hash to its name."""


def _listed(git: Git, commit: str, blobs: bool) -> list[str]:
    root = git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{tree}}").strip()
    out = git.run("ls-tree", "-r", "-t", "-z", "--full-tree", "--end-of-options", commit)
    ids = [commit, root]
    for item in out.split("\0"):
        meta, _, _path = item.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and (parts[1] == "tree" or (blobs and parts[1] == "blob")):
            ids.append(parts[2])
    return list(dict.fromkeys(ids))


def _read_exact(stream, size: int, digest) -> bytes:  # noqa: ANN001 - a pipe and a hashlib object
    """Feed ``size`` bytes of ``stream`` to ``digest``; returns the first 64 KiB (a commit's header is there)."""
    head = b""
    left = size
    while left:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            raise InputError("git cat-file --batch ended inside an object")
        if len(head) < 65536:
            head += chunk[: 65536 - len(head)]
        digest.update(chunk)
        left -= len(chunk)
    return head


def verify_commit_objects(git: Git, commit: str, *, blobs: bool = True) -> None:
    """ObjectMismatch unless the commit, its trees and (``blobs``) its blobs each hash to their ids."""
    ids = _listed(git, commit, blobs)
    with tempfile.TemporaryFile() as names:
        names.write(("\n".join(ids) + "\n").encode())
        names.seek(0)
        proc = subprocess.Popen(
            git.argv(["cat-file", "--batch"]),
            stdin=names,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=git_env(),
        )
        assert proc.stdout is not None
        try:
            for oid in ids:
                header = proc.stdout.readline().decode(errors="replace").split()
                if len(header) != 3 or header[0] != oid:
                    raise ObjectMismatch(f"{git.label}: object {oid} is missing ({' '.join(header)})")
                kind, size = header[1], int(header[2])
                digest = hashlib.sha256() if len(oid) == 64 else hashlib.sha1()
                digest.update(f"{kind} {size}\0".encode())
                head = _read_exact(proc.stdout, size, digest)
                proc.stdout.read(1)  # the newline after each object
                if digest.hexdigest() != oid:
                    raise ObjectMismatch(
                        f"{git.label}: {kind} {oid} does not hash to its name "
                        f"(its content is {digest.hexdigest()}): the repository's objects were rewritten"
                    )
                if oid == commit and not head.startswith(f"tree {ids[1]}\n".encode()):
                    raise ObjectMismatch(f"{git.label}: commit {commit} does not name tree {ids[1]}")
        finally:
            proc.stdout.close()
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if proc.stderr:
                proc.stderr.close()
            code = proc.wait()
        if code != 0:
            raise GitFailed(["cat-file", "--batch"], code, err, where=git.label)
