"""Ingest: read sources, validate all of them, then append every run in one transaction.

Nothing is written unless every source validates and every run appends: a bad
line anywhere, or a conflict in any run, leaves the store as it was.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import StoreError
from engine.native import RunEvents, read_native
from engine.store import AppendResult, EventStore

__all__ = ["IngestReport", "ingest_native", "FORMATS"]

FORMATS = ("native",)


@dataclass(frozen=True)
class IngestReport:
    source: str
    run_id: str
    events_read: int
    duplicates_skipped: int
    result: AppendResult

    @property
    def summary(self) -> str:
        r = self.result
        if r.no_op:
            return f"{self.source}: run {self.run_id}: already stored ({r.event_count} events), nothing written"
        held = f", {r.already_stored} already stored" if r.already_stored else ""
        sealed = ", sealed" if r.sealed else ""
        return f"{self.source}: run {self.run_id}: {r.appended} events appended{held} (head {r.head_hash[:12]}{sealed})"


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
