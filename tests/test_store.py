"""The append-only store, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from builders import RUN, every_kind_run, ev, extra_events, models, reference_head, reference_hashes, small_run, \
    write_jsonl
from databases import DATABASES, fresh_url, pg_schema_url
from procgrade.engine.errors import (
    EventIdConflictError,
    InputError,
    RunSealedError,
    SchemaNotReadyError,
    SeqConflictError,
    StoreError,
    UnknownRunError,
)
from procgrade.engine.events import event_adapter
from procgrade.engine.ingest import ingest_native
from procgrade.engine.log_verification import verify_log
from procgrade.engine.native import dump_native
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.store.postgres import PostgresEventStore
from procgrade.engine.store.sqlite import ROWS_PER_STATEMENT, SQLiteEventStore
from procgrade.engine.stored import STORED_COLUMNS


HASH = STORED_COLUMNS.index("hash")


def snapshot(store: EventStore) -> tuple:
    return tuple((info, tuple(store.stored_events(info.run_id))) for info in store.runs())


def execute(store: EventStore, sql: str, **params: Any) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(sql), params)


# --- basics -------------------------------------------------------------------------------------


def test_open_store_kind(store: EventStore, db_kind: str) -> None:
    assert isinstance(store, SQLiteEventStore if db_kind == "sqlite" else PostgresEventStore)
    assert store.runs() == []


def test_open_without_create_on_an_empty_database_is_not_ready(tmp_path: Path) -> None:
    for kind in DATABASES:
        with fresh_url(kind, tmp_path / kind) as url:
            with pytest.raises(SchemaNotReadyError):
                open_store(url)


def test_append_and_read_back(store: EventStore) -> None:
    events = models(small_run())
    result = store.append(RUN, events)
    assert (result.run_id, result.appended, result.already_stored, result.event_count) == (RUN, 8, 0, 8)
    assert result.head_hash == reference_head(small_run()) and not result.sealed and not result.no_op
    assert list(store.events(RUN)) == events
    rows = list(store.stored_events(RUN))
    assert [r[STORED_COLUMNS.index("hash")] for r in rows] == reference_hashes(small_run())
    assert [r[1] for r in rows] == list(range(8))
    command_row = rows[4]
    assert command_row[STORED_COLUMNS.index("exit_code")] == 0
    assert command_row[STORED_COLUMNS.index("command")] == "python -m pip install -e ."
    assert command_row[STORED_COLUMNS.index("outcome")] == "pass"
    assert rows[5][STORED_COLUMNS.index("tests_passed")] == 12
    info = store.run(RUN)
    assert (info.event_count, info.head_hash, info.harness, info.model) == (8, result.head_hash, "test-harness", "model-x")


def test_unknown_run(store: EventStore) -> None:
    with pytest.raises(UnknownRunError):
        store.run("nope")
    with pytest.raises(UnknownRunError):
        store.seal("nope")
    assert list(store.events("nope")) == []


# --- idempotency and conflicts ------------------------------------------------------------------


def test_append_is_idempotent_per_event_id(store: EventStore) -> None:
    events = models(small_run())
    first = store.append(RUN, events)
    before = snapshot(store)
    again = store.append(RUN, events)
    assert again.no_op and (again.appended, again.already_stored) == (0, 8)
    assert (again.event_count, again.head_hash) == (8, first.head_hash)
    one = store.append(RUN, events[3:4])
    assert one.no_op and one.already_stored == 1 and one.head_hash == first.head_hash
    assert snapshot(store) == before


def test_overlapping_batch_appends_only_new_events(store: EventStore) -> None:
    full = models(small_run() + extra_events(RUN, 8, 5))
    store.append(RUN, full[:6])
    result = store.append(RUN, full[4:])
    assert (result.appended, result.already_stored, result.event_count) == (7, 2, 13)
    assert result.head_hash == reference_head(small_run() + extra_events(RUN, 8, 5))
    assert list(store.events(RUN)) == full


def test_different_event_at_a_stored_seq_is_a_seq_conflict(store: EventStore) -> None:
    store.append(RUN, models(small_run()))
    before = snapshot(store)
    intruder = models([ev("message", 5, text="I was here first", event_id="intruder")])
    with pytest.raises(SeqConflictError) as info:
        store.append(RUN, intruder)
    assert (info.value.run_id, info.value.seq) == (RUN, 5)
    # also when the intruder follows identical events in the same batch, and nothing is written
    batch = models(small_run()[:5] + [ev("message", 5, text="x", event_id="intruder")] + extra_events(RUN, 6, 5))
    with pytest.raises(SeqConflictError):
        store.append(RUN, batch)
    assert snapshot(store) == before


def test_same_event_id_with_different_content_is_an_event_id_conflict(store: EventStore) -> None:
    store.append(RUN, models(small_run()))
    before = snapshot(store)
    changed = dict(small_run()[4], exit_code=1)
    with pytest.raises(EventIdConflictError) as info:
        store.append(RUN, models([changed]))
    assert (info.value.run_id, info.value.seq) == (RUN, 4)
    # payload-only change is a change too
    with pytest.raises(EventIdConflictError):
        store.append(RUN, models([dict(small_run()[1], payload={"role": "assistant", "tokens": 18})]))
    assert snapshot(store) == before


def test_event_id_used_in_another_run_is_an_event_id_conflict(store: EventStore) -> None:
    store.append("run-a", models(small_run("run-a")))
    before = snapshot(store)
    stolen = small_run("run-b")
    stolen[3]["event_id"] = "run-a/6"
    with pytest.raises(EventIdConflictError) as info:
        store.append("run-b", models(stolen))
    assert (info.value.run_id, info.value.seq) == ("run-b", 3)
    assert "run-a" in str(info.value)
    assert snapshot(store) == before
    with pytest.raises(UnknownRunError):
        store.run("run-b")


def test_event_id_reused_at_a_later_seq_of_the_same_run(store: EventStore) -> None:
    store.append(RUN, models(small_run()))
    before = snapshot(store)
    with pytest.raises(EventIdConflictError) as info:
        store.append(RUN, models([ev("message", 8, text="again", event_id=f"{RUN}/2")]))
    assert info.value.seq == 8
    assert snapshot(store) == before


def test_event_id_repeated_within_one_append_is_an_event_id_conflict(store: EventStore) -> None:
    events = small_run()
    events[6]["event_id"] = events[2]["event_id"]
    with pytest.raises(EventIdConflictError):
        store.append(RUN, models(events))
    assert store.runs() == []


def test_gap_after_stored_events_is_a_seq_conflict(store: EventStore) -> None:
    store.append(RUN, models(small_run()))
    with pytest.raises(SeqConflictError) as info:
        store.append(RUN, models(extra_events(RUN, 9, 2)))
    assert info.value.seq == 9
    with pytest.raises(SeqConflictError):
        store.append("fresh", models(extra_events("fresh", 1, 2)))
    assert store.run(RUN).event_count == 8
    assert [r.run_id for r in store.runs()] == [RUN]


def test_batch_shape_is_checked(store: EventStore) -> None:
    with pytest.raises(StoreError):  # not consecutive
        store.append(RUN, models([small_run()[0], small_run()[2]]))
    with pytest.raises(StoreError):  # another run's event
        store.append(RUN, models([small_run()[0], small_run("x")[1]]))
    with pytest.raises(StoreError):  # seq 0 must open the run
        store.append(RUN, models([ev("message", 0, text="hi")]))
    assert store.runs() == []


# --- two writers --------------------------------------------------------------------------------


def test_two_writers_same_next_seq_second_gets_seq_conflict(store_url: str, open_stores: list) -> None:
    one = open_store(store_url, create=True)
    open_stores.append(one)
    two = open_store(store_url)
    open_stores.append(two)
    one.append(RUN, models(small_run()))
    mine = models([ev("message", 8, text="writer one", event_id="w1-8")])
    theirs = models([ev("message", 8, text="writer two", event_id="w2-8")])
    assert two.run(RUN).event_count == 8
    assert one.append(RUN, mine).appended == 1
    with pytest.raises(SeqConflictError) as info:
        two.append(RUN, theirs)
    assert info.value.seq == 8
    assert list(two.events(RUN))[8] == mine[0]
    assert one.run(RUN).event_count == two.run(RUN).event_count == 9
    assert two.append(RUN, mine).no_op  # the winner's retry through the other store is a no-op


@pytest.mark.parametrize("new_run", [False, True], ids=["existing-run", "new-run"])
def test_two_writers_racing_in_threads_exactly_one_wins(store_url: str, open_stores: list, new_run: bool) -> None:
    stores = [open_store(store_url, create=True)]
    stores.append(open_store(store_url))
    open_stores.extend(stores)
    rounds = 4
    for round_no in range(rounds):
        run_id = f"race-{round_no}" if new_run else RUN
        if new_run:
            batches = [models(small_run(run_id)), models(small_run(run_id))]
            batches[1][-1] = models([dict(small_run(run_id)[-1], event_id=f"{run_id}/other", status="failed")])[0]
            seq = 7
        else:
            if round_no == 0:
                stores[0].append(RUN, models(small_run()))
            seq = 8 + round_no
            batches = [models([ev("message", seq, text=f"writer {w}", event_id=f"w{w}-{seq}")]) for w in (0, 1)]
        barrier = threading.Barrier(2)
        outcomes: list[Any] = [None, None]

        def write(w: int) -> None:
            barrier.wait()
            try:
                outcomes[w] = stores[w].append(run_id, batches[w])
            except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                outcomes[w] = exc

        threads = [threading.Thread(target=write, args=(w,)) for w in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        winners = [w for w in (0, 1) if not isinstance(outcomes[w], Exception)]
        losers = [w for w in (0, 1) if isinstance(outcomes[w], Exception)]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        assert isinstance(outcomes[losers[0]], SeqConflictError), repr(outcomes[losers[0]])
        stored = list(stores[losers[0]].events(run_id))
        assert stored[seq] == batches[winners[0]][-1]
        assert len(stored) == seq + 1
        assert verify_log(stores[0], run_id).ok


# --- sealing ------------------------------------------------------------------------------------


def test_seal_records_head_and_refuses_appends(store: EventStore) -> None:
    result = store.append(RUN, models(small_run()))
    info = store.seal(RUN)
    assert info.sealed and (info.sealed_event_count, info.sealed_head_hash) == (8, result.head_hash)
    assert (info.event_count, info.head_hash) == (8, result.head_hash)
    before = snapshot(store)
    with pytest.raises(RunSealedError) as exc:
        store.append(RUN, models(extra_events(RUN, 8, 1)))
    assert exc.value.seq == 8
    with pytest.raises(RunSealedError):  # overlap plus new: still refused, nothing written
        store.append(RUN, models(small_run() + extra_events(RUN, 8, 2)))
    again = store.append(RUN, models(small_run()))
    assert again.no_op and again.sealed and again.head_hash == result.head_hash
    assert store.append(RUN, models(small_run()), seal=True).no_op
    assert store.seal(RUN) == info  # sealing twice changes nothing
    with pytest.raises(SeqConflictError):  # a conflict is still a conflict
        store.append(RUN, models([ev("message", 3, text="x", event_id="zz")]))
    assert snapshot(store) == before


def test_append_with_seal(store: EventStore) -> None:
    result = store.append(RUN, models(small_run()), seal=True)
    assert result.sealed and result.appended == 8
    info = store.run(RUN)
    assert (info.sealed_event_count, info.sealed_head_hash) == (8, reference_head(small_run()))
    store.append("other", models(small_run("other")[:4]))
    sealed_later = store.append("other", models(small_run("other")[:4]), seal=True)
    assert sealed_later.no_op and sealed_later.sealed
    assert store.run("other").sealed_event_count == 4
    with pytest.raises(RunSealedError):
        store.append("other", models(small_run("other")[4:]))


# --- the database itself refuses changes --------------------------------------------------------


@pytest.mark.parametrize("sql", [
    "UPDATE events SET exit_code = 1 WHERE run_id = :run AND seq = 4",
    "UPDATE events SET payload = '{}' WHERE run_id = :run",
    "UPDATE events SET hash = 'x'",
    "DELETE FROM events WHERE run_id = :run AND seq = 7",
    "DELETE FROM events",
    "DELETE FROM runs WHERE run_id = :run",
    "DELETE FROM runs",
])
def test_database_refuses_changes_to_the_log(store: EventStore, sql: str) -> None:
    store.append(RUN, models(small_run()))
    before = snapshot(store)
    with pytest.raises(sa_exc.DBAPIError, match="procgrade"):
        execute(store, sql, run=RUN)
    assert snapshot(store) == before
    assert verify_log(store, RUN).ok


def test_database_refuses_update_of_a_sealed_run_row(store: EventStore) -> None:
    store.append(RUN, models(small_run()), seal=True)
    store.append("open", models(small_run("open")))
    before = snapshot(store)
    for sql in ("UPDATE runs SET head_hash = 'x' WHERE run_id = :run",
                "UPDATE runs SET sealed_head_hash = NULL, sealed_event_count = NULL WHERE run_id = :run",
                "UPDATE runs SET event_count = 9"):
        with pytest.raises(sa_exc.DBAPIError, match="sealed"):
            execute(store, sql, run=RUN)
    assert snapshot(store) == before


def test_database_refuses_truncate_on_postgresql() -> None:
    """PostgreSQL only: SQLite has no TRUNCATE (its DELETE is covered above)."""
    with pg_schema_url() as url:
        store = open_store(url, create=True)
        try:
            store.append(RUN, models(small_run()))
            for table in ("events", "runs"):
                with pytest.raises(sa_exc.DBAPIError, match="append-only"):
                    execute(store, f"TRUNCATE {table} CASCADE")
            assert store.run(RUN).event_count == 8 and len(list(store.events(RUN))) == 8
        finally:
            store.close()


# --- bulk paths ---------------------------------------------------------------------------------


class _SpyCursor:
    """Records how events are inserted: ``copy`` (PostgreSQL's COPY), ``executemany`` (one row per
    statement), or ``values xN`` for each execution of a statement of N rows (SQLite)."""

    def __init__(self, cursor: Any, calls: list[str]) -> None:
        self._cursor, self._calls = cursor, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        if sql.startswith("INSERT INTO events ("):
            self._calls.append(f"values x{sql.count('(?')}")
        return self._cursor.execute(sql, *args, **kwargs)

    def executemany(self, sql: str, params: Any, *args: Any, **kwargs: Any) -> Any:
        params = list(params)
        if sql.count("(?") > 1:
            self._calls.extend([f"values x{sql.count('(?')}"] * len(params))
        else:
            self._calls.append("executemany")
        return self._cursor.executemany(sql, params, *args, **kwargs)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        self._calls.append("copy")
        return self._cursor.copy(*args, **kwargs)


@pytest.fixture
def insert_calls(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = type(store)._begin
    monkeypatch.setattr(type(store), "_begin", lambda self, raw: _SpyCursor(original(self, raw), calls))
    return calls


def _sqlite_statements(rows: int, per: int = ROWS_PER_STATEMENT) -> list[str]:
    """SQLite's inserts of ``rows`` events: full statements of ``per`` rows, then the rest in
    statements of powers of two, largest first."""
    full, rest = divmod(rows, per)
    return [f"values x{per}"] * full + [f"values x{1 << bit}" for bit in reversed(range(rest.bit_length()))
                                         if rest >> bit & 1]


@pytest.mark.parametrize("length", [2, 63, 64, 65, 99, 100, 101, 260])
def test_bulk_paths_round_trip(store: EventStore, db_kind: str, insert_calls: list[str], length: int) -> None:
    lines = every_kind_run(RUN, length)
    events = models(lines)
    result = store.append(RUN, events)
    if db_kind == "postgresql":
        assert insert_calls == ["copy" if length >= 100 else "executemany"]
    else:
        assert insert_calls == _sqlite_statements(length)
    assert result.appended == length and result.head_hash == reference_head(lines)
    assert list(store.events(RUN)) == events
    rows = list(store.stored_events(RUN))
    assert [r[STORED_COLUMNS.index("hash")] for r in rows] == reference_hashes(lines)
    report = verify_log(store, RUN)
    assert report.ok, report.problems
    assert report.events_checked == length


def test_bulk_path_on_a_partly_stored_run(store: EventStore, db_kind: str, insert_calls: list[str]) -> None:
    lines = every_kind_run(RUN, 230)
    store.append(RUN, models(lines[:30]))
    result = store.append(RUN, models(lines))
    assert (result.appended, result.already_stored) == (200, 30)
    if db_kind == "postgresql":
        assert insert_calls == ["executemany", "copy"]
    else:
        assert insert_calls == _sqlite_statements(30) + _sqlite_statements(200)
    assert result.head_hash == reference_head(lines)
    assert verify_log(store, RUN).ok


def test_a_clash_deep_in_a_many_statement_append_writes_nothing_of_it(store: EventStore) -> None:
    """An event_id already stored, given again at the 151st row of a 260-row append (the third
    of SQLite's many-row statements): the clash is named and none of the 260 rows is written."""
    store.append("other-run", models(every_kind_run("other-run", 5)))
    lines = every_kind_run(RUN, 260)
    lines[150]["event_id"] = "other-run/3"
    before = snapshot(store)
    with pytest.raises(EventIdConflictError, match="already stored") as info:
        store.append(RUN, models(lines))
    assert info.value.seq == 150
    assert snapshot(store) == before


def test_sqlite_statements_fit_a_lowered_limit_of_bound_values(tmp_path: Path) -> None:
    """An SQLite built to bind fewer values per statement (the limit was 999 before 3.32) gets
    statements of as many rows as fit: here 3 rows of 30 values under a limit of 100."""
    import sqlite3

    store = open_store(f"sqlite:///{tmp_path}/limited.db", create=True)
    try:
        connect = store._raw_connection

        def lowered() -> Any:  # every connection the store writes on has the lower limit
            raw = connect()
            raw.driver_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 100)
            return raw

        store._raw_connection = lowered  # type: ignore[method-assign]
        calls: list[str] = []
        original = SQLiteEventStore._begin
        store._begin = lambda raw: _SpyCursor(original(store, raw), calls)  # type: ignore[method-assign]
        lines = every_kind_run(RUN, 10)
        store.append(RUN, models(lines))
        assert len(STORED_COLUMNS) * 3 <= 100 < len(STORED_COLUMNS) * 4
        assert calls == ["values x3"] * 3 + ["values x1"] == _sqlite_statements(10, per=3)
        assert store.run(RUN).head_hash == reference_head(lines) and verify_log(store, RUN).ok
    finally:
        store.close()


def test_opening_a_store_keeps_a_none_adapter_the_host_program_registered(tmp_path: Path) -> None:
    """procgrade's NoneType adapter (a speed-up on Python 3.11) never replaces one the program
    embedding procgrade registered before opening a store."""
    import sqlite3

    key = (type(None), sqlite3.PrepareProtocol)
    saved = sqlite3.adapters.pop(key, None)

    def host(_value: None) -> str:
        return "host"

    sqlite3.register_adapter(type(None), host)
    try:
        open_store(f"sqlite:///{tmp_path}/host.db", create=True).close()
        assert sqlite3.adapters[key] is host
    finally:
        sqlite3.adapters.pop(key, None)
        if saved is not None:
            sqlite3.adapters[key] = saved


# --- export and re-ingest -----------------------------------------------------------------------


def _export(store: EventStore, run_id: str, path: Path) -> Path:
    path.write_bytes(b"".join(dump_native(store.events(run_id))))
    return path


@pytest.mark.parametrize("target", DATABASES)
def test_export_then_ingest_elsewhere_gives_the_same_head(store: EventStore, tmp_path: Path, target: str) -> None:
    lines = every_kind_run("rich", 130) + small_run()
    ingest_native(store, [write_jsonl(tmp_path / "in.jsonl", lines)])
    heads = {r.run_id: r.head_hash for r in store.runs()}
    assert heads == {"rich": reference_head(lines[:130]), RUN: reference_head(lines[130:])}
    with fresh_url(target, tmp_path / "target") as url:
        other = open_store(url, create=True)
        try:
            for run_id, head in heads.items():
                path = _export(store, run_id, tmp_path / f"{run_id}.jsonl")
                [report] = ingest_native(other, [path])
                assert report.result.head_hash == head
                assert [r[HASH] for r in other.stored_events(run_id)] == [r[HASH] for r in store.stored_events(run_id)]
                assert list(other.events(run_id)) == list(store.events(run_id))
                assert verify_log(other, run_id).ok
                # and exporting again from the target gives the same bytes
                assert _export(other, run_id, tmp_path / f"{run_id}.2.jsonl").read_bytes() == path.read_bytes()
        finally:
            other.close()


def same_json_types(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (1.0 is not 1 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json_types(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json_types(x, y) for x, y in zip(a, b))
    return a == b


FLOAT_PAYLOADS = [
    pytest.param({"score": 1.0, "ratios": [0.0, 2.5, 1e16], "n": 3}, id="mixed"),
    pytest.param({"x": 1.0, "y": [2.0]}, id="integral-floats-only"),
    pytest.param({"t": 0.0}, id="zero-float"),
    pytest.param({"k": -3.0, "big": 1e16, "n": 2**70}, id="integral-floats-and-big-int"),
]


@pytest.mark.parametrize("payload", FLOAT_PAYLOADS)
def test_payload_floats_are_read_back_as_floats(store: EventStore, payload: dict) -> None:
    """The store keeps payloads type-faithful (engine/stored.py): 1.0 comes back as 1.0."""
    lines = small_run()
    lines[1] = dict(lines[1], payload=payload)
    store.append(RUN, models(lines))
    back = list(store.events(RUN))[1].payload
    assert same_json_types(back, payload), (back, payload)
    assert verify_log(store, RUN).ok


@pytest.mark.parametrize("payload", FLOAT_PAYLOADS)
def test_export_then_ingest_stores_the_same_rows(store: EventStore, tmp_path: Path, payload: dict) -> None:
    """Export is the way to move a run: the copy must hold what the original holds, including
    the payload text (a float stays a float: the store keeps payloads type-faithful)."""
    lines = small_run()
    lines[1] = dict(lines[1], payload=payload)
    ingest_native(store, [write_jsonl(tmp_path / "in.jsonl", lines)])
    path = _export(store, RUN, tmp_path / "out.jsonl")
    with fresh_url("sqlite", tmp_path / "target") as url:
        other = open_store(url, create=True)
        try:
            ingest_native(other, [path])
            copied = list(other.events(RUN))[1].payload
            assert same_json_types(copied, list(store.events(RUN))[1].payload)
            assert list(other.stored_events(RUN)) == list(store.stored_events(RUN))
        finally:
            other.close()


# --- edge values: stored exactly, or refused as located input ------------------------------------

# Every one of these must either be stored exactly or refused as a located InputError.
_EXTREME_VALUES = [
    pytest.param(4, {"exit_code": 2**63}, id="exit_code-2**63"),
    pytest.param(4, {"exit_code": -(2**63) - 1}, id="exit_code--2**63-1"),
    pytest.param(4, {"exit_code": 2**70}, id="exit_code-2**70"),
    pytest.param(4, {"stage": 2**31}, id="stage-2**31"),
    pytest.param(4, {"stage": 2**31 - 1, "exit_code": 2**63 - 1}, id="control-largest-storable"),
    pytest.param(4, {"payload": {"ns": 2**70}}, id="payload-int-2**70"),
    pytest.param(4, {"payload": {"ns": -(2**64) - 5, "l": [2**65]}}, id="payload-int-beyond-64-bit"),
    pytest.param(4, {"payload": {"ns": 2**63, "neg": -(2**63)}}, id="payload-int-64-bit"),
    pytest.param(4, {"payload": {"neg": -(2**63) - 1}}, id="payload-int-below-int64-19-digits"),
    pytest.param(4, {"payload": {"neg": -(10**19) + 1, "pos": 2**64 - 1}}, id="payload-int-19-digit-extremes"),
    pytest.param(4, {"payload": {"f": 1.0, "g": [2.0, 1e16, 123456789012345678901234.0], "n": 10**25}},
                 id="payload-floats-and-big-int-together"),
    pytest.param(0, {"model_settings": {"seed": 2**80}}, id="model_settings-int-2**80"),
    pytest.param(4, {"duration_ms": 2**64}, id="duration-2**64"),
    pytest.param(4, {"command": "ls\x00-la"}, id="nul-in-command"),
    pytest.param(2, {"path": "a\x00b.md"}, id="nul-in-path"),
    pytest.param(4, {"event_id": "id\x00x"}, id="nul-in-event_id"),
    pytest.param(1, {"text": "nul \x00 in message text"}, id="nul-in-message-text"),
    pytest.param(0, {"model": "model\x00x"}, id="nul-in-run_started-model"),
    pytest.param(0, {"task_id": "task\x00"}, id="nul-in-run_started-task_id"),
    pytest.param(0, {"harness": {"name": "h\x00", "version": "1\x002"}}, id="nul-in-run_started-harness"),
    pytest.param(3, {"new_path": "x\x00y", "edit_kind": "rename"}, id="nul-in-file_edit-new_path"),
]


@pytest.mark.parametrize("index,change", _EXTREME_VALUES)
def test_edge_values_are_stored_exactly_or_refused_as_input(store: EventStore, tmp_path: Path,
                                                                   index: int, change: dict) -> None:
    """Values at the edges of what JSON, the columns and the databases hold. Either ingest
    refuses the line as a located InputError and writes nothing, or the store holds it
    exactly: verify-log is ok and export re-ingests to the same head. A raw driver or
    encoder exception, or a lossy round trip, is a bug."""
    lines = small_run()
    lines[index] = {**lines[index], **change}
    path = write_jsonl(tmp_path / "extreme.jsonl", lines)
    try:
        [report] = ingest_native(store, [path])
    except InputError as exc:
        assert str(exc).startswith(f"{path}:{index + 1}: "), str(exc)
        assert store.runs() == []
        return
    assert report.result.head_hash == reference_head(lines)
    assert list(store.events(RUN)) == models(lines)
    report_v = verify_log(store, RUN)
    assert report_v.ok, report_v.problems
    exported = _export(store, RUN, tmp_path / "out.jsonl")
    with fresh_url("sqlite", tmp_path / "again") as url:
        other = open_store(url, create=True)
        try:
            assert ingest_native(other, [exported])[0].result.head_hash == report.result.head_hash
        finally:
            other.close()


def test_python_built_payload_with_dict_subclass_hashes_like_its_json(store: EventStore, tmp_path: Path) -> None:
    """Library callers build events in Python; a payload holding an OrderedDict (a dict) with a
    float must hash as its JSON does, or export -> re-ingest changes the head."""
    line = dict(small_run()[1], payload={"meta": OrderedDict([("b", 1.0), ("a", 0.5)])})
    built = event_adapter().validate_python(line)
    result = store.append(RUN, [models(small_run()[:1])[0], built])
    json_line = dict(small_run()[1], payload={"meta": {"b": 1.0, "a": 0.5}})
    assert result.head_hash == reference_head([small_run()[0], json_line])
    exported = _export(store, RUN, tmp_path / "out.jsonl")
    with fresh_url("sqlite", tmp_path / "again") as url:
        other = open_store(url, create=True)
        try:
            assert ingest_native(other, [exported])[0].result.head_hash == result.head_hash
        finally:
            other.close()


def test_filtered_reads_equal_filtering_every_stored_row(store: EventStore) -> None:
    """stored_where, run_heads and seals: what the reports, integrity checks and re-scoring read in
    one query each, the same rows as picking them out of every run's stored_events."""
    names = [f"r{i:04d}" for i in range(600)]  # more than one query's 500 listed ids
    store.append_runs([(name, models(small_run(name))) for name in names])
    store.append("zz", models(every_kind_run("zz", 40)), seal=True)
    every = [row for info in store.runs() for row in store.stored_events(info.run_id)]
    kind, seq = STORED_COLUMNS.index("kind"), STORED_COLUMNS.index("seq")

    def by_run(rows: Any) -> dict[str, list[tuple]]:
        found: dict[str, list[tuple]] = {}
        for row in rows:
            found.setdefault(row[0], []).append(tuple(row))
        return found

    assert by_run(store.stored_where()) == by_run(every)
    kinds = ["command", "test_run"]
    assert by_run(store.stored_where(kinds=kinds)) == by_run(r for r in every if r[kind] in kinds)
    picked = names[::7] + ["zz", "no-such-run"]
    assert by_run(store.stored_where(run_ids=picked, seq_below=3)) == by_run(
        r for r in every if r[0] in picked and r[seq] < 3)
    ids = [r[2] for r in every][::5]
    assert by_run(store.stored_where(event_ids=ids)) == by_run(r for r in every if r[2] in set(ids))
    assert list(store.stored_where(kinds=[])) == [] and list(store.stored_where(run_ids=[])) == []
    with pytest.raises(ValueError):
        list(store.stored_where(run_ids=["a"], event_ids=["b"]))
    infos = store.runs()
    assert store.runs(picked) == [i for i in infos if i.run_id in picked] and store.runs([]) == []
    assert store.run_heads() == [(i.run_id, i.head_hash or "", i.event_count) for i in infos]
    assert store.seals() == {"zz": (store.run("zz").event_count, store.run("zz").head_hash)}
