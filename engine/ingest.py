"""Ingest: read sources, validate all of them, then append every run in one transaction.

Sources are procgrade's native JSONL or any format an importer reads (``--format
auto`` detects which, file by file, and the report says which it chose). Nothing
is written unless every source validates and every run appends: a bad line or
record anywhere, or a conflict in any run, leaves the store as it was.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import StoreError
from engine.native import RunEvents, parse_native_lines, read_native
from engine.store import AppendResult, EventStore

__all__ = ["IngestReport", "Ingested", "ingest_native", "ingest_paths", "formats"]


def formats() -> list[str]:
    """What ``--format`` takes: auto, native, and every importer's name."""
    from engine.importers import importers

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
                 seal: bool = False) -> Ingested:
    """Ingest files, directories and archives in any known format: all runs, or nothing.

    With ``format="auto"`` each file is given to the first importer that recognises it
    (native logs included); files nobody recognises are listed, not guessed at.
    """
    from engine.importers import plan_imports
    from engine.importers.source_tree import open_tree

    reports: list[IngestReport] = []
    unrecognised: list[str] = []
    with _no_cyclic_gc(), store.writer() as writer:
        for path in paths:
            if format == "native":
                reports.extend(_append_native(writer, read_native(path), seal))
                continue
            tree = open_tree(path)
            native = [rel for rel in tree.selected if format == "auto" and _is_native(tree, rel)]
            for rel in native:
                batches = parse_native_lines(tree.label(rel), tree.read_bytes(rel).split(b"\n"))
                reports.extend(_append_native(writer, batches, seal))
            plan = plan_imports(tree, format, skip=native)
            unrecognised.extend(tree.label(rel) for rel in plan.unrecognised)
            for importer, unit in plan.units:
                for run in importer.read(tree, unit):
                    try:
                        result = writer.append(run.run_id, run.events, seal=seal)
                    except StoreError as exc:
                        raise _locate_imported(exc, run.tree or tree, run.places) from exc
                    reports.append(IngestReport(tree.label(unit.primary), run.run_id, len(run.events), 0,
                                                result, importer.name))
    return Ingested(reports, unrecognised)


def _append_native(writer: object, batches: list[RunEvents], seal: bool) -> list[IngestReport]:
    reports = []
    for batch in batches:
        try:
            result = writer.append(batch.run_id, batch.events, seal=seal)  # type: ignore[attr-defined]
        except StoreError as exc:
            raise _locate(exc, batches) from exc
        reports.append(IngestReport(batch.source, batch.run_id, len(batch.events), batch.duplicates_skipped, result))
    return reports


def _is_native(tree: object, rel: str) -> bool:
    """A JSONL file whose first record is a procgrade event (run_id, seq, kind)."""
    first = tree.first_json_line(rel)  # type: ignore[attr-defined]
    return isinstance(first, dict) and {"run_id", "seq", "kind", "event_id"} <= first.keys()


def ingest_native(store: EventStore, paths: Sequence[Path | str], *, seal: bool = False) -> list[IngestReport]:
    """Ingest native JSONL files: all runs of all files, or nothing.

    Files are read one at a time inside one write transaction, so memory holds one
    file's events, and a bad line in the last file still leaves nothing written.
    """
    reports: list[IngestReport] = []
    with _no_cyclic_gc(), store.writer() as writer:
        for path in paths:
            batches = read_native(path)
            for batch in batches:
                try:
                    result = writer.append(batch.run_id, batch.events, seal=seal)
                except StoreError as exc:
                    raise _locate(exc, batches) from exc
                reports.append(IngestReport(batch.source, batch.run_id, len(batch.events),
                                            batch.duplicates_skipped, result))
            del batches
    return reports


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic collector: events hold no cycles, and its passes over millions of
    young objects cost a third of ingest time (reference counting still frees everything)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
        if batch.run_id == exc.run_id and exc.seq is not None and batch.events:
            if batch.events[0].seq <= exc.seq <= batch.events[-1].seq:
                place = f"{batch.source}:{batch.line_of(exc.seq)}: seq: "
                break
    located = type(exc)(f"{place}{exc}", run_id=exc.run_id, seq=exc.seq)
    located.cause = exc
    located.located = bool(place)
    return located
