"""What one demo stage hands back; shared by ``demo/service.py`` and the stage modules it runs.

Its own module so that the stage modules (``validate_stage.py``, ``publish_stage.py``) and
the runner that imports them do not import each other.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from releasekit.findings import Findings


class StageResult(BaseModel):
    name: str
    status: Literal["passed", "failed", "skipped"]
    summary: str
    outputs: dict[str, str] = Field(default_factory=dict)
    findings: Findings = Field(default_factory=Findings)
    seconds: float | None = None  # wall time of the stage (set by the runner)
