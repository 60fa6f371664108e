"""CLI commands of the demo stage: ``releasekit demo``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from releasekit.cli_options import JSON

if TYPE_CHECKING:
    from releasekit.demo.result import StageResult


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""

    @app.command("demo")
    def demo_cmd(
        directory: Path = typer.Option(
            None, "--dir", help="where to make the example (default: a fresh temp dir)"
        ),
        as_json: bool = JSON,
    ) -> None:
        """Make a self-contained example release and run the whole pipeline on it: lock, check, build, verify, validate, publish."""
        from rich.markup import escape

        from releasekit.demo.service import run_demo
        from releasekit.report import print_json, render_findings, stdout_console

        console = stdout_console()

        def show(result: StageResult) -> None:
            style = {"passed": "green", "failed": "bold red", "skipped": "yellow"}[result.status]
            console.print(
                f"[{style}]{result.status:>7}[/{style}] [bold]{escape(result.name)}[/bold]: {escape(result.summary)}"
                + (f" [dim]({result.seconds:.0f} s)[/dim]" if result.seconds is not None else "")
            )
            for key, value in result.outputs.items():
                console.print(f"          {escape(key)}: {escape(value)}")
            if result.findings.findings:
                render_findings(result.findings, console)

        result = run_demo(directory, progress=(lambda _r: None) if as_json else show)
        if as_json:
            print_json(result)
        else:
            for note in result.skipped:
                console.print(f"[yellow]skipped[/yellow]: {escape(note)}")
            verdict = "[green]demo passed[/green]" if result.passed else "[bold red]demo failed[/bold red]"
            console.print(f"{verdict}: everything is under {escape(result.directory)}")
        raise typer.Exit(0 if result.passed else 1)
