"""The command-line shell: parse, call one service function, render its result.

Each pipeline stage registers its own commands from ``releasekit/<stage>/commands.py``
so that the stages stay independent of one another and of this file. A stage's
commands module is imported only when one of its commands runs (or its own ``--help``
is asked for): ``releasekit --version`` and ``releasekit --help`` import no stage, and
no Docker SDK, HTTP client or plotting library. The root help lists the commands from
the static table ``COMMANDS`` below; ``tests/test_architecture.py`` holds it equal to
what the stage modules register.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
import threading
import traceback
from difflib import get_close_matches
from typing import Any

from releasekit import __version__
from releasekit.child_env import refuse_key_in_environment
from releasekit.deadline import DeadlinePassed, start_command
from releasekit.errors import ReleasekitError

# (command, the module whose ``register(app)`` adds it, its one-line help), in pipeline order.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("manifest", "releasekit.manifest.commands", "Read, check and explain a release manifest."),
    # ``manifest import`` lives in the legacy room; its group is merged into the stage's own.
    ("manifest", "releasekit.legacy.commands", "Read, check and explain a release manifest."),
    ("plan", "releasekit.plan.commands", "Lock and check the merge plan against git."),
    ("audit", "releasekit.plan.commands", "Audit release inputs: release-only commits, version pins."),
    (
        "build",
        "releasekit.builder.commands",
        "Build wheels from fresh checkouts of the locked commits and assemble a labelled, reproducible image.",
    ),
    (
        "verify-provenance",
        "releasekit.provenance.commands",
        "Prove that what IMAGE imports is exactly what the locked commits produce.",
    ),
    (
        "sign",
        "releasekit.signing.commands",
        "Sign a release directory's evidence once verification ended, and each later link once written.",
    ),
    (
        "stage",
        "releasekit.staging.commands",
        "Push the verified candidate to a staging repository and record its digest, for GPU hosts to pull.",
    ),
    (
        "test",
        "releasekit.suites.commands",
        "Run the components' test suites inside IMAGE; judge failures against the baseline image.",
    ),
    (
        "hygiene",
        "releasekit.suites.commands",
        "Run ruff, ruff format --check, git diff --check and the repository's hooks on the composed tree.",
    ),
    ("matrix", "releasekit.validate.commands", "List the validation cells of a manifest."),
    (
        "validate",
        "releasekit.validate.commands",
        "Run matrix cells against a candidate image (default: run), or aggregate receipts.",
    ),
    (
        "publish",
        "releasekit.publish.commands",
        "Push IMAGE and tag it, only if every gate passed for this exact image ID and lock.",
    ),
    (
        "promote",
        "releasekit.publish.commands",
        "Re-tag the digest behind --from as --to after checking its attached evidence again; never rebuilds.",
    ),
    (
        "reproduce",
        "releasekit.reproduce.commands",
        "Rebuild a published image from its attached source archive alone; exit 0 same, 1 different.",
    ),
    ("keys", "releasekit.signing.commands", "Signing keys for the evidence (DSSE envelopes)."),
    (
        "summary",
        "releasekit.publish.commands",
        "Render release records as GitHub-flavoured markdown (for $GITHUB_STEP_SUMMARY).",
    ),
    (
        "demo",
        "releasekit.demo.commands",
        "Make a self-contained example release and run the whole pipeline on it: "
        "lock, check, build, verify, validate, publish.",
    ),
)


def _modules_by_command() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, module, _help in COMMANDS:
        out[name] = (*out.get(name, ()), module)
    return out


_MODULE = _modules_by_command()
_HELP = {name: text for name, _module, text in COMMANDS}


def stage_commands(module_name: str) -> dict[str, Any]:
    """Import one stage's commands module and return the click commands its ``register`` adds."""
    import typer

    module = importlib.import_module(module_name)
    scratch = typer.Typer()
    module.register(scratch)
    return dict(typer.main.get_group(scratch).commands)


def _lazy_stages() -> Any:
    """The root group's class, made here: it subclasses typer's group, and typer is imported only when needed."""
    from typer.core import TyperCommand, TyperGroup

    class LazyStages(TyperGroup):
        """The root group: commands come from ``COMMANDS``; a stage is imported when it is used."""

        _listing = False  # True while the root help is being written: stubs, no stage imports

        def list_commands(self, ctx: Any) -> list[str]:
            return list(_MODULE)

        def get_command(self, ctx: Any, cmd_name: str) -> Any:
            if cmd_name in self.commands:
                return self.commands[cmd_name]
            modules = _MODULE.get(cmd_name)
            if modules is None:
                return None
            if self._listing:
                return TyperCommand(name=cmd_name, help=_HELP[cmd_name])
            for module in modules:
                for name, command in stage_commands(module).items():
                    present = self.commands.setdefault(name, command)
                    if present is not command and hasattr(present, "add_command"):
                        # A second module's group of the same name adds its subcommands to the first.
                        for sub in getattr(command, "commands", {}).values():
                            present.add_command(sub)
            return self.commands.get(cmd_name)

        def format_help(self, ctx: Any, formatter: Any) -> None:
            self._listing = True
            try:
                super().format_help(ctx, formatter)
            finally:
                self._listing = False

        def resolve_command(self, ctx: Any, args: list[str]) -> Any:
            try:
                return super().resolve_command(ctx, args)
            except Exception as exc:
                # Typer suggests from the commands already loaded; suggest from the whole table.
                # (Matched by name: typer may raise its vendored click's UsageError or click's own.)
                message = getattr(exc, "message", None)
                usage_error = any(k.__name__ == "UsageError" for k in type(exc).__mro__)
                if usage_error and args and isinstance(message, str) and "Did you mean" not in message:
                    matches = get_close_matches(args[0], list(_MODULE))
                    if matches:
                        suggestion = ", ".join(repr(m) for m in matches)
                        exc.message = f"{message.rstrip('.')}. Did you mean {suggestion}?"  # type: ignore[attr-defined]
                raise

    return LazyStages


def _build_app() -> Any:
    """The typer app (typer is imported here: ``--version`` and the fast entries never need it)."""
    import typer

    app = typer.Typer(
        name="releasekit",
        cls=_lazy_stages(),
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
        ctx: Any,  # typer.Context: set below (typer is imported in this function only)
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version."
        ),
        mirror: list[str] = typer.Option(
            [],
            "--mirror",
            help="URL=PATH: read repository URL from the local copy PATH, in every command (repeatable).",
        ),
        offline: bool = typer.Option(
            False,
            "--offline",
            help="Repositories only from their mirrors, the forge and wheel indexes not asked, in every "
            "command (also RELEASEKIT_OFFLINE=1).",
        ),
    ) -> None:
        """Manifest -> lock -> build -> verify-provenance -> validate -> publish."""
        # Before the command reads or starts anything: no command holds a signing key in its
        # environment (issue 43); ``sign`` takes it from --key FILE or --key-fd N only.
        refuse_key_in_environment(ctx.invoked_subcommand or "releasekit")
        if mirror or offline:
            from releasekit.git.mirrors import use_options

            use_options(mirror, offline)

    _root.__annotations__["ctx"] = typer.Context
    return app


_APP: Any = None


def __getattr__(name: str) -> Any:
    # ``from releasekit.cli import app``: built on first use.
    global _APP
    if name == "app":
        if _APP is None:
            _APP = _build_app()
        return _APP
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fast(args: list[str]) -> int | None:
    """A typer-free entry, for a command whose start-up is timed against git (docs/benchmarks.md).

    None: not one of them, or arguments it leaves to the typer command (which stays the
    reference; tests hold both to the same options and output).
    """
    if args[:2] == ["audit", "release-only"]:
        refuse_key_in_environment("audit")
        from releasekit.plan.fast_commands import release_only_json

        return release_only_json(args[2:])
    return None


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


_GROUPS = ("manifest", "plan", "audit", "validate", "keys")  # commands named by their first two words


def _command_name(args: list[str]) -> str:
    """The command an interrupt stopped, as the user typed it (``build``, ``plan lock``)."""
    words = [a for a in args if not a.startswith("-")][:2]
    if len(words) == 2 and words[0] in _GROUPS:
        return " ".join(words)
    return words[0] if words else "releasekit"


def _terminated(_signum: int, _frame: object) -> None:
    # SIGTERM (a CI job cancelled, ``kill``) stops a command as Ctrl-C does: its clean-up runs.
    raise KeyboardInterrupt


def _interrupted(args: list[str]) -> None:
    """One line, exit 130: which command stopped, and what it left (``atomic.kept_so_far``)."""
    from releasekit.atomic import kept_so_far

    sys.stderr.write(f"releasekit: interrupted during {_command_name(args)}; {kept_so_far()}\n")
    sys.exit(130)


def main(argv: list[str] | None = None) -> None:
    """Entry point: exit 0 passed, 1 findings, 2 unusable input or environment, 130 interrupted."""
    args = list(sys.argv[1:] if argv is None else argv)
    start_command()  # what is bounded over the whole command (its git processes' total) counts from here
    try:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _terminated)
        code = _fast(args)
        if code is None:
            code = __getattr__("app")(args=args, standalone_mode=False, prog_name="releasekit")
        if code == 130:  # typer turns a KeyboardInterrupt into exit 130, silently
            raise KeyboardInterrupt
    except ReleasekitError as exc:
        if len(exc.details) > 1:
            # Several problems: one line each (file:line:col: field: message), no summary line.
            for line in exc.details:
                sys.stderr.write(f"releasekit: error: {' '.join(line.split())}\n")
        else:
            sys.stderr.write(f"releasekit: error: {exc.one_line()}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _interrupted(args)
    except DeadlinePassed as exc:
        sys.stderr.write(f"releasekit: error: {' '.join(exc.message.split())}\n")
        sys.exit(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - the promise is: never a traceback
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            sys.stderr.write(f"releasekit: error: no space left on device: {exc.filename or exc}\n")
            sys.exit(2)
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
