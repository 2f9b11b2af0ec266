"""Reading and writing at once: forked workers read and prepare a unit's runs while ingest
writes them.

Reading a harness log (parsing, redaction, building events), preparing its rows (canonical
JSON, payload hashes: :func:`procgrade.engine.stored.prepare_row`) and writing them (chain
hashes, inserts) each take a share of an import; one process does one after the other and
keeps one core busy. Here child processes, forked when a unit is read, run the importer,
prepare each finished run's rows and hand them over a pipe each (a few runs in flight, so
memory stays bounded by the runs, not the source), while the parent, the one writer, only
chains and appends them in order. Rows are lists of strings and numbers: they pickle and
unpickle at memory speed, unlike the events' models and payloads. Where the importer can
split a unit (:meth:`Importer.shared_reading`: an Inspect ``.json`` log's samples), each of
several workers reads every n-th run and the parent takes the runs in turn from each, so the
order, and the first error met in that order, are the ones a single reader gives. The
children only read: they never touch the store (they leave with ``os._exit``, so nothing
inherited is closed or flushed), and an error one meets is handed over and raised by the
parent, where the transaction is rolled back as always.

Used where ``fork`` exists, the unit holds enough runs to be worth the hand-over (a unit the
importer says is big) and a core is idle (see :func:`_workers`); otherwise, and with
``PROCGRADE_IMPORT_WORKERS=0``, runs are read in the writing process as before. Either way the
runs' rows, and so the stored bytes, are the same.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from procgrade.engine.cores import usable_cores
from procgrade.engine.errors import InputError
from procgrade.engine.events import build_event_validators
from procgrade.engine.importers.base import TAKEOVER, Importer, Unit
from procgrade.engine.importers.building import ImportedRun
from procgrade.engine.importers.source_tree import SourceTree
from procgrade.engine.worker_processes import follow_parent

__all__ = ["PreparedRun", "prepared_runs_of", "IN_FLIGHT", "MAX_WORKERS"]

#: Runs handed over and not yet taken by the writer at most, all workers together (each gets
#: its part, at least one). Each worker also holds the run it is preparing and, while it waits
#: for a slot, the next one pickled: with four workers about 12 runs are in memory at once.
IN_FLIGHT = 4
#: Workers reading one unit at most.
MAX_WORKERS = 4
_RUN = "run"
_DONE = "done"
_FAILED = "failed"
_TAKEOVER = "takeover"


@dataclass
class PreparedRun:
    """One imported run as ingest writes it: its rows, prepared (``RunWriter.append_rows``), and
    where each seq came from (for the store's errors)."""

    run_id: str
    rows: list[list[Any]]
    places: list[tuple[str, str]]
    #: The tree the places are in (None from a worker: the parent fills in its own).
    tree: SourceTree | None


def prepared(run: ImportedRun) -> PreparedRun:
    """``run``'s rows (its events let go of as they are prepared: memory holds one form)."""
    from procgrade.engine.stored import prepare_row

    events = run.events
    rows = [prepare_row(event) for event in events]
    run.events = []
    return PreparedRun(run.run_id, rows, run.places, run.tree)


def prepared_runs_of(importer: Importer, tree: SourceTree, unit: Unit) -> Iterator[PreparedRun]:
    """``importer.iter_runs(tree, unit)`` as prepared rows, read and prepared by forked workers
    when that is worth it."""
    count = _workers(importer, tree, unit)
    if not count:
        for run in importer.iter_runs(tree, unit):
            yield prepared(run)
        return
    shared = importer.shared_reading(tree, unit) if count > 1 else None
    if shared is None:
        readers: list[Callable[[], Iterator[Any]]] = [lambda: importer.iter_runs(tree, unit)]
    else:
        readers = [lambda share=share: shared.read(share, count) for share in range(count)]
    build_event_validators()
    context = multiprocessing.get_context("fork")
    slots = max(1, IN_FLIGHT // len(readers))
    workers: list[_Worker] = []
    finished = False
    try:
        for read in readers:  # inside the try: a fork that fails stops the workers already started
            workers.append(_Worker(context, read, tree, slots))
        position, sole = 0, None
        while True:
            worker = workers[position % len(workers)] if sole is None else sole
            kind, data = worker.receive(tree.label(unit.primary))
            if kind == _TAKEOVER:
                sole = worker  # it reads every run from here on; the others' shares are moot
                for other in workers:
                    if other is not worker:
                        other.stop(False)
                continue
            if kind == _DONE:
                finished = True
                return
            if kind == _FAILED:
                finished = True
                raise _rebuilt(data)
            if data.tree is None:
                data.tree = tree
            yield data
            del data
            position += 1
    finally:
        for worker in workers:
            worker.stop(finished)


class _Worker:
    """One forked reader and the pipe its runs come over."""

    def __init__(self, context: Any, read: Callable[[], Iterator[Any]], tree: SourceTree, slots: int) -> None:
        self.reader, writer = context.Pipe(duplex=False)
        _widen(writer)
        # A semaphore bounds the runs in flight: sent and not yet taken by the writer.
        self.slots = context.BoundedSemaphore(slots)
        self.process = context.Process(target=_read, args=(read, tree, writer, self.slots, os.getpid()),
                                       daemon=True)
        self.process.start()
        writer.close()
        self.done = False

    def receive(self, label: str) -> tuple[str, Any]:
        try:
            message = self.reader.recv_bytes()
        except (EOFError, OSError):  # gone between messages (EOFError) or in the middle of one
            raise RuntimeError(f"the import worker reading {label} stopped "
                               f"(exit code {_exit_code(self.process)})") from None
        self.slots.release()
        kind, data = pickle.loads(message)
        self.done = kind in (_DONE, _FAILED)
        return kind, data

    def stop(self, finished: bool) -> None:
        """End the worker: stopped unless it said it was done (then it is leaving by itself)."""
        if not (finished and self.done) and self.process.is_alive():
            self.process.terminate()
        self.process.join()
        self.reader.close()


def _widen(writer: Any) -> None:
    """Give the pipe a buffer of a run's size (Linux: up to ``/proc/sys/fs/pipe-max-size``, 1 MB
    by default), so that the worker hands a run or two over without waiting for this process to
    take them. Where that cannot be done the pipe only stays narrower."""
    try:
        import fcntl

        fcntl.fcntl(writer.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except (ImportError, OSError, ValueError):
        pass


_PIPE_BYTES = 1 << 20


def _exit_code(child: Any) -> int | None:
    child.join(5)
    return child.exitcode


def _workers(importer: Importer, tree: SourceTree, unit: Unit) -> int:
    """How many workers read ``unit``: ``PROCGRADE_IMPORT_WORKERS=N`` that many (0: none, read
    here), where ``fork`` exists and the importer says the unit is worth it; by default, when
    other work leaves at least half a core idle now, one per core, at most :data:`MAX_WORKERS`
    (only a unit the importer can split gets more than one). One worker per core, not per idle
    core: reading is most of the work and divides evenly, so on 2 cores with another process busy
    two workers still beat one (500-sample Inspect log, load 1.9: 4.2 s against 5.2-5.9 s wall,
    6.2 s in process). The hand-over costs CPU (pickling), so on a machine whose cores are all
    busy a worker only slows the import. Cores are the ones this process may use
    (:func:`procgrade.engine.cores.usable_cores`: a container's CPU quota counts); idle is the
    machine's."""
    setting = os.environ.get("PROCGRADE_IMPORT_WORKERS", "").strip()
    if setting == "0" or sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    if not importer.worth_a_worker(tree, unit):
        return 0
    if setting.isdigit():
        return min(int(setting), MAX_WORKERS)
    cores = usable_cores()
    if cores < 2:
        return 0
    return min(cores, MAX_WORKERS) if _busy_elsewhere() < (os.cpu_count() or 1) - 0.5 else 0


def _busy_elsewhere() -> float:
    """Cores busy with other work now: the share of CPU time not idle over a short look
    (``/proc/stat``, Linux; this process sleeps meanwhile, so it is other processes' use), else
    the load average of the last minute. A single count of runnable tasks misleads: busy
    processes that happen to wait on I/O at that instant are not counted."""
    try:
        first = _cpu_times()
        time.sleep(_LOOK_SECONDS)
        second = _cpu_times()
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    total = sum(second) - sum(first)
    idle = (second[3] + second[4]) - (first[3] + first[4])  # idle and iowait
    if total <= 0:
        return 0.0
    return (os.cpu_count() or 1) * (1 - idle / total)


#: How long :func:`_busy_elsewhere` looks (a few clock ticks of every core).
_LOOK_SECONDS = 0.05


def _cpu_times() -> list[int]:
    """The machine's CPU time so far by kind (user, nice, system, idle, iowait, ...), in ticks."""
    with open("/proc/stat", "rb") as handle:
        fields = handle.readline().split()
    if fields[0] != b"cpu":
        raise ValueError("no cpu line")
    return [int(field) for field in fields[1:9]]


def _read(read: Callable[[], Iterator[Any]], tree: SourceTree, writer: Any, slots: Any, parent: int) -> None:
    """The child: read its runs, prepare their rows and hand them over; an error is handed over
    too. Leaves with ``os._exit`` so that no inherited resource (the parent's store connection)
    is touched, and dies with the parent (:func:`follow_parent`)."""
    code = 0
    try:
        follow_parent(parent)
        for run in read():
            if isinstance(run, str):
                assert run == TAKEOVER
                message = pickle.dumps((_TAKEOVER, None))
            else:
                ready = prepared(run)
                if ready.tree is tree:
                    ready.tree = None  # the parent has it
                message = pickle.dumps((_RUN, ready), protocol=pickle.HIGHEST_PROTOCOL)
                del ready
            slots.acquire()
            writer.send_bytes(message)
            del message
        slots.acquire()
        writer.send_bytes(pickle.dumps((_DONE, None)))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
        message = pickle.dumps((_FAILED, _portable(exc)))
        try:
            slots.acquire()
            writer.send_bytes(message)
        except (OSError, ValueError):
            code = 1
    finally:
        try:
            writer.close()
        finally:
            os._exit(code)  # no flush: buffered output inherited from the parent is the parent's to write


def _portable(exc: BaseException) -> tuple[Any, ...]:
    """An error as something that survives pickling: an ``InputError`` by its four parts (its
    own pickling would call it with the message alone), others as they are when they round-trip,
    else as their text."""
    if isinstance(exc, InputError):
        return ("input", type(exc), (exc.source, exc.line, exc.field, exc.reason))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - unpicklable: its text still gets there
        return ("other", RuntimeError(f"{type(exc).__name__}: {exc}"))
    return ("other", exc)


def _rebuilt(portable: tuple[Any, ...]) -> BaseException:
    """The error :func:`_portable` made portable, as it was."""
    if portable[0] == "input":
        return portable[1](*portable[2])
    return portable[1]
