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

import jinja2
from pydantic import BaseModel, Field

from releasekit.errors import InputError
from releasekit.findings import Findings

# The repository's dockerfiles/ (an editable install, as CI and the README set up).
TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "dockerfiles"
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
        where = {"file": name, "line": ins.line}
        if ins.keyword == "FROM" and not re.search(r"@sha256:[0-9a-f]{64}(\s|$)", ins.args):
            findings.add("DOCKERFILE_BASE_NOT_BY_DIGEST", f"FROM {ins.args}: the base image must be named by digest", **where)
        if ins.keyword in ("COPY", "ADD"):
            if "--from" in ins.args:
                findings.add("DOCKERFILE_COPIES_SOURCE", f"{ins.keyword} --from copies another stage's files", **where)
                continue
            for src in _copy_sources(ins.args):
                clean = src.removeprefix("./")
                if "://" in clean or not (clean == WHEELS_CONTEXT or (clean.startswith(WHEELS_CONTEXT) and clean.endswith(".whl"))):
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
