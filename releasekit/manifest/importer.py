"""Import a merge manifest of today's tool (shared/reference/*.manifest.*.json).

That format pins one repository: a base ref, the PRs to merge in order (number, head,
title) and reviewed exclusions (number, head, disposition, reason). It becomes one git
component with a merge plan whose heads are pinned, and one exclusion per reviewed PR
(recognised by PR number and by its head commit).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ruamel.yaml import YAML

from releasekit.errors import InputError
from releasekit.manifest.models import TO_BE_LOCKED

_DISPOSITIONS = {
    "superseded": "superseded",
    "experimental": "experimental",
    "alternative": "alternative",
    "out_of_scope": "out-of-scope",
    "out-of-scope": "out-of-scope",
    "deferred": "deferred",
}


class _RefPR(BaseModel):
    model_config = ConfigDict(extra="ignore")
    number: int = Field(ge=1)
    head: str = Field(pattern=r"^[0-9a-f]{40}$")
    title: str = Field(min_length=1)


class _RefExclusion(BaseModel):
    model_config = ConfigDict(extra="ignore")
    number: int = Field(ge=1)
    head: str = Field(pattern=r"^[0-9a-f]{40}$")
    disposition: str
    reason: str = Field(min_length=1)


class _RefManifest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    schema_version: int
    name: str
    repository: str
    base_ref: str
    pull_requests: list[_RefPR]
    reviewed_exclusions: list[_RefExclusion] = Field(default_factory=list)


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out[:64] or "release"


def import_reference_manifest(
    path: Path, *, component: str = "vllm", base_image: str, cuda_arch_list: list[str]
) -> dict[str, Any]:
    """Translate the reference JSON into releasekit/v1 manifest data (a plain dict)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a JSON manifest of the reference tool: {exc}") from None
    try:
        ref = _RefManifest.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{path}: not a reference merge manifest: {where}: {err['msg']}") from None
    if ref.schema_version != 1:
        raise InputError(f"{path}: reference schema_version {ref.schema_version} is not supported (1 is)")
    branch = ref.base_ref.removeprefix("refs/heads/")
    exclusions = []
    for ex in ref.reviewed_exclusions:
        disposition = _DISPOSITIONS.get(ex.disposition.lower())
        if disposition is None:
            raise InputError(f"{path}: PR #{ex.number}: unknown disposition '{ex.disposition}'")
        exclusions.append(
            {
                "id": f"{component}-pr-{ex.number}",
                "description": f"{component} PR #{ex.number} (reviewed, not merged)",
                "component": component,
                "pr": ex.number,
                "commits": [ex.head],
                "disposition": disposition,
                "reason": ex.reason,
            }
        )
    return {
        "schema": "releasekit/v1",
        "name": _slug(ref.name),
        "description": f"Imported from the reference tool's merge manifest {path.name}",
        "sources": [path.name],
        "components": {
            component: {
                "kind": "git",
                "repo": ref.repository,
                "canonical_branch": branch,
                "merge_plan": [{"pr": p.number, "title": p.title, "head": p.head} for p in ref.pull_requests],
            }
        },
        "toolchain": {
            "base_image": {"name": base_image, "digest": TO_BE_LOCKED},
            "cuda_arch_list": cuda_arch_list,
        },
        "exclusions": exclusions,
    }


def dump_yaml(data: dict[str, Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # keep the plan's order
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()
