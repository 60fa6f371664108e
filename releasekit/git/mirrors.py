"""Where to read a repository from instead of its URL: ``--mirror URL=PATH`` and ``RELEASEKIT_MIRRORS``.

A manifest names each repository by its public URL, and everything releasekit writes
(lock, plan-check.json, labels) keeps that URL. A mirror only changes where the objects
and refs come from: a local repository (bare or not) holding a copy of the remote, such
as a team's shared mirror or a snapshot without network access.

Two sources, merged (the command line wins for the same URL):

- ``RELEASEKIT_MIRRORS``: the path of a file of ``URL=PATH`` lines (``#`` comments and
  blank lines ignored; a relative PATH is relative to the file's folder);
- ``--mirror URL=PATH`` (repeatable) on the commands that reach repositories, and on the
  root command (``releasekit --mirror URL=PATH build …``) for every other one.

URLs match after dropping a trailing ``/`` and ``.git``, and credentials.

Offline (``--offline``, ``RELEASEKIT_OFFLINE=1``): nothing is read from the network at all.
A repository URL without a mirror is refused where it would be fetched (``OfflineNoMirror``,
naming it), and the forge is not asked (``forge/bounded_http.py``).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path

from releasekit.bounded_read import read_bounded
from releasekit.errors import InputError
from releasekit.git.remote import strip_credentials

MIRRORS_ENV = "RELEASEKIT_MIRRORS"
MIRRORS_MAX_BYTES = 1 << 20
OFFLINE_ENV = "RELEASEKIT_OFFLINE"
# How close a RELEASEKIT_MIRRORS entry and an unmirrored URL of the command (same host) must be
# for the entry to count as a mistyped name of it: ``…/tokenspeeed`` for ``…/tokenspeed`` is one
# edit; ``…/vllm`` for ``…/vllm-old`` (another repository) is four.
_MISTYPE_EDITS = 2

# URL key -> mirror path, from --mirror options of this process.
_GIVEN: dict[str, Path] = {}
# [True] once --offline was given to this process (RELEASEKIT_OFFLINE=1 is read each time).
_OFFLINE: list[bool] = []


class OfflineNoMirror(InputError):
    """Offline, a repository URL the command must read has no mirror: one line naming it."""

    def __init__(self, url: str) -> None:
        self.url = strip_credentials(url)
        super().__init__(
            f"offline: no mirror for {self.url} (give --mirror {self.url}=PATH or list it in {MIRRORS_ENV})"
        )


def set_offline(offline: bool) -> None:
    """``--offline``: this process reads no URL from the network (only from mirrors)."""
    if offline and not _OFFLINE:
        _OFFLINE.append(True)


def is_offline() -> bool:
    """``--offline`` was given, or ``RELEASEKIT_OFFLINE`` is ``1`` (or ``true``/``yes``)."""
    return bool(_OFFLINE) or os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes")


def use_options(mirrors: list[str], offline: bool) -> None:
    """A command's ``--mirror`` and ``--offline`` options, recorded for this process."""
    add_mirrors(mirrors)
    set_offline(offline)


def url_key(url: str) -> str:
    text = strip_credentials(url.strip()).rstrip("/")
    if text.startswith(("/", "./", "../", "~")):
        # A local path names the same repository as its file:// URL (how manifests' paths are kept).
        text = Path(text).expanduser().resolve().as_uri()
    return text[: -len(".git")] if text.endswith(".git") else text


def parse_mirror(spec: str, *, base_dir: Path | None = None, origin: str = "--mirror") -> tuple[str, Path]:
    """``URL=PATH`` -> (URL key, absolute path). InputError (one line) for anything else."""
    url, sep, path = spec.strip().partition("=")
    url, path = url.strip(), path.strip()
    if not sep or not url or not path:
        raise InputError(f"{origin} expects URL=PATH, got {spec!r}")
    where = Path(path).expanduser()
    if not where.is_absolute():
        where = (base_dir or Path.cwd()) / where
    return url_key(url), where.resolve()


def add_mirrors(specs: list[str]) -> None:
    """Record ``--mirror URL=PATH`` options for this process (every Mirror opened later uses them)."""
    for spec in specs:
        key, path = parse_mirror(spec)
        _GIVEN[key] = path


def _from_file() -> dict[str, Path]:
    name = os.environ.get(MIRRORS_ENV, "").strip()
    if not name:
        return {}
    file = Path(name).expanduser()
    try:
        # A FIFO or /dev/zero named by the variable must neither hang nor fill memory.
        text = read_bounded(file, MIRRORS_MAX_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{MIRRORS_ENV}={name}: cannot read: {type(exc).__name__}") from None
    found: dict[str, Path] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, path = parse_mirror(line, base_dir=file.resolve().parent, origin=f"{name}:{number}:")
        found[key] = path
    return found


def configured_mirrors() -> dict[str, Path]:
    """URL key -> mirror path, from ``RELEASEKIT_MIRRORS`` and ``--mirror``; InputError for a bad file."""
    return {**_from_file(), **_GIVEN}


def mirror_for(url: str) -> Path | None:
    """The local mirror to read ``url`` from, or None (fetch from the URL itself)."""
    return configured_mirrors().get(url_key(url))


def check_mirrors_named(urls: Iterable[str], *, source: str) -> None:
    """Every ``--mirror URL=PATH`` of this process names a repository the command reads (``urls``);
    one that matches none (a mistyped URL, which would send releasekit to the network) is bad input:
    exit 2, naming it and the nearest URL of ``source``. ``RELEASEKIT_MIRRORS`` is a shared list of
    many repositories, so an entry of it that matches none is refused only when it looks like a
    mistyped name of a URL of the command that has no mirror (same host, at most two edits apart)."""
    keys = {url_key(url): url for url in urls}
    for key in sorted(_GIVEN):
        if key in keys:
            continue
        nearest = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.0)
        near = f"; the nearest is {keys[nearest[0]]}" if nearest else f"; {source} names no repository"
        raise InputError(f"--mirror {key}=…: no repository of {source} has that URL{near}")
    listed = _from_file()
    unmirrored = sorted(k for k in keys if k not in listed and k not in _GIVEN)
    for key in sorted(listed):
        if key in keys or key in _GIVEN:
            continue
        close = [k for k in unmirrored if _host(k) == _host(key) and _edits(k, key) <= _MISTYPE_EDITS]
        if close:
            raise InputError(
                f"{MIRRORS_ENV} entry {key}=…: no repository of {source} has that URL; "
                f"the nearest is {keys[close[0]]}, which has no mirror"
            )


def _edits(a: str, b: str) -> int:
    """The Levenshtein distance of two URL keys (insertions, deletions, substitutions)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _host(key: str) -> str:
    rest = key.split("://", 1)[-1]
    return rest.split("/", 1)[0].rsplit("@", 1)[-1].lower()
