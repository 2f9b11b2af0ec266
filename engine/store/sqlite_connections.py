"""Connections to a SQLite store file straight from the standard library's ``sqlite3``.

Importing SQLAlchemy costs about 0.3 s on this project's 2-core machine, a quarter of
``procgrade rescore --all`` on a 500-run store and more than the start-up budget of a command.
The store itself needs none of it: every query it runs is plain SQL on a driver cursor. So a
store on a plain SQLite file (``sqlite:///FILE`` or a bare path) draws its connections from
:class:`SQLiteConnections`, set up exactly as :func:`procgrade.engine.store.sqlite.sqlite_engine`
sets up SQLAlchemy's (WAL, ``synchronous=NORMAL``, foreign keys on, explicit transactions, a
30 s busy timeout), and builds a SQLAlchemy engine only when a caller asks for ``store.engine``
(Alembic, the SQL rule backend, reports' set queries). Anything else (an in-memory database, a
URI with options, a name that needs escaping in a URL) goes through SQLAlchemy as before.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

__all__ = ["BUSY_TIMEOUT_S", "SQLiteConnections", "PooledConnection", "configure"]

#: Idle connections kept for reuse (SQLAlchemy's default pool size for a file database).
_POOL_SIZE = 5
#: Seconds a connection waits for another's lock before SQLite says "database is locked".
BUSY_TIMEOUT_S = 30


def configure(connection: sqlite3.Connection, *, wal: bool = True) -> None:
    """Set a new connection up as every procgrade SQLite connection is: explicit transactions (the
    driver's implicit BEGIN off), WAL, ``synchronous=NORMAL``, foreign keys enforced."""
    connection.isolation_level = None
    cursor = connection.cursor()
    if wal:
        cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


class PooledConnection:
    """One connection lent by :class:`SQLiteConnections`, shaped as the part of SQLAlchemy's
    ``raw_connection()`` the store uses: ``driver_connection``, ``commit``, ``rollback``, and
    ``close``, which hands it back (a transaction left open is rolled back)."""

    __slots__ = ("driver_connection", "_owner", "_generation")

    def __init__(self, connection: sqlite3.Connection, owner: SQLiteConnections, generation: int) -> None:
        self.driver_connection = connection
        self._owner: SQLiteConnections | None = owner
        self._generation = generation

    def commit(self) -> None:
        self.driver_connection.commit()

    def rollback(self) -> None:
        self.driver_connection.rollback()

    def close(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._give_back(self.driver_connection, self._generation)

    def discard(self) -> None:
        """Close the connection instead of handing it back (its settings are not the pool's)."""
        self._owner = None
        self.driver_connection.close()


class SQLiteConnections:
    """A small pool of connections to one SQLite file, without SQLAlchemy (see the module's doc).

    Thread-safe as SQLAlchemy's pool is: a connection is used by one thread at a time, and may be
    handed back from another (``check_same_thread`` off, as SQLAlchemy sets it for file databases).
    """

    def __init__(self, path: Path, url: str) -> None:
        #: Absolute, as SQLAlchemy makes it when it creates an engine: a relative path stays the file
        #: it named when the store opened, whatever directory the process is in later.
        self.path = Path(os.path.abspath(path))
        self.url = url
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        #: Moves on at each :meth:`dispose`: a connection lent before is closed when handed back.
        self._generation = 0

    def raw_connection(self) -> PooledConnection:
        with self._lock:
            connection = self._idle.pop() if self._idle else None
            generation = self._generation
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                         check_same_thread=False)
            try:
                configure(connection)
            except BaseException:
                connection.close()
                raise
        return PooledConnection(connection, self, generation)

    def _give_back(self, connection: sqlite3.Connection, generation: int) -> None:
        try:
            if connection.in_transaction:
                connection.rollback()
        except sqlite3.Error:
            connection.close()
            return
        with self._lock:
            if generation == self._generation and len(self._idle) < _POOL_SIZE:
                self._idle.append(connection)
                return
        connection.close()

    def dispose(self) -> None:
        """Close every idle connection (connections still lent are closed when handed back), as
        SQLAlchemy's ``Engine.dispose`` does; a later :meth:`raw_connection` opens a new one."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for connection in idle:
            connection.close()

    def __repr__(self) -> str:
        return f"SQLiteConnections({self.url!r})"
