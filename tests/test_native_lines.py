"""Native files read a chunk at a time: the same lines, and the same refusal of an overlong line
(at the same line, after the same lines), as reading one line at a time with a bounded readline."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

import procgrade.engine.native as native
from procgrade.engine.errors import InputError
from procgrade.engine.native import bounded_lines


def readline_lines(handle: io.BytesIO, source: str, limit: int) -> Iterator[bytes]:
    """The reference: what bounded_lines did before it read in chunks."""
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
            raise InputError(source, number, None, f"line longer than {limit} bytes")
        yield raw[:-1] if raw.endswith(b"\n") else raw


def outcome(lines: Iterator[bytes]) -> list:
    got: list = []
    try:
        got.extend(lines)
    except InputError as exc:
        got.append((exc.source, exc.line, exc.field, exc.reason))
    return got


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8, 64])
def test_chunked_reading_matches_readline(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_READ_BYTES", chunk)
    rng = random.Random(chunk)
    for _ in range(2000):
        data = bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(0, 40)))
        limit = rng.randrange(0, 9)
        expected = outcome(readline_lines(io.BytesIO(data), "f.jsonl", limit))
        assert outcome(bounded_lines(io.BytesIO(data), "f.jsonl", limit)) == expected, (data, limit)


def test_an_overlong_line_is_refused_after_the_lines_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_READ_BYTES", 4)
    lines = bounded_lines(io.BytesIO(b"ok\n" + b"x" * 100), "f", 10)
    assert next(lines) == b"ok"
    with pytest.raises(InputError, match=r"f:2: -: line longer than 10 bytes"):
        next(lines)


def test_a_repeated_key_is_never_taken_for_a_plain_line() -> None:
    """Strings holding quotes, backslashes and colons (JSON text inside strings) never hide a
    repeated key from the key count (they may only send a good line down the slow path)."""
    import json

    import orjson

    from procgrade.engine.native import _plain_shape

    rng = random.Random(7)
    alphabet = ['"', "\\", ":", "a", " ", '\\"', '":', "{"]
    plain_seen = 0
    for _ in range(3000):
        value = {f"k{i}": "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
                 for i in range(rng.randrange(1, 5))}
        nested = {"payload": value, "text": "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))}
        raw = json.dumps(nested, separators=(",", ":") if rng.random() < 0.5 else (", ", ": ")).encode()
        plain_seen += _plain_shape(raw, orjson.loads(raw))[0]
        repeated = raw.replace(b'{"k0"', b'{"k0":"x","k0"', 1)
        assert _plain_shape(repeated, orjson.loads(repeated))[0] is False, repeated
    assert plain_seen > 1000  # most good lines stay on the fast path


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
def test_the_shortest_lines_that_nest_too_deep_are_not_plain(separators: tuple[str, str]) -> None:
    """Lines shorter than _DEEP_MIN_BYTES skip the bracket count: the shortest text nesting one
    level deeper than MAX_DEPTH is that long, and is still caught, compact or spaced; one level
    less is plain."""
    import json

    import orjson

    from procgrade.engine.json_guards import MAX_DEPTH
    from procgrade.engine.native import _DEEP_MIN_BYTES, _plain_shape

    def nested(levels: int) -> bytes:  # the top object is a level
        return json.dumps({"a": json.loads("[" * (levels - 1) + "]" * (levels - 1))}, separators=separators).encode()

    shortest = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    assert len(shortest) == _DEEP_MIN_BYTES
    assert _plain_shape(nested(MAX_DEPTH + 1), orjson.loads(nested(MAX_DEPTH + 1))) == (False, False)
    assert _plain_shape(nested(MAX_DEPTH), orjson.loads(nested(MAX_DEPTH)))[0] is True


def _event_line(seq: int) -> bytes:
    import orjson

    kind = {"kind": "run_started", "harness": {"name": "h"}} if seq == 0 else {"kind": "message", "text": "hi"}
    return orjson.dumps({"run_id": "r", "seq": seq, "event_id": f"e{seq}", "actor": "agent", **kind})


@pytest.mark.parametrize("bad_at", [2, native.SCAN_LINES - 1, native.SCAN_LINES, native.SCAN_LINES + 3])
def test_lines_read_a_block_at_a_time_report_the_first_problem_in_file_order(bad_at: int) -> None:
    """The redaction filter takes SCAN_LINES lines at once, but a bad line before an overlong one
    is still the error reported, and an overlong line after good ones comes after their rows."""
    lines = [_event_line(seq) for seq in range(native.SCAN_LINES + 10)]
    lines[bad_at] = b'{"run_id": "r", "seq": '  # not JSON
    long_at = bad_at + 1
    lines[long_at] = b"x" * 100

    def numbered() -> Iterator[tuple[int, bytes]]:
        for number, raw in enumerate(lines, start=1):
            if number == long_at + 1:
                raise InputError("f", number, None, "line longer than 10 bytes")
            yield number, raw

    items = []
    with pytest.raises(InputError) as caught:
        for item in native._row_items("f", numbered()):
            items.append(item)
    assert caught.value.line == bad_at + 1 and "invalid JSON" in caught.value.reason
    assert [item[0] for item in items] == list(range(1, bad_at + 1))

    lines[bad_at] = _event_line(bad_at)
    items = []
    with pytest.raises(InputError) as caught:
        for item in native._row_items("f", numbered()):
            items.append(item)
    assert (caught.value.line, caught.value.reason) == (long_at + 1, "line longer than 10 bytes")
    assert [item[0] for item in items] == list(range(1, long_at + 1))


def test_rows_hold_one_object_per_run_id_kind_and_actor() -> None:
    """Prepared rows share their run id, kind and actor texts (one object per value, on the fields
    path and the model's alike), so a block marshals each once and kept rows hold each once."""
    import orjson

    lines = [_event_line(seq) for seq in range(40)]
    lines += [orjson.dumps({"run_id": "r", "seq": seq, "event_id": f"e{seq}", "actor": "harness", "kind": "command",
                            "command": "ls", "payload": {"t": 0.5}}) for seq in range(40, 50)]  # a float: the model's path
    rows = [item[5] for item in native._row_items("f", enumerate(lines, start=1))]
    for column, values in ((0, {"r"}), (4, {"run_started", "message", "command"}), (5, {"agent", "harness"})):
        assert {row[column] for row in rows} == values
        assert len({id(row[column]) for row in rows}) == len(values), column


def test_a_cut_off_line_holding_a_marker_is_reported_as_invalid_json_in_its_turn() -> None:
    """The block's redaction scan runs before any line is validated: a line cut off mid-write that
    holds a marker (``token``) is still reported as invalid JSON at its line, and only after the
    problems of the lines before it, in this process and in a worker's block."""
    from procgrade.engine.native_workers import _prepare_block

    cut = b'{"run_id": "r", "seq": 3, "kind": "message", "text": "the token'
    for lines, expected in (([_event_line(0), _event_line(1), cut], (3, "invalid JSON")),
                            ([_event_line(0), b'{"seq": 1}', cut], (2, "missing")),
                            ([_event_line(0), _event_line(5), cut], (2, "seqs must be gapless"))):
        with pytest.raises(InputError) as caught:
            list(native.iter_native_rows("f", lines))
        assert caught.value.line == expected[0] and expected[1] in caught.value.reason
    written, piped, error = _prepare_block("f", 1, [_event_line(0), cut])
    assert error[0] == 2 and "invalid JSON" in error[2] and len(written) + len(piped) == 1


def block_outcome(blocks: Iterator[tuple[int, bytes]], max_lines: int) -> list:
    """The lines of ``blocks`` in turn, as :func:`outcome` gives them, after checking each block: its
    first line's number follows the lines before it, and it holds at most ``max_lines`` lines."""
    got: list = []
    try:
        for first, data in blocks:
            lines = data.split(b"\n")
            assert first == len(got) + 1 and len(lines) <= max_lines, (first, len(got), lines)
            got.extend(lines)
    except InputError as exc:
        got.append((exc.source, exc.line, exc.field, exc.reason))
    return got


@pytest.mark.parametrize("read_bytes", [1, 2, 3, 5, 8, 64])
def test_blocks_hold_the_lines_line_by_line_reading_gives(read_bytes: int) -> None:
    """A file read in blocks (as ingest's workers take a file on disk) gives the same lines, in
    blocks numbered by their first line and of at most their number of lines, and refuses an
    overlong line at the same line after the same lines, as reading it line by line (the bounded
    ``readline`` reference)."""
    from procgrade.engine.native import bounded_blocks

    rng = random.Random(read_bytes)
    for _ in range(3000):
        data = bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(0, 60)))
        limit, max_lines = rng.randrange(0, 12), rng.randrange(1, 6)
        expected = outcome(readline_lines(io.BytesIO(data), "f.jsonl", limit))  # not bounded_lines: it reads blocks
        blocks = bounded_blocks(io.BytesIO(data), "f.jsonl", max_lines=max_lines, read_bytes=read_bytes, limit=limit)
        assert block_outcome(blocks, max_lines) == expected, (data, limit, max_lines)


def test_a_native_file_on_disk_reads_alike_by_line_and_by_block(tmp_path: Path) -> None:
    """:class:`NativeFile`: its lines and its blocks' lines are the file's, a file that cannot be
    opened is reported in its turn (when first read), and closing it closes the file."""
    from procgrade.engine.native import NativeFile

    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(_event_line(seq) + b"\n" for seq in range(50)))
    lines = list(NativeFile(path))
    assert lines == [_event_line(seq) for seq in range(50)]
    blocks = list(NativeFile(path).blocks(max_lines=7, read_bytes=2**16))
    assert [first for first, _ in blocks] == list(range(1, 51, 7))
    assert b"\n".join(data for _, data in blocks).split(b"\n") == lines
    missing = NativeFile(tmp_path / "gone.jsonl", "gone.jsonl")
    reading = iter(missing)  # nothing opened yet
    with pytest.raises(InputError, match="gone.jsonl: -: cannot read"):
        next(reading)
    opened = NativeFile(path)
    reading = opened.blocks(max_lines=7, read_bytes=100)
    next(reading)
    opened.close()
    with pytest.raises(StopIteration):
        next(reading)
