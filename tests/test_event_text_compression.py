"""PostgreSQL keeps events' payloads and fields compressed with LZ4 (revision 0008): a new store
writes them so, a store migrated from 0007 keeps reading what pglz wrote and writes LZ4 from then
on, and every event reads back as it was appended (its hash chain verifies). PostgreSQL only: SQLite
has no column compression, and its schema at the head is held by tests/test_sqlite_head.py."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import text

from databases import pg_schema_url
from procgrade.engine.events import Command, RunStarted
from procgrade.engine.log_verification import verify_log
from procgrade.engine.store import migrate, open_store
from procgrade.engine.store.migrate import alembic_config, upgrade
from procgrade.engine.store.postgres import postgres_engine


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_schema_url() as url:
        yield url


def _command(seq: int, output: str) -> Command:
    return Command(run_id="r", seq=seq, event_id=f"e{seq}", actor="agent", command="cat big.log", exit_code=0,
                   payload={"output": output})


def _big_output(seed: int) -> str:
    """About 64 KB of text that compresses, as tool outputs do, but not to nothing."""
    lines = [f"{i} {hashlib.sha256(f'{seed}/{i % 5}'.encode()).hexdigest()} ok" for i in range(800)]
    return "\n".join(lines)


def _compressions(url: str) -> tuple[dict[str, str], list[tuple[int, str | None]]]:
    """Each text column's compression setting ('' is the server's default), and how each stored
    payload is compressed, by seq."""
    engine = postgres_engine(url)
    try:
        with engine.connect() as connection:
            columns = dict(connection.execute(text(
                "SELECT attname, attcompression FROM pg_attribute "
                "WHERE attrelid = 'events'::regclass AND attname IN ('payload', 'facts', 'command')")).all())
            stored = connection.execute(text(
                "SELECT seq, pg_column_compression(payload) FROM events ORDER BY seq")).all()
        return columns, [tuple(row) for row in stored]
    finally:
        engine.dispose()


def test_a_new_store_compresses_payloads_and_fields_with_lz4(pg_url: str) -> None:
    store = open_store(pg_url, create=True)
    try:
        appended = [RunStarted(run_id="r", seq=0, event_id="e0", actor="harness", harness={"name": "h"}),
                    _command(1, _big_output(1))]
        store.append("r", appended)
        assert list(store.events("r")) == appended
        assert verify_log(store, "r").ok
    finally:
        store.close()
    columns, stored = _compressions(pg_url)
    assert columns == {"payload": "l", "facts": "l", "command": ""}
    assert stored == [(0, None), (1, "lz4")]  # a payload of a few bytes is not compressed at all


def test_a_store_migrated_from_0007_reads_old_payloads_and_writes_new_ones_with_lz4(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = postgres_engine(pg_url)
    try:
        config = alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0007")
    finally:
        engine.dispose()
    first = [RunStarted(run_id="r", seq=0, event_id="e0", actor="harness", harness={"name": "h"}),
             _command(1, _big_output(1))]
    with monkeypatch.context() as patched:  # append as procgrade did at 0007 (this one requires the head)
        patched.setattr(migrate, "check_revision", lambda current: None)
        store = open_store(pg_url)
        try:
            store.append("r", first)
        finally:
            store.close()
    assert _compressions(pg_url) == ({"payload": "", "facts": "", "command": ""}, [(0, None), (1, "pglz")])

    engine = postgres_engine(pg_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    store = open_store(pg_url)
    try:
        later = [_command(2, _big_output(2))]
        store.append("r", later)
        assert list(store.events("r")) == first + later
        assert verify_log(store, "r").ok
    finally:
        store.close()
    assert _compressions(pg_url) == ({"payload": "l", "facts": "l", "command": ""},
                                     [(0, None), (1, "pglz"), (2, "lz4")])
