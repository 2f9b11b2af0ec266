"""A new SQLite store is made from the head schema's snapshot (engine/store/sqlite_head.py), and that
is exactly the schema Alembic's migrations make; anything the snapshot cannot answer migrates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from procgrade.engine.store import init_database, open_store
from procgrade.engine.store.migrate import alembic_head_revision, upgrade
from procgrade.engine.store.sqlite import sqlite_engine
from procgrade.engine.store.sqlite_head import create_head_schema, schema_statements
from procgrade.migrations import sqlite_head


def _master(path: Path) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]], int]:
    """(sqlite_master's rows by name, alembic_version's rows, user_version) of a database file."""
    with sqlite3.connect(path) as conn:
        master = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        versions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
    return master, versions, user_version


def _migrated_by_alembic(path: Path) -> None:
    engine = sqlite_engine(f"sqlite:///{path}")
    try:
        upgrade(engine)
    finally:
        engine.dispose()


def test_the_snapshot_is_of_the_head_revision_and_up_to_date(tmp_path: Path) -> None:
    """Fails after a new revision until `python -m procgrade.engine.store.sqlite_head` is run."""
    assert sqlite_head.REVISION == alembic_head_revision()
    _migrated_by_alembic(tmp_path / "alembic.db")
    with sqlite3.connect(tmp_path / "alembic.db") as conn:
        assert tuple(schema_statements(conn)) == sqlite_head.STATEMENTS


def test_a_new_store_has_the_schema_alembic_makes(tmp_path: Path) -> None:
    _migrated_by_alembic(tmp_path / "alembic.db")
    store = open_store(f"sqlite:///{tmp_path / 'new.db'}", create=True)
    try:
        assert store._engine is None  # made without SQLAlchemy's engine, so without Alembic
    finally:
        store.close()
    assert init_database(str(tmp_path / "init.db"))[0] == sqlite_head.REVISION
    expected = _master(tmp_path / "alembic.db")
    assert expected[1] == [(sqlite_head.REVISION,)]
    assert _master(tmp_path / "new.db") == expected
    assert _master(tmp_path / "init.db") == expected


def test_the_overwrite_guards_come_with_the_snapshot(tmp_path: Path) -> None:
    """Revision 0005's triggers are in the snapshot: a new store refuses to replace a run's row."""
    store = open_store(f"sqlite:///{tmp_path / 'new.db'}", create=True)
    store.close()
    with sqlite3.connect(tmp_path / "new.db") as conn:
        triggers = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        assert triggers
        conn.execute("INSERT INTO runs (run_id, event_count) VALUES ('r', 0)")
        with pytest.raises(sqlite3.DatabaseError, match="procgrade"):
            conn.execute("INSERT OR REPLACE INTO runs (run_id, event_count) VALUES ('r', 5)")


def test_an_older_snapshot_leaves_the_store_to_alembic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _migrated_by_alembic(tmp_path / "alembic.db")
    monkeypatch.setattr(sqlite_head, "REVISION", "0000")
    store = open_store(f"sqlite:///{tmp_path / 'new.db'}", create=True)
    try:
        assert store._engine is not None  # Alembic migrated it
    finally:
        store.close()
    assert _master(tmp_path / "new.db") == _master(tmp_path / "alembic.db")


def test_only_an_empty_file_takes_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert create_head_schema(conn, sqlite_head.REVISION) is False
        assert not conn.in_transaction
        assert [row[0] for row in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
        empty = sqlite3.connect(tmp_path / "empty.db", isolation_level=None)
        try:
            assert create_head_schema(empty, sqlite_head.REVISION) is True
            assert create_head_schema(empty, sqlite_head.REVISION) is False  # made already: left as it is
            assert create_head_schema(empty, "0000") is False
        finally:
            empty.close()
    finally:
        conn.close()
