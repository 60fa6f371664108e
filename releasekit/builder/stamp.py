"""Version policies at build time: make the version name the commit (``stamp``), or leave it (``static``).

``stamp`` changes the fresh checkout's build copy by the component's own mechanism and
returns what it changed, so that the change is a declared build-time modification in
build.json and the provenance (verify-provenance then expects exactly that content):

- ``pyproject``: ``[project] version = "X.Y.Z"`` becomes ``"X.Y.Z+g<sha12>"``;
- ``file``: a version file holding ``X.Y.Z`` (or one ``__version__ = "X.Y.Z"`` line) becomes
  ``X.Y.Z+g<sha12>``; with ``pyproject``, ``file`` names a second file stamped alike;
- ``setuptools-scm``: ``SETUPTOOLS_SCM_PRETEND_VERSION=<base>+g<sha12>`` (no file changes);
- ``env``: the declared variable is set to ``<base>+g<sha12>`` (no file changes).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from releasekit.errors import BuildFailed, InputError
from releasekit.manifest.models import BuildRecipe, VersionPolicy

SHORT = 12
_STATIC_VERSION = re.compile(r'^(?P<lead>version\s*=\s*)(?P<q>["\'])(?P<v>[^"\']+)(?P=q)', re.MULTILINE)
_PLAIN_VERSION = re.compile(r"^[0-9][0-9A-Za-z.!_-]*$")
_ASSIGNED_VERSION = re.compile(
    r'^(?:__version__|VERSION|version)\s*(?::\s*str\s*)?=\s*(?P<q>["\'])(?P<v>[0-9][^"\']*)(?P=q)',
    re.MULTILINE,
)


class Modification(BaseModel):
    """A declared build-time change of one source file (or of the build environment)."""

    mechanism: str  # pyproject | file | setuptools-scm | env
    path: str | None = None  # repository-relative, for file changes
    before_sha256: str | None = None
    after_sha256: str | None = None
    after_blob: str | None = None  # git blob id of the new content: what the source-blob check expects
    variable: str | None = None  # for env changes
    value: str | None = None


@dataclass
class Stamped:
    env: dict[str, str] = field(default_factory=dict)
    modifications: list[Modification] = field(default_factory=list)


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id


def local_label(commit: str) -> str:
    return f"g{commit[:SHORT]}"


def stamped_version(base: str, commit: str) -> str:
    if "+" in base:
        raise BuildFailed(
            f"version {base} already has a local label; stamping would not name the commit alone"
        )
    return f"{base}+{local_label(commit)}"


def _project_table_span(text: str) -> tuple[int, int] | None:
    start = re.search(r"^\[project\]\s*$", text, re.MULTILINE)
    if start is None:
        return None
    nxt = re.search(r"^\[", text[start.end() :], re.MULTILINE)
    return start.end(), start.end() + nxt.start() if nxt else len(text)


def static_pyproject_version(text: str) -> str | None:
    """The static ``[project] version``; None when absent or dynamic."""
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return None
    value = project.get("version")
    return value if isinstance(value, str) and "version" not in project.get("dynamic", []) else None


def _rewrite_file(
    project: Path, root: Path, rel: str, policy: VersionPolicy, *, commit: str, component: str
) -> Modification:
    path = project / rel
    if not path.is_file():
        raise BuildFailed(
            f"{component}: version policy stamp: {policy.stamp} names {rel}, which the checkout lacks"
        )
    before = path.read_bytes()
    text = before.decode("utf-8")
    if policy.stamp == "pyproject":
        span = _project_table_span(text)
        match = _STATIC_VERSION.search(text, *span) if span else None
        if match is None or static_pyproject_version(text) is None:
            raise BuildFailed(f"{component}: pyproject.toml has no static [project] version to stamp")
        new = stamped_version(match.group("v"), commit)
        after_text = text[: match.start("v")] + new + text[match.end("v") :]
    else:
        value = text.strip()
        assigned = list(_ASSIGNED_VERSION.finditer(text))
        if _PLAIN_VERSION.match(value):
            after_text = text.replace(value, stamped_version(value, commit), 1)
        elif len(assigned) == 1:
            match = assigned[0]
            after_text = (
                text[: match.start("v")] + stamped_version(match.group("v"), commit) + text[match.end("v") :]
            )
        else:
            raise BuildFailed(
                f'{component}: {rel} holds neither a plain version nor one __version__ = "X.Y.Z" line'
            )
    after = after_text.encode("utf-8")
    path.write_bytes(after)
    return Modification(
        mechanism=policy.stamp or "",
        path=str(path.relative_to(root)),
        before_sha256=hashlib.sha256(before).hexdigest(),
        after_sha256=hashlib.sha256(after).hexdigest(),
        after_blob=git_blob_id(after),
    )


def apply(recipe: BuildRecipe, source: Path, commit: str, component: str) -> Stamped:
    """Apply the recipe's version policy to the build copy at ``source``; scm and static change nothing."""
    policy = recipe.version_policy
    out = Stamped()
    if policy.policy != "stamp":
        return out
    project = source / recipe.subdirectory if recipe.subdirectory else source
    if policy.stamp == "pyproject":
        out.modifications.append(
            _rewrite_file(project, source, "pyproject.toml", policy, commit=commit, component=component)
        )
        if policy.file:
            as_file = policy.model_copy(update={"stamp": "file"})
            out.modifications.append(
                _rewrite_file(project, source, policy.file, as_file, commit=commit, component=component)
            )
    elif policy.stamp == "file":
        assert policy.file is not None
        out.modifications.append(
            _rewrite_file(project, source, policy.file, policy, commit=commit, component=component)
        )
    else:
        assert policy.base is not None
        variable = "SETUPTOOLS_SCM_PRETEND_VERSION" if policy.stamp == "setuptools-scm" else policy.variable
        assert variable is not None
        value = stamped_version(policy.base, commit)
        out.env[variable] = value
        out.modifications.append(Modification(mechanism=policy.stamp or "", variable=variable, value=value))
    return out


def planned(recipe: BuildRecipe, commit: str | None) -> tuple[dict[str, str], list[str]]:
    """What ``apply`` will do, for ``build --plan``: (environment it adds, files it changes)."""
    policy = recipe.version_policy
    label = local_label(commit) if commit else "g<sha12>"
    if policy.policy != "stamp":
        return {}, []
    if policy.stamp in ("pyproject", "file"):
        rels = (["pyproject.toml"] if policy.stamp == "pyproject" else []) + (
            [policy.file] if policy.file else []
        )
        sub = f"{recipe.subdirectory.rstrip('/')}/" if recipe.subdirectory else ""
        return {}, [f"{sub}{rel}: version X.Y.Z -> X.Y.Z+{label}" for rel in rels]
    variable = "SETUPTOOLS_SCM_PRETEND_VERSION" if policy.stamp == "setuptools-scm" else policy.variable or ""
    return {variable: f"{policy.base}+{label}"}, []


def require_commit_named(recipe: BuildRecipe) -> bool:
    """Whether the built version must carry ``+g<sha>``: under scm and stamp, not under static."""
    return recipe.version_policy.policy != "static"


def check_policy_input(recipe: BuildRecipe, component: str) -> None:
    policy = recipe.version_policy
    if (
        policy.policy == "stamp"
        and policy.stamp == "file"
        and policy.file
        and (policy.file.startswith("/") or ".." in Path(policy.file).parts)
    ):
        raise InputError(f"{component}: version file {policy.file} must be inside the project")
