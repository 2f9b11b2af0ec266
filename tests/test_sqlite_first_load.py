"""The first load of a SQLite store that holds no runs is written through a rollback journal, not
the WAL (engine/store/sqlite_first_load.py): the same rows, the file held exclusively from the
switch on and back in WAL after it whether it committed, failed or was killed, and everything else
(a store holding runs, another connection on the file, readers arriving meanwhile) as it was."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from builders import ev, models, small_run, write_jsonl

from procgrade.engine.ingest import ingest_native
from procgrade.engine.log_verification import verify_log
from procgrade.engine.store import open_store

ROOT = Path(__file__).resolve().parent.parent


def _header_says_wal(path: Path) -> bool:
    """Bytes 18 and 19 of a SQLite file are 2 in WAL mode, 1 with a rollback journal."""
    return path.read_bytes()[18:20] == b"\x02\x02"


def _journal_files(path: Path) -> set[str]:
    return {p.name.removeprefix(path.name) for p in path.parent.glob(path.name + "-*") if p.stat().st_size}


def _rows(path: Path) -> list[tuple]:
    store = open_store(f"sqlite:///{path}")
    try:
        return [row for info in store.runs() for row in store.stored_events(info.run_id)]
    finally:
        store.close()


def _plain_read(path: Path) -> str:
    """What another connection that does not wait gets when it reads the file."""
    import sqlite3

    other = sqlite3.connect(path, timeout=0)
    try:
        return f"read {other.execute('SELECT count(*) FROM runs').fetchall()[0][0]} runs"
    except sqlite3.OperationalError as exc:
        return str(exc)
    finally:
        other.close()


def _big_run(run_id: str, events: int = 2000) -> list:
    """Events enough (about 4 MB stored) to spill SQLite's 2 MB page cache mid-transaction."""
    notes = [ev("message", seq, run_id, text=f"note {seq} " + "x" * 1500, intent="progress")
             for seq in range(7, 7 + events)]
    return models(small_run(run_id)[:7] + notes)


def test_first_load_goes_through_a_rollback_journal_and_leaves_the_same_rows_in_wal(tmp_path: Path) -> None:
    events = small_run("r1") + small_run("r2")
    source = write_jsonl(tmp_path / "runs.jsonl", events)
    bulk, plain = tmp_path / "bulk.db", tmp_path / "plain.db"
    store = open_store(f"sqlite:///{bulk}", create=True)
    seen: dict[str, object] = {}
    try:
        with store.writer(bulk=True) as writer:
            seen["reader before any write"] = _plain_read(bulk)
            writer.append("r0", _big_run("r0"))
            seen["mode"] = writer._tx.execute("PRAGMA journal_mode").fetchall()[0][0]
            seen["files"] = _journal_files(bulk)
        with store._reading() as cursor:  # the pool's next connection is a plain one again
            seen["after"] = [cursor.execute(f"PRAGMA {name}").fetchall()[0][0]
                             for name in ("journal_mode", "synchronous", "locking_mode")]
        assert ingest_native(store, [source])  # a second load: the store holds runs now
    finally:
        store.close()
    assert seen == {"reader before any write": "database is locked", "mode": "delete", "files": {"-journal"},
                    "after": ["wal", 1, "normal"]}
    assert _header_says_wal(bulk) and not (tmp_path / "bulk.db-journal").exists()

    reference = open_store(f"sqlite:///{plain}", create=True)
    try:
        with reference.writer() as writer:  # not bulk: through the WAL
            writer.append("r0", _big_run("r0"))
        ingest_native(reference, [source])
    finally:
        reference.close()
    assert _rows(bulk) == _rows(plain)
    store = open_store(f"sqlite:///{bulk}")
    try:
        assert all(verify_log(store, info.run_id).ok for info in store.runs())
    finally:
        store.close()


def test_a_store_holding_runs_keeps_the_wal(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = open_store(f"sqlite:///{path}", create=True)
    try:
        ingest_native(store, [write_jsonl(tmp_path / "first.jsonl", small_run("r1"))])
        with store.writer(bulk=True) as writer:
            writer.append("r2", _big_run("r2"))
            mode = writer._tx.execute("PRAGMA journal_mode").fetchall()[0][0]
            files = _journal_files(path)
    finally:
        store.close()
    assert mode == "wal" and "-journal" not in files and "-wal" in files


def test_another_connection_on_the_file_keeps_the_wal(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "store.db"
    store = open_store(f"sqlite:///{path}", create=True)
    other = sqlite3.connect(path)  # another process's reader, say: SQLite will not leave WAL under it
    try:
        other.execute("SELECT count(*) FROM runs").fetchall()
        with store.writer(bulk=True) as writer:
            writer.append("r1", _big_run("r1", 200))
            mode = writer._tx.execute("PRAGMA journal_mode").fetchall()[0][0]
        assert other.execute("SELECT run_id FROM runs").fetchall() == [("r1",)]
    finally:
        other.close()
        store.close()
    assert mode == "wal"


def test_a_failed_first_load_leaves_an_empty_store_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = open_store(f"sqlite:///{path}", create=True)
    try:
        with pytest.raises(RuntimeError, match="input broke"):
            with store.writer(bulk=True) as writer:
                writer.append("r1", _big_run("r1"))
                raise RuntimeError("input broke")
        assert store.runs() == []
        with store._reading() as cursor:  # the load's connection was closed; the next one is in WAL
            assert cursor.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    finally:
        store.close()
    assert _header_says_wal(path) and not (tmp_path / "store.db-journal").exists()


def test_a_reader_arriving_during_the_first_load_waits_for_its_commit(tmp_path: Path) -> None:
    """A store opened during the load waits on SQLite's lock (the busy timeout) and then sees
    every run: never an error, never part of the load."""
    path = tmp_path / "store.db"
    store = open_store(f"sqlite:///{path}", create=True)
    seen: list[object] = []

    def read() -> None:
        reader = open_store(f"sqlite:///{path}")
        try:
            seen.append(sorted(info.run_id for info in reader.runs()))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            seen.append(exc)
        finally:
            reader.close()

    try:
        with store.writer(bulk=True) as writer:
            writer.append("r1", _big_run("r1"))
            writer.append("r2", _big_run("r2"))
            reader = threading.Thread(target=read)
            reader.start()
            time.sleep(0.5)
            assert reader.is_alive() and seen == []  # waiting, not failed
        reader.join(timeout=30)
    finally:
        store.close()
    assert seen == [["r1", "r2"]]
    assert _header_says_wal(path)


def test_a_first_load_killed_midway_is_rolled_back_by_the_next_open(tmp_path: Path) -> None:
    """A process that dies inside its first load leaves a hot journal; the next connection rolls
    it back and turns the file back to WAL, and the load can be run again."""
    path = tmp_path / "store.db"
    child = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from builders import extra_events, models, small_run
        from procgrade.engine.store import open_store
        store = open_store({f'sqlite:///{path}'!r}, create=True)
        with store.writer(bulk=True) as writer:
            writer.append("r1", models(small_run("r1")[:7] + extra_events("r1", 7, 3000)))
            os._exit(9)  # as kill -9 would: no rollback, no close
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=120)
    assert done.returncode == 9, done.stderr.decode()
    assert (tmp_path / "store.db-journal").stat().st_size > 0 and not _header_says_wal(path)

    store = open_store(f"sqlite:///{path}")
    try:
        assert store.runs() == []
        assert ingest_native(store, [write_jsonl(tmp_path / "run.jsonl", small_run("r1"))])
        assert [info.run_id for info in store.runs()] == ["r1"] and verify_log(store, "r1").ok
    finally:
        store.close()
    assert _header_says_wal(path) and not (tmp_path / "store.db-journal").exists()


def test_a_reader_kept_out_past_the_busy_timeout_is_told_the_store_is_busy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not "cannot open ... check the file's permissions": the file is fine, a load holds it."""
    from procgrade.engine.errors import DatabaseUnavailableError, StoreError
    from procgrade.engine.store import sqlite_connections

    path = tmp_path / "store.db"
    store = open_store(f"sqlite:///{path}", create=True)
    try:
        with store.writer(bulk=True) as writer:
            writer.append("r1", _big_run("r1", 100))
            monkeypatch.setattr(sqlite_connections, "BUSY_TIMEOUT_S", 0.2)
            with pytest.raises(StoreError, match="the database is busy") as refused:
                open_store(f"sqlite:///{path}")
            assert not isinstance(refused.value, DatabaseUnavailableError)
            monkeypatch.undo()
    finally:
        store.close()
    assert _plain_read(path) == "read 1 runs"


def test_a_failed_switch_back_leaves_the_rows_and_the_next_connection_restores_wal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from procgrade.engine.store import sqlite_first_load

    def refuse(_connection: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(sqlite_first_load, "back_to_wal", refuse)
    path = tmp_path / "store.db"
    store = open_store(f"sqlite:///{path}", create=True)
    try:
        assert ingest_native(store, [write_jsonl(tmp_path / "run.jsonl", small_run("r1"))])
        assert not _header_says_wal(path)  # the committed load stands, in a rollback-journal file
        assert [info.run_id for info in store.runs()] == ["r1"]  # a new connection: set up as always
    finally:
        store.close()
    assert _header_says_wal(path) and not (tmp_path / "store.db-journal").exists()
