"""What the store says of a run and of an append: plain records, importable without SQLAlchemy.

``procgrade runs`` reads them straight from a SQLite file (:mod:`procgrade.engine.cli_runs`) and
every store returns them, so they live apart from the store's engine code.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RUN_COLUMNS", "RunInfo", "AppendResult"]

#: The ``runs`` table's columns, in :class:`RunInfo`'s field order.
RUN_COLUMNS = (
    "run_id", "harness", "harness_version", "model", "task_id",
    "event_count", "head_hash", "sealed_event_count", "sealed_head_hash",
    "source_format", "redactions", "unparsed",
)


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    harness: str | None
    harness_version: str | None
    model: str | None
    task_id: str | None
    event_count: int
    head_hash: str | None
    sealed_event_count: int | None
    sealed_head_hash: str | None
    #: Set for runs an importer made: its format, secrets redacted, malformed records kept.
    source_format: str | None = None
    redactions: int | None = None
    unparsed: int | None = None

    @property
    def sealed(self) -> bool:
        return self.sealed_head_hash is not None


@dataclass(frozen=True)
class AppendResult:
    run_id: str
    appended: int
    already_stored: int
    event_count: int
    head_hash: str | None
    sealed: bool
    #: True when this append sealed the run (it was not sealed before).
    sealed_now: bool = False

    @property
    def no_op(self) -> bool:
        """No event appended (``sealed_now`` says whether the call sealed the run all the same)."""
        return self.appended == 0
