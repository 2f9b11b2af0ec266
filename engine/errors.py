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
    "DatabaseUnavailableError",
    "MissingExtraError",
    "OutputPathError",
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


class DatabaseUnavailableError(StoreError):
    """The database URL is malformed, names no usable database, or the server cannot be reached:
    fix ``--db`` (or ``$PROCGRADE_DB``), start the server, or create the database."""


class MissingExtraError(ProcgradeError):
    """A feature needs an optional extra that is not installed; the message names the ``pip install``."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        self.feature, self.extra, self.module = feature, extra, module
        super().__init__(f"{feature} needs the {module!r} package, which is not installed: "
                         f"pip install 'procgrade[{extra}]'")


class OutputPathError(ProcgradeError):
    """A file procgrade was asked to write cannot be written there; checked before any work starts."""
