"""SQLite: the embedded default. WAL, one writer at a time (BEGIN IMMEDIATE), many rows per INSERT statement."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

from procgrade.engine.errors import UnknownRunError
from procgrade.engine.store.base import EventStore, RunInfo, values_insert
from procgrade.engine.store.location import plain_sqlite_file, plain_sqlite_url
from procgrade.engine.store.sqlite_connections import BUSY_TIMEOUT_S, SQLiteConnections, configure
from procgrade.engine.stored import STORED_COLUMNS

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.engine import URL

#: Rows one INSERT statement writes. Each execution of a statement on a table with a trigger
#: (every table here has its overwrite guard, revision 0005) opens a statement journal, which
#: copies the page it changes first: per row with ``executemany`` of a one-row statement. Many
#: rows per statement pay it once for all of them: a bare insert of 200,000 native rows took 2.8 s
#: one row per statement, 2.0 s fifty per statement; statements of 300 or 1,000 rows were slower
#: again (bench/RESULTS.md: the fourth run's changes). A remainder is written in statements of
#: powers of two, so a table needs at most seven statement texts, which stay in sqlite3's cache.
ROWS_PER_STATEMENT = 64


def sqlite_engine(url: str | URL) -> Engine:
    """An engine whose connections run in WAL with foreign keys on and explicit transactions.

    pysqlite's own implicit BEGIN is turned off (isolation_level=None) and SQLAlchemy
    emits BEGIN itself, the recipe SQLAlchemy documents for correct SQLite transactions. A store
    on a plain file uses it only when asked for ``store.engine``: its own queries go through
    :class:`procgrade.engine.store.sqlite_connections.SQLiteConnections`, set up the same way.
    """
    from sqlalchemy import create_engine, event

    from procgrade.engine.store.database_errors import install as install_error_translation

    engine = install_error_translation(create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S}))
    _bind_none_directly()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        configure(dbapi_connection, wal=url not in ("sqlite://", "sqlite:///:memory:"))

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def _null(_value: None) -> None:
    return None


def _bind_none_directly() -> None:
    """The sqlite3 module sends every ``None`` parameter through its adapter registry (a key
    tuple built, a lookup that misses, two attribute lookups); on Python 3.11 binding a None
    cost seven times binding an int, and an event row binds about twenty (its empty columns),
    some 15% of a bare executemany of native rows. An adapter registered for ``NoneType``
    turns the miss into a hit that returns the None itself, bound as NULL as before. Python
    3.12's miss is cheap enough that the adapter would only add a call. An adapter the host
    program registered for ``NoneType`` is kept."""
    if sys.version_info < (3, 12):
        sqlite3.adapters.setdefault((type(None), sqlite3.PrepareProtocol), _null)


class SQLiteEventStore(EventStore):
    dialect = "sqlite"
    param = "?"

    def _make_engine(self, url: str) -> Engine:
        if self._direct is not None:  # the file the store opened, even if the process changed directory since
            from sqlalchemy.engine import URL

            return sqlite_engine(URL.create("sqlite", database=str(self._direct.path)))
        return sqlite_engine(url)

    def _direct_connections(self, url: str) -> SQLiteConnections | None:
        """A plain SQLite file's connections come from ``sqlite3`` itself (see
        :mod:`procgrade.engine.store.sqlite_connections`); other URLs take SQLAlchemy's pool."""
        path = plain_sqlite_file(url)
        if path is None or plain_sqlite_url(url) != url:
            return None
        _bind_none_directly()
        return SQLiteConnections(path, url)

    def create_schema(self) -> str:
        """An empty file gets the head revision's schema from its snapshot in one transaction
        (:mod:`procgrade.engine.store.sqlite_head`), without Alembic; anything else migrates."""
        if self._direct is not None:
            from procgrade.engine.store.database_errors import translated
            from procgrade.engine.store.migrate import head_revision
            from procgrade.engine.store.sqlite_head import create_head_schema

            head = head_revision()
            raw = self._raw_connection()
            try:
                with translated():
                    created = create_head_schema(raw.driver_connection, head)
            finally:
                raw.close()
            if created:
                return head
        return super().create_schema()

    def schema_revision(self) -> str | None:
        """The revision in Alembic's version table, read on the store's own connection; a table of
        several rows (which Alembic words as an error) is left to Alembic."""
        if self._direct is None:
            return super().schema_revision()
        from procgrade.engine.store.migrate import sqlite_versions

        with self._reading() as cursor:
            versions = sqlite_versions(cursor)
        if versions is None:
            return None
        if len(versions) > 1:
            return super().schema_revision()
        return versions[0] if versions else None

    def _bulk_mode(self, raw: Any) -> Callable[[], None] | None:
        """A store on a plain file that holds no runs yet takes its first load without the WAL
        (:mod:`procgrade.engine.store.sqlite_first_load`): the file goes back to WAL after the
        transaction and the connection, which held it exclusively, is closed, not pooled (so is
        one left in any doubt by an error or an interrupt on the way)."""
        if self._direct is None:
            return None
        from procgrade.engine.store.sqlite_first_load import back_to_wal, without_wal

        connection = raw.driver_connection
        try:
            switched = without_wal(connection)
        except BaseException:
            raw.discard()
            raise
        if not switched:
            return None

        def end() -> None:
            try:
                back_to_wal(connection)
            except sqlite3.Error:
                pass  # what was written stands; the next connection's set-up (configure) turns the file to WAL
            finally:
                raw.discard()

        return end

    def _begin(self, raw: Any) -> Any:
        cursor = raw.driver_connection.cursor()
        cursor.execute("BEGIN IMMEDIATE")  # take the write lock now: one writer at a time
        return cursor

    def _lock_run(self, tx: Any, run_id: str, create: bool = True) -> RunInfo:
        if create:
            # Not INSERT OR IGNORE: a trigger refuses every insert over an existing run (0005).
            tx.execute("INSERT INTO runs (run_id, event_count) SELECT ?, 0 "
                       "WHERE NOT EXISTS (SELECT 1 FROM runs WHERE run_id = ?)", (run_id, run_id))
        info = self._select_run(tx, run_id)
        if info is None:
            raise UnknownRunError(f"no run {run_id!r} in the store")
        return info

    integrity_errors = (sqlite3.IntegrityError,)

    def _runs_in_key_order(self, run_ids: Sequence[str]) -> list[str]:
        """``run_ids`` in code-point order, without a query or a connection: the schema gives
        ``run_id`` SQLite's BINARY collation, which compares UTF-8 bytes, and UTF-8 bytes sort as
        their code points. The query cost re-scoring 4 us a run of 35 events (500 index lookups a
        batch). A run without events is kept; the reader then finds the runs after it short and
        refuses them."""
        return sorted(run_ids)

    def _insert_rows(self, tx: Any, rows: list[tuple[Any, ...]]) -> None:
        self._insert_many(tx, "events", STORED_COLUMNS, rows)

    def _insert_many(self, tx: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` with statements of up to :data:`ROWS_PER_STATEMENT` rows each (fewer
        when the build of SQLite allows fewer bound values per statement), the rest in
        statements of powers of two rows (37 rows: 32, 4 and 1)."""
        columns = tuple(columns)
        getlimit = getattr(tx.connection, "getlimit", None)  # the standard library's driver has it
        limit = getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if getlimit is not None else 999
        per = max(1, min(ROWS_PER_STATEMENT, limit // len(columns)))
        whole = len(rows) - len(rows) % per
        if whole:
            tx.executemany(values_insert(table, columns, per),
                           (tuple(chain.from_iterable(rows[start:start + per])) for start in range(0, whole, per)))
        start = whole
        while start < len(rows):
            size = 1 << ((len(rows) - start).bit_length() - 1)
            tx.execute(values_insert(table, columns, size), tuple(chain.from_iterable(rows[start:start + size])))
            start += size

