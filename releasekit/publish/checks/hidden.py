"""No runtime switch outside the image's defaults and the cell's definition.

Flags that only express the cell's own coordinates and where the server runs are the
engine adapter's to name (``Engine.placement_flags``); the rule asks the adapter of the
cell's engine rather than keeping a table of one engine's flags.
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.checks.context import (
    PLACEMENT_ENV,
    CellPolicy,
    GateSubject,
    flags_of,
    read_receipts,
    shown,
)
from releasekit.validate.engines import adapter_for


def placement_flags(engine: str) -> frozenset[str]:
    """The adapter's placement flags; none for an engine releasekit has no adapter for."""
    adapter = adapter_for(engine)
    return adapter.placement_flags() if adapter is not None else frozenset()


class NoHiddenSwitches:
    name = "no runtime switch outside the image's defaults and the cell's definition"
    codes = ("HIDDEN_SWITCH",)

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        image = subject.image
        default_flags = flags_of(image.entrypoint + image.cmd)
        views, _ = read_receipts(subject)
        for view in views:
            if view.image_id != subject.image.id:
                continue
            cell = subject.policy.cell(view.cell or "") or CellPolicy(id=view.cell or "?")
            for key, value in sorted(view.env.items()):
                if key in PLACEMENT_ENV:
                    continue
                if image.env.get(key) == value or cell.env.get(key) == value:
                    continue
                what = "overrides the image default" if key in image.env else "is not in the image's defaults"
                out.add(
                    "HIDDEN_SWITCH",
                    f"env {key}={shown(key, value)} {what} and the cell does not declare it",
                    cell=view.cell,
                    path=view.path,
                )
            allowed = default_flags | flags_of(cell.args) | placement_flags(cell.engine)
            for flag in sorted(flags_of(view.args) - allowed):
                out.add(
                    "HIDDEN_SWITCH",
                    f"flag {flag} is neither an image default nor in the cell's extra_args",
                    cell=view.cell,
                    path=view.path,
                )
        return out
