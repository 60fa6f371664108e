"""Dockerfiles (release scope): shell installs in ``RUN``, ``ARG``/``ENV`` version variables, and
``FROM`` image tags that name a pinned package's version (``FROM base:cu130-flashinfer-0.6.16``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from packaging.utils import canonicalize_name

from releasekit.plan.pins.interface import Found, InputFile, Stated
from releasekit.plan.pins.shell import shell_installs, version_variables
from releasekit.plan.pins.text import same_version, strip_comment

# A tag's version: release segments, then pre/post/dev parts (0.6.16, 2.5.0.post20260810, 1.0rc1).
_TAG_VERSION = r"v?(?P<version>[0-9]+(?:\.[0-9]+)+(?:[.]?(?:a|b|rc|post|dev)[0-9]+)*)"


def _tag_aliases(package: str) -> list[str]:
    """How an image tag may name a package: its name, without a trailing python/py, its last words."""
    words = [w for w in re.split(r"[-_.]+", canonicalize_name(package)) if w]
    aliases = {"-".join(words)}
    if len(words) > 1 and words[-1] in ("python", "py"):
        aliases.add("-".join(words[:-1]))
    for start in range(1, len(words) - 1):
        aliases.add("-".join(words[start:]))
    return sorted(aliases, key=len, reverse=True)


def _from_tags(source: InputFile) -> None:
    """Record in ``source.stated`` each ``FROM`` tag that names a pinned package's version."""
    for lineno, raw in enumerate(source.lines, start=1):
        m = re.match(r"^\s*FROM\s+(?:--\S+\s+)*(?P<image>\S+)", strip_comment(raw), re.IGNORECASE)
        if not m:
            continue
        image = m.group("image").split("@", 1)[0]
        last = image.rsplit("/", 1)[-1]
        if ":" not in last or "$" in last:
            continue  # no tag, or a variable (checked where the variable is set)
        tag = last.split(":", 1)[1].lower()
        for want in source.wanted:
            if "release" not in want.scopes:
                continue
            for alias in _tag_aliases(want.package):
                name = "[-_.]".join(re.escape(w) for w in alias.split("-"))
                hit = re.search(rf"(?:^|[-_.]){name}[-_]?{_TAG_VERSION}(?=$|[-_+])", tag)
                if hit is None:
                    continue
                found = Found(source.path, lineno, f"FROM {m.group('image')}", "release")
                agrees = same_version(hit.group("version"), want.version)
                source.stated.append(Stated(found, want, f"FROM tag {tag}", agrees))
                break


class Dockerfile:
    kind = "dockerfile"

    def claims(self, path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        return (
            name == "Dockerfile"
            or name.startswith("Dockerfile.")
            or name.endswith((".Dockerfile", ".dockerfile"))
            or name.endswith("Containerfile")
        )

    def read(self, source: InputFile) -> Iterator[Found]:
        yield from shell_installs(source, source.lines)
        version_variables(source, any_assignment=False)
        _from_tags(source)


SOURCE = Dockerfile()
