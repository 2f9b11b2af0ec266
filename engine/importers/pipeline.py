"""Reading and writing at once: a forked worker reads and prepares a unit's runs while ingest
writes them.

Reading a harness log (parsing, redaction, building events), preparing its rows (canonical
JSON, payload hashes: :func:`procgrade.engine.stored.prepare_row`) and writing them (chain
hashes, inserts) each take a share of an import; one process does one after the other and
keeps one core busy. Here a child process, forked when a unit is read, runs the importer,
prepares each finished run's rows and hands them over a bounded queue (a few runs in flight,
so memory stays bounded by the runs, not the source), while the parent, the one writer, only
chains and appends them in order. Rows are lists of strings and numbers: they pickle and
unpickle at memory speed, unlike the events' models and payloads. The child only reads: it
never touches the store (it leaves with ``os._exit``, so nothing inherited is closed or
flushed), and an error it meets is handed over and raised by the parent, where the
transaction is rolled back as always.

Used where ``fork`` exists, the unit holds enough runs to be worth the hand-over (a unit the
importer says is big) and a core is idle (see :func:`_parallel`); otherwise, and with
``PROCGRADE_IMPORT_WORKERS=0``, runs are read in the writing process as before. Either way the
runs' rows, and so the stored bytes, are the same.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.importers.base import Importer, Unit
from procgrade.engine.importers.building import ImportedRun
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["PreparedRun", "prepared_runs_of", "IN_FLIGHT"]

#: Runs read ahead of the writer at most (each held pickled in the queue).
IN_FLIGHT = 4
_RUN = "run"
_DONE = "done"
_FAILED = "failed"


@dataclass
class PreparedRun:
    """One imported run as ingest writes it: its rows, prepared (``RunWriter.append_rows``), and
    where each seq came from (for the store's errors)."""

    run_id: str
    rows: list[list[Any]]
    places: list[tuple[str, str]]
    #: The tree the places are in (None from the worker: the parent fills in its own).
    tree: SourceTree | None


def prepared(run: ImportedRun) -> PreparedRun:
    """``run``'s rows (its events let go of as they are prepared: memory holds one form)."""
    from procgrade.engine.stored import prepare_row

    events = run.events
    rows = [prepare_row(event) for event in events]
    run.events = []
    return PreparedRun(run.run_id, rows, run.places, run.tree)


def prepared_runs_of(importer: Importer, tree: SourceTree, unit: Unit) -> Iterator[PreparedRun]:
    """``importer.iter_runs(tree, unit)`` as prepared rows, read and prepared by a forked worker
    when that is worth it."""
    if not _parallel(importer, tree, unit):
        for run in importer.iter_runs(tree, unit):
            yield prepared(run)
        return
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    _widen(writer)
    # A semaphore bounds the runs in flight: sent and not yet taken by the writer.
    slots = context.BoundedSemaphore(IN_FLIGHT)
    child = context.Process(target=_read, args=(importer, tree, unit, writer, slots), daemon=True)
    child.start()
    writer.close()
    finished = False
    try:
        while True:
            try:
                message = reader.recv_bytes()
            except EOFError:
                raise RuntimeError(f"the import worker reading {tree.label(unit.primary)} stopped "
                                   f"(exit code {_exit_code(child)})") from None
            slots.release()
            kind, data = pickle.loads(message)
            del message
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
    finally:
        if not finished and child.is_alive():
            child.terminate()
        child.join()
        reader.close()


def _widen(writer: Any) -> None:
    """Give the pipe a buffer of a run's size (Linux: up to ``/proc/sys/fs/pipe-max-size``, 1 MB
    by default), so that the worker hands a run over in one write, not in 64 KB steps each waiting
    for this process to be scheduled. Where that cannot be done the pipe only stays narrower."""
    try:
        import fcntl

        fcntl.fcntl(writer.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except (ImportError, OSError, ValueError):
        pass


_PIPE_BYTES = 1 << 20


def _exit_code(child: Any) -> int | None:
    child.join(5)
    return child.exitcode


def _parallel(importer: Importer, tree: SourceTree, unit: Unit) -> bool:
    """Whether to read ``unit`` in a worker: ``PROCGRADE_IMPORT_WORKERS=0`` never, ``=1`` always
    (where ``fork`` exists and the importer says the unit is worth it); by default only when a
    core is idle. The hand-over costs CPU (pickling), so on a machine whose cores are all busy
    the worker only slows the import (measured: about +20% CPU and more wall time there)."""
    setting = os.environ.get("PROCGRADE_IMPORT_WORKERS", "")
    if setting == "0" or sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods():
        return False
    if not importer.worth_a_worker(tree, unit):
        return False
    if setting == "1":
        return True
    cores = os.cpu_count() or 1
    return cores >= 2 and os.getloadavg()[0] <= cores - 1


def _read(importer: Importer, tree: SourceTree, unit: Unit, writer: Any, slots: Any) -> None:
    """The child: read every run, prepare its rows and hand them over; an error is handed over
    too. Leaves with ``os._exit`` so that no inherited resource (the parent's store connection)
    is touched."""
    code = 0
    try:
        for run in importer.iter_runs(tree, unit):
            ready = prepared(run)
            if ready.tree is tree:
                ready.tree = None  # the parent has it
            data = pickle.dumps((_RUN, ready), protocol=pickle.HIGHEST_PROTOCOL)
            del ready
            slots.acquire()
            writer.send_bytes(data)
            del data
        slots.acquire()
        writer.send_bytes(pickle.dumps((_DONE, None)))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
        data = pickle.dumps((_FAILED, _portable(exc)))
        try:
            slots.acquire()
            writer.send_bytes(data)
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
