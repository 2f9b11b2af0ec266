"""A store on a plain SQLite file reads and writes on ``sqlite3`` connections of its own, without
SQLAlchemy (engine/store/sqlite_connections.py): set up as SQLAlchemy's are, pooled, and the same
data either way; every other URL still goes through SQLAlchemy."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from builders import small_run, write_jsonl

from procgrade.engine.errors import DatabaseUnavailableError, StoreError
from procgrade.engine.ingest import ingest_native
from procgrade.engine.store import open_store
from procgrade.engine.store.location import plain_sqlite_url, resolve_url
from procgrade.engine.store.sqlite_connections import SQLiteConnections

#: File names whose URL needs no escaping, and names SQLAlchemy escapes (left to it).
PLAIN_NAMES = ["x.db", "./x.db", "a//b.db", "a b.db", "dir/sub-dir/run_1.db", "a+b~.db", "~/x.db"]
ESCAPED_NAMES = ["x@y.db", "a:b.db", "a;b.db", "é.db", "a,b.db", "a=b.db", "a'b.db"]


@pytest.mark.parametrize("name", PLAIN_NAMES + ESCAPED_NAMES)
@pytest.mark.parametrize("form", ["path", "url"])
def test_the_quick_url_is_sqlalchemys_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                              form: str) -> None:
    """Where the quick path answers, its URL is the one SQLAlchemy's parser and renderer give;
    names SQLAlchemy would escape are left to it."""
    from sqlalchemy.engine import URL, make_url

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "dir" / "sub-dir").mkdir(parents=True)
    text = name if form == "path" else f"sqlite:///{name}"
    quick = plain_sqlite_url(text)
    parsed = URL.create("sqlite", database=str(Path(text))) if form == "path" else make_url(text)
    if name in ESCAPED_NAMES:
        assert quick is None
    else:
        assert quick == parsed.render_as_string(hide_password=False)
        assert make_url(quick).database == parsed.database
        if not name.startswith("~"):
            assert resolve_url(text, create=True) == quick


def _store_with_a_run(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}", create=True)
    ingest_native(store, [write_jsonl(tmp_path / "run.jsonl", small_run("r1"))])
    return store


def test_a_plain_file_store_needs_no_engine_until_asked(tmp_path: Path) -> None:
    store = _store_with_a_run(tmp_path)
    try:
        assert isinstance(store._direct, SQLiteConnections)
        assert store._engine is None  # made, written and read without SQLAlchemy's engine
        info = store.run("r1")
        stored = list(store.stored_events("r1"))
        # SQLAlchemy's engine, built when asked, sees the very same rows
        with store.engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT run_id, event_count, head_hash FROM runs").all()
            events = conn.exec_driver_sql("SELECT count(*) FROM events WHERE run_id = 'r1'").scalar()
        assert [tuple(row) for row in rows] == [("r1", info.event_count, info.head_hash)]
        assert events == len(stored) == info.event_count
    finally:
        store.close()


def test_in_memory_and_uri_urls_take_sqlalchemys_pool(tmp_path: Path) -> None:
    store = open_store("sqlite://", create=True)
    try:
        assert store._direct is None and store.runs() == []
    finally:
        store.close()
    odd = tmp_path / "a@b.db"
    store = open_store(str(odd), create=True)
    try:
        assert store._direct is None
        assert store.url == f"sqlite:///{str(odd).replace('@', '%40')}"
    finally:
        store.close()


def test_connections_are_set_up_as_sqlalchemys(tmp_path: Path) -> None:
    store = _store_with_a_run(tmp_path)
    try:
        direct = store._raw_connection()
        through_engine = store.engine.raw_connection()
        try:
            settings = []
            for raw in (direct, through_engine):
                conn = raw.driver_connection
                settings.append((conn.isolation_level,
                                 *(conn.execute(f"PRAGMA {name}").fetchone()[0]
                                   for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout"))))
            assert settings[0] == settings[1] == (None, "wal", 1, 1, 30000)
        finally:
            direct.close()
            through_engine.close()
    finally:
        store.close()


def test_the_pool_reuses_rolls_back_and_disposes(tmp_path: Path) -> None:
    path = tmp_path / "pool.db"
    sqlite3.connect(path).execute("CREATE TABLE t (x INTEGER)").connection.close()
    pool = SQLiteConnections(path, f"sqlite:///{path}")
    first = pool.raw_connection()
    conn = first.driver_connection
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (1)")
    first.close()  # handed back inside a transaction: rolled back, not committed
    first.close()  # a second close is a no-op
    assert not conn.in_transaction
    again = pool.raw_connection()
    assert again.driver_connection is conn  # reused
    assert again.driver_connection.execute("SELECT count(*) FROM t").fetchone() == (0,)
    lent = pool.raw_connection()
    assert lent.driver_connection is not conn
    again.close()
    pool.dispose()  # closes the idle one ...
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")
    kept = lent.driver_connection
    lent.close()  # ... and one lent before the dispose when it comes back
    with pytest.raises(sqlite3.ProgrammingError):
        kept.execute("SELECT 1")
    fresh = pool.raw_connection()  # the pool still serves after a dispose, as an engine does
    assert fresh.driver_connection.execute("SELECT count(*) FROM t").fetchone() == (0,)
    fresh.close()
    pool.dispose()


def test_driver_errors_on_the_direct_path_are_worded_as_before(tmp_path: Path) -> None:
    store = _store_with_a_run(tmp_path)
    try:
        with store._reading() as cursor:
            cursor.execute("DROP TABLE seals")
        with pytest.raises(StoreError, match="the database lacks procgrade's 'seals'"):
            store.seals()
    finally:
        store.close()
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4096)
    with pytest.raises(DatabaseUnavailableError, match="is not a SQLite database"):
        open_store(str(damaged))


def test_a_relative_path_stays_the_file_it_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As with SQLAlchemy (which makes the path absolute when it creates an engine), a store opened
    on a relative path keeps reading that file after the process changes directory: new pooled
    connections and the engine built later alike, and nothing is created where the process went."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(home)
    store = open_store("store.db", create=True)
    try:
        ingest_native(store, [write_jsonl(home / "run.jsonl", small_run("r1"))])
        monkeypatch.chdir(elsewhere)
        store._direct.dispose()  # the next read opens a new connection
        assert [info.run_id for info in store.runs()] == ["r1"]
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT run_id FROM runs").scalar() == "r1"
        assert list(elsewhere.iterdir()) == []
    finally:
        store.close()
