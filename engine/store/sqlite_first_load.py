"""The first load of a SQLite store, written through a rollback journal instead of the WAL.

In WAL mode SQLite writes every page twice: into the WAL as the transaction goes, then into the
database file when the commit's checkpoint copies it back. For an import of 200 MB that second
copy is a tenth of the work (the 500-sample Inspect log: about 0.4 s of 3.2 s). A rollback journal
keeps the original content of the pages a transaction changes, and pages that did not exist
before it are not journaled at all; a store that holds no runs yet has almost nothing to keep, so
its first load is written once, straight into the file.

So a bulk load (``store.writer(bulk=True)``, which ``ingest`` asks for) into a SQLite store that
holds no runs takes the file for itself: its connection goes into exclusive locking mode and
switches the file to ``journal_mode=DELETE`` (with ``synchronous=FULL``, which keeps a rollback
journal consistent through a crash or a power cut, as WAL's ``NORMAL`` does in WAL), writes the
load in one transaction, turns the file back to WAL while it still holds the lock (nothing can
come between), and is closed, which releases it. A process killed in between leaves a journal
(``FILE-journal``, part of the database until then: never delete it) that the next connection
rolls back, and a file that connection turns back to WAL.

SQLite refuses the switch at once while another connection holds a lock on the file (any
connection that has read it); the load then goes through the WAL as every other write does.
A connection that opens during the load waits for it (the 30 s busy timeout; past that it gets
the store's one-line "the database is busy" error), where in WAL it would have read the empty
store at once. Stores that hold runs never switch: their readers keep WAL's reads beside a writer.
"""

from __future__ import annotations

import sqlite3

__all__ = ["back_to_wal", "without_wal"]


def without_wal(connection: sqlite3.Connection) -> bool:
    """Take the file of ``connection`` (outside a transaction) for a first load through a rollback
    journal if its store holds no runs and no other connection holds a lock on it; True when done,
    and the connection must then end with :func:`back_to_wal` and be closed. False leaves the
    connection as it was (WAL, normal locking)."""
    if connection.execute("SELECT 1 FROM runs LIMIT 1").fetchall():
        return False
    connection.execute("PRAGMA locking_mode=EXCLUSIVE")  # from the switch on, the lock stays ours
    try:
        mode = connection.execute("PRAGMA journal_mode=DELETE").fetchall()[0][0]
    except sqlite3.OperationalError:  # "database is locked": another connection holds a lock
        mode = None
    if mode != "delete":
        connection.execute("PRAGMA locking_mode=NORMAL")
        return False
    connection.execute("PRAGMA synchronous=FULL")
    return True


def back_to_wal(connection: sqlite3.Connection) -> None:
    """Turn the file back to WAL after the load, committed or rolled back, while ``connection``
    still holds the exclusive lock. The connection stays in exclusive locking mode for as long as
    it lives in WAL: the caller closes it."""
    connection.execute("PRAGMA journal_mode=WAL")
