"""Reading and writing at once: a forked worker reads a unit's runs while ingest writes them.

Reading a harness log (parsing, redaction, building events) and writing it (canonical JSON,
hashes, inserts) each take about half of an import; one process does one after the other and
keeps one core busy. Here a child process, forked when a unit is read, runs the importer and
hands each finished run over a bounded queue (a few runs in flight, so memory stays bounded by
the runs, not the source), while the parent, the one writer, appends them in order. The child
only reads: it never touches the store (it leaves with ``os._exit``, so nothing inherited is
closed or flushed), and an error it meets is handed over and raised by the parent, where the
transaction is rolled back as always.

Used where ``fork`` exists, the unit holds enough runs to be worth the hand-over (a unit the
importer says is big) and a core is idle (see :func:`_parallel`); otherwise, and with
``PROCGRADE_IMPORT_WORKERS=0``, runs are read in the writing process as before. Either way the
runs, and so the stored bytes, are the same.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.importers.base import Importer, Unit
from procgrade.engine.importers.building import ImportedRun
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["runs_of", "IN_FLIGHT"]

#: Runs read ahead of the writer at most (each held pickled in the queue).
IN_FLIGHT = 4
_DONE = b"done"
_FAILED = b"failed"


def runs_of(importer: Importer, tree: SourceTree, unit: Unit) -> Iterator[ImportedRun]:
    """``importer.iter_runs(tree, unit)``, read by a forked worker when that is worth it."""
    if not _parallel(importer, tree, unit):
        yield from importer.iter_runs(tree, unit)
        return
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    # The pipe's buffer plus a semaphore bound the runs in flight.
    slots = context.BoundedSemaphore(IN_FLIGHT)
    child = context.Process(target=_read, args=(importer, tree, unit, writer, slots), daemon=True)
    child.start()
    writer.close()
    finished = False
    try:
        while True:
            try:
                kind, data = reader.recv()
            except EOFError:
                raise RuntimeError(f"the import worker reading {tree.label(unit.primary)} stopped "
                                   f"(exit code {child.exitcode})") from None
            slots.release()
            if kind == _DONE:
                finished = True
                return
            if kind == _FAILED:
                finished = True
                raise _rebuilt(pickle.loads(data))
            run = _unpacked(data)
            if run.tree is None:
                run.tree = tree
            yield run
    finally:
        reader.close()
        if not finished and child.is_alive():
            child.terminate()
        child.join()


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
    """The child: read every run and hand it over; an error is handed over too. Leaves with
    ``os._exit`` so that no inherited resource (the parent's store connection) is touched."""
    code = 0
    try:
        for run in importer.iter_runs(tree, unit):
            if run.tree is tree:
                run.tree = None  # the parent has it
            data = _packed(run)
            slots.acquire()
            writer.send((b"run", data))
        slots.acquire()
        writer.send((_DONE, b""))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
        data = pickle.dumps(_portable(exc))
        try:
            slots.acquire()
            writer.send((_FAILED, data))
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
    if portable[0] == "input":
        return portable[1](*portable[2])
    return portable[1]


def _packed(run: ImportedRun) -> bytes:
    """``run`` pickled with its events' payloads beside the events, not in them: a pydantic model
    holding a big payload unpickles several times slower than the two apart (the writer's time)."""
    payloads = [event.payload for event in run.events]
    for event in run.events:
        object.__setattr__(event, "payload", None)  # the child's copy, sent and dropped
    return pickle.dumps((run, payloads), protocol=pickle.HIGHEST_PROTOCOL)


def _unpacked(data: bytes) -> ImportedRun:
    run, payloads = pickle.loads(data)
    for event, payload in zip(run.events, payloads):
        object.__setattr__(event, "payload", payload)  # the validated value, put back as it was
    return run
