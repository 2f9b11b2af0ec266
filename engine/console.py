"""The ``procgrade`` console script's entry point: answers Ctrl-C from its first instant.

Loading the command line (Typer, Rich, SQLAlchemy, pydantic) takes a moment; an interrupt
during it must end like any other (one line, exit 130), not with an import traceback. This
module imports nothing heavy itself, so it is loaded before the interrupt can come.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    try:
        from engine.cli import app
        from engine.cli_errors import run
    except KeyboardInterrupt:
        print("procgrade: interrupted while starting: nothing was done", file=sys.stderr, flush=True)
        sys.exit(130)
    sys.exit(run(app))


if __name__ == "__main__":
    main()
