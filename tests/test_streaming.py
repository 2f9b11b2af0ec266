"""Streaming: native ingest writes runs in pieces as it reads (same rows, same errors as whole-run
ingest, nothing written on failure); the report caps a huge run's page with a pointer to
``procgrade show``. The memory figures themselves are measured by ``bench/huge_run.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

import procgrade.engine.native

from procgrade import engine
from builders import RUN, ev, extra_events, line, reference_head, small_run, write_jsonl, write_lines
from procgrade.engine.errors import EventIdConflictError, InputError, StoreError
from procgrade.engine.ingest import ingest_native, ingest_paths
from procgrade.engine.log_verification import verify_log
from procgrade.engine.native import iter_native
from procgrade.engine.reporting.run_pages import run_page, run_section
from procgrade.engine.store import EventStore
from procgrade.rules.loading import load_ruleset


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(engine.native, "CHUNK_EVENTS", 4)
    monkeypatch.setattr(engine.native.iter_native, "__kwdefaults__", {"chunk": 4})
    return 4


def long_run(run_id: str = RUN, extra: int = 30) -> list[dict]:
    return small_run(run_id)[:7] + extra_events(run_id, 7, extra)


def test_pieces_are_consecutive_and_bounded(small_chunks: int) -> None:
    a, b = long_run("a"), long_run("b")
    interleaved = [x for pair in zip(a, b) for x in pair]
    pieces = list(iter_native("x.jsonl", [line(e) for e in interleaved]))
    assert all(len(p.events) <= small_chunks for p in pieces)
    for run_id, events in (("a", a), ("b", b)):
        seqs = [e.seq for p in pieces if p.run_id == run_id for e in p.events]
        assert seqs == [e["seq"] for e in events]


def test_ingest_in_pieces_stores_what_whole_ingest_stores(store: EventStore, tmp_path: Path,
                                                           small_chunks: int) -> None:
    a, b = long_run("a"), long_run("b")
    path = write_jsonl(tmp_path / "x.jsonl", [x for pair in zip(a, b) for x in pair])
    reports = ingest_paths(store, [path], format="native", seal=True).reports
    assert [(r.run_id, r.events_read, r.result.appended, r.result.sealed) for r in reports] == [
        ("a", len(a), len(a), True), ("b", len(b), len(b), True)]
    for run_id, events in (("a", a), ("b", b)):
        info = store.run(run_id)
        assert info.head_hash == reference_head(events) == info.sealed_head_hash
        assert verify_log(store, run_id).ok
    again = ingest_native(store, [path])
    assert all(r.result.no_op for r in again)


def test_a_late_retried_line_beyond_the_piece_is_a_no_op(store: EventStore, tmp_path: Path, small_chunks: int) -> None:
    events = long_run()
    lines = [line(e) for e in events]
    lines.insert(20, lines[2])  # seq 2 repeated long after its piece was written
    [report] = ingest_native(store, [write_lines(tmp_path / "x.jsonl", lines)])
    assert report.result.event_count == len(events) and report.result.head_hash == reference_head(events)


def test_a_late_changed_line_beyond_the_piece_is_refused_at_its_line(store: EventStore, tmp_path: Path,
                                                                     small_chunks: int) -> None:
    events = long_run()
    lines = [line(e) for e in events]
    lines.insert(20, line(dict(events[4], exit_code=7)))
    path = write_lines(tmp_path / "x.jsonl", lines)
    with pytest.raises(StoreError) as info:
        ingest_native(store, [path])
    assert str(info.value).startswith(f"{path}:21: seq: ")
    assert store.runs() == []


def test_event_id_reused_in_a_later_piece(store: EventStore, tmp_path: Path, small_chunks: int) -> None:
    events = long_run()
    events[25]["event_id"] = events[3]["event_id"]
    path = write_jsonl(tmp_path / "x.jsonl", events)
    with pytest.raises(InputError, match=":26: event_id: event_id 'run-1/3' already used at line 4"):
        ingest_native(store, [path])
    assert store.runs() == []


def test_event_id_of_another_file_in_the_same_ingest(store: EventStore, tmp_path: Path, small_chunks: int) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", long_run("a"))
    stolen = long_run("b")
    stolen[20]["event_id"] = "a/9"
    second = write_jsonl(tmp_path / "b.jsonl", stolen)
    with pytest.raises(StoreError) as info:
        ingest_native(store, [first, second])
    assert isinstance(info.value.cause, EventIdConflictError)
    assert str(info.value).startswith(f"{second}:21: seq: ") and "(run a, seq 9)" in str(info.value)
    assert store.runs() == []


def test_bad_line_after_many_pieces_leaves_nothing(store: EventStore, tmp_path: Path, small_chunks: int) -> None:
    events = long_run()
    lines = [line(e) for e in events] + [b'{"run_id": "run-1", "seq": 37}']
    with pytest.raises(InputError, match=":38: "):
        ingest_native(store, [write_lines(tmp_path / "x.jsonl", lines)])
    assert store.runs() == []


def test_report_caps_a_huge_run(store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import procgrade.engine.reporting.run_pages as pages

    monkeypatch.setattr(pages, "TIMELINE_CAP", 10)
    monkeypatch.setattr(pages, "VIOLATIONS_CAP", 2)
    events = small_run()[:7] + [ev("command", seq, command="make", exit_code=1) for seq in range(7, 60)]
    ingest_native(store, [write_jsonl(tmp_path / "x.jsonl", events)])
    page = run_page(store, RUN, load_ruleset())
    assert [e.seq for e in page.events][:10] == list(range(10))
    assert page.events_omitted == 60 - len(page.events) > 0
    cited = {seq for v in page.violations for seq in v.cited}
    assert {e.seq for e in page.events} == set(range(10)) | cited
    html = run_section(page)
    assert f"procgrade show {RUN}" in html and f"{page.events_omitted} of 60 events are not shown" in html
    if page.violations_omitted:
        assert f"procgrade explain {RUN}" in html


def test_a_2_gb_sparse_file_is_refused_without_being_read_whole(store: EventStore, tmp_path: Path) -> None:
    path = tmp_path / "sparse.jsonl"
    with path.open("wb") as handle:
        handle.truncate(2 * 2**30)  # NUL bytes and no newline: one "line" of 2 GB
    with pytest.raises(InputError, match=r"sparse.jsonl:1: -: line longer than 67108864 bytes"):
        ingest_paths(store, [path], format="native")
    assert store.runs() == []
