"""Appending an oracle's outcome events to a run, or to an outcome-only run the oracle creates.

Acceptance checks and browser gradings land the same way: into a stored run the user names (which
must exist and be unsealed), or into an outcome-only run that a ``run_started`` by the oracle's
harness opens. Another writer may append between reading the run and writing to it, so the
events are rebuilt from a fresh read and the append retried on ``SeqConflictError``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from procgrade.engine.errors import RunSealedError, SeqConflictError, UnknownRunError
from procgrade.engine.events import EVENT_KINDS, Event

_ATTEMPTS = 5


def outcome_event(kind: str, **fields: Any) -> Event:
    """One event of ``kind``; fields left ``None`` are omitted, so they take the model's default."""
    return EVENT_KINDS[kind].model_validate({k: v for k, v in fields.items() if v is not None})


def require_appendable(store: Any, run_id: str, what: str) -> None:
    """Raise before an expensive check is spent on a run that cannot take it: ``UnknownRunError``
    if ``run_id`` is not stored, ``RunSealedError`` if it is sealed."""
    if store.run(run_id).sealed:
        raise RunSealedError(f"run {run_id} is sealed; {what} cannot be appended", run_id=run_id)


def count_kind(store: Any, run_id: str, kind: str) -> int:
    """How many events of ``kind`` run ``run_id`` holds (reads the stored rows, not the models)."""
    from procgrade.engine.stored import STORED_COLUMNS

    column = STORED_COLUMNS.index("kind")
    return sum(1 for row in store.stored_events(run_id) if row[column] == kind)


@dataclass(frozen=True)
class OutcomeRun:
    """The opening ``run_started`` of an outcome-only run: who opened it, when, for which task."""

    harness: str
    task_id: str
    label: str  # the run's ``labels["kind"]``, e.g. ``acceptance-only``
    ts: str


@dataclass(frozen=True)
class Appended:
    run_id: str
    check: int  # how many earlier checks (``started_kind`` events) the run held
    created: bool
    events: list[Event]


def append_outcome(store: Any, run_id: str | None, outcome_run_id: str, *, started_kind: str,
                   build: Callable[[str, int, int], list[Event]], opening: OutcomeRun, what: str) -> Appended:
    """Append the events ``build(target, first_seq, check)`` makes to run ``run_id`` in one transaction.

    Without ``run_id`` they go to ``outcome_run_id``, created (seq 0 ``run_started``, event id
    ``<run>@start``) if it is not stored yet. ``check`` counts the ``started_kind`` events already in
    the run, so a second check of the same workspace is a new attempt, never a replacement.
    """
    target = run_id or outcome_run_id
    for _ in range(_ATTEMPTS):
        try:
            info = store.run(target)
            created, count, check = False, info.event_count, count_kind(store, target, started_kind)
        except UnknownRunError:
            if run_id is not None:
                raise
            created, count, check = True, 0, 0
        events = build(target, count + (1 if created else 0), check)
        if created:
            from procgrade.engine.version import __version__

            start = outcome_event("run_started", run_id=target, seq=0, event_id=f"{target}@start", ts=opening.ts,
                                  actor="harness", harness={"name": opening.harness, "version": __version__},
                                  task_id=opening.task_id, labels={"kind": opening.label})
            events = [start, *events]
        try:
            with store.writer() as writer:
                writer.append(target, events)
        except SeqConflictError:
            continue  # another writer appended meanwhile: re-read the run and retry
        return Appended(target, check, created, events)
    raise SeqConflictError(f"run {target}: kept changing while {what} was appended", run_id=target)
