"""The image config by allowlist: every runtime key equals the base's plus what the build declares.

Compared keys: Env (per variable), Entrypoint, Cmd, WorkingDir, User, Shell, Healthcheck,
OnBuild, Volumes, ExposedPorts, StopSignal, and the labels other than ``io.releasekit.*`` and
``org.opencontainers.image.*`` (the labels check owns those). Keys the engine keeps but
never applies to a container are ignored; any other key with a value is an error naming it.
The expected config is the one the reproduction computed (base config + the template's
ENV/CMD/ENTRYPOINT/WORKDIR/USER/LABEL), never the candidate's own.
"""

from __future__ import annotations

import json
from typing import Any

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.context import VerifyContext

COMPARED = (
    "Entrypoint",
    "Cmd",
    "WorkingDir",
    "User",
    "Shell",
    "Healthcheck",
    "OnBuild",
    "Volumes",
    "ExposedPorts",
    "StopSignal",
)
# Bookkeeping the engine stores in an image's config but does not apply when it runs one.
INERT = frozenset(
    {
        "Hostname",
        "Domainname",
        "AttachStdin",
        "AttachStdout",
        "AttachStderr",
        "Tty",
        "OpenStdin",
        "StdinOnce",
        "Image",
        "ArgsEscaped",
        "NetworkDisabled",
        "MacAddress",
    }
)
LABEL_PREFIXES = ("io.releasekit.", "org.opencontainers.image.")


def _norm(value: Any) -> Any:
    return None if value in (None, "", [], {}, False) else value


def _env(items: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, _, value = str(item).partition("=")
        out[key] = value
    return out


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


class ConfigCheck:
    name = "image-config"
    codes = ("CONFIG_MISMATCH", "CONFIG_KEY_UNEXPECTED")

    def examines(self, ctx: VerifyContext) -> Examined:
        """The config keys (and each Env variable and label) of the image and the reproduction."""
        rep = ctx.reproduction
        if rep is None or not rep.ok:
            return Examined.of(
                "config keys", (), absent="no reproduced config to compare with (see the reproduction check)"
            )
        want: dict[str, Any] = dict(rep.config.get("config") or {})
        have: dict[str, Any] = dict(ctx.image_config)
        keys = {k for k in (*want, *have) if k not in ("Env", "Labels")}
        env = {f"Env.{k}" for k in (*_env(want.get("Env")), *_env(have.get("Env")))}
        labels = {
            f"Labels.{k}"
            for k in (*dict(want.get("Labels") or {}), *dict(have.get("Labels") or {}))
            if not k.startswith(LABEL_PREFIXES)
        }
        return Examined.of("config keys", keys | env | labels | set(COMPARED))

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        rep = ctx.reproduction
        if rep is None or not rep.ok:
            return found  # the reproduction check reports why
        want: dict[str, Any] = dict(rep.config.get("config") or {})
        have: dict[str, Any] = dict(ctx.image_config)
        want_env, have_env = _env(want.get("Env")), _env(have.get("Env"))
        for key in sorted(set(want_env) | set(have_env)):
            if want_env.get(key) != have_env.get(key):
                got = f"{key}={have_env[key]!r}" if key in have_env else "absent"
                found.add(
                    "CONFIG_MISMATCH",
                    f"Env {key}: the image has {got}; the reproduction "
                    + (f"{key}={want_env[key]!r}" if key in want_env else "does not set it"),
                    field=f"Env.{key}",
                )
        for key in COMPARED:
            if _norm(have.get(key)) != _norm(want.get(key)):
                found.add(
                    "CONFIG_MISMATCH",
                    f"{key}: the image has {_show(have.get(key))}; the reproduction {_show(want.get(key))}",
                    field=key,
                )
        want_labels = dict(want.get("Labels") or {})
        have_labels = dict(have.get("Labels") or {})
        for label in sorted(set(want_labels) | set(have_labels)):
            if label.startswith(LABEL_PREFIXES):
                continue
            if want_labels.get(label) != have_labels.get(label):
                found.add(
                    "CONFIG_MISMATCH",
                    f"label {label}: the image has {_show(have_labels.get(label))}; the "
                    f"reproduction {_show(want_labels.get(label))}",
                    field=f"Labels.{label}",
                )
        known = {"Env", "Labels", *COMPARED, *INERT}
        for key in sorted(have):
            if key not in known and _norm(have[key]) is not None:
                found.add(
                    "CONFIG_KEY_UNEXPECTED",
                    f"the image config sets {key} = {_show(have[key])}, which no release config has",
                    field=key,
                )
        return found
