"""The ``procgrade`` console script's entry point: answers Ctrl-C from its first instant.

Loading the command line (Typer, Rich, SQLAlchemy, pydantic) takes a moment; an interrupt
during it must end like any other (one line, exit 130), not with an import traceback. This
module imports nothing heavy itself, so it is loaded before the interrupt can come.
"""

from __future__ import annotations

import signal
import sys

__all__ = ["main"]


def main() -> None:
    from procgrade.engine.interrupts import (INTERRUPTED_WHILE_STARTING, deferred_interrupt, interrupt_seen,
                                             watch_interrupts)

    watch_interrupts()
    try:
        with deferred_interrupt():
            # Compiled modules whose init assumes its own imports succeed: orjson's (ijl/orjson#310)
            # crashed the interpreter (SIGSEGV) when a Ctrl-C landed while it imported the standard
            # library, and pydantic_core panics if its import of datetime fails. Loaded first, the
            # interrupt held until they are in.
            import datetime  # noqa: F401
            import orjson  # noqa: F401
        from procgrade.engine.cli import app
        from procgrade.engine.cli_errors import run
    except BaseException as exc:  # an interrupt, or what a library made of it (pydantic: SchemaError)
        if not (isinstance(exc, KeyboardInterrupt) or interrupt_seen()):
            raise
        print(INTERRUPTED_WHILE_STARTING, file=sys.stderr, flush=True)
        sys.exit(130)
    code = run(app)
    # Done: a Ctrl-C during the interpreter's own shutdown (closing pools, flushing) changes nothing now.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    main()
