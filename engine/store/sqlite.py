"""SQLite: the embedded default. WAL, one writer at a time (BEGIN IMMEDIATE), many rows per INSERT statement."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import Any

from sqlalchemy import Engine, create_engine, event

from procgrade.engine.errors import UnknownRunError
from procgrade.engine.store.database_errors import install as install_error_translation
from procgrade.engine.store.base import EventStore, RunInfo
from procgrade.engine.stored import STORED_COLUMNS

#: The page size of a new store. An event row (a WITHOUT ROWID table's record) keeps at most
#: about a quarter of a page in its b-tree cell and the rest in a chain of overflow pages: with
#: 4 KiB pages a 10 KB payload (an Inspect model call, a command's output) spills into three
#: overflow pages, each written on insert and walked to reach the columns stored after the
#: payload. With 64 KiB pages rows up to about 16 KB stay whole (README, Performance: the 500-sample
#: Inspect log's inserts and commit take about a third less time; small rows read the same).
#: SQLite applies it only while the file is still empty: an existing store keeps its own.
PAGE_SIZE = 65536

#: Rows one INSERT statement writes. Each execution of a statement on a table with a trigger
#: (every table here has its overwrite guard, revision 0005) opens a statement journal, which
#: copies the page it changes first: per row with ``executemany`` of a one-row statement, that was
#: two thirds of inserting a native event (200,000 rows: 3.3 s, 1.1 s without the trigger).
#: Many rows per statement pay it once for all of them (1.7-1.8 s); statements of 300 or 1,000
#: rows were slower again (README, Performance: the fourth run's changes).
ROWS_PER_STATEMENT = 64


def sqlite_engine(url: str) -> Engine:
    """An engine whose connections run in WAL with foreign keys on and explicit transactions.

    pysqlite's own implicit BEGIN is turned off (isolation_level=None) and SQLAlchemy
    emits BEGIN itself, the recipe SQLAlchemy documents for correct SQLite transactions.
    """
    engine = install_error_translation(create_engine(url, connect_args={"timeout": 30}))
    _bind_none_directly()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA page_size={PAGE_SIZE}")  # before WAL mode writes the header of a new file
        if url not in ("sqlite://", "sqlite:///:memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def _null(_value: None) -> None:
    return None


def _bind_none_directly() -> None:
    """Before Python 3.12 the sqlite3 module sends every ``None`` parameter through its adapter
    registry (a key tuple built, a lookup that misses, two attribute lookups): binding a None
    cost seven times binding an int, and an event row binds about twenty (its empty columns),
    some 15% of a bare executemany of native rows. An adapter registered for ``NoneType``
    turns the miss into a hit that returns the None itself, bound as NULL as before. Python
    3.12 binds None directly; there the adapter would only add a call."""
    if sys.version_info < (3, 12):
        sqlite3.register_adapter(type(None), _null)


class SQLiteEventStore(EventStore):
    dialect = "sqlite"
    param = "?"

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

    def _insert_rows(self, tx: Any, rows: list[tuple[Any, ...]]) -> None:
        self._insert_many(tx, "events", STORED_COLUMNS, rows)

    def _insert_many(self, tx: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` with statements of up to :data:`ROWS_PER_STATEMENT` rows each (fewer
        when the build of SQLite allows fewer bound values per statement)."""
        width = len(columns)
        per = max(1, min(ROWS_PER_STATEMENT, tx.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
        whole = len(rows) - len(rows) % per
        if whole:
            tx.executemany(values_insert(table, tuple(columns), per),
                           (tuple(chain.from_iterable(rows[start:start + per])) for start in range(0, whole, per)))
        if whole < len(rows):
            tx.execute(values_insert(table, tuple(columns), len(rows) - whole), tuple(chain.from_iterable(rows[whole:])))


@lru_cache(maxsize=256)
def values_insert(table: str, columns: tuple[str, ...], rows: int) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...), ...`` for ``rows`` rows."""
    one = f"({', '.join('?' * len(columns))})"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * rows)}"
