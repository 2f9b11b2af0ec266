"""The append-only event store (SQLite embedded default, PostgreSQL).

Nothing heavy is imported until it is used: the store classes (the event model) load on first access
to :class:`EventStore`/:class:`RunInfo`/:class:`AppendResult` (PEP 562) or on opening a store, so a
command that only reads ``store.location`` pays for neither. A store on a plain SQLite file never loads
SQLAlchemy or Alembic unless a caller asks for ``store.engine`` (see ``sqlite_connections.py`` and
``sqlite_head.py``); PostgreSQL's store loads SQLAlchemy on its first query, Alembic to migrate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from procgrade.engine.errors import DatabaseUnavailableError, StoreError
from procgrade.engine.settings import DEFAULT_DB
from procgrade.engine.store.location import connection_problem, resolve_url

if TYPE_CHECKING:
    from procgrade.engine.store.base import EventStore
    from procgrade.engine.store.run_info import AppendResult, RunInfo

__all__ = [
    "AppendResult",
    "EventStore",
    "RunInfo",
    "DEFAULT_DB",
    "init_database",
    "normalize_url",
    "open_store",
    "opened_store",
]

def __getattr__(name: str) -> Any:
    if name in ("AppendResult", "RunInfo"):
        from procgrade.engine.store import run_info

        value = getattr(run_info, name)
        globals()[name] = value
        return value
    if name == "EventStore":
        from procgrade.engine.store.base import EventStore

        globals()[name] = EventStore
        return EventStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def normalize_url(url: str, *, create: bool = True) -> str:
    """Accept SQLAlchemy URLs, ``postgresql://`` (uses psycopg 3) and bare SQLite file paths, checked
    before use (:func:`procgrade.engine.store.location.resolve_url`; ``create=False``: the SQLite file must exist)."""
    return resolve_url(url, create=create)


def _store_class(url: str) -> type[EventStore]:
    from procgrade.engine.store.location import plain_sqlite_file

    if plain_sqlite_file(url) is not None:
        dialect = "sqlite"
    else:
        from sqlalchemy.engine import make_url

        dialect = make_url(url).get_backend_name()
    if dialect == "sqlite":
        from procgrade.engine.store.sqlite import SQLiteEventStore

        return SQLiteEventStore
    if dialect == "postgresql":
        from procgrade.engine.store.postgres import PostgresEventStore

        return PostgresEventStore
    raise ValueError(f"unsupported database {dialect!r}: use sqlite:///FILE or postgresql://...")


def init_database(url: str) -> tuple[str, str]:
    """Create or migrate the schema at ``url``; return (revision, the URL without password)."""
    from procgrade.engine.store.location import shown
    from procgrade.engine.store.migrate import upgrade

    url = normalize_url(url, create=True)
    store = _store_class(url)(url)
    try:
        revision = _first_contact(url, store.schema_revision)
        revision = store.create_schema() if revision is None else upgrade(store.engine)
    finally:
        store.close()
    return revision, shown(url)


def open_store(url: str, *, create: bool = False) -> EventStore:
    """Open the store at ``url``.

    With ``create``, an empty database is given the schema (a database holding an
    older procgrade schema is never migrated implicitly: ``procgrade init`` does that). Without it a
    SQLite file that does not exist is an error, never created.
    """
    from procgrade.engine.store.migrate import check_revision

    url = normalize_url(url, create=create)
    store = _store_class(url)(url)
    try:
        revision = _first_contact(url, store.schema_revision)
        if create and revision is None:
            revision = store.create_schema()
        check_revision(revision)
    except BaseException:
        store.close()
        raise
    return store


def _first_contact(url: str, probe: Callable[[], str | None]) -> str | None:
    """Run the first query on a new store; a driver's failure to connect becomes one
    :class:`DatabaseUnavailableError` saying what is wrong and what to do."""
    from procgrade.engine.store.database_errors import is_busy, translate

    try:
        return probe()
    except StoreError as exc:
        # the engine's driver-error translation (database_errors) got there first: say it as a
        # first contact does, from the driver's own error; a lock held past the busy timeout
        # (another writer, a new store's first load) stays "busy", not a reason to check the file
        if exc.__cause__ is None or isinstance(exc, DatabaseUnavailableError) or is_busy(exc.__cause__):
            raise
        raise connection_problem(url, exc.__cause__) from exc.__cause__
    except Exception as exc:
        if not _is_driver_error(exc):
            raise
        if is_busy(exc):
            raise translate(exc) or exc from exc
        raise connection_problem(url, exc) from exc


def _is_driver_error(exc: BaseException) -> bool:
    """A driver's error, raw (``sqlite3``'s, from a store's own connections) or wrapped by SQLAlchemy
    (checked only when SQLAlchemy is loaded: otherwise it raised nothing)."""
    import sqlite3
    import sys

    if isinstance(exc, sqlite3.Error):
        return True
    sqlalchemy_errors = sys.modules.get("sqlalchemy.exc")
    return sqlalchemy_errors is not None and isinstance(exc, sqlalchemy_errors.DBAPIError)


@contextmanager
def opened_store(url: str, *, create: bool = False) -> Iterator[EventStore]:
    """:func:`open_store` for the length of a block. The close is shielded from Ctrl-C (it waits for
    the connections to close), so an interrupted command never leaves a connection half shut."""
    from procgrade.engine.interrupts import deferred_interrupt

    store = open_store(url, create=create)
    try:
        yield store
    finally:
        with deferred_interrupt():
            store.close()
