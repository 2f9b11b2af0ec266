"""Native ingest's prepared rows and worker processes: the same rows, hashes and errors as the
one-process model path (the row built from the parsed line equals the row dumped from the model;
blocks prepared by workers store what one process stores; the first bad line in file order is
the one reported, and nothing is written)."""

from __future__ import annotations

import json
import marshal
from pathlib import Path

import pytest

import procgrade.engine.native_workers as native_workers
from builders import RUN, record_pool_starts, ev, extra_events, line, reference_head, small_run, write_jsonl, write_lines
from procgrade.engine.chain import GENESIS
from procgrade.engine.errors import InputError
from procgrade.engine.ingest import ingest_native
from procgrade.engine.log_verification import verify_log
from procgrade.engine.native import _validated
from procgrade.engine.store import EventStore
from procgrade.engine.stored import IN_STAGE, chain_rows, prepare_row, to_stored

ODD_LINES = [
    # null members, floats, an integer beyond 64 bits, -0.0, a key outside the BMP
    {"run_id": "r", "seq": 1, "event_id": "a", "kind": "message", "actor": "agent", "text": "t", "ts": None,
     "intent": None, "payload": {"a": None, "f": 1.0, "big": 123456789012345678901234567890, "z": -0.0}},
    {"run_id": "r", "seq": 1, "event_id": "b", "kind": "command", "actor": "agent", "command": "cat a.txt",
     "payload": {"k\U0001f600": 1, "\u00e9": [1, 2.5e300, {"x": None}]}},
    {"run_id": "r", "seq": 1, "event_id": "c", "kind": "plan_grade", "actor": "judge", "plan_id": "p",
     "attempt": 0, "grader": "g", "passed": True},
    {"run_id": "r", "seq": 0, "event_id": "d", "kind": "run_started", "actor": "harness",
     "harness": {"name": "h", "version": None},
     "imported": {"format": "f", "importer_version": "1", "files": [], "records": 3}},
    {"run_id": "r", "seq": 1, "event_id": "e", "kind": "message", "actor": "agent",
     "text": "my key is sk-abcdefghijklmnopqrstuvwxyz123456", "payload": {"token": "sk-abcdefghijklmnopqrstuvwxyz123456"}},
    {"run_id": "r", "seq": 1, "event_id": "f", "kind": "acceptance_verdict", "actor": "grader", "verifier": "v",
     "status": "evaluated", "reward": "1", "details": {"score": 0.5, "n": 18446744073709551615}},
    {"run_id": "r", "seq": 2, "event_id": "g", "kind": "file_edit", "actor": "agent", "path": "./a/../b.py",
     "edit_kind": "modify", "parent_seq": 1, "stage": 3, "payload": {}},
]


@pytest.mark.parametrize("record", small_run() + extra_events(RUN, 8, 6) + ODD_LINES)
def test_row_from_the_parsed_line_is_the_row_from_the_model(record: dict) -> None:
    raw = line(record)
    event, parsed, _ = _validated("x.jsonl", 1, raw)
    assert prepare_row(event, parsed) == prepare_row(event)
    # and chaining the prepared row gives what to_stored gives
    row = prepare_row(event, parsed)
    chain_rows([row], GENESIS, lambda r: 7)
    expected = to_stored(event, GENESIS, 7).row
    assert tuple(row) == expected and row[IN_STAGE] == 7


def snapshot(store: EventStore) -> tuple:
    return tuple((info, tuple(store.stored_events(info.run_id))) for info in store.runs())


def interleaved_runs() -> list[dict]:
    a = small_run("a")[:7] + extra_events("a", 7, 40)
    b = small_run("b")[:7] + extra_events("b", 7, 25)
    return [x for pair in zip(a, b) for x in pair] + a[len(b):]


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 5 lines and two worker processes, so a small file really goes through workers."""
    monkeypatch.setattr(native_workers, "BLOCK_LINES", 5)
    monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", "2")


def test_workers_store_what_one_process_stores(store: EventStore, tmp_path: Path, tiny_blocks: None) -> None:
    events = interleaved_runs()
    path = write_jsonl(tmp_path / "x.jsonl", events)
    reports = ingest_native(store, [path], seal=True)
    assert [(r.run_id, r.events_read, r.result.appended) for r in reports] == [("a", 47, 47), ("b", 32, 32)]
    for run_id in ("a", "b"):
        assert store.run(run_id).head_hash == reference_head([e for e in events if e["run_id"] == run_id])
        assert verify_log(store, run_id).ok
    with_workers = snapshot(store)
    # re-ingest through workers is a no-op; a fresh store filled by one process holds the same
    assert all(r.result.no_op for r in ingest_native(store, [path]))
    assert snapshot(store) == with_workers


def test_workers_and_one_process_fill_stores_alike(db_kind: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from databases import fresh_url
    from procgrade.engine.store import open_store

    path = write_jsonl(tmp_path / "x.jsonl", interleaved_runs())
    snapshots = []
    for index, (workers, block) in enumerate((("0", 2000), ("2", 3), ("1", 7))):
        monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", workers)
        monkeypatch.setattr(native_workers, "BLOCK_LINES", block)
        with fresh_url(db_kind, tmp_path / f"db{index}") as url:
            store = open_store(url, create=True)
            try:
                ingest_native(store, [path])
                snapshots.append(snapshot(store))
            finally:
                store.close()
    assert snapshots[0] == snapshots[1] == snapshots[2]


@pytest.mark.parametrize("bad_at,expected_line,field", [
    (3, 4, "-"),    # in the first block
    (31, 32, "-"),  # in a later block, prepared by a worker
    (78, 79, "-"),  # in the last line
])
def test_a_bad_line_in_any_block_is_located_and_writes_nothing(store: EventStore, tmp_path: Path, tiny_blocks: None,
                                                               bad_at: int, expected_line: int, field: str) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", small_run("other"))
    lines = [line(e) for e in interleaved_runs()]
    lines[bad_at] = b'{"oops"'
    bad = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(InputError) as info:
        ingest_native(store, [good, bad])
    assert (info.value.source, info.value.line, info.value.field or "-") == (str(bad), expected_line, field)
    assert store.runs() == []


def test_the_first_problem_in_file_order_wins_across_checks(store: EventStore, tmp_path: Path,
                                                            tiny_blocks: None) -> None:
    """A seq gap (found by the writer) before a malformed line (found by a worker) in the same block."""
    lines = [line(e) for e in interleaved_runs()]
    gap = json.loads(lines[21])
    gap["seq"] += 5
    gap["event_id"] += "-moved"
    lines[21] = line(gap)
    lines[23] = b'{"run_id": 5}'
    path = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(InputError) as info:
        ingest_native(store, [path])
    assert info.value.line == 22 and info.value.field == "seq" and "gapless" in info.value.reason
    assert store.runs() == []


def test_workers_setting_must_be_a_number(store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", "many")
    with pytest.raises(InputError, match="PROCGRADE_INGEST_WORKERS"):
        ingest_native(store, [write_jsonl(tmp_path / "x.jsonl", small_run())])
    assert store.runs() == []


@pytest.fixture
def pool_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Blocks of 5 lines, two workers allowed; records each start of a worker pool (its size)."""
    return record_pool_starts(monkeypatch, 5)


def test_small_input_starts_no_process(store: EventStore, tmp_path: Path, pool_starts: list[int]) -> None:
    """Up to POOL_MIN_BLOCKS blocks (over all files of one ingest) are prepared in this process."""
    limit = native_workers.POOL_MIN_BLOCKS * 5
    events = small_run("a")[:7] + extra_events("a", 7, limit - 7)
    assert len(events) == limit
    ingest_native(store, [write_jsonl(tmp_path / "x.jsonl", events)])
    assert pool_starts == [] and store.run("a").event_count == limit


def test_one_block_more_starts_the_pool_once_for_every_file(store: EventStore, tmp_path: Path,
                                                             pool_starts: list[int]) -> None:
    limit = native_workers.POOL_MIN_BLOCKS * 5
    first = small_run("a")[:7] + extra_events("a", 7, limit - 7)
    second = small_run("b")[:7] + extra_events("b", 7, 3)
    third = small_run("c")[:7] + extra_events("c", 7, 30)
    paths = [write_jsonl(tmp_path / f"{name}.jsonl", run) for name, run in (("a", first), ("b", second), ("c", third))]
    reports = ingest_native(store, paths)
    assert pool_starts == [2]  # the second file crossed the threshold; the third used the same pool
    assert [r.result.appended for r in reports] == [limit, 10, 37]
    for run_id, run in (("a", first), ("b", second), ("c", third)):
        assert store.run(run_id).head_hash == reference_head(run)


def test_the_pool_is_shut_down_after_an_error(store: EventStore, tmp_path: Path, pool_starts: list[int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []
    real_close = native_workers.PreparePool.close

    def close(self: native_workers.PreparePool) -> None:
        closed.append(self.started)
        real_close(self)
        assert not self.started

    monkeypatch.setattr(native_workers.PreparePool, "close", close)
    lines = [line(e) for e in interleaved_runs()]
    lines[70] = b'{"oops"'
    with pytest.raises(InputError) as info:
        ingest_native(store, [write_lines(tmp_path / "bad.jsonl", lines)])
    assert info.value.line == 71 and pool_starts == [2] and True in closed
    assert store.runs() == []


@pytest.mark.parametrize("record", small_run() + extra_events(RUN, 8, 6) + ODD_LINES + [
    {"run_id": "r", "seq": 1, "event_id": "h", "kind": "message", "actor": "agent", "text": "\\ud83d\\ude00 \U0001f600",
     "payload": {"\\ud83d\\ude00": 1, "nested": [{"\U0001f600": [0.5]}]}},
    {"run_id": "r", "seq": 1, "event_id": "i", "kind": "message", "actor": "agent", "text": "t",
     "payload": {"deep": [[[[{"f": 1e-7}]]]], "e": "\u00e9"}},
])
def test_the_line_check_finds_what_the_canonical_scan_finds(record: dict) -> None:
    """The row native ingest builds (its walk over the line telling whether orjson's bytes are
    canonical) is the row the model path builds."""
    from procgrade.engine.canonical import _orjson_is_canonical
    from procgrade.engine.native import _checked, _row_items
    from procgrade.engine.stored import _DUMP_IS_RECORD

    for raw in (line(record), json.dumps(record, indent=1).encode(), json.dumps(record, ensure_ascii=True).encode(),
                json.dumps(record, ensure_ascii=False).encode()):
        event, parsed, _, canonical = _checked("x.jsonl", 1, raw)
        if canonical is not None and parsed is not None and parsed["kind"] in _DUMP_IS_RECORD:  # rows use it
            assert canonical == _orjson_is_canonical(parsed.get("payload", {}))
        (item,) = list(_row_items("x.jsonl", [(1, raw)]))
        assert item[5] == prepare_row(event)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_bad_line_before_an_overlong_one_is_the_one_reported(store: EventStore, tmp_path: Path, workers: str,
                                                               pool_starts: list[int],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading stops at a line too long to hold; the lines before it are still checked first."""
    import procgrade.engine.native as native

    monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", workers)
    monkeypatch.setattr(native, "MAX_LINE_BYTES", 400)
    lines = [line(e) for e in interleaved_runs()]
    for bad_at, long_at in ((3, 20), (60, 75), (3, 76)):  # in buffered blocks, in blocks after the pool started
        changed = list(lines)
        changed[bad_at] = b'{"oops"'
        changed[long_at] = b" " * 500
        with pytest.raises(InputError) as info:
            ingest_native(store, [write_lines(tmp_path / "bad.jsonl", changed)])
        assert info.value.line == bad_at + 1 and "invalid JSON" in info.value.reason
        changed[bad_at] = lines[bad_at]
        with pytest.raises(InputError) as info:
            ingest_native(store, [write_lines(tmp_path / "bad.jsonl", changed)])
        assert info.value.line == long_at + 1 and "line longer than 400 bytes" in info.value.reason
    assert store.runs() == []


def test_an_unexpected_error_in_a_block_comes_after_the_lines_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only bad input: any error a worker meets comes back with the items before it, so the
    writer's checks across those lines run first, as in one process."""
    import procgrade.engine.native as native

    def rows_then_a_bug(source: str, number: int, raw: bytes, unchanged: object) -> tuple[list[object], int]:
        if number == 3:
            raise ZeroDivisionError("a bug on line 3")
        return ["r", number, f"r/{number}", None, "message"], 0

    monkeypatch.setattr(native, "_line_row", rows_then_a_bug)
    result = native_workers._prepare_block("f.jsonl", 1, [b"a", b"b", b"c", b"d"])
    got = []
    with pytest.raises(ZeroDivisionError, match="a bug on line 3"):
        for block in native_workers._unpacked("f.jsonl", result, None):
            got.extend(block)
    assert [item[0] for item in got] == [1, 2]


@pytest.mark.parametrize("room_for", ["all", "some", "none"])
def test_a_block_s_rows_come_through_the_shared_buffer_as_far_as_they_fit(
        monkeypatch: pytest.MonkeyPatch, room_for: str) -> None:
    """A worker reads a block's lines from its shared input buffer, writes the marshalled parts
    into its shared buffer while they fit and sends the rest through the pipe; the writer reads
    them back in order, the error last."""
    import mmap

    import procgrade.engine.native as native

    lines = [line(ev("message", seq, text="x" * 40)) for seq in range(1, 8)] + [b"{"]
    monkeypatch.setattr(native, "SCAN_LINES", 2)
    nothing, parts, expected_error = native_workers._prepare_block("f.jsonl", 1, lines)  # all through the pipe
    assert nothing == [] and len(parts) == 4
    room = {"all": 10**6, "some": len(parts[0]) + len(parts[1]), "none": 5}[room_for]
    buffer = mmap.mmap(-1, room)
    monkeypatch.setattr(native_workers, "_slots", [buffer])
    joined = b"\n".join(lines)
    monkeypatch.setattr(native_workers, "_inputs", [mmap.mmap(-1, len(joined))])
    native_workers._inputs[0][:] = joined  # the lines handed over in the input buffer, not pickled
    written, piped, error = native_workers._prepare_block("f.jsonl", 1, len(joined), 0)
    assert error == expected_error and error[0] == 8
    assert (len(written), len(piped)) == {"all": (4, 0), "some": (2, 2), "none": (0, 4)}[room_for]
    assert [buffer[sum(written[:k]):sum(written[:k + 1])] for k in range(len(written))] + piped == parts
    unpacked = []
    with pytest.raises(InputError) as caught:
        for block in native_workers._unpacked("f.jsonl", (written, piped, error), buffer):
            unpacked.extend(block)
    assert caught.value.line == 8
    assert unpacked == list(native._row_items("f.jsonl", enumerate(lines[:7], start=1)))
    buffer.close()
    native_workers._inputs[0].close()


def test_lines_holding_their_own_newline_are_not_handed_over_joined(tiny_blocks: None) -> None:
    """Lines read from elsewhere than procgrade's reader may keep their newline: joined by newlines
    they would split into more lines (and later line numbers), so such a block is pickled."""
    import procgrade.engine.native as native

    events = small_run("a")[:7] + extra_events("a", 7, 60)
    lines = [line(event) + b"\n" for event in events] + [b"{"]
    errors = []
    for workers in (0, 2):
        with pytest.raises(InputError) as caught:
            list(native.iter_native_rows("f.jsonl", lines, workers=workers))
        errors.append((caught.value.line, caught.value.reason))
    assert errors[0] == errors[1] and errors[0][0] == len(lines)


@pytest.mark.parametrize("how", ["ingest_native", "native", "auto"])
def test_input_known_to_be_big_starts_the_pool_before_the_first_block(
        store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Files that add up to more than POOL_MIN_BYTES start the workers before the first line is
    read, so the writer prepares none of them itself; ``procgrade ingest`` (native files given
    or found in a folder) and the library path alike. Rows and heads are the same."""
    from procgrade.engine.ingest import ingest_paths

    blocks_read_at_start: list[int] = []
    starts = record_pool_starts(monkeypatch, 5, blocks_read=blocks_read_at_start)
    runs = {name: small_run(name)[:7] + extra_events(name, 7, 8) for name in ("a", "b", "c")}
    folder = tmp_path / "runs"
    folder.mkdir()
    paths = [write_jsonl(folder / f"{name}.jsonl", run) for name, run in runs.items()]
    total = sum(path.stat().st_size for path in paths)
    monkeypatch.setattr(native_workers, "POOL_MIN_BYTES", total - 1)
    if how == "ingest_native":
        ingest_native(store, paths)
    else:
        ingest_paths(store, [folder] if how == "auto" else paths, format=how)
    assert starts == [2] and blocks_read_at_start == [0]
    for run_id, run in runs.items():
        assert store.run(run_id).head_hash == reference_head(run)


def test_input_below_the_byte_threshold_still_waits_for_its_blocks(
        store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At POOL_MIN_BYTES exactly, the size says nothing: the small file is prepared here."""
    starts = record_pool_starts(monkeypatch, 5)
    path = write_jsonl(tmp_path / "a.jsonl", small_run("a"))
    monkeypatch.setattr(native_workers, "POOL_MIN_BYTES", path.stat().st_size)
    ingest_native(store, [path])
    assert starts == [] and store.run("a").event_count == len(small_run("a"))


@pytest.mark.parametrize(("cores", "lowered"), [(1, True), (2, True), (64, False)])
def test_workers_yield_to_the_writer_only_when_they_leave_it_no_core(monkeypatch: pytest.MonkeyPatch,
                                                                     cores: int, lowered: bool) -> None:
    """Two workers and the writer on one or two cores: the workers run WORKER_NICENESS lower
    than the writer, so the scheduler gives the writer a core; with cores to spare, as the writer."""
    import os

    monkeypatch.setattr(native_workers, "usable_cores", lambda: cores)
    writer = os.nice(0)
    with native_workers.PreparePool(2) as pool:
        pool._start()
        assert pool._pool is not None
        seen = {pool._pool.submit(os.nice, 0).result() for _ in range(8)}
    expected = min(19, writer + native_workers.WORKER_NICENESS) if lowered else writer
    assert seen == {expected} and os.nice(0) == writer
