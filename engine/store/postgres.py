"""PostgreSQL: one writer at a time (a transaction-scoped advisory lock), row lock per run
(SELECT ... FOR UPDATE), COPY (FORMAT BINARY) bulk path.

The advisory lock is what SQLite's BEGIN IMMEDIATE is: two ingests that lock overlapping runs
in opposite orders would otherwise deadlock (each holding one run row, waiting for the
other's); with every writer queueing on one lock first, no lock is ever taken out of order."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url

from procgrade.engine.errors import UnknownRunError
from procgrade.engine.store.database_errors import install as install_error_translation
from procgrade.engine.facts import FACT_COLUMNS
from procgrade.engine.store.base import EventStore, RunInfo
from procgrade.engine.stored import STORED_COLUMNS

_TEXT_OR_INT = {"text": "text", "int": "int8"}
_COPY_TYPES = (
    ["text", "int8", "text", "text", "text", "text", "int4", "int8"]
    + [_TEXT_OR_INT[kind] for kind in FACT_COLUMNS.values()]
    + ["int4"]  # in_stage (engine.stored.DERIVED_COLUMNS)
    + ["text", "text", "text", "text"]
)
_INSERT = f"INSERT INTO events ({', '.join(STORED_COLUMNS)}) VALUES ({', '.join(['%s'] * len(STORED_COLUMNS))})"
_COPY = f"COPY events ({', '.join(STORED_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
#: Below this many rows a pipelined executemany beats COPY (eventstore_rules.md, 1.5).
_COPY_THRESHOLD = 100
#: The advisory lock key every procgrade writer takes ("procgrade" in ASCII, as an int8).
WRITER_LOCK = int.from_bytes(b"procgrad", "big") >> 1


def postgres_engine(url: str) -> Engine:
    # An unreachable host fails within seconds, not after the system's TCP timeout (minutes), unless
    # the URL sets its own connect_timeout.
    options = {} if "connect_timeout" in make_url(url).query else {"connect_args": {"connect_timeout": 10}}
    return install_error_translation(create_engine(url, pool_pre_ping=True, **options))


class PostgresEventStore(EventStore):
    dialect = "postgresql"
    param = "%s"

    def _make_engine(self, url: str) -> Engine:
        return postgres_engine(url)

    def _begin(self, raw: Any) -> Any:
        cursor = raw.driver_connection.cursor()  # psycopg opens the transaction on first statement
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        return cursor

    def _lock_run(self, tx: Any, run_id: str, create: bool = True) -> RunInfo:
        if create:
            # Blocks on a concurrent writer's uncommitted row, then does nothing.
            tx.execute("INSERT INTO runs (run_id, event_count) VALUES (%s, 0) ON CONFLICT DO NOTHING", (run_id,))
        info = self._select_run(tx, run_id, " FOR UPDATE")
        if info is None:
            raise UnknownRunError(f"no run {run_id!r} in the store")
        return info

    @property
    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.IntegrityError,)

    def _insert_rows(self, tx: Any, rows: list[tuple[Any, ...]]) -> None:
        if len(rows) < _COPY_THRESHOLD:
            tx.executemany(_INSERT, rows)
            return
        with tx.copy(_COPY) as copy:
            copy.set_types(_COPY_TYPES)
            for row in rows:
                copy.write_row(row)
