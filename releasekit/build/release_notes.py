"""RELEASE.md: the release documentation seed 003 step 3 asks for, rendered from a template."""

from __future__ import annotations

import jinja2

from releasekit.records.build import BuildRecord

TEMPLATE = """\
# Release {{ r.name }}

Image `{{ r.image_id }}`{% if r.image_tag %} tagged `{{ r.image_tag }}`{% endif %}, created {{ r.image.created }}
(SOURCE_DATE_EPOCH {{ r.image.source_date_epoch }}).

- Lock sha256: `{{ r.lock_sha256 }}`
- Manifest sha256: `{{ r.manifest_sha256 }}`
- Base image: `{{ r.base_image.name }}` {{ r.base_image.digest or r.base_image.image_id }}

## Toolchain

| | version |
|---|---|
| CUDA | {{ r.toolchain.cuda or "not pinned" }} |
| NCCL | {{ r.toolchain.nccl or "not pinned" }} |
| PyTorch | {{ r.toolchain.pytorch or "not pinned" }} |
| CUDA arch list | {{ (r.toolchain.cuda_arch_list or []) | join(", ") or "none" }} |

## Components

| component | repository | commit | version | wheel sha256 |
|---|---|---|---|---|
{% for c in r.components %}
| {{ c.name }} | {{ c.repo or "" }} | {{ c.commit or "" }} | {{ c.version or "" }} | {{ c.wheel_sha256 or "not built" }} |
{% endfor %}

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
"""


def render_release_notes(record: BuildRecord) -> str:
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, autoescape=False, undefined=jinja2.StrictUndefined)  # noqa: S701
    return env.from_string(TEMPLATE).render(r=record)
