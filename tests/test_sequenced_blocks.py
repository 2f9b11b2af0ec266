"""The checks across native lines take whole blocks at once where a block only continues one run
(procgrade.engine.native._continues): whatever the input and however it is cut into blocks, the
pieces, line numbers, redaction counts and the first error are those of checking line by line."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procgrade.engine import native
from procgrade.engine.errors import InputError


def _outcome(pieces: Any) -> tuple[list[tuple], str | None]:
    """(each piece as plain values, the error that ended them or None)."""
    got: list[tuple] = []
    try:
        for piece in pieces:
            got.append((piece.run_id, piece.source, [list(r) for r in piece.rows], piece.lines,
                        piece.duplicates_skipped, dict(piece.redactions)))
    except InputError as exc:
        return got, str(exc)
    return got, None


def _line_by_line(items: list[tuple], chunk: int | None) -> Any:
    runs: dict[str, Any] = {}
    yield from native._sequenced_lines("f.jsonl", items, chunk, True, runs, {})
    for state in runs.values():
        if state.buffer.items or state.buffer.duplicates_skipped:
            yield state.flush()


def _items(lines: list[tuple]) -> list[tuple]:
    """Items as the row path makes them, from (run, seq, event id number, content, redacted[,
    mislabelled]): a mislabelled line is run_started where it should not be, or not where it should."""
    items = []
    for number, (run_id, seq, event, content, redacted, *odd) in enumerate(lines, start=1):
        kind = "run_started" if (seq == 0) != bool(odd and odd[0]) else "message"
        row = [run_id, seq, f"e{event}", None, kind, f"header-{content}"]
        items.append((number, run_id, seq, f"e{event}", kind, row, redacted))
    return items


@st.composite
def _lines(draw: st.DrawFn) -> list[tuple]:
    """Mostly well-formed interleaved runs, with now and then a repeated, skipped, reordered or
    mislabelled line, or a reused event id."""
    runs = draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True))
    next_seq = {run: 0 for run in runs}
    lines: list[tuple] = []
    event = 0
    for _ in range(draw(st.integers(0, 40))):
        run = draw(st.sampled_from(runs))
        seq = next_seq[run]
        twist = draw(st.integers(0, 30))
        if twist == 0 and seq:
            seq -= draw(st.integers(1, seq))  # a repeat (same or different content) or an old seq
        elif twist == 1:
            seq += 1  # a gap
        else:
            next_seq[run] = seq + 1
        event_number = draw(st.integers(0, event)) if twist == 2 else event
        event += 1
        content = draw(st.integers(0, 1)) if twist == 0 else 0
        lines.append((run, seq, event_number, content,
                      draw(st.sampled_from([0, 0, 0, 1, 2])), twist == 3))
    return lines


@settings(max_examples=500, deadline=None)
@given(_lines(), st.integers(1, 9), st.one_of(st.none(), st.integers(1, 7)))
def test_blocks_are_checked_as_line_by_line(lines: list, block_size: int, chunk: int | None) -> None:
    items = _items(lines)
    expected = _outcome(_line_by_line(items, chunk))
    got = _outcome(native._sequenced("f.jsonl", native.item_blocks(iter(items), block_size), chunk, rows=True))
    assert got == expected


def test_a_clean_run_in_big_blocks_is_taken_a_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcut is taken: after a run's first block, no line goes through the line checks."""
    items = _items([("a", seq, seq, 0, 0) for seq in range(50)])
    checked: list[int] = []
    real = native._sequenced_lines

    def counting(source: str, block: list, *args: Any) -> Any:
        checked.append(len(block))
        return real(source, block, *args)

    monkeypatch.setattr(native, "_sequenced_lines", counting)
    pieces = list(native._sequenced("f.jsonl", native.item_blocks(iter(items), 10), 20, rows=True))
    assert checked == [10]
    assert [len(piece.rows) for piece in pieces] == [20, 20, 10]
    assert [piece.lines[0] for piece in pieces] == [1, 21, 41]


def test_an_error_after_a_block_comes_after_the_lines_before_it() -> None:
    """item_blocks hands on the items read before an error, then raises it."""
    def items() -> Any:
        yield from _items([("a", 0, 0, 0, 0), ("a", 1, 1, 0, 0), ("a", 3, 2, 0, 0)])
        raise InputError("f.jsonl", 4, "seq", "unreadable")

    got, error = _outcome(native._sequenced("f.jsonl", native.item_blocks(items(), 10), None, rows=True))
    assert got == [] and error is not None and "f.jsonl:3" in error and "gapless" in error
