"""Dockerfile templates: rendering, parsing and the lint that guards what goes into an image.

Seed 003's rule is that no runtime source may exist only in an image overlay: an image
gets wheels, never a copied source tree, and never a PYTHONPATH that points around the
installed packages. The lint enforces that on the rendered template; the assembler
then takes the image's ENV, LABEL, CMD, ENTRYPOINT, WORKDIR and USER from it.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, Field

from releasekit.errors import InputError
from releasekit.findings import Findings

# Package data (releasekit/templates/): found by a plain `pip install .` as well as an editable one.
TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"
DEFAULT_TEMPLATE = "release.Dockerfile.j2"
WHEELS_CONTEXT = "wheels/"


class Instruction(BaseModel):
    line: int
    keyword: str
    args: str


class ImageSettings(BaseModel):
    """What the rendered Dockerfile says about the final image's config."""

    env: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    cmd: list[str] | None = None
    entrypoint: list[str] | None = None
    workdir: str | None = None
    user: str | None = None


def render(template: Path, context: dict) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # a Dockerfile, not HTML  # noqa: S701
    )
    try:
        return env.get_template(template.name).render(**context)
    except jinja2.TemplateError as exc:
        raise InputError(f"template {template.name}: {exc}") from None


def parse(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        joined = " ".join(p for p in pending if p and not p.startswith("#"))
        pending = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(line=start, keyword=keyword.upper(), args=args.strip()))
    return out


def _pairs(args: str) -> dict[str, str]:
    """ENV/LABEL arguments: ``k=v k2="v 2"`` or the legacy ``k v``."""
    tokens = shlex.split(args)
    if tokens and "=" not in tokens[0]:
        return {tokens[0]: " ".join(tokens[1:])}
    result: dict[str, str] = {}
    for token in tokens:
        key, _, value = token.partition("=")
        result[key] = value
    return result


def _copy_sources(args: str) -> list[str]:
    parts = json.loads(args) if args.startswith("[") else shlex.split(args)
    parts = [p for p in parts if not p.startswith("--")]
    return parts[:-1]


def lint(text: str, name: str) -> Findings:
    findings = Findings()
    for ins in parse(text):
        where: dict[str, Any] = {"file": name, "line": ins.line}
        if ins.keyword == "FROM" and not re.search(r"@sha256:[0-9a-f]{64}(\s|$)", ins.args):
            findings.add(
                "DOCKERFILE_BASE_NOT_BY_DIGEST",
                f"FROM {ins.args}: the base image must be named by digest",
                **where,
            )
        if ins.keyword in ("COPY", "ADD"):
            if "--from" in ins.args:
                findings.add(
                    "DOCKERFILE_COPIES_SOURCE", f"{ins.keyword} --from copies another stage's files", **where
                )
                continue
            for src in _copy_sources(ins.args):
                clean = src.removeprefix("./")
                if "://" in clean or not (
                    clean == WHEELS_CONTEXT or (clean.startswith(WHEELS_CONTEXT) and clean.endswith(".whl"))
                ):
                    findings.add(
                        "DOCKERFILE_COPIES_SOURCE",
                        f"{ins.keyword} {src}: only built wheels ({WHEELS_CONTEXT}) may be copied into a release image",
                        **where,
                    )
        if ins.keyword == "ENV":
            for key, value in _pairs(ins.args).items():
                if key != "PYTHONPATH":
                    continue
                bad = [p for p in value.split(":") if p and not re.search(r"/(site|dist)-packages/?$", p)]
                if bad:
                    findings.add(
                        "DOCKERFILE_PYTHONPATH",
                        f"PYTHONPATH names {', '.join(bad)}: only site-packages/dist-packages paths are allowed",
                        **where,
                    )
        if ins.keyword == "RUN" and re.search(r"\bpip\b.*\binstall\b", ins.args):
            missing = [flag for flag in ("--no-deps", "--require-hashes") if flag not in ins.args]
            if missing:
                findings.add(
                    "DOCKERFILE_INSTALL_UNPINNED",
                    f"pip install without {' and '.join(missing)}: wheels must be installed by hash, without resolving",
                    **where,
                )
    return findings


def image_settings(text: str) -> ImageSettings:
    settings = ImageSettings()
    for ins in parse(text):
        if ins.keyword == "ENV":
            settings.env.update(_pairs(ins.args))
        elif ins.keyword == "LABEL":
            settings.labels.update(_pairs(ins.args))
        elif ins.keyword in ("CMD", "ENTRYPOINT"):
            value = json.loads(ins.args) if ins.args.startswith("[") else ["/bin/sh", "-c", ins.args]
            setattr(settings, ins.keyword.lower(), value)
        elif ins.keyword == "WORKDIR":
            settings.workdir = ins.args
        elif ins.keyword == "USER":
            settings.user = ins.args
    return settings


_PIP_TOKEN_SKIP = re.compile(r"^(-|\$\{?[A-Za-z_]|install$|pip3?$|/)")


def _pip_requirements(run: str) -> list[str]:
    """The requirement arguments of each ``pip install`` in a RUN (options and paths left out)."""
    out: list[str] = []
    for part in re.split(r"&&|;|\|", run):
        try:
            tokens = shlex.split(part)
        except ValueError:
            continue
        if "install" not in tokens or not any(t.rsplit("/", 1)[-1] in ("pip", "pip3") for t in tokens):
            continue
        args = tokens[tokens.index("install") + 1 :]
        skip_next = False
        for token in args:
            if skip_next:
                skip_next = False
                continue
            if token in (
                "--index-url",
                "-i",
                "--extra-index-url",
                "-c",
                "-r",
                "--constraint",
                "--requirement",
            ):
                skip_next = True
                continue
            if _PIP_TOKEN_SKIP.match(token) or token in ("then", "fi", "else"):
                continue
            out.append(token)
    return out


def lint_builder(text: str, name: str) -> Findings:
    """Rules for builder Dockerfiles (dockerfiles/*-builder.Dockerfile): what makes a builder reproducible.

    The base is a digest or a ``BASE_IMAGE`` ARG without a default (the manifest passes it
    by digest); every pip requirement is pinned with ``==``; apt installs are
    non-interactive, without recommends, in the RUN that updated the lists and removes
    them; ADD (URLs, archives) is refused; RUN with a pipe sets ``pipefail``.
    """
    findings = Findings()
    instructions = parse(text)
    arg_defaults: dict[str, str | None] = {}
    pipefail = False
    for ins in instructions:
        where: dict[str, Any] = {"file": name, "line": ins.line}
        if ins.keyword == "ARG":
            key, eq, value = ins.args.partition("=")
            arg_defaults[key.strip()] = value.strip() if eq else None
        elif ins.keyword == "SHELL" and "pipefail" in ins.args:
            pipefail = True
        elif ins.keyword == "FROM":
            _lint_from(ins.args.split()[0], arg_defaults, findings, where)
        elif ins.keyword == "ADD":
            findings.add(
                "DOCKERFILE_ADD",
                "ADD fetches URLs and unpacks archives: use COPY of the build context",
                **where,
            )
        elif ins.keyword == "RUN":
            _lint_run(ins.args, pipefail, findings, where)
    return findings


def _lint_from(
    ref: str, arg_defaults: dict[str, str | None], findings: Findings, where: dict[str, Any]
) -> None:
    """The base is a digest, or an ARG without a default (or with a digest default)."""
    variable = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", ref)
    if variable:
        default = arg_defaults.get(variable.group(1), "")
        if default and not re.search(r"@sha256:[0-9a-f]{64}$", default):
            findings.add(
                "DOCKERFILE_BASE_NOT_BY_DIGEST",
                f"ARG {variable.group(1)} defaults to {default}, not a digest",
                **where,
            )
        elif variable.group(1) not in arg_defaults:
            findings.add(
                "DOCKERFILE_BASE_NOT_BY_DIGEST",
                f"FROM {ref}: no ARG {variable.group(1)} declared",
                **where,
            )
    elif not re.search(r"@sha256:[0-9a-f]{64}$", ref):
        findings.add(
            "DOCKERFILE_BASE_NOT_BY_DIGEST",
            f"FROM {ref}: the base image must be named by digest",
            **where,
        )


def _lint_run(args: str, pipefail: bool, findings: Findings, where: dict[str, Any]) -> None:
    """pip requirements pinned with ==; apt-get install non-interactive and cleaned up; pipes with pipefail."""
    unpinned = [r for r in _pip_requirements(args) if "==" not in r]
    if unpinned:
        findings.add(
            "DOCKERFILE_INSTALL_UNPINNED",
            f"pip install of {', '.join(unpinned)}: pin every requirement with ==",
            **where,
        )
    if re.search(r"\bapt-get\s+install\b", args):
        missing = [f for f in ("-y", "--no-install-recommends") if f not in args.split()]
        if missing:
            findings.add("DOCKERFILE_APT", f"apt-get install without {' and '.join(missing)}", **where)
        if "apt-get update" not in args or "rm -rf /var/lib/apt/lists" not in args:
            findings.add(
                "DOCKERFILE_APT",
                "apt-get install must follow apt-get update in the same RUN and remove the lists",
                **where,
            )
    if re.search(r"(?<!\|)\|(?!\|)", args) and not pipefail:
        findings.add("DOCKERFILE_PIPEFAIL", "RUN with a pipe needs SHELL [... -o pipefail ...]", **where)
