"""The first load of a SQLite store, written through a rollback journal instead of the WAL.

In WAL mode SQLite writes every page twice: into the WAL as the transaction goes, then into the
database file when the commit's checkpoint copies it back. For an import of 200 MB that second
copy is a tenth of the work (the 500-sample Inspect log: about 0.4 s of 3.2 s). A rollback journal
keeps the original content of the pages a transaction changes, and pages that did not exist
before it are not journaled at all; a store that holds no runs yet has almost nothing to keep, so
its first load is written once, straight into the file.

So a bulk load (``store.writer(bulk=True)``, which ``ingest`` asks for) into a SQLite store that
holds no runs switches the file to ``journal_mode=DELETE`` for that one transaction, with
``synchronous=FULL`` (what a rollback journal needs to survive a power cut; WAL's ``NORMAL`` is
not enough there), and back to WAL after it, committed or rolled back. A crash in between leaves a
journal that the next connection rolls back, and a file it turns back to WAL.

SQLite refuses to leave WAL at once while any other connection has the file open; the load then
goes through the WAL as every other write does. A connection that opens while the load runs finds
the file locked: its reads wait for the commit (the 30 s busy timeout), where in WAL they would
have read the empty store at once. Stores that hold runs never switch: their readers keep WAL's
reads beside a writer.
"""

from __future__ import annotations

import sqlite3

__all__ = ["back_to_wal", "without_wal"]


def without_wal(connection: sqlite3.Connection) -> bool:
    """Switch the file of ``connection`` (outside a transaction) to a rollback journal if its store
    holds no runs and no other connection has it open; True when switched."""
    if connection.execute("SELECT 1 FROM runs LIMIT 1").fetchall():
        return False
    try:
        mode = connection.execute("PRAGMA journal_mode=DELETE").fetchall()[0][0]
    except sqlite3.OperationalError:  # "database is locked": another connection has the file open
        return False
    if mode != "delete":
        return False
    connection.execute("PRAGMA synchronous=FULL")
    return True


def back_to_wal(connection: sqlite3.Connection) -> bool:
    """Return the file of ``connection`` to WAL and the connection to ``synchronous=NORMAL``
    after :func:`without_wal`; False if SQLite refused (the connection should then be closed,
    not reused: the next connection's set-up turns the file back to WAL)."""
    try:
        mode = connection.execute("PRAGMA journal_mode=WAL").fetchall()[0][0]
        connection.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error:
        return False
    return mode == "wal"
