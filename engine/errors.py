"""Errors by what the caller can do about them (not by which driver raised them)."""

from __future__ import annotations

__all__ = [
    "ProcgradeError",
    "InputError",
    "StoreError",
    "SchemaNotReadyError",
    "ConflictError",
    "SeqConflictError",
    "EventIdConflictError",
    "RunSealedError",
    "UnknownRunError",
    "ScoreDriftError",
]


class ProcgradeError(Exception):
    """Base of every error procgrade reports to a user."""


class InputError(ProcgradeError):
    """Bad input, located as ``FILE:LINE: field: reason``."""

    def __init__(self, source: str, line: int | str | None, field: str | None, reason: str) -> None:
        self.source, self.line, self.field, self.reason = source, line, field, reason
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {field or '-'}: {reason}")


class StoreError(ProcgradeError):
    """The store could not do what was asked; ``run_id``/``seq`` say where, when known."""

    def __init__(self, message: str, *, run_id: str | None = None, seq: int | None = None) -> None:
        super().__init__(message)
        self.run_id, self.seq = run_id, seq
        #: True when the message starts with the input's ``FILE:LINE: field:``.
        self.located = False
        self.cause: StoreError | None = None


class SchemaNotReadyError(StoreError):
    """The database has no procgrade schema, or an older one: run ``procgrade init``."""


class ConflictError(StoreError):
    """Someone else wrote something different where this write would go: re-read, then retry or give up."""


class SeqConflictError(ConflictError):
    """The run already holds a different event at this seq (another writer got there first)."""


class EventIdConflictError(ConflictError):
    """The event_id is already stored with different content, or in another run."""


class RunSealedError(StoreError):
    """The run is sealed; nothing more can be appended to it."""


class UnknownRunError(StoreError):
    """No run with that id is stored."""


class ScoreDriftError(ConflictError):
    """A recomputed score document differs from the stored one for the same inputs."""
