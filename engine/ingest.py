"""Ingest: read sources and append every run in one transaction, writing as they are read.

Sources are procgrade's native JSONL or any format an importer reads (``--format
auto`` detects which, file by file, and the report says which it chose). Nothing
is written unless every source validates and every run appends: a bad line or
record anywhere, or a conflict in any run, leaves the store as it was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from procgrade.engine import cyclic_gc
from procgrade.engine.errors import InputError, StoreError
from procgrade.engine.importers.provenance import Overrides
from procgrade.engine.native import NativeFile, RunEvents, iter_native_rows
from procgrade.engine.native_workers import PreparePool
from procgrade.engine.store import AppendResult, EventStore
from procgrade.engine.store.base import RunWriter

if TYPE_CHECKING:
    from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["IngestReport", "Ingested", "Overrides", "ingest_native", "ingest_paths", "formats"]


def formats() -> list[str]:
    """What ``--format`` takes: auto, native, and every importer's name."""
    from procgrade.engine.importers import importers

    return ["auto", "native", *importers()]


@dataclass(frozen=True)
class IngestReport:
    source: str
    run_id: str
    events_read: int
    duplicates_skipped: int
    result: AppendResult
    format: str = "native"

    @property
    def summary(self) -> str:
        r = self.result
        run = f"{self.source} ({self.format}): run {self.run_id}"
        if r.no_op and r.sealed_now:  # held already; this ingest only sealed it
            return f"{run}: already stored ({r.event_count} events); sealed now at head {(r.head_hash or '-')[:12]}"
        if r.no_op:
            sealed = ", sealed" if r.sealed else ""
            return f"{run}: already stored ({r.event_count} events{sealed}), nothing written"
        held = f", {r.already_stored} already stored" if r.already_stored else ""
        sealed = ", sealed" if r.sealed else ""
        return f"{run}: {r.appended} events appended{held} (head {r.head_hash[:12]}{sealed})"


@dataclass(frozen=True)
class Ingested:
    """What one ingest did: a report per run, and the files no format recognised."""

    reports: list[IngestReport]
    unrecognised: list[str]


def ingest_paths(store: EventStore, paths: Sequence[Path | str], *, format: str = "auto",
                 seal: bool = False, overrides: Overrides | None = None) -> Ingested:
    """Ingest files, directories and archives in any known format: all runs, or nothing.

    With ``format="auto"`` each file is given to the first importer that recognises it
    (native logs included); files nobody recognises are listed, not guessed at.
    ``overrides`` (``--system/--model/--label``) give every imported run what its format
    does not record; native logs carry their own provenance and are refused with them.
    """
    from procgrade.engine.importers.provenance import overrides as applying

    given = overrides or Overrides()
    with applying(given):
        return _ingest(store, paths, format=format, seal=seal, given=given)


def _ingest(store: EventStore, paths: Sequence[Path | str], *, format: str, seal: bool, given: Overrides) -> Ingested:
    from procgrade.engine.importers import plan_imports
    from procgrade.engine.importers.pipeline import prepared_runs_of
    from procgrade.engine.importers.source_tree import open_tree

    reports: list[IngestReport] = []
    unrecognised: list[str] = []
    with cyclic_gc.paused(), _prepare_pool() as pool, store.writer(bulk=True) as writer:
        if format == "native":
            paths = list(paths)  # a caller's iterator: the first path is named below if refused
            if given and paths:
                raise _native_refused(str(paths[0]))
            files, size = _native_sources(paths, unrecognised)
            return Ingested(_append_native_files(writer, files, size, pool, seal), unrecognised)
        for path in paths:
            tree = open_tree(path)
            native = [rel for rel in tree.selected if format == "auto" and _is_native(tree, rel)]
            if native and given:
                raise _native_refused(tree.label(native[0]))
            reports.extend(_append_native_files(writer, *_tree_files(tree, native), pool, seal))
            plan = plan_imports(tree, format, skip=native)
            unrecognised.extend(tree.label(rel) for rel in plan.unrecognised)
            for importer, unit in plan.units:
                for run in prepared_runs_of(importer, tree, unit):  # read by a worker while written here
                    try:
                        result = writer.append_rows(run.run_id, run.rows, seal=seal)
                    except StoreError as exc:
                        raise _locate_imported(exc, run.tree or tree, run.places) from exc
                    reports.append(IngestReport(tree.label(unit.primary), run.run_id, len(run.rows), 0,
                                                result, importer.name))
                    del run
    return Ingested(reports, unrecognised)


def _native_refused(where: str) -> InputError:
    return InputError(where, None, None, "--system, --model and --label apply to imported formats; a native log "
                      "records its own provenance (ingest it separately)")


def _append_native(writer: RunWriter, pieces: Iterator[RunEvents], seal: bool) -> list[IngestReport]:
    """Write one file's runs piece by piece as they are read (memory holds a piece per run, not
    the file); seal them once the file is read; one report per run."""
    totals: dict[str, _RunTotals] = {}
    with contextlib.closing(pieces):  # on an error, stop the file's reading (and its queued blocks) now
        for piece in pieces:
            try:
                result = writer.append_rows(piece.run_id, piece.rows, redactions=piece.redactions)
            except StoreError as exc:
                raise _locate(exc, [piece]) from exc
            totals.setdefault(piece.run_id, _RunTotals(piece.source)).add(piece, result)
    if seal:
        for run_id in totals:
            was_sealed = totals[run_id].last.sealed  # as the run stood when this file's events went in
            info = writer.seal(run_id)
            totals[run_id].sealed = info.sealed
            totals[run_id].sealed_now = info.sealed and not was_sealed
    return [t.report(run_id) for run_id, t in totals.items()]


@dataclass
class _RunTotals:
    """One run's pieces of one file, added up into one report."""

    source: str
    events_read: int = 0
    duplicates_skipped: int = 0
    appended: int = 0
    already_stored: int = 0
    last: AppendResult | None = None
    sealed: bool = False
    sealed_now: bool = False

    def add(self, piece: RunEvents, result: AppendResult) -> None:
        self.events_read += len(piece.items)
        self.duplicates_skipped += piece.duplicates_skipped
        self.appended += result.appended
        self.already_stored += result.already_stored
        self.last = result

    def report(self, run_id: str) -> IngestReport:
        last = self.last
        assert last is not None
        result = AppendResult(run_id, self.appended, self.already_stored, last.event_count, last.head_hash,
                              last.sealed or self.sealed, sealed_now=last.sealed_now or self.sealed_now)
        return IngestReport(self.source, run_id, self.events_read, self.duplicates_skipped, result)


def _is_tree(path: Path | str) -> bool:
    """A directory or an archive: what ``--format native`` reads file by file, like any format."""
    from procgrade.engine.importers.source_tree import ARCHIVE_SUFFIXES

    return Path(path).is_dir() or str(path).lower().endswith(ARCHIVE_SUFFIXES)


def _native_sources(paths: list[Path | str], unrecognised: list[str]) -> tuple[list[tuple[str, Iterable[bytes]]], int]:
    """``--format native``'s files, in order, and their bytes on disk: a file named is read as
    native whatever it holds (its errors name its lines); in a directory or an archive, the files
    whose first record is a procgrade event, the others added to ``unrecognised`` (as a named
    importer's format does). A directory or archive holding no native file is an input error."""
    from procgrade.engine.importers.source_tree import open_tree

    files: list[tuple[str, Iterable[bytes]]] = []
    size = 0
    for path in paths:
        if not _is_tree(path):
            files.append((str(path), NativeFile(path)))
            size += _file_size(path)
            continue
        tree = open_tree(path)
        native = [rel for rel in tree.selected if _is_native(tree, rel)]
        if not native:
            raise InputError(tree.label_root, None, None, "nothing here is in the native format "
                             "(JSONL whose first record has run_id, seq, kind and event_id)")
        chosen = set(native)
        unrecognised.extend(tree.label(rel) for rel in tree.selected if rel not in chosen)
        found, found_size = _tree_files(tree, native)
        files.extend(found)
        size += found_size
    return files, size


def _tree_files(tree: SourceTree, rels: list[str]) -> tuple[list[tuple[str, Iterable[bytes]]], int]:
    """The files ``rels`` of ``tree`` as (source, lines), and their bytes on disk (an archive's
    members, which have no file of their own, count none): a file on disk as a :class:`NativeFile`."""
    files: list[tuple[str, Iterable[bytes]]] = []
    size = 0
    for rel in rels:
        where = tree.disk_path(rel)
        if where is None:
            files.append((tree.label(rel), tree.iter_lines(rel)))
        else:
            files.append((tree.label(rel), NativeFile(where, tree.label(rel))))
            size += _file_size(where)
    return files, size


def _is_native(tree: object, rel: str) -> bool:
    """A JSONL file whose first record is a procgrade event (run_id, seq, kind)."""
    first = tree.first_json_line(rel)  # type: ignore[attr-defined]
    return isinstance(first, dict) and {"run_id", "seq", "kind", "event_id"} <= first.keys()


def ingest_native(store: EventStore, paths: Sequence[Path | str], *, seal: bool = False) -> list[IngestReport]:
    """Ingest native JSONL files: all runs of all files, or nothing.

    Every file is read line by line inside one write transaction and each run is written in
    pieces as it is read, so memory is bounded by a piece per open run (not by the file), and a
    bad line in the last file still leaves nothing written.
    """
    with cyclic_gc.paused(), _prepare_pool() as pool, store.writer(bulk=True) as writer:
        return _append_native_paths(writer, list(paths), pool, seal)


def _append_native_paths(writer: RunWriter, paths: list[Path | str], pool: PreparePool,
                         seal: bool) -> list[IngestReport]:
    """Native files on disk, in order, into ``writer``'s transaction (each opened only when read)."""
    files = [(str(path), NativeFile(path)) for path in paths]
    return _append_native_files(writer, files, sum(_file_size(path) for path in paths), pool, seal)


def _append_native_files(writer: RunWriter, files: list[tuple[str, Iterable[bytes]]], size: int,
                         pool: PreparePool, seal: bool) -> list[IngestReport]:
    """Native files (source, lines) of ``size`` bytes in all, in order, into ``writer``'s
    transaction. The pool knows them all ahead: it starts its workers at once when they are
    big enough, and reads and prepares the next file while the last rows of one go in."""
    pool.expect(files)
    pool.expect_bytes(size)
    reports: list[IngestReport] = []
    for source, lines in files:
        reports.extend(_append_native(writer, _native_rows(source, lines, pool), seal))
    return reports


def _file_size(path: Path | str) -> int:
    """Bytes in the file at ``path`` (0 when that cannot be told: reading it says why)."""
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return 0


def _prepare_pool() -> PreparePool:
    """The ingest's worker processes (started only once its native input is big enough), shut
    down when the ingest ends, however it ends (right after its transaction commits or rolls back)."""
    return PreparePool(ingest_workers())


def _native_rows(source: str, lines: Iterable[bytes], pool: PreparePool) -> Iterator[RunEvents]:
    """A native file's pieces as prepared rows, by the ingest's worker processes once it is big enough."""
    return iter_native_rows(source, lines, workers=pool)


def ingest_workers() -> int:
    """Processes that prepare native lines while this one writes: ``PROCGRADE_INGEST_WORKERS``,
    else one per core this process may use (:func:`procgrade.engine.cores.usable_cores`: its
    affinity and a container's CPU quota), at most four (preparing a line costs about twice what
    writing it does, so the writer shares a core with them); 0 reads in this process, which is
    also the default on a single core: there a worker only adds the hand-over (200,000 events
    under a one-core quota: 4.9 s in process, 5.2 s with one worker, 5.9-6.5 s with two)."""
    given = os.environ.get("PROCGRADE_INGEST_WORKERS", "").strip()
    if given:
        try:
            return max(0, int(given))
        except ValueError:
            raise InputError("PROCGRADE_INGEST_WORKERS", None, None, f"not a number of processes: {given!r}") from None
    from procgrade.engine.cores import usable_cores

    cores = usable_cores()
    return 0 if cores < 2 else min(4, cores)


def _locate_imported(exc: StoreError, tree: object, places: list[tuple[str, str]]) -> StoreError:
    """The store's error about an imported run, prefixed with the source record it came from."""
    place = ""
    if exc.seq is not None and 0 <= exc.seq < len(places):
        file, record = places[exc.seq]
        place = f"{tree.label(file)}:{record}: seq: " if record else f"{tree.label(file)}: seq: "  # type: ignore[attr-defined]
    located = type(exc)(f"{place}{exc}", run_id=exc.run_id, seq=exc.seq)
    located.cause = exc
    located.located = bool(place)
    return located


def _locate(exc: StoreError, batches: list[RunEvents]) -> StoreError:
    """The store's error, of the same class, prefixed with ``FILE:LINE: seq:`` of the event
    it is about (the original is kept as ``cause``)."""
    place = ""
    for batch in batches:
        if batch.run_id == exc.run_id and exc.seq is not None and batch.items:
            if batch.first_seq <= exc.seq <= batch.last_seq:
                place = f"{batch.source}:{batch.line_of(exc.seq)}: seq: "
                break
    located = type(exc)(f"{place}{exc}", run_id=exc.run_id, seq=exc.seq)
    located.cause = exc
    located.located = bool(place)
    return located
