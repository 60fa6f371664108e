"""RELEASE.md: the release documentation seed 003 step 3 asks for, rendered from a template.

Besides the image and its components it lists what a release engineer reads first: which
pull requests were merged (number, head, how each landed), which were superseded, closed
or excluded, and what the release-only audit found. How each PR landed and the audit come
from ``plan-check.json`` (``releasekit.records.plan_check``) when ``plan check --output``
wrote one into the release directory for this lock (the workflow runs it before build);
without it, the lock's PRs and heads are listed and the landing is "not checked".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jinja2

from releasekit.builder.labels import source_unverified
from releasekit.manifest.models import AcceptedRequirement, Exclusion, Manifest, RuntimeSwitch
from releasekit.records.build import BuildRecord
from releasekit.records.lock import Lock
from releasekit.records.plan_check import PlanCheckResult, ReleaseOnlyReport
from releasekit.report.markdown import BLANK, table


@dataclass
class PRLine:
    component: str
    number: int
    title: str
    head: str
    role: str
    landed: str  # how and where it landed, or why not known
    codes: str = ""
    forge: str = "not read"  # the PR's state on the forge as the lock recorded it


@dataclass
class ReleaseNotesPlan:
    """The merge-plan part of RELEASE.md, gathered from the lock, the manifest and plan-check.json."""

    merged: list[PRLine] = field(default_factory=list)
    not_merged: list[PRLine] = field(default_factory=list)  # superseded, closed
    exclusions: list[Exclusion] = field(default_factory=list)
    release_only: list[ReleaseOnlyReport] = field(default_factory=list)
    plan_check: str = "not run"  # "passed" / "failed" / "not run" / a reason it was not used
    # From the manifest: requirements accepted unmet (verify-provenance's requirements check), the
    # runtime switches the release sets on purpose, and each validation cell's own env.
    accepted_requirements: list[AcceptedRequirement] = field(default_factory=list)
    runtime_switches: list[RuntimeSwitch] = field(default_factory=list)
    cell_env: list[tuple[str, dict[str, str]]] = field(default_factory=list)


def with_manifest(plan: ReleaseNotesPlan, manifest: Manifest) -> ReleaseNotesPlan:
    """``plan`` with what the manifest accepts and declares (issue 44): shown, never failed."""
    plan.accepted_requirements = list(manifest.policy.accepted_requirements)
    plan.runtime_switches = list(manifest.policy.runtime_switches)
    plan.cell_env = [
        (cell.id, dict(sorted(cell.env.items()))) for cell in manifest.validation.cells if cell.env
    ]
    return plan


def _landed(
    arrival: str | None,
    inside: int | None,
    how: str | None,
    at: str | None,
    *,
    state: str,
    acknowledged: bool = False,
) -> str:
    if state not in ("merged",):
        return state
    words = {
        "merge": "own merge",
        "fast-forward": "fast-forward",
        "squash": "squash",
        "rebase": "rebase / cherry-pick",
    }
    text = (
        f"inside #{inside}" if arrival == "inside" and inside else words.get(arrival or "", how or "merged")
    )
    if acknowledged:
        text += f" (no merge of its own; acknowledged in the manifest: `arrived_in: {inside}`)"
    elif arrival == "inside":
        text += " (no merge of its own, not acknowledged)"
    return f"{text} at `{at[:12]}`" if at else text


def _forge_state(lock: Lock, component: str, number: int) -> str:
    comp = lock.forge.component(component) if lock.forge else None
    if comp is None:
        return "not read (lock without forge data)"
    if comp.status != "read":
        return f"not read ({comp.reason})"
    pr = next((p for p in comp.pull_requests if p.number == number), None)
    if pr is None:
        return "not read"
    if not pr.found:
        return "not found (404)"
    words: list[str] = [pr.state or "?"]
    if pr.draft:
        words.append("draft")
    if pr.base_ref:
        words.append(f"into {pr.base_ref}")
    if pr.state == "merged" and pr.merge_commit_sha:
        words.append(f"as `{pr.merge_commit_sha[:12]}`")
    return ", ".join(words)


def notes_plan(
    lock: Lock, exclusions: list[Exclusion], plan_check: PlanCheckResult | None, lock_sha256: str
) -> ReleaseNotesPlan:
    plan = ReleaseNotesPlan(exclusions=list(exclusions))
    usable = plan_check is not None and plan_check.lock_sha256 in (None, lock_sha256)
    if plan_check is not None and not usable:
        plan.plan_check = "plan-check.json is for another lock: not used"
    elif plan_check is not None:
        plan.plan_check = "passed" if plan_check.passed else "failed"
        plan.release_only = list(plan_check.release_only)
    statuses = {}
    if usable and plan_check is not None:
        statuses = {
            (c.component, s.pr, s.role): s
            for c in plan_check.components
            for s in c.statuses
            if s.pr is not None
        }
    for name, comp in lock.git_components().items():
        for pr in comp.pull_requests:
            st = statuses.get((name, pr.number, pr.role))
            if st is None:
                landed = "not checked (no plan-check.json)"
                codes = ""
            else:
                landed = _landed(
                    st.arrival,
                    st.arrived_inside,
                    st.how,
                    st.landed_at,
                    state=st.state,
                    acknowledged=st.arrival_acknowledged,
                )
                codes = ", ".join(st.codes)
            line = PRLine(
                name,
                pr.number,
                pr.title or "",
                pr.head,
                pr.role,
                landed,
                codes,
                _forge_state(lock, name, pr.number),
            )
            (plan.merged if pr.role in ("planned", "already_canonical") else plan.not_merged).append(line)
    return plan


TEMPLATE = """\
# Release {{ r.name }}

Image `{{ r.image_id }}`{% if r.image_tag %} tagged `{{ r.image_tag }}`{% endif %}, created {{ r.image.created }}
(SOURCE_DATE_EPOCH {{ r.image.source_date_epoch }}).

- Lock sha256: `{{ r.lock_sha256 }}`
- Manifest sha256: `{{ r.manifest_sha256 }}`
- Base image: `{{ r.base_image.name }}` {{ r.base_image.digest or r.base_image.image_id }}

## Toolchain

{{ t.toolchain }}

## Components

{{ t.components }}

{% for c in r.components if c.built %}
{% if loop.first %}## Built from fresh checkouts

{% endif %}
- **{{ c.name }}**: `{{ c.wheel_filename }}` from `{{ c.repo }}` at `{{ c.commit }}` (tree `{{ c.tree }}`)
{%- if c.native_arches %}, CUDA code for {{ c.native_arches | join(", ") }}{% endif %}.
{% if c.version_policy == "static" %}
  Version policy **static** ({{ c.version_policy_reason }}): the version `{{ c.version }}` does not name the commit;
  the commit is proven by the image labels, the provenance and the source-blob check of verify-provenance.
{% elif c.version_policy == "stamp" %}
  Version policy **stamp** ({{ c.version_policy_reason }}): releasekit stamped `{{ c.version }}` at build time
{%- for m in c.modifications %}; {% if m.path %}`{{ m.path }}` sha256 {{ m.before_sha256[:12] }} -> {{ m.after_sha256[:12] }}{% else %}`{{ m.variable }}={{ m.value }}`{% endif %}{% endfor %}.
{% endif %}
{% endfor %}

{% if p.accepted_requirements %}
## Requirements accepted unmet

verify-provenance names every requirement the image does not meet; the manifest accepts these
(`policy.accepted_requirements`), so they are shown, not failed:

{% for a in p.accepted_requirements %}
- {% for n in a.requirements %}`{{ n }}`{{ ", " if not loop.last }}{% endfor %}{% if a.required_by %} required by `{{ a.required_by }}`{% endif %}: {{ a.reason }}
{% endfor %}

{% endif %}
{% if p.runtime_switches or p.cell_env %}
## Runtime switches

{% for w in p.runtime_switches %}
{% if loop.first %}Declared by the manifest (`policy.runtime_switches`), set on purpose:

{% endif %}
- `{{ w.name }}{% if w.value is not none %}={{ w.value }}{% endif %}`: {{ w.reason }}
{% endfor %}
{% for cell, env in p.cell_env %}
{% if loop.first %}

Set by validation cells (their `env`, as each receipt records it in `invocation.cell_env`):

{% endif %}
- cell `{{ cell }}`: {% for k, v in env.items() %}`{{ k }}={{ v }}`{{ ", " if not loop.last }}{% endfor %}

{% endfor %}

{% endif %}
## Pull requests

Plan check: {{ p.plan_check }}.

{{ t.merged }}

{% if p.not_merged %}
### Superseded and closed (must not be merged)

{{ t.not_merged }}

{% endif %}
{% if p.exclusions %}
### Excluded changes

{% for e in p.exclusions %}
- **{{ e.id }}** ({{ e.disposition }}{% if e.component %}, {{ e.component }}{% endif %}): {{ e.description }}. {{ e.reason }}
{% endfor %}

{% endif %}
## Release-only audit

{% for r in p.release_only %}
- `{{ r.release }}` (`{{ r.release_commit[:12] }}`) against `{{ r.canonical }}`: {{ r.examined }} commits examined,
  {{ r.equivalent }} with a patch-equivalent on canonical, {{ r.release_only | length }} release-only.
{% for c in r.release_only %}
  - `{{ c.commit[:12] }}` {{ c.subject }}{% if c.carried_by %}: carried onto canonical by #{{ c.carried_by }}{% else %}: **on the release side only**{% endif %}

{% endfor %}
{% else %}
No release branch was audited{% if p.plan_check == "not run" %} (no plan-check.json given with --plan-check, in the release directory or beside the lock){% endif %}.
{% endfor %}
"""


def _tables(record: BuildRecord, plan: ReleaseNotesPlan) -> dict[str, str]:
    """The template's tables, each written by ``report.markdown.table`` (no trailing newline)."""
    tool = record.toolchain
    arches = tool.get("cuda_arch_list") or []
    toolchain = [
        ("CUDA", tool.get("cuda") or "not pinned"),
        ("NCCL", tool.get("nccl") or "not pinned"),
        ("PyTorch", tool.get("pytorch") or "not pinned"),
        ("CUDA arch list", ", ".join(map(str, arches if isinstance(arches, list) else [])) or "none"),
    ]
    components = [
        (
            c.name,
            c.repo or "",
            _commit(record, c.name, c.commit),
            c.version or "",
            c.wheel_sha256 or "not built",
        )
        for c in record.components
    ]
    merged: list[tuple[object, ...]] = [
        (
            pr.component,
            f"#{pr.number}",
            pr.title,
            f"`{pr.head[:12]}`",
            pr.role,
            pr.landed,
            pr.forge,
            pr.codes or "-",
        )
        for pr in plan.merged
    ] or [(BLANK, BLANK, "no merge plan", BLANK, BLANK, BLANK, BLANK, BLANK)]
    not_merged = [
        (pr.component, f"#{pr.number}", f"`{pr.head[:12]}`", pr.role, pr.landed, pr.forge)
        for pr in plan.not_merged
    ]
    pr_columns = ("component", "PR", "title", "head", "role", "how it landed", "on the forge", "findings")
    tables = {
        "toolchain": table((BLANK, "version"), toolchain),
        "components": table(("component", "repository", "commit", "version", "wheel sha256"), components),
        "merged": table(pr_columns, merged),
        "not_merged": table(("component", "PR", "head", "role", "on canonical", "on the forge"), not_merged),
    }
    return {name: "\n".join(lines) for name, lines in tables.items()}


def _commit(record: BuildRecord, name: str, commit: str | None) -> str:
    """A component's commit; a wheel's whose source plan lock could not read is marked unverified."""
    if source_unverified(record.labels, name):
        return f"{commit or 'unknown'} (source unverified: WHEEL_SOURCE_UNVERIFIED)"
    return commit or ""


def render_release_notes(record: BuildRecord, plan: ReleaseNotesPlan | None = None) -> str:
    env = jinja2.Environment(
        trim_blocks=True, lstrip_blocks=True, autoescape=False, undefined=jinja2.StrictUndefined
    )  # noqa: S701
    plan = plan or ReleaseNotesPlan()
    return env.from_string(TEMPLATE).render(r=record, p=plan, t=_tables(record, plan))
