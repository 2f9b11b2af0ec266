"""The recorder API on a local store (SQLite and PostgreSQL): kinds, structure, ids, retries, conflicts."""

from __future__ import annotations

import inspect

import pytest
from recording_harness import StepClock, two_stage_build

from procgrade.engine.errors import InputError, StoreError
from procgrade.engine.events import EVENT_KINDS
from procgrade.engine.log_verification import verify_log
from procgrade.engine.native import parse_native_lines
from procgrade.engine.recorder import RecordConflictError, Recorder, StoreTransport, event_id_for, record


def test_every_event_kind_has_a_typed_method() -> None:
    for kind, model in EVENT_KINDS.items():
        if kind == "run_started":
            assert not hasattr(Recorder, kind)  # the recorder writes it, at seq 0 only
            continue
        method = getattr(Recorder, kind)
        params = inspect.signature(method).parameters
        own = {name for name in model.model_fields if name not in ("run_id", "seq", "event_id", "kind")}
        assert own <= set(params), kind
        assert inspect.signature(method).return_annotation is model


def test_two_stage_build_records_structure_and_verifies(store) -> None:
    two_stage_build("acme/build", store)
    events = list(store.events("acme/build"))
    assert [e.seq for e in events] == list(range(len(events)))
    kinds = [e.kind for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert kinds.count("stage_started") == kinds.count("stage_ended") == 2
    by_kind = {e.kind: e for e in events}
    assert by_kind["job_finished"].parent_seq == next(e.seq for e in events if e.kind == "job_started" and e.stage == 1)
    assert by_kind["worker_report"].actor == "subagent:tester1"
    assert all(e.stage == 1 for e in events if e.kind == "file_edit" and e.payload == {} and "stage1" in e.path)
    assert all(e.event_id == event_id_for(e.model_dump(mode="json", exclude_none=True)) for e in events)
    info = store.run("acme/build")
    assert info.sealed and info.harness == "scripted-harness" and info.model == "model-x"
    assert verify_log(store, "acme/build").ok


def test_stage_that_raises_ends_failed_and_delegation_reports_failure(store) -> None:
    rec = record("acme/fail", store, harness="h", clock=None)
    with pytest.raises(RuntimeError):
        with rec.stage(0):
            with rec.delegate("w", "do it"):
                raise RuntimeError("worker crashed")
    rec.close()
    events = list(store.events("acme/fail"))
    assert [e.kind for e in events] == ["run_started", "stage_started", "delegation", "worker_report", "stage_ended"]
    assert events[3].status == "failure" and events[3].text == "RuntimeError: worker crashed"
    assert events[4].status == "failed" and events[4].parent_seq == 1


def test_invalid_fields_are_located_errors_like_ingest_and_nothing_is_sent(store) -> None:
    rec = record("acme/bad", store, harness="h", clock=None)
    with pytest.raises(InputError) as raised:
        rec.command(command=5)
    assert str(raised.value) == "recorder:seq 1: command: Input should be a valid string (got 5)"
    # the same field error ingest reports for the same event
    with pytest.raises(InputError) as ingested:
        parse_native_lines("f.jsonl", [b'{"run_id":"acme/bad","seq":1,"event_id":"x","kind":"command","actor":"agent","command":5}'])
    assert ingested.value.field == raised.value.field and ingested.value.reason == raised.value.reason
    with pytest.raises(InputError, match="seq: set by the recorder"):
        rec.message(text="x", seq=7)
    with pytest.raises(InputError, match="edit_kind: missing"):
        rec.file_edit(path="a.py")
    rec.message(text="fine")
    rec.close()
    assert [e.seq for e in store.events("acme/bad")] == [0, 1]


def test_retried_append_is_a_no_op(store) -> None:
    rec = record("acme/retry", store, harness="h", clock=None, batch_size=10)
    rec.message(text="one")
    rec.message(text="two")
    batch = list(rec.pending)
    rec.flush()
    transport = StoreTransport(store)
    head = transport.append("acme/retry", batch, batch[0].seq)  # the retry of a batch whose answer was lost
    assert head.event_count == 3
    assert store.append("acme/retry", batch).no_op


def test_second_writer_at_a_taken_seq_is_refused_then_resyncs(store) -> None:
    first = record("acme/shared", store, harness="h", clock=None)
    second = Recorder("acme/shared", StoreTransport(store), clock=None, batch_size=10)
    first.message(text="first writer")
    second.message(text="second writer", parent_seq=0)
    second.message(text="second again", parent_seq=1)  # its parent is the event before it, in the same batch
    with pytest.raises(RecordConflictError) as conflict:
        second.flush()
    assert conflict.value.seq == 1 and conflict.value.head.event_count == 2
    assert "another writer" in str(conflict.value)
    assert [e.seq for e in second.pending] == [1, 2]  # nothing lost, nothing written
    second.resync()
    assert [e.seq for e in second.pending] == [2, 3]
    assert second.pending[0].parent_seq == 0 and second.pending[1].parent_seq == 2
    second.flush()
    texts = [getattr(e, "text", None) for e in store.events("acme/shared")]
    assert texts == [None, "first writer", "second writer", "second again"]
    assert verify_log(store, "acme/shared").ok


def test_an_existing_run_needs_resume(store) -> None:
    record("acme/again", store, harness="h", clock=None).close()
    with pytest.raises(StoreError, match="already holds 1 events: pass resume=True"):
        record("acme/again", store, harness="h")
    rec = record("acme/again", store, harness="h", resume=True, clock=None)
    rec.message(text="more")
    rec.close()
    assert store.run("acme/again").event_count == 2


def test_same_build_same_bytes_across_recordings(store, tmp_path) -> None:
    from procgrade.engine.store import open_store

    two_stage_build("acme/twice", store)
    other = open_store(f"sqlite:///{tmp_path}/other.db", create=True)
    try:
        two_stage_build("acme/twice", other)
        assert list(other.stored_events("acme/twice")) == list(store.stored_events("acme/twice"))
    finally:
        other.close()
    assert StepClock()() == "2026-01-01T00:00:01.000Z"
