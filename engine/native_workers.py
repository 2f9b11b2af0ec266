"""Native ingest on every core: worker processes prepare blocks of lines while the caller writes.

Parsing, validating, redacting and canonicalising a line depend on that line alone, so
blocks of lines go to worker processes (forked: they start with every module loaded) and
come back as prepared rows (:func:`procgrade.engine.stored.prepare_row`), in order, while
the caller runs the checks across lines, chains the rows and inserts them. At most a few
blocks are in flight, so memory stays bounded by blocks, not by the file. An ingest starts
its workers once, when its input is big enough to pay for them (:data:`POOL_MIN_BLOCKS`).

A worker stops at the first bad line of its block and hands back the lines before it
with the error; the caller sequences those first, so the error reported is the first
problem in file order, exactly as when one process reads everything.
"""

from __future__ import annotations

import itertools
import marshal
import mmap
import os
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from procgrade.engine.cores import usable_cores
from procgrade.engine.errors import InputError
from procgrade.engine.worker_processes import follow_parent

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["PreparePool", "BLOCK_LINES", "BLOCK_BYTES", "BLOCK_READ_BYTES", "POOL_MIN_BLOCKS", "POOL_MIN_BYTES",
           "WORKER_NICENESS"]

#: A block ends after this many lines, or once it holds this many bytes (large payloads).
BLOCK_LINES = 2000
BLOCK_BYTES = 2 * 2**20
#: A native file on disk (:class:`procgrade.engine.native.NativeFile`) is read this many bytes at a
#: time, the whole lines of each read a block (cut after BLOCK_LINES lines, the few over carried
#: into the next read): about BLOCK_LINES lines of a common event (260 bytes), and well within the
#: input buffer of a slot.
BLOCK_READ_BYTES = 2**19
#: Workers start only once one ingest has read more than this many blocks (16,000 lines or
#: 16 MB): below that, forking (a copy of a big process's page tables, the pool's threads)
#: and handing rows back cost more CPU than they save wall time (measured: a 5,000-line file
#: takes as long either way, at 40% more CPU with two workers; 20,000 lines gain 25% wall).
#: Small inputs (every test file, most real runs) never start a process.
POOL_MIN_BLOCKS = 8
#: An ingest whose native files add up to more bytes than this (POOL_MIN_BLOCKS full blocks by
#: size: the pool would start within them anyway, unless single lines pass 2 MB) starts its
#: workers at once.
POOL_MIN_BYTES = POOL_MIN_BLOCKS * BLOCK_BYTES
#: Blocks in flight per worker: the writer takes several blocks' rows in one burst (a piece of a
#: run is thousands of events), so workers keep preparing meanwhile instead of waiting for it.
_WINDOW = 4
#: How much lower the workers' priority is than the writer's when they and the writer outnumber
#: the cores (two workers and the writer on two cores). The writer chains and inserts in order,
#: so every moment it waits for a core the whole ingest waits. Sharing the cores evenly, it got
#: two thirds of one while the workers ran ahead, and the rows they had prepared ahead were then
#: inserted with the other core idle: a tenth of the wall time of a 300,000-event ingest. At a
#: lower priority the scheduler gives the writer a core of its own and the workers the rest
#: (4.3-4.6 s instead of 4.6-4.8 for those events; niceness 6 to 19 all did as well). 10, not 19:
#: on a machine busy with other work the workers still get a tenth of a core's share, not a
#: sixtieth. With a core to spare for the writer the workers keep the writer's priority.
WORKER_NICENESS = 10
#: Bytes of each buffer shared with the workers, one per block in flight: a worker writes a
#: block's marshalled rows there and the writer unmarshals them in place, instead of both
#: pickling them and copying them through a pipe (about 1.5 MB for 2,000 common lines). Rows
#: that do not fit (payloads of megabytes) come through the pipe as before. Pages are taken only
#: as they are written, and kept (each buffer at its largest block's size) until the ingest ends.
SLOT_BYTES = 8 * 2**20
#: Bytes of the buffer beside each that hands a worker the block's lines (joined by newlines), in
#: place of pickling them through the executor's queue; a block that does not fit (a line of
#: megabytes) is pickled as before.
INPUT_BYTES = 2 * BLOCK_BYTES


class PreparePool:
    """The worker processes of one ingest (every file of it), started the first time its input
    passes :data:`POOL_MIN_BLOCKS` blocks and shut down by :meth:`close` (on success, error or
    Ctrl-C alike: use it as a context manager around the write transaction)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._blocks_read = 0
        #: Bytes of native input this ingest said it will read (:meth:`expect_bytes`).
        self._expected_bytes = 0
        #: Blocks handed to the workers, oldest first: (the lines they came from, the future, or
        #: the error that stopped reading those lines, the shared buffer the rows go to or None).
        self._pending: deque[tuple[Iterable[bytes], Any, int | None]] = deque()
        #: The buffers shared with the workers (:data:`SLOT_BYTES` for rows, :data:`INPUT_BYTES`
        #: for lines, by slot), and the slots no block holds.
        self._slots: list[mmap.mmap] = []
        self._inputs: list[mmap.mmap] = []
        self._free_slots: list[int] = []
        #: The file whose blocks are being handed out: (its lines, its source, its blocks).
        self._feed: tuple[Iterable[bytes], str, Iterator[Any]] | None = None
        #: Files to read once the one under way is all handed out (see :meth:`expect`).
        self._upcoming: deque[tuple[str, Iterable[bytes]]] = deque()
        #: Lines read ahead and then given up (an error): they cannot be read again.
        self._dropped: list[Iterable[bytes]] = []

    def __enter__(self) -> "PreparePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._pool is not None

    def expect(self, files: Iterable[tuple[str, Iterable[bytes]]]) -> None:
        """The files (source, lines) this ingest reads next, in order, each later passed to
        :meth:`row_blocks` as the very same lines object: once the workers run, the next file's
        blocks go to them while the writer still inserts the last rows of the one before, so
        the pipeline does not drain at each file's end. Only reading moves earlier: the rows and
        errors of each file still come out of its own :meth:`row_blocks`, in file order."""
        self._upcoming.extend(files)

    def expect_bytes(self, size: int) -> None:
        """This ingest's native files hold ``size`` bytes more (their sizes on disk): once the
        total passes :data:`POOL_MIN_BYTES`, the workers start with the first file, instead of
        after its first blocks, which this process would prepare itself meanwhile (a first
        file of 10,000 lines: most of a second of the writer's time, alone on the critical path)."""
        self._expected_bytes += size

    def close(self) -> None:
        """Cancel blocks not yet started, wait for the running ones, end the processes and let
        go of the buffers shared with them."""
        self._drop_ahead()
        self._upcoming.clear()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        slots, self._slots, self._free_slots = self._slots + self._inputs, [], []
        self._inputs = []
        for slot in slots:
            try:
                slot.close()
            except BufferError:  # a block's rows still being read (an abandoned generator): freed with it
                pass

    def row_blocks(self, source: str, lines: Iterable[bytes]) -> Iterator[list[tuple]]:
        """The items of :func:`procgrade.engine.native._row_items` for ``lines``, in order and in
        lists (a block of lines each): prepared in this process while the ingest is small, by
        the workers once it is big enough.

        A line that cannot be read (too long) is reported only after every line before it is
        checked, so the first problem in file order is the one reported, as in one process."""
        from procgrade.engine.native import _row_items, item_blocks

        if any(lines is dropped for dropped in self._dropped):
            raise RuntimeError(f"{source}: its lines were read ahead and given up after an error")
        self._forget_upcoming(lines)
        if self.workers <= 0:  # a block at a time, read line by line
            yield from item_blocks(_row_items(source, enumerate(lines, start=1)))
            return
        if self._pool is None and self._expected_bytes > POOL_MIN_BYTES:
            self._start()
        if self._pool is None:
            blocks = _read_ahead(_blocks(lines))
            held: list[Any] = []
            for block in blocks:
                held.append(block)
                if isinstance(block, Exception):
                    break
                self._blocks_read += 1
                if self._blocks_read > POOL_MIN_BLOCKS:
                    self._start()
                    break
            if self._pool is None:  # the input so far is small: no process pays its start-up
                for block in held:
                    if isinstance(block, Exception):
                        raise block
                    first, block_lines = block
                    yield from item_blocks(_row_items(source, enumerate(_lines_of(block_lines), start=first)))
                return
            self._drop_ahead()
            self._feed = (lines, source, itertools.chain(held, blocks))
        elif not self._reading(lines):  # not read ahead: whatever was is of no use now
            self._drop_ahead()
            self._feed = (lines, source, _read_ahead(_blocks(lines)))
        pending = self._pending
        finished = False
        try:
            while True:
                self._fill()
                if not pending or pending[0][0] is not lines:  # every block of this file is consumed
                    finished = True
                    return
                _lines, item, slot = pending.popleft()
                if isinstance(item, Exception):
                    raise item
                try:
                    yield from _unpacked(source, item.result(), None if slot is None else self._slots[slot])
                finally:
                    if slot is not None:  # its rows are all unmarshalled (or given up): free for the next block
                        self._free_when_done(item, slot)
        finally:
            if not finished:  # an error or an early stop: nothing more of this ingest is read ahead
                self._drop_ahead()
                self._dropped.extend(later for _source, later in self._upcoming)
                self._upcoming.clear()

    def _reading(self, lines: Iterable[bytes]) -> bool:
        """Are ``lines`` the file whose blocks are handed out or waiting to be consumed?"""
        return bool(self._pending and self._pending[0][0] is lines) or (
            self._feed is not None and self._feed[0] is lines)

    def _forget_upcoming(self, lines: Iterable[bytes]) -> None:
        """Take ``lines`` (and any file expected before it) off the files to read ahead."""
        if any(lines is later for _source, later in self._upcoming):
            while self._upcoming.popleft()[1] is not lines:
                pass

    def _fill(self) -> None:
        """Hand blocks to the workers until :data:`_WINDOW` per worker are in flight, going on
        to the next expected file once the current one is all handed out."""
        pending, pool = self._pending, self._pool
        assert pool is not None
        while len(pending) < _WINDOW * self.workers:
            if self._feed is None:
                if not self._upcoming:
                    return
                source, lines = self._upcoming.popleft()
                self._feed = (lines, source, _read_ahead(_blocks(lines)))
            lines, source, blocks = self._feed
            block = next(blocks, None)
            if block is None:
                self._feed = None
            elif isinstance(block, Exception):  # raised when this file's items reach it
                pending.append((lines, block, None))
                self._feed = None
            else:
                # a block given up while a worker ran it keeps its buffer until that ends: then
                # (rarely) none is free and the rows come through the pipe
                slot = self._free_slots.pop() if self._free_slots else None
                try:
                    future = self._submit(source, *block, slot)
                except BaseException:
                    if slot is not None:
                        self._free_slots.append(slot)
                    raise
                pending.append((lines, future, slot))

    def _submit(self, source: str, first: int, lines: list[bytes] | bytes, slot: int | None) -> Any:
        """Hand a block to the workers: its lines (or, from a :class:`procgrade.engine.native.NativeFile`,
        their bytes joined by newlines) in the slot's input buffer when they fit and hold no newline
        of their own (lines from elsewhere than :func:`bounded_lines` may)."""
        assert self._pool is not None
        if type(lines) is bytes:
            if slot is not None and len(lines) <= INPUT_BYTES:
                self._inputs[slot][:len(lines)] = lines
                return self._pool.submit(_prepare_block, source, first, len(lines), slot)
        elif slot is not None and sum(map(len, lines)) + len(lines) - 1 <= INPUT_BYTES:
            joined = b"\n".join(lines)
            if joined.count(b"\n") == len(lines) - 1:
                self._inputs[slot][:len(joined)] = joined
                return self._pool.submit(_prepare_block, source, first, len(joined), slot)
        return self._pool.submit(_prepare_block, source, first, lines, slot)

    def _free_when_done(self, future: Any, slot: int) -> None:
        """Give ``slot`` back once no worker can still use it: now if ``future`` is done or was
        cancelled before it ran, else when it ends (into this pool's list of the time)."""
        free = self._free_slots
        if future.cancel() or future.done():
            free.append(slot)
        else:
            future.add_done_callback(lambda _future: free.append(slot))

    def _drop_ahead(self) -> None:
        """Cancel every block in flight and stop handing out the current file."""
        pending = list(self._pending)
        self._pending.clear()  # first: a failure below must not free these slots twice
        for _lines, future, slot in pending:
            if not isinstance(future, Exception) and slot is not None:
                self._free_when_done(future, slot)
        dropped = {id(lines): lines for lines, _item, _slot in pending}
        if self._feed is not None:
            dropped[id(self._feed[0])] = self._feed[0]
            close = getattr(self._feed[2], "close", None)
            if close is not None:  # the reading under way: its file is closed now
                close()
        for lines in dropped.values():
            close = getattr(lines, "close", None)
            if close is not None:  # a generator over an open file: let it go now
                close()
        self._dropped.extend(dropped.values())
        self._feed = None

    def _start(self) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from procgrade.engine.events import build_event_validators
        from procgrade.engine.native import fields_path_ready

        build_event_validators()
        fields_path_ready()
        niceness = WORKER_NICENESS if self.workers >= usable_cores() else 0
        # made before the workers are forked, which inherit them (shared, not copied)
        self._slots = [mmap.mmap(-1, SLOT_BYTES) for _ in range(_WINDOW * self.workers)]
        self._inputs = [mmap.mmap(-1, INPUT_BYTES) for _ in self._slots]
        self._free_slots = list(range(len(self._slots)))
        self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"),
                                         initializer=_start_worker,
                                         initargs=(os.getpid(), niceness, self._slots, self._inputs))


def _start_worker(parent: int, niceness: int, slots: list[mmap.mmap], inputs: list[mmap.mmap]) -> None:
    """A worker's first step: follow its parent (:func:`follow_parent`), lower its priority by
    ``niceness`` and keep the buffers it shares with the writer."""
    global _slots, _inputs
    _slots, _inputs = slots, inputs
    follow_parent(parent)
    if niceness:
        try:
            os.nice(niceness)
        except OSError:  # not allowed here: the workers share the cores evenly with the writer
            pass


def _read_ahead(blocks: Iterator[tuple[int, list[bytes]]]) -> Iterator[Any]:
    """The blocks, then the error that stopped reading (if one did: a line too long, a file
    that cannot be read or fails midway) as the last item, so the lines read before it are
    checked before it is raised, and a file read ahead raises only once its turn comes."""
    try:
        yield from blocks
    except Exception as exc:
        yield exc


def _blocks(lines: Iterable[bytes]) -> Iterator[tuple[int, list[bytes] | bytes]]:
    """(number of the first line, lines) in blocks of at most BLOCK_LINES lines or about BLOCK_BYTES;
    from a :class:`procgrade.engine.native.NativeFile`, the lines of each block joined by newlines
    (read a block at a time, never split into lines here)."""
    from procgrade.engine.native import NativeFile

    if isinstance(lines, NativeFile):
        yield from lines.blocks(max_lines=BLOCK_LINES, read_bytes=BLOCK_READ_BYTES)
        return
    block: list[bytes] = []
    size, first = 0, 1
    try:
        for number, raw in enumerate(lines, start=1):
            if not block:
                first = number
            block.append(raw)
            size += len(raw)
            if len(block) >= BLOCK_LINES or size >= BLOCK_BYTES:
                yield first, block
                block, size = [], 0
    except Exception:  # a line or file that cannot be read: the lines before it are checked first
        if block:
            yield first, block
        raise
    if block:
        yield first, block


#: In a worker: the buffers it shares with the writer, by slot: for rows (:data:`SLOT_BYTES`
#: each) and for lines (:data:`INPUT_BYTES`).
_slots: list[mmap.mmap] = []
_inputs: list[mmap.mmap] = []


def _prepare_block(source: str, first: int, lines: list[bytes] | bytes | int,
                   slot: int | None = None) -> tuple[list[int], list[bytes], Any]:
    """The block's items up to the line that stopped it, marshalled SCAN_LINES at a time, and
    that line's error: (the sizes of the parts written one after another into shared buffer
    ``slot``, the parts that did not fit there, the error as (line, field, reason), any other
    error as itself, or None). Any error, not only bad input, comes back with the items before
    it, so the caller's checks across those lines still run first, as they do when one process
    reads everything. ``lines``: the block's lines, their bytes joined by newlines, or how many
    bytes of them (joined by newlines) the slot's input buffer holds."""
    from procgrade.engine.native import row_item_lists

    if isinstance(lines, int):
        assert slot is not None
        lines = _inputs[slot][:lines].split(b"\n")
    else:
        lines = _lines_of(lines)
    buffer = None if slot is None else _slots[slot]
    written: list[int] = []
    offset = 0
    piped: list[bytes] = []
    error: Any = None

    def pack(items: list[Any]) -> None:  # marshalled while still in the cache: a fifth cheaper than whole blocks
        nonlocal offset
        part = marshal.dumps(items)
        if buffer is not None and not piped and offset + len(part) <= len(buffer):
            buffer[offset:offset + len(part)] = part
            offset += len(part)
            written.append(len(part))
        else:  # once one part goes through the pipe, every later one does: the order is kept
            piped.append(part)

    try:
        for items in row_item_lists(source, enumerate(lines, start=first)):
            pack(items)
    except InputError as exc:
        error = (exc.line, exc.field, exc.reason)
    except Exception as exc:  # noqa: BLE001 - raised by the caller in its turn
        error = exc if _pickles(exc) else RuntimeError(f"{type(exc).__name__}: {exc}")
    return written, piped, error


def _lines_of(block: list[bytes] | bytes) -> list[bytes]:
    """A block's lines (:func:`_blocks`)."""
    return block.split(b"\n") if type(block) is bytes else block


def _pickles(exc: BaseException) -> bool:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any failure means it does not travel
        return False
    return True


def _unpacked(source: str, result: tuple[list[int], list[bytes], Any],
              buffer: mmap.mmap | None) -> Iterator[list[tuple]]:
    """A worker's block: its items (a list per marshalled part: those in its shared ``buffer``,
    then those that came through the pipe), then the error that stopped it, if any."""
    written, piped, error = result
    if written:
        assert buffer is not None
        offset = 0
        with memoryview(buffer) as view:
            for size in written:
                yield marshal.loads(view[offset:offset + size])
                offset += size
    for part in piped:
        yield marshal.loads(part)
    if isinstance(error, BaseException):
        raise error
    if error is not None:
        raise InputError(source, *error)
