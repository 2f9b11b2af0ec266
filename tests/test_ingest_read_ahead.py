"""Native ingest reads the next file ahead (its blocks go to the workers while the writer still
inserts the file before): the same rows as reading file by file, and still the first problem in
file order is the one reported, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import procgrade.engine.native_workers as native_workers
from builders import extra_events, line, record_pool_starts, reference_head, small_run, write_jsonl, write_lines
from procgrade.engine.errors import InputError
from procgrade.engine.ingest import ingest_native
from procgrade.engine.native import MAX_LINE_BYTES
from procgrade.engine.store import EventStore


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Blocks of 3 lines and two workers, started after the first few blocks; records the starts."""
    return record_pool_starts(monkeypatch, 3, min_blocks=2)


def runs(count: int, length: int = 20) -> list[list[dict]]:
    return [small_run(f"r{i}")[:7] + extra_events(f"r{i}", 7, length - 7 + i) for i in range(count)]


def snapshot(store: EventStore) -> tuple:
    return tuple((info, tuple(store.stored_events(info.run_id))) for info in store.runs())


def test_many_small_files_store_what_one_process_stores(store: EventStore, tmp_path: Path, tiny_blocks: list[int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    written = runs(6)
    paths = [write_jsonl(tmp_path / f"{i}.jsonl", run) for i, run in enumerate(written)]
    reports = ingest_native(store, paths, seal=True)
    assert tiny_blocks == [2]
    assert [(r.source, r.run_id, r.result.appended) for r in reports] == [
        (str(p), f"r{i}", len(run)) for i, (p, run) in enumerate(zip(paths, written))]
    for i, run in enumerate(written):
        assert store.run(f"r{i}").head_hash == reference_head(run)
    read_ahead = snapshot(store)
    assert all(r.result.no_op for r in ingest_native(store, paths))
    assert snapshot(store) == read_ahead


def test_the_same_file_twice_is_read_twice(store: EventStore, tmp_path: Path, tiny_blocks: list[int]) -> None:
    (run,) = runs(1, 40)
    path = write_jsonl(tmp_path / "a.jsonl", run)
    reports = ingest_native(store, [path, path, path])
    assert [r.result.appended for r in reports] == [40, 0, 0]
    assert [r.result.already_stored for r in reports] == [0, 40, 40]


def bad_copy(path: Path, run: list[dict], at: int, raw: bytes) -> Path:
    lines = [line(e) for e in run]
    lines[at] = raw
    return write_lines(path, lines)


@pytest.mark.parametrize("later", ["malformed", "missing", "overlong", "gap"])
@pytest.mark.parametrize("at", [1, 30])
def test_a_problem_in_one_file_wins_over_any_in_the_files_read_ahead(
        store: EventStore, tmp_path: Path, tiny_blocks: list[int], later: str, at: int) -> None:
    """File 1 is good, file 2 holds a bad line (early or late in it), files 3 and 4 are bad
    too: the error is file 2's, whatever the others hold, and nothing is written."""
    first, second, third, fourth = runs(4, 40)
    paths = [write_jsonl(tmp_path / "1.jsonl", first), bad_copy(tmp_path / "2.jsonl", second, at, b'{"oops"')]
    if later == "malformed":
        paths.append(bad_copy(tmp_path / "3.jsonl", third, 2, b"[1, 2"))
    elif later == "missing":
        paths.append(tmp_path / "missing.jsonl")
    elif later == "overlong":
        paths.append(bad_copy(tmp_path / "3.jsonl", third, 2, b"x" * (MAX_LINE_BYTES + 1)))
    else:
        gap = dict(third[5], seq=9, event_id="moved")
        paths.append(bad_copy(tmp_path / "3.jsonl", third, 5, line(gap)))
    paths.append(bad_copy(tmp_path / "4.jsonl", fourth, 0, b"{"))
    with pytest.raises(InputError) as info:
        ingest_native(store, paths)
    assert (info.value.source, info.value.line) == (str(paths[1]), at + 1)
    assert info.value.reason.startswith("invalid JSON")
    assert store.runs() == []


@pytest.mark.parametrize("problem", ["missing", "gap", "malformed"])
def test_a_problem_in_a_file_read_ahead_is_reported_once_reached(store: EventStore, tmp_path: Path,
                                                                 tiny_blocks: list[int], problem: str) -> None:
    first, second, third = runs(3, 40)
    paths = [write_jsonl(tmp_path / "1.jsonl", first), write_jsonl(tmp_path / "2.jsonl", second)]
    if problem == "missing":
        paths.append(tmp_path / "missing.jsonl")
        expected = (str(paths[2]), None)
    elif problem == "gap":
        paths.append(bad_copy(tmp_path / "3.jsonl", third, 25, line(dict(third[25], seq=99, event_id="moved"))))
        expected = (str(paths[2]), 26)
    else:
        paths.append(bad_copy(tmp_path / "3.jsonl", third, 38, json.dumps({"run_id": 5}).encode()))
        expected = (str(paths[2]), 39)
    with pytest.raises(InputError) as info:
        ingest_native(store, paths)
    assert (info.value.source, info.value.line) == expected
    assert store.runs() == []


def test_lines_read_ahead_and_dropped_are_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After an error the files read ahead are given up: reading one later is refused, not
    silently short of the lines already handed out."""
    monkeypatch.setattr(native_workers, "BLOCK_LINES", 3)
    monkeypatch.setattr(native_workers, "POOL_MIN_BLOCKS", 1)
    first, second = runs(2, 40)
    bad = [line(e) for e in first]
    bad[30] = b"{"
    later = iter([line(e) for e in second])
    with native_workers.PreparePool(1) as pool:
        pool.expect([("1.jsonl", bad), ("2.jsonl", later)])
        with pytest.raises(InputError):
            list(pool.row_blocks("1.jsonl", bad))
        with pytest.raises(RuntimeError, match="read ahead"):
            list(pool.row_blocks("2.jsonl", later))


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("bad_at,long_at", [(2, 3), (71, 73), (70, 74)])
def test_a_bad_line_just_before_an_overlong_one_in_the_same_block_wins(
        store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str,
        bad_at: int, long_at: int) -> None:
    """The lines read before an overlong line that had not yet made a whole block are checked
    before reading's error is raised (they were once dropped with the unfinished block)."""
    import procgrade.engine.native as native

    monkeypatch.setattr(native_workers, "BLOCK_LINES", 5)
    monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", workers)
    monkeypatch.setattr(native, "MAX_LINE_BYTES", 400)
    lines = [line(e) for e in small_run("a")[:7] + extra_events("a", 7, 80)]
    lines[bad_at] = b'{"oops"'
    lines[long_at] = b" " * 500
    with pytest.raises(InputError) as info:
        ingest_native(store, [write_lines(tmp_path / "bad.jsonl", lines)])
    assert info.value.line == bad_at + 1 and "invalid JSON" in info.value.reason
    assert store.runs() == []


def test_a_file_failing_midway_raises_in_its_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """An I/O error while a later file is read ahead waits for that file's turn (after its lines
    read before the error); a bad line in the file before still wins."""
    monkeypatch.setattr(native_workers, "BLOCK_LINES", 3)
    monkeypatch.setattr(native_workers, "POOL_MIN_BLOCKS", 1)
    first, second = runs(2, 40)

    def failing() -> object:
        yield from (line(e) for e in second[:10])
        raise OSError("the disk went away")

    good = [line(e) for e in first]
    bad = list(good)
    bad[30] = b"{"
    with native_workers.PreparePool(1) as pool:
        later = failing()
        pool.expect([("1.jsonl", bad), ("2.jsonl", later)])
        with pytest.raises(InputError) as info:
            list(pool.row_blocks("1.jsonl", bad))
        assert info.value.line == 31
    with native_workers.PreparePool(1) as pool:
        later = failing()
        pool.expect([("1.jsonl", good), ("2.jsonl", later)])
        assert sum(len(block) for block in pool.row_blocks("1.jsonl", good)) == 40
        items = []
        with pytest.raises(OSError, match="disk went away"):
            for block in pool.row_blocks("2.jsonl", later):
                items.extend(block)
        assert [item[0] for item in items] == list(range(1, 11))


def test_a_directory_of_native_files_is_read_in_blocks_by_the_workers(
        store: EventStore, tmp_path: Path, tiny_blocks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory's native files on disk go to the workers in blocks read from the file
    (:class:`procgrade.engine.native.NativeFile`): the same rows as one process reading them line by
    line, and a bad line in a later file still names its file and line, with nothing written."""
    from procgrade.engine.ingest import ingest_paths
    from procgrade.engine.store import open_store

    written = runs(5)
    folder = tmp_path / "runs"
    folder.mkdir()
    for i, run in enumerate(written):
        write_jsonl(folder / f"{i}.jsonl", run)
    result = ingest_paths(store, [folder])
    assert tiny_blocks == [2]
    assert sorted((r.run_id, r.result.appended) for r in result.reports) == [
        (f"r{i}", len(run)) for i, run in enumerate(written)]
    monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", "0")
    alone = open_store(f"sqlite:///{tmp_path / 'alone.db'}", create=True)
    try:
        ingest_paths(alone, [folder])
        assert snapshot(alone) == snapshot(store)
    finally:
        alone.close()
    monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", "2")
    bad = tmp_path / "bad"
    bad.mkdir()
    for i, run in enumerate(written):
        lines = [line(e) for e in run]
        if i == 3:
            lines[11] = b'{"run_id": "r3", "seq": '
        write_lines(bad / f"{i}.jsonl", lines)
    fresh = open_store(f"sqlite:///{tmp_path / 'fresh.db'}", create=True)
    try:
        with pytest.raises(InputError) as caught:
            ingest_paths(fresh, [bad])
        assert caught.value.source.endswith("3.jsonl") and caught.value.line == 12
        assert list(fresh.runs()) == []
    finally:
        fresh.close()
