"""The command-line shell: parse, call one service function, render its result.

Each pipeline stage registers its own commands from ``releasekit/<stage>/commands.py``
so that the stages stay independent of one another and of this file.
"""

from __future__ import annotations

import os
import sys
import traceback

import typer

from releasekit import __version__
from releasekit.errors import ReleasekitError

app = typer.Typer(
    name="releasekit",
    help="Release GPU LLM-serving images as a function of public commits.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"releasekit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Manifest -> lock -> build -> verify-provenance -> validate -> publish."""


def _register_stages() -> None:
    # Import order is the pipeline order; a stage never imports a later one.
    from releasekit.manifest import commands as manifest_commands  # noqa: I001
    from releasekit.plan import commands as plan_commands
    from releasekit.build import commands as build_commands
    from releasekit.provenance import commands as provenance_commands
    from releasekit.validate import commands as validate_commands
    from releasekit.publish import commands as publish_commands
    from releasekit.reproduce import commands as reproduce_commands
    from releasekit.demo import commands as demo_commands

    for module in (
        manifest_commands,
        plan_commands,
        build_commands,
        provenance_commands,
        validate_commands,
        publish_commands,
        reproduce_commands,
        demo_commands,
    ):
        module.register(app)


_register_stages()


def _click_error(exc: BaseException) -> tuple[int, str] | None:
    """Recognise click's own exceptions, whichever copy of click raised them (typer vendors one)."""
    name = type(exc).__name__
    if name == "NoArgsIsHelpError":
        return 2, ""
    if name == "Abort":
        return 2, "aborted"
    if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
        return int(exc.exit_code or 2), " ".join(exc.format_message().split())
    return None


def main(argv: list[str] | None = None) -> None:
    """Entry point: exit 0 passed, 1 findings, 2 unusable input or environment."""
    try:
        code = app(args=argv, standalone_mode=False, prog_name="releasekit")
    except ReleasekitError as exc:
        if len(exc.details) > 1:
            # Several problems: one line each (file:line:col: field: message), no summary line.
            for line in exc.details:
                sys.stderr.write(f"releasekit: error: {' '.join(line.split())}\n")
        else:
            sys.stderr.write(f"releasekit: error: {exc.one_line()}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("releasekit: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the promise is: never a traceback
        known = _click_error(exc)
        if known is not None:
            code, text = known
            if text:
                sys.stderr.write(f"releasekit: error: {text}\n")
            sys.exit(code)
        if os.environ.get("RELEASEKIT_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(
            f"releasekit: internal error: {type(exc).__name__}: {' '.join(str(exc).split())} "
            "(set RELEASEKIT_DEBUG=1 for a traceback)\n"
        )
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
