"""Pausing Python's cyclic garbage collector around work that makes no reference cycles.

Ingest and re-scoring allocate millions of short-lived tuples, lists and dicts (rows, findings,
documents) and keep none of them in a cycle: reference counting frees every one of them. The
cyclic collector still runs a pass every 700 allocations and, now and then, over every object
alive, which in a re-score grows with the runs planned and held (measured: 8% of re-scoring
10,000 runs of 35 events, 5% of 100 runs of 3,500; a third of ingest time). Paused, nothing is
lost: what a cycle would hold (a traceback, say) is collected once the collector is back on.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off for the block (as it was after: a nested pause leaves it off). The
    switch is the process's: of two threads pausing at once, the first to finish turns it back on
    for both, which costs the other its saving, never its memory."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
