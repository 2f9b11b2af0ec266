"""SQLite: the embedded default. WAL, one writer at a time (BEGIN IMMEDIATE), executemany bulk path."""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Engine, create_engine, event

from procgrade.engine.errors import UnknownRunError
from procgrade.engine.store.database_errors import install as install_error_translation
from procgrade.engine.store.base import EventStore, RunInfo
from procgrade.engine.stored import STORED_COLUMNS

_INSERT = f"INSERT INTO events ({', '.join(STORED_COLUMNS)}) VALUES ({', '.join('?' * len(STORED_COLUMNS))})"


def sqlite_engine(url: str) -> Engine:
    """An engine whose connections run in WAL with foreign keys on and explicit transactions.

    pysqlite's own implicit BEGIN is turned off (isolation_level=None) and SQLAlchemy
    emits BEGIN itself, the recipe SQLAlchemy documents for correct SQLite transactions.
    """
    engine = install_error_translation(create_engine(url, connect_args={"timeout": 30}))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if url not in ("sqlite://", "sqlite:///:memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


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
        tx.executemany(_INSERT, rows)
