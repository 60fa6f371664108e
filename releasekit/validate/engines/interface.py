"""What releasekit needs from a serving engine: how to start it and where it reports.

An adapter renders a cell into a command and environment; the container runner, the
checks and the gates are engine-neutral. SGLang or TokenSpeed adapters implement the
same class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from pydantic import BaseModel, Field

from releasekit.manifest.validation import Cell


class ServeCommand(BaseModel):
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    port: int
    served_model_name: str
    problems: list[str] = Field(default_factory=list, description="cell settings the engine cannot express")


class Engine(ABC):
    name: str
    health_path: str = "/health"
    models_path: str = "/v1/models"
    metrics_path: str = "/metrics"

    @abstractmethod
    def serve_command(self, cell: Cell, model_path: str, *, port: int = 8000) -> ServeCommand:
        """The argv (inside the image) and the extra environment that start this cell's server."""
