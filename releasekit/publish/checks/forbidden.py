"""No env var or flag the manifest forbids, in the image's defaults or in any receipt of this image."""

from __future__ import annotations

import fnmatch

from releasekit.findings import Findings
from releasekit.publish.checks.context import GateSubject, flags_of, read_receipts, shown


def env_forbidden(pattern: str, key: str, value: str) -> bool:
    name, sep, wanted = pattern.partition("=")
    if not fnmatch.fnmatchcase(key, name):
        return False
    return not sep or value == wanted


class NoForbiddenSwitches:
    name = "no switch the manifest forbids"
    codes = ("FORBIDDEN_SWITCH",)

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        policy = subject.policy
        reason = f" ({policy.forbidden_reason})" if policy.forbidden_reason else ""
        sources: list[tuple[str | None, str | None, dict[str, str], list[str]]] = [
            (None, "image defaults", subject.image.env, subject.image.entrypoint + subject.image.cmd)
        ]
        views, _ = read_receipts(subject)
        sources += [(v.cell, v.path, v.env, v.args) for v in views if v.image_id == subject.image.id]
        for cell, where, env, args in sources:
            for key, value in sorted(env.items()):
                for pattern in policy.forbidden_env:
                    if env_forbidden(pattern, key, value):
                        out.add(
                            "FORBIDDEN_SWITCH",
                            f"env {key}={shown(key, value)} is forbidden{reason}",
                            cell=cell,
                            path=where,
                        )
            used = flags_of(args)
            for flag in policy.forbidden_args:
                if flag in used:
                    out.add("FORBIDDEN_SWITCH", f"flag {flag} is forbidden{reason}", cell=cell, path=where)
        return out
