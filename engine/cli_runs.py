"""``procgrade runs`` on a SQLite store without loading SQLAlchemy, Alembic or the event model.

Listing the runs is one ``SELECT`` on one table, but opening a store the general way
(:func:`procgrade.engine.store.open_store`) imports SQLAlchemy's engine, Alembic's migration
machinery and the pydantic event model first: seconds before a query of milliseconds. For a
SQLite file at the schema this procgrade writes, :func:`quick_runs` reads the ``runs`` table
with the standard library's ``sqlite3``, read-only. Anything else (PostgreSQL, an in-memory or
URI-style SQLite URL, a file without procgrade's schema or at another revision, any driver error)
returns None and the command opens the store the general way, so every error it reports is the
one the general path reports. A missing or unreadable file is checked by the same function the
general path uses (:func:`procgrade.engine.store.location.check_sqlite_file`), so that error is
fast and worded the same.
"""

from __future__ import annotations

import sqlite3
from urllib.parse import quote

from procgrade.engine.store.migrate import schema_head, sqlite_versions
from procgrade.engine.store.run_info import RUN_COLUMNS, RunInfo

__all__ = ["quick_runs"]


def quick_runs(db: str) -> list[RunInfo] | None:
    """Every run of the SQLite store ``db``, sorted by run id in code-point order (as
    :meth:`procgrade.engine.store.base.EventStore.runs`), or None when the general path must answer.
    Raises what the general path raises for a missing, foldered or non-SQLite file."""
    from procgrade.engine.store.location import check_sqlite_file, plain_sqlite_file

    path = plain_sqlite_file(db)
    if path is None:
        return None

    check_sqlite_file(path, create=False)
    try:
        connection = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        versions = sqlite_versions(connection)
        head = schema_head()
        if versions is None or head is None or versions != [head]:
            return None
        rows = connection.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs").fetchall()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    return sorted((RunInfo(*row) for row in rows), key=lambda info: info.run_id)
