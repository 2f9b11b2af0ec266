"""Native ingest on every core: worker processes prepare blocks of lines while the caller writes.

Parsing, validating, redacting and canonicalising a line depend on that line alone, so
blocks of lines go to worker processes (forked: they start with every module loaded) and
come back as prepared rows (:func:`procgrade.engine.stored.prepare_row`), in order, while
the caller runs the checks across lines, chains the rows and inserts them. At most a few
blocks are in flight, so memory stays bounded by blocks, not by the file. A file of one
block never starts a worker.

A worker stops at the first bad line of its block and hands back the lines before it
with the error; the caller sequences those first, so the error reported is the first
problem in file order, exactly as when one process reads everything.
"""

from __future__ import annotations

import marshal
import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from procgrade.engine.errors import InputError

__all__ = ["row_items", "BLOCK_LINES", "BLOCK_BYTES"]

#: A block ends after this many lines, or once it holds this many bytes (large payloads).
BLOCK_LINES = 2000
BLOCK_BYTES = 4 * 2**20
#: Blocks in flight per worker: the writer takes several blocks' rows in one burst (a piece of a
#: run is thousands of events), so workers keep preparing meanwhile instead of waiting for it.
_WINDOW = 4


def row_items(source: str, lines: Iterable[bytes], workers: int) -> Iterator[tuple]:
    """The items of :func:`procgrade.engine.native._row_items` for ``lines``, prepared by
    ``workers`` processes (in this process when the lines fit in one block)."""
    from procgrade.engine.native import _row_items

    blocks = _blocks(lines)
    first = next(blocks, None)
    if first is None:
        return
    second = next(blocks, None)
    if second is None:
        yield from _row_items(source, enumerate(first[1], start=first[0]))
        return
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_start, initargs=(os.getpid(),))
    pending: deque[Future[tuple[bytes, tuple | None]]] = deque()
    try:
        pending.append(pool.submit(_prepare_block, source, *first))
        pending.append(pool.submit(_prepare_block, source, *second))
        for block in blocks:
            while len(pending) >= _WINDOW * workers:
                yield from _unpacked(source, pending.popleft().result())
            pending.append(pool.submit(_prepare_block, source, *block))
        while pending:
            yield from _unpacked(source, pending.popleft().result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _blocks(lines: Iterable[bytes]) -> Iterator[tuple[int, list[bytes]]]:
    """(number of the first line, lines) in blocks of at most BLOCK_LINES lines or about BLOCK_BYTES."""
    block: list[bytes] = []
    size, first = 0, 1
    for number, raw in enumerate(lines, start=1):
        if not block:
            first = number
        block.append(raw)
        size += len(raw)
        if len(block) >= BLOCK_LINES or size >= BLOCK_BYTES:
            yield first, block
            block, size = [], 0
    if block:
        yield first, block


def _worker_start(parent: int) -> None:
    """Ctrl-C is the writer's to handle (it rolls back and shuts the pool down); a writer killed
    outright takes its workers with it (Linux), so none lingers holding a copy of its database
    connection (which would keep a PostgreSQL transaction, and its locks, open)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown still ends them
        pass
    if os.getppid() != parent:  # the writer died before the line above
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _prepare_block(source: str, first: int, lines: list[bytes]) -> tuple[bytes, tuple | None]:
    """(the block's items up to its first bad line, marshalled; that line's error as
    (line, field, reason), or None)."""
    from procgrade.engine.native import _row_items

    items: list[Any] = []
    error = None
    try:
        for item in _row_items(source, enumerate(lines, start=first)):
            items.append(item)
    except InputError as exc:
        error = (exc.line, exc.field, exc.reason)
    return marshal.dumps(items), error


def _unpacked(source: str, result: tuple[bytes, tuple | None]) -> Iterator[tuple]:
    packed, error = result
    yield from marshal.loads(packed)
    if error is not None:
        raise InputError(source, *error)
