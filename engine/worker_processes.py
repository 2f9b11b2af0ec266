"""What every forked helper process of a write does first: leave Ctrl-C to its parent and die
with it.

Ingest's and import's workers are forked from the process that holds the write transaction,
so each holds a copy of its database connection. A worker outliving a parent killed outright
(``kill -9``, the OOM killer) would keep that connection, and a PostgreSQL transaction with its
locks, open until someone finds and kills it; a worker taking Ctrl-C itself would print a
traceback over the parent's clean "interrupted" line.
"""

from __future__ import annotations

import os
import signal

__all__ = ["follow_parent"]

#: ``prctl`` option: the signal the kernel sends this process when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1


def follow_parent(parent: int) -> None:
    """Ignore Ctrl-C (the parent handles it: it rolls back and stops its workers) and ask the
    kernel for SIGKILL when the parent dies (Linux; elsewhere the parent's own shutdown still
    ends its workers). ``parent`` is the parent's pid taken before forking: if it has already
    died, this process leaves at once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the kernel was asked
        os._exit(1)
