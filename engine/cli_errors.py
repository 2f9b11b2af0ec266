"""How the ``procgrade`` command ends: the one place that maps exceptions to messages.

Every user mistake ends with one line on stderr naming what is wrong and what to do, and a
documented exit code:

* ``0`` done; ``1`` a user error (a file, database, run, rule set or input that is wrong,
  or a check that failed); ``2`` usage (an unknown command or option, a missing argument, a
  value of the wrong type or not among an option's choices); ``130`` interrupted (Ctrl-C).

Commands raise :mod:`procgrade.engine.errors` exceptions and never catch them; :func:`run` turns them
into that line. ``--debug`` (anywhere before ``--``) or ``PROCGRADE_DEBUG=1`` prints the
traceback first. A long command registers what an interruption leaves behind with
:func:`on_interrupt`, so Ctrl-C says what was stored and that re-running continues.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import typer

from procgrade.engine.errors import InputError, MissingExtraError, ProcgradeError, StoreError, UnknownRunError
from procgrade.engine.interrupts import INTERRUPTED_WHILE_STARTING, interrupt_seen, watch_interrupts

__all__ = ["EXIT_OK", "EXIT_USER", "EXIT_USAGE", "EXIT_INTERRUPTED", "run", "describe", "on_interrupt",
           "EXTRAS"]

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROG = "procgrade"

#: Optional packages and the extra that installs each (``pip install 'procgrade[extra]'``).
EXTRAS = {
    "psycopg": "postgres", "numpy": "analysis", "scipy": "analysis", "pandas": "analysis",
    "statsmodels": "analysis", "sklearn": "analysis", "threadpoolctl": "analysis", "docker": "docker",
    "pytest": "acceptance", "krippendorff": "krippendorff", "playwright": "dev",
}

#: What an interruption of a command leaves behind, when the command registered nothing finer.
_INTERRUPTED = {
    "ingest": "an ingest commits all its runs at once at the end, so this one wrote nothing; re-running the "
              "same command ingests them (runs already stored are skipped)",
    "grades import": "grades are appended in one transaction at the end, so nothing was written; re-run the "
                     "same command to import them",
    "rescore": "scores are stored run by run, each document whole; re-running `procgrade rescore --all` scores "
               "the runs still missing and keeps what is stored",
    "score": "scores are stored run by run, each document whole; re-running the same command scores the runs "
             "still missing and keeps what is stored",
    "report": "the page is written whole at the end, so no report was written; re-run the command to write it",
    "accept": "the check is recorded in one transaction after the judge finishes, so nothing was recorded; "
              "re-run the command to judge the workspace",
}
_DEFAULT_INTERRUPTED = ("every write is one transaction, so nothing partial was stored; re-run the command "
                        "to finish")

_notes: list[Callable[[], str]] = []
_said: list[str] = []


@contextlib.contextmanager
def on_interrupt(note: Callable[[], str]) -> Iterator[None]:
    """While the block runs, an interruption prints ``note()`` (what was stored, how to continue)."""
    _notes.append(note)
    try:
        yield
    except KeyboardInterrupt:
        _said.append(note())  # what was stored when the interrupt passed through
        raise
    else:
        _said.append(note())  # still true if the interrupt comes later, while the command prints
    finally:
        _notes.remove(note)


def _click_errors() -> tuple[type[BaseException], ...]:
    """Typer's own click (Typer >= 0.20 vendors it) or click's: usage and parameter errors."""
    found: list[type[BaseException]] = []
    typer_exception = getattr(typer, "TyperException", None)
    if typer_exception is not None:
        found.append(typer_exception)
    try:
        from click.exceptions import ClickException
    except ImportError:
        pass
    else:
        found.append(ClickException)
    return tuple(found)


def describe(exc: BaseException) -> tuple[str, int] | None:
    """The one line and exit code for an exception a user can act on; None for a bug."""
    if isinstance(exc, InputError):
        return _one_line(str(exc)), EXIT_USER
    if isinstance(exc, UnknownRunError) and not exc.located:
        return f"{PROG}: {_one_line(str(exc))}: `procgrade runs` lists the stored runs", EXIT_USER
    if isinstance(exc, StoreError):
        return _one_line(str(exc) if exc.located else f"{PROG}: {exc}"), EXIT_USER
    mixed = _mixed_settings(exc)
    if mixed is not None:
        return mixed, EXIT_USER
    if isinstance(exc, ProcgradeError):
        return f"{PROG}: {_one_line(str(exc))}", EXIT_USER
    if isinstance(exc, ModuleNotFoundError) and exc.name and exc.name.split(".")[0] in EXTRAS:
        module = exc.name.split(".")[0]
        extra = MissingExtraError("this command", EXTRAS[module], module)
        return f"{PROG}: {extra}", EXIT_USER
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError):
        from procgrade.engine.store.location import _driver_message

        return (f"{PROG}: the database failed: {_driver_message(exc)}: check that it is reachable and "
                "re-run the command"), EXIT_USER
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{PROG}: {where}{exc.strerror.lower()}: check the path and its permissions", EXIT_USER
    return None


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines) if lines else text


def _mixed_settings(exc: BaseException) -> str | None:
    """A refusal to pool runs whose settings differ, as the command line spells it."""
    groups = getattr(exc, "groups", None)
    if type(exc).__name__ != "MixedGroupSettingsError" or not isinstance(groups, dict):
        return None
    keys = sorted({key for differences in groups.values() for key in differences})
    names = ", ".join(sorted(groups)[:3]) + (f" and {len(groups) - 3} more" if len(groups) > 3 else "")
    shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
    return (f"{PROG}: runs of one {getattr(exc, 'by', '?')} group differ in settings ({shown}) in {len(groups)} "
            f"group(s) ({names}), so they are not pooled: add --allow-mixed to pool them anyway (the output then "
            "lists which settings differ per group), or group --by a field that separates them")


def _interrupted(command_path: str | None) -> str:
    if command_path is None:
        return INTERRUPTED_WHILE_STARTING
    if _said:
        note = _said[-1]
    elif _notes:
        note = _notes[-1]()
    else:
        name = command_path.removeprefix(PROG).strip()
        note = _INTERRUPTED.get(name, _DEFAULT_INTERRUPTED)
    return f"{PROG}: interrupted: {note}"


def _split_debug(args: Sequence[str]) -> tuple[list[str], bool]:
    """``--debug`` is global: accepted anywhere before ``--``."""
    debug = os.environ.get("PROCGRADE_DEBUG", "") not in ("", "0")
    kept: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            kept.extend(args[i:])
            break
        if arg == "--debug":
            debug = True
            continue
        kept.append(arg)
    return kept, debug


def _say(line: str) -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    print(line, file=sys.stderr, flush=True)


def run(app: typer.Typer, args: Sequence[str] | None = None) -> int:
    """Run ``app`` as the ``procgrade`` command; return the exit code (never raise)."""
    from procgrade.engine.cli_coercion import install as plain_text_options
    from procgrade.engine.cli_help import readable_help

    watch_interrupts()
    _said.clear()  # what an earlier command run in this process stored is not this one's to report
    plain_text_options()  # --db URL without importing pydantic (start-up)
    argv, debug = _split_debug(sys.argv[1:] if args is None else list(args))
    if not debug:
        # Libraries log what they then raise (SQLAlchemy: "Exception closing connection" with a traceback);
        # the one line below says it. --debug keeps their logs.
        logging.getLogger("sqlalchemy").addHandler(logging.NullHandler())
    command_path = None  # set once the command runs: an interrupt before then did nothing
    try:
        command = typer.main.get_command(app)
        readable_help(command)
        with command.make_context(PROG, argv) as ctx:
            command_path = _invoked_path(command, argv)
            command.invoke(ctx)
        return EXIT_OK
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        _say(_interrupted(command_path))
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`procgrade show RUN | head`): nothing to say, and nowhere to say it.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - interpreter shutdown flushes it
        return EXIT_USER
    except BaseException as exc:  # noqa: BLE001 - this is the one place that maps every exception
        return _ended_by(exc, debug, command_path)


def _invoked_path(command: Any, argv: Sequence[str]) -> str:
    """``procgrade ingest`` / ``procgrade grades import``: the command the arguments name."""
    path, group = [PROG], command
    for arg in argv:
        if arg.startswith("-"):
            continue
        commands = getattr(group, "commands", None)
        if not commands or arg not in commands:
            break
        path.append(arg)
        group = commands[arg]
    return " ".join(path)


def _ended_by(exc: BaseException, debug: bool, command_path: str | None = PROG) -> int:
    exit_code = getattr(exc, "exit_code", None)
    if isinstance(exc, (typer.Exit, SystemExit)) or type(exc).__name__ == "Exit":
        code = exit_code if exit_code is not None else getattr(exc, "code", 0)
        return code if isinstance(code, int) else EXIT_USER
    if isinstance(exc, typer.Abort) or type(exc).__name__ == "Abort":
        _say(f"{PROG}: aborted")
        return EXIT_INTERRUPTED
    if isinstance(exc, _click_errors()):
        _say(_usage_line(exc))
        return exit_code if isinstance(exit_code, int) else EXIT_USAGE
    if debug:
        traceback.print_exc()
    if interrupt_seen():
        _say(_interrupted(command_path))
        return EXIT_INTERRUPTED
    known = describe(exc)
    if known is not None:
        line, code = known
        _say(line)
        return code
    first = _one_line(str(exc))[:300]
    _say(f"{PROG}: internal error: {type(exc).__name__}{': ' + first if first else ''} (a bug in procgrade: "
         "re-run with --debug for the traceback and report it)")
    return EXIT_USER


def _usage_line(exc: BaseException) -> str:
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None) or PROG
    message = _one_line(exc.format_message() if hasattr(exc, "format_message") else str(exc)).rstrip(".")
    if getattr(exc, "exit_code", EXIT_USAGE) != EXIT_USAGE:
        return f"{path}: {message}"
    return f"{path}: {message} (see '{path} --help')"
