"""Ctrl-C that stops cleanly: never between a commit and the count of what it stored, never in a worker.

A long command (ingest, score, rescore, report) is interrupted by SIGINT, raised as
KeyboardInterrupt in the main thread. Transactions already make every write whole; these
helpers keep the rest honest:

* :func:`deferred_interrupt` holds a Ctrl-C until a short block ends (a score's commit and
  the progress count that reports it), so "N of M stored" is exact.
* Worker processes ignore SIGINT (:func:`worker_ignores_interrupts` as the pool's initializer;
  :func:`interrupts_blocked` around spawning them, so none is born before it ignores): the
  terminal sends Ctrl-C to the whole process group, and only the driver should answer it, by
  stopping the pool, instead of every worker printing a traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["deferred_interrupt", "interrupts_blocked", "worker_ignores_interrupts", "watch_interrupts",
           "interrupt_seen", "INTERRUPTED_WHILE_STARTING"]

#: The line for a Ctrl-C before the command ran (loading, building the commands, parsing arguments).
INTERRUPTED_WHILE_STARTING = "procgrade: interrupted while starting: nothing was done"

_seen: list[bool] = []


def _remembered(signum: int, frame: Any) -> None:
    _seen.append(True)
    raise KeyboardInterrupt


def _unraisable(unraisable: Any) -> None:
    """A Ctrl-C that landed in a weakref callback or a ``__del__`` cannot propagate: Python would print
    it as "Exception ignored ... Traceback" and lose it. Deliver it again a moment later instead."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        return
    sys.__unraisablehook__(unraisable)


def watch_interrupts() -> None:
    """Ctrl-C raises KeyboardInterrupt as usual, and is remembered: a library may turn it into an error
    of its own (pydantic does, when the interrupt lands while it builds a model), which the command
    line then reports as the interruption it is (:func:`interrupt_seen`). Leaves a handler someone
    else installed (or SIG_IGN, as a shell gives background jobs) alone."""
    if _main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _remembered)
        sys.unraisablehook = _unraisable


def interrupt_seen() -> bool:
    """True once Ctrl-C reached this process (after :func:`watch_interrupts`)."""
    return bool(_seen)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block to its end even if Ctrl-C comes meanwhile; raise the interrupt after it."""
    if not _main_thread():
        yield
        return
    received: list[tuple[int, Any]] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(*received[0])


@contextlib.contextmanager
def interrupts_blocked() -> Iterator[None]:
    """Block SIGINT at the OS level while the block runs (processes it spawns inherit the mask); a Ctrl-C
    that arrived meanwhile is delivered when it ends."""
    if not (_main_thread() and hasattr(signal, "pthread_sigmask")):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def worker_ignores_interrupts() -> None:
    """A pool initializer: this worker ignores Ctrl-C (its driver stops it), then unblocks the signal."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
