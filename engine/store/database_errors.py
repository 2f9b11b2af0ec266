"""Driver errors as one-line :class:`StoreError`s: what went wrong with the database, not a traceback.

A database that does not exist, a server that is down, a store whose tables were dropped,
a SQLite file held by another writer for too long: each becomes a typed error naming the
problem in the driver's own words (first line only) and what to do. Constraint violations
are left alone: the store turns those into located conflicts itself.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from procgrade.engine.errors import SchemaNotReadyError, StoreError

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = ["translate", "translated", "install", "is_busy"]

_MISSING_TABLE = re.compile(r'no such table: (\w+)|relation "(\w+)" does not exist|no such column: (\w+)'
                            r'|column "?(\w+)"? does not exist')


def _driver_classes() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(errors to translate, integrity errors to leave alone) of the installed drivers."""
    errors: list[type[BaseException]] = [sqlite3.Error]
    integrity: list[type[BaseException]] = [sqlite3.IntegrityError]
    try:
        import psycopg
    except ImportError:
        pass
    else:
        errors.append(psycopg.Error)
        integrity.append(psycopg.IntegrityError)
    return tuple(errors), tuple(integrity)


def is_busy(exc: BaseException) -> bool:
    """SQLite's "database is locked" (another writer held the lock past the busy timeout), raw or
    wrapped by SQLAlchemy."""
    original = getattr(exc, "orig", None) or exc
    return isinstance(original, sqlite3.OperationalError) and "locked" in str(original)


def translate(exc: BaseException) -> StoreError | None:
    """The one-line :class:`StoreError` for a driver error, or None when it is not one to translate
    (key conflicts and procgrade's own trigger refusals: raw SQL that meets them keeps the driver's
    error, and the store's writer turns them into located conflicts)."""
    errors, integrity = _driver_classes()
    original = getattr(exc, "orig", None) or exc
    if not isinstance(original, errors):
        return None
    message = (str(original).strip().splitlines() or [type(original).__name__])[0]
    if "procgrade: " in message or isinstance(original, integrity):
        return None  # a trigger's refusal or a key conflict: the store explains those itself
    missing = _MISSING_TABLE.search(message)
    if missing:
        name = next(g for g in missing.groups() if g)
        return SchemaNotReadyError(f"the database lacks procgrade's {name!r} ({message}): it was changed or "
                                   "dropped outside procgrade; restore it from a backup or run `procgrade init` "
                                   "on an empty database")
    if is_busy(original):
        return StoreError(f"the database is busy ({message}): another procgrade is writing to it; try again "
                          "when it is done")
    if "connection" in message or "could not connect" in message or "does not exist" in message \
            or "unable to open" in message or "authentication" in message:
        return StoreError(f"cannot open the database: {message}")
    return StoreError(f"database error: {message}")


@contextmanager
def translated() -> Iterator[None]:
    """A driver error raised in the block leaves as :func:`translate`'s one-line error (anything
    else, key conflicts and trigger refusals included, as it is): for code on raw driver connections."""
    try:
        yield
    except Exception as exc:
        error = translate(exc)
        if error is None:
            raise
        raise error from exc


def install(engine: Engine) -> Engine:
    """Make every statement run through ``engine`` raise :func:`translate`'s error instead of the driver's."""
    from sqlalchemy import event

    @event.listens_for(engine, "handle_error")
    def _handle(context: Any) -> None:
        translated = translate(context.original_exception)
        if translated is not None:
            raise translated from context.original_exception

    return engine
