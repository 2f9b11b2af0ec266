"""Concurrent writers on both databases end cleanly; database failures are one-line messages.

Ingests of overlapping files in opposite orders (a deadlock on PostgreSQL before writers took
one advisory lock), concurrent ``score`` of one run (SQLite "database is locked", PostgreSQL
unique violations before), a missing database, a store whose tables were dropped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from builders import extra_events, small_run, write_jsonl
from databases import pg_base_url
from procgrade.engine.errors import SchemaNotReadyError, StoreError
from procgrade.engine.log_verification import verify_log
from procgrade.engine.store import open_store
from procgrade.engine.store.scores import ScoreStore

ROOT = Path(__file__).resolve().parent.parent


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "250"}
    env.pop("PROCGRADE_DB", None)
    return subprocess.Popen([sys.executable, "-m", "procgrade.engine.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    outputs = [p.communicate(timeout=240) for p in procs]
    return [(p.returncode, *output) for p, output in zip(procs, outputs)]


def test_opposite_order_ingests_of_overlapping_files_never_deadlock(store_url: str, tmp_path: Path) -> None:
    open_store(store_url, create=True).close()
    for round_ in range(3):
        runs = [f"r{round_}-{i}" for i in range(4)]
        files = []
        for part in range(2):  # both files hold every run, in opposite orders: part 0 a prefix, part 1 all
            events = []
            for run in (runs if part == 0 else runs[::-1]):
                events += (small_run(run) + extra_events(run, 8, 300))[: 150 if part == 0 else None]
            files.append(str(write_jsonl(tmp_path / f"f{round_}-{part}.jsonl", events)))
        results = finish([start("ingest", "--db", store_url, *files),
                          start("ingest", "--db", store_url, *reversed(files))])
        for code, out, err in results:  # the later writer finds everything stored: a no-op
            assert code == 0 and "Traceback" not in err and "Deadlock" not in err, err
        store = open_store(store_url)
        try:
            for run in runs:
                assert store.run(run).event_count == 308
                assert verify_log(store, run).ok
        finally:
            store.close()


def test_concurrent_score_of_one_run_stores_one_document(store_url: str, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "run.jsonl", small_run("solo") + extra_events("solo", 8, 200))
    store = open_store(store_url, create=True)
    store.close()
    assert finish([start("ingest", "--db", store_url, str(source))])[0][0] == 0
    results = finish([start("score", "solo", "--db", store_url) for _ in range(4)])
    for code, out, err in results:
        assert code == 0 and "Traceback" not in err, err
    assert sum("new" in out for _, out, _ in results) == 1
    store = open_store(store_url)
    try:
        assert len(ScoreStore(store).scores("solo")) == 1
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM rulesets")).scalar() == 1
    finally:
        store.close()


def test_missing_postgresql_database_is_one_line(tmp_path: Path) -> None:
    base = pg_base_url().rsplit("/", 1)[0]
    url = f"{base}/procgrade_no_such_database_here"
    with pytest.raises(StoreError, match="has no database 'procgrade_no_such_database_here'.*createdb"):
        open_store(url)
    code, out, err = finish([start("runs", "--db", url)])[0]
    assert code == 1 and "Traceback" not in err and err.strip().count("\n") == 0, err
    assert err.startswith("procgrade: the PostgreSQL server at") and "has no database" in err


def test_store_with_dropped_tables_is_one_line(store_url: str, db_kind: str) -> None:
    store = open_store(store_url, create=True)
    from builders import models

    store.append("x", models(small_run("x")))
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE seals"))
        if db_kind == "postgresql":
            conn.execute(text("DROP TABLE scores, events CASCADE"))
        else:
            conn.execute(text("DROP TABLE scores"))
            conn.execute(text("DROP TABLE events"))
    try:
        with pytest.raises(SchemaNotReadyError, match="lacks procgrade's 'events'"):
            list(store.events("x"))
        with pytest.raises(SchemaNotReadyError, match="lacks procgrade's"):
            store.append("y", models(small_run("y")))
    finally:
        store.close()
    for args in (["show", "x"], ["verify-log"], ["score", "x"], ["verify"]):
        code, out, err = finish([start(*args, "--db", store_url)])[0]
        assert code == 1 and "Traceback" not in err and err.strip().count("\n") == 0, (args, err)
        assert "lacks procgrade's" in err, err


def test_busy_sqlite_writer_is_one_line(tmp_path: Path) -> None:
    """A writer that holds SQLite's lock longer than the busy timeout: the other gets a message."""
    import sqlite3

    from procgrade.engine.store.database_errors import translate

    error = translate(sqlite3.OperationalError("database is locked"))
    assert isinstance(error, StoreError) and "busy" in str(error) and "\n" not in str(error)


def test_a_busy_error_wrapped_by_sqlalchemy_is_still_busy() -> None:
    """Stores on SQLAlchemy's path (in-memory, URI URLs) raise the driver's error wrapped: a store's
    first contact must still call it busy, not a reason to check the file."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from procgrade.engine.store.database_errors import is_busy

    assert is_busy(OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked")))
    assert not is_busy(OperationalError("SELECT 1", {}, sqlite3.OperationalError("unable to open database file")))
