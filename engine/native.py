"""procgrade's own run format: JSONL, one event per line, validated against the event schema.

Reading checks everything that can be checked without the store, and reports
the first problem as ``FILE:LINE: field: reason``: bytes that are not UTF-8,
lines that are not JSON, keys repeated in an object, nesting deeper than the limit,
unknown kinds, wrong types, impossible timestamps, missing fields, gaps in a run's
seqs, a seq repeated with different content, an event_id reused. An identical
repeated line (a retried write) is skipped and counted. Secrets are redacted as the
harness importers redact them (the payload keeps the marker; the run counts them).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from sys import intern, maxsize
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson
from pydantic import ValidationError

from procgrade.engine.errors import InputError
from procgrade.engine.events import Event, event_adapter
from procgrade.engine.importers.redaction import LineHits, Redactor, unchanged_json_line, unchanged_json_lines
from procgrade.engine.json_guards import MAX_DEPTH, duplicate_key, key_endings, nesting_error
from procgrade.engine.native_workers import BLOCK_LINES
from procgrade.engine.stored import FIELDS_KINDS, prepare_fields_row, prepare_row

if TYPE_CHECKING:
    from procgrade.engine.native_workers import PreparePool

__all__ = ["RunEvents", "read_native", "parse_native_lines", "iter_native", "iter_native_rows", "item_blocks",
           "bounded_lines", "dump_native", "CHUNK_EVENTS"]


@dataclass
class RunEvents:
    """Consecutive events of one run as read from one source, with where each came from
    (a whole run, or one piece of it when read in chunks): as validated models, or (from
    :func:`iter_native_rows`, for the store) as prepared rows."""

    run_id: str
    source: str
    events: list[Event] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    duplicates_skipped: int = 0
    #: seq -> secrets redacted from that event before it was validated.
    redactions: dict[int, int] = field(default_factory=dict)
    #: The events as rows (:func:`procgrade.engine.stored.prepare_row`) instead of models.
    rows: list[list[Any]] | None = None

    @property
    def items(self) -> list[Any]:
        """The events or the rows, whichever this piece holds."""
        return self.events if self.rows is None else self.rows

    @property
    def first_seq(self) -> int:
        items = self.items
        return items[0].seq if self.rows is None else items[0][1]

    @property
    def last_seq(self) -> int:
        items = self.items
        return items[-1].seq if self.rows is None else items[-1][1]

    def line_of(self, seq: int) -> int:
        return self.lines[seq - self.first_seq]


#: Events of one run held before they are handed on (ingest writes them as the file is read).
CHUNK_EVENTS = 5000


def read_native(path: Path | str) -> list[RunEvents]:
    """Read and validate a native JSONL file; runs in order of first appearance."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from exc
    return parse_native_lines(str(path), data.split(b"\n"))


#: The longest line read (a payload of a few MB is common; a 2 GB file of NUL bytes is not a line).
MAX_LINE_BYTES = 64 * 2**20


def bounded_lines(handle: BinaryIO, source: str, limit: int | None = None) -> Iterator[bytes]:
    """The lines of an open binary file without their ``\\n``, one at a time; a line longer than
    ``limit`` bytes is refused before it is held whole. Read a megabyte at a time and split in C
    (a ``readline`` per line cost the single writer of a big ingest a tenth of its time): the
    lines of :func:`bounded_blocks`, one block at a time."""
    for _first, data in bounded_blocks(handle, source, max_lines=maxsize, read_bytes=_READ_BYTES, limit=limit):
        yield from data.split(b"\n")


_READ_BYTES = 2**20


def bounded_blocks(handle: BinaryIO, source: str, *, max_lines: int, read_bytes: int,
                   limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    """The lines of an open binary file in blocks: (number of the block's first line, its lines
    joined by ``\\n``). The file is read ``read_bytes`` at a time; a block ends after ``max_lines``
    lines, or with the whole lines of a read once they hold half of ``read_bytes`` (fewer are
    carried into the next read), or at the file's end. The same lines and the same refusal of a
    line longer than ``limit`` bytes (after the blocks of the lines before it) as
    :func:`bounded_lines`, without a Python step per line: lines are counted and blocks cut in C."""
    limit = MAX_LINE_BYTES if limit is None else limit
    with handle:
        number = 0  # lines handed on
        carried = b""  # whole lines read and not yet handed on (fewer than a block), joined
        kept = 0  # how many
        partial: list[bytes] = []  # the pieces of the line under way (no newline read yet)
        held = 0
        while True:
            chunk = handle.read(read_bytes)
            if not chunk:
                last = [carried] if kept else []
                if partial:  # a last line without its newline
                    last.append(b"".join(partial))
                if last:
                    yield number + 1, b"\n".join(last)
                return
            cut = chunk.rfind(b"\n")
            if cut < 0:
                partial.append(chunk)
                held += len(chunk)
                if held > limit:
                    yield from _whole_blocks(number + 1, carried, kept, max_lines)
                    raise InputError(source, number + kept + 1, None, f"line longer than {limit} bytes")
                continue
            partial.append(chunk[:cut])
            whole = b"".join(partial) if len(partial) > 1 else partial[0]
            data = carried + b"\n" + whole if kept else whole
            count = kept + whole.count(b"\n") + 1
            if len(whole) > limit:  # rare: a line of it may pass the limit
                for at, raw in enumerate(lines := data.split(b"\n")):
                    if len(raw) > limit:
                        yield from _whole_blocks(number + 1, b"\n".join(lines[:at]), at, max_lines)
                        raise InputError(source, number + at + 1, None, f"line longer than {limit} bytes")
            while count >= max_lines:  # a block's lines: cut after them
                if count - max_lines < max_lines:  # none or a few lines over: count back from the end
                    end = len(data)
                    for _ in range(count - max_lines):
                        end = data.rfind(b"\n", 0, end)
                else:
                    end = -1
                    for _ in range(max_lines):
                        end = data.find(b"\n", end + 1)
                yield number + 1, data[:end]
                data, number, count = data[end + 1:], number + max_lines, count - max_lines
            if count and len(data) >= read_bytes // 2:  # enough bytes for a block
                yield number + 1, data
                number, count = number + count, 0
            carried, kept = (data, count) if count else (b"", 0)
            rest = chunk[cut + 1:]
            partial, held = ([rest], len(rest)) if rest else ([], 0)
            if held > limit:
                yield from _whole_blocks(number + 1, carried, kept, max_lines)
                raise InputError(source, number + kept + 1, None, f"line longer than {limit} bytes")


def _whole_blocks(first: int, data: bytes, count: int, max_lines: int) -> Iterator[tuple[int, bytes]]:
    """``data`` (``count`` lines joined by ``\\n``, the first numbered ``first``; none when 0) in
    blocks of at most ``max_lines`` lines: what comes before a line that is refused."""
    if count:
        lines = data.split(b"\n")
        for start in range(0, count, max_lines):
            yield first + start, b"\n".join(lines[start:start + max_lines])


class NativeFile:
    """A native file on disk, opened when first read, and read once: its lines one at a time
    (iterating it: :func:`bounded_lines`), or in blocks of whole lines joined by ``\\n``
    (:meth:`blocks`: :func:`bounded_blocks`), which ingest's workers split themselves. The one
    writer then neither splits the file into lines nor joins them again for the workers: reading
    200,000 events took it 0.12-0.19 s of CPU that way and takes 0.04-0.08 s in blocks, and the
    whole ingest waits on the writer."""

    def __init__(self, path: Path | str, source: str | None = None) -> None:
        self.path = Path(path)
        self.source = str(path) if source is None else source
        self._reading: Iterator[Any] | None = None

    def __iter__(self) -> Iterator[bytes]:
        self._reading = self._read(bounded_lines)
        return self._reading

    def blocks(self, *, max_lines: int, read_bytes: int) -> Iterator[tuple[int, bytes]]:
        """(number of the first line, the lines joined by ``\\n``) in blocks (:func:`bounded_blocks`)."""
        self._reading = self._read(bounded_blocks, max_lines=max_lines, read_bytes=read_bytes)
        return self._reading

    def close(self) -> None:
        """Stop the reading under way, closing the file."""
        if self._reading is not None:
            self._reading.close()  # type: ignore[attr-defined]

    def _read(self, reader: Any, **options: Any) -> Iterator[Any]:
        """``reader`` over the opened file: a generator, so a file that cannot be opened is
        reported when its first line or block is asked for, in its turn."""
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise InputError(self.source, None, None, f"cannot read: {exc.strerror or exc}") from exc
        yield from reader(handle, self.source, **options)


def parse_native_lines(source: str, lines: Iterable[bytes]) -> list[RunEvents]:
    """Every run of ``lines`` whole, in order of first appearance."""
    runs: dict[str, RunEvents] = {}
    for piece in iter_native(source, lines, chunk=None):
        runs[piece.run_id] = piece
    return list(runs.values())


#: One line's result: (line number, run_id, seq, event_id, kind, the event or its row, secrets redacted).
_Item = tuple[int, str, int, str, str, Any, int]


def iter_native(source: str, lines: Iterable[bytes], *, chunk: int | None = CHUNK_EVENTS) -> Iterator[RunEvents]:
    """Validate ``lines`` one by one and yield each run in consecutive pieces of at most ``chunk``
    events (None: each run whole, at the end), so a caller can write as it reads: memory holds
    a chunk per run, not the file. A line repeating an event already handed on is handed on
    again as a piece of its own: the store skips it when identical and refuses it when not."""
    return _sequenced(source, item_blocks(_event_items(source, lines)), chunk, rows=False)


def iter_native_rows(source: str, lines: Iterable[bytes], *, chunk: int | None = None,
                     workers: "int | PreparePool" = 0) -> Iterator[RunEvents]:
    """:func:`iter_native` with each piece holding prepared rows (``piece.rows``) instead of
    models, what :meth:`RunWriter.append_rows` takes: the same checks, errors and pieces.

    With ``workers`` (a number of processes, or an ingest's
    :class:`procgrade.engine.native_workers.PreparePool`) and input big enough to pay for them,
    processes of their own parse, validate and prepare blocks of lines while the caller writes
    the pieces before them; memory holds a few blocks, not the file."""
    chunk = CHUNK_EVENTS if chunk is None else chunk
    if isinstance(workers, int) and workers <= 0:
        return _sequenced(source, item_blocks(_row_items(source, enumerate(lines, start=1))), chunk, rows=True)
    return _pooled_rows(source, lines, chunk, workers)


def _pooled_rows(source: str, lines: Iterable[bytes], chunk: int,
                 workers: "int | PreparePool") -> Iterator[RunEvents]:
    from procgrade.engine.native_workers import PreparePool

    own = isinstance(workers, int)
    pool = PreparePool(workers) if isinstance(workers, int) else workers
    blocks = pool.row_blocks(source, lines)
    try:
        yield from _sequenced(source, blocks, chunk, rows=True)
    finally:
        blocks.close()  # cancels this file's blocks still queued (an error, or the caller stopped early)
        if own:
            pool.close()


def item_blocks(items: Iterable[_Item], size: int = BLOCK_LINES) -> Iterator[list[_Item]]:
    """``items`` in lists of up to ``size`` (a workers' block of lines, by default), as the
    checks across lines take them; an error met midway comes after the list of the items
    before it, so those are checked first."""
    block: list[_Item] = []
    try:
        for item in items:
            block.append(item)
            if len(block) >= size:
                yield block
                block = []
    except Exception:
        if block:
            yield block
        raise
    if block:
        yield block


def _event_items(source: str, lines: Iterable[bytes]) -> Iterator[_Item]:
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        event, _record, redacted = _validated(source, number, raw)
        yield number, event.run_id, event.seq, event.event_id, event.kind, event, redacted


def _row_items(source: str, numbered: Iterable[tuple[int, bytes]]) -> Iterator[_Item]:
    """Each line's item with its prepared row (:func:`row_item_lists`, one at a time)."""
    for items in row_item_lists(source, numbered):
        yield from items


def row_item_lists(source: str, numbered: Iterable[tuple[int, bytes]]) -> Iterator[list[_Item]]:
    """The lines' items with their prepared rows, in lists of :data:`SCAN_LINES` lines' (fewer
    where lines are blank): the redaction filter scans those lines at once
    (:func:`unchanged_json_lines`; a line where it finds something gets the per-line look at what
    it found), and a worker marshals each list whole, with no Python step a line between. A line
    that cannot be read, or is refused, comes after the items of the lines before it (a list of
    its own), as line by line."""
    fields_path_ready()
    numbered = iter(numbered)
    while True:
        lines: list[tuple[int, bytes]] = []
        failure: Exception | None = None
        try:
            for pair in numbered:
                lines.append(pair)
                if len(lines) >= SCAN_LINES:
                    break
        except Exception as exc:  # reported once the lines before it are checked
            failure = exc
        items: list[_Item] = []
        try:
            for (number, raw), unchanged in zip(lines, unchanged_json_lines([raw for _, raw in lines])):
                if not raw or raw.isspace():  # blank
                    continue
                row, redacted = _line_row(source, number, raw, unchanged)
                items.append((number, row[0], row[1], row[2], row[4], row, redacted))
        except Exception:
            if items:
                yield items
            raise
        if items:
            yield items
        if failure is not None:
            raise failure
        if len(lines) < SCAN_LINES:
            return


#: Lines the redaction filter scans at once (and a worker's rows marshalled at once): their
#: rows are built and handed on while still in the processor's cache.
SCAN_LINES = 250


def _sequenced(source: str, blocks: Iterable[list[_Item]], chunk: int | None, *, rows: bool) -> Iterator[RunEvents]:
    """The checks across lines (seq order per run, repeated lines, reused event ids, run_started
    at seq 0) over validated lines, cut into pieces. Two events are the same when their models
    are equal, or (rows) when their canonical headers are: the header covers every field and
    the payload's digest. A block that only continues one run (its next seqs, event ids not seen
    before, no run_started) passes them all at once; any other goes line by line, which words
    the error."""
    runs: dict[str, _RunState] = {}
    seen_ids: dict[str, int] = {}
    for block in blocks:
        state = runs.get(block[0][1]) if block else None
        if state is not None and state.last is not None and _continues(block, state.last + 1, seen_ids):
            yield from _take_block(state, block, chunk, seen_ids)
            continue
        yield from _sequenced_lines(source, block, chunk, rows, runs, seen_ids)
    for state in runs.values():
        if state.buffer.items or state.buffer.duplicates_skipped:
            yield state.flush()


def _continues(block: list[_Item], next_seq: int, seen_ids: dict[str, int]) -> bool:
    """Does ``block`` only continue its first item's run, at ``next_seq``, with event ids not
    seen before and no run_started? Then every check across lines passes for each of its items."""
    count, run_id = len(block), block[0][1]
    return ([item[1] for item in block].count(run_id) == count
            and [item[2] for item in block] == list(range(next_seq, next_seq + count))
            and "run_started" not in [item[4] for item in block]
            and len(ids := {item[3] for item in block}) == count
            and seen_ids.keys().isdisjoint(ids))


def _take_block(state: _RunState, block: list[_Item], chunk: int | None,
                seen_ids: dict[str, int]) -> Iterator[RunEvents]:
    """Add a block :func:`_continues` passed to its run's buffer, as line by line would: the same
    pieces (cut at ``chunk`` events), lines, redaction counts and remembered event ids."""
    seen_ids.update([(item[3], item[0]) for item in block])
    start, count = 0, len(block)
    while start < count:
        buffer = state.buffer
        held = buffer.items
        if not held:
            state.buffer_first = block[start][2]
        end = count if chunk is None else min(count, start + max(1, chunk - len(held)))
        part = block[start:end] if start or end < count else block
        held.extend([item[5] for item in part])
        buffer.lines.extend([item[0] for item in part])
        if any([item[6] for item in part]):
            buffer.redactions.update([(item[2], item[6]) for item in part if item[6]])
        state.last = part[-1][2]
        start = end
        if chunk is not None and len(held) >= chunk:
            yield state.flush()


def _sequenced_lines(source: str, items: list[_Item], chunk: int | None, rows: bool,
                     runs: dict[str, _RunState], seen_ids: dict[str, int]) -> Iterator[RunEvents]:
    """The checks across lines, line by line (any block :func:`_continues` does not pass)."""
    for number, run_id, seq, event_id, kind, thing, redacted in items:
        state = runs.get(run_id)
        if state is None:
            state = runs[run_id] = _RunState(seq, _piece(run_id, source, rows))
        buffer = state.buffer
        if state.last is not None and seq <= state.last:
            if seq < state.first:
                raise InputError(source, number, "seq",
                                 f"run {run_id}: seq {seq} comes after seq {state.last}: seqs must ascend")
            held = buffer.items
            if held and seq >= state.buffer_first:
                earlier = held[seq - state.buffer_first]
                if (earlier[-1] != thing[-1]) if rows else (earlier != thing):
                    raise InputError(source, number, "seq",
                                     f"run {run_id}: seq {seq} repeated with different content "
                                     f"(first at line {buffer.line_of(seq)})")
                buffer.duplicates_skipped += 1
                continue
            # an event handed on already: the store compares it with what it wrote
            if chunk is not None:
                yield state.flush()
            piece = _piece(run_id, source, rows)
            piece.items.append(thing)
            piece.lines.append(number)
            if redacted:
                piece.redactions[seq] = redacted
            yield piece
            continue
        if state.last is not None and seq != state.last + 1:
            raise InputError(source, number, "seq",
                             f"run {run_id}: seq {seq} follows seq {state.last}: seqs must be gapless")
        first_line = seen_ids.setdefault(event_id, number)
        if first_line != number:
            raise InputError(source, number, "event_id", f"event_id {event_id!r} already used at line {first_line}")
        if (seq == 0) != (kind == "run_started"):
            reason = ("seq 0 must be a run_started event" if seq == 0
                      else f"run_started must be seq 0, not seq {seq}")
            raise InputError(source, number, "kind", f"run {run_id}: {reason}")
        held = buffer.items
        if not held:
            state.buffer_first = seq
        held.append(thing)
        buffer.lines.append(number)
        if redacted:
            buffer.redactions[seq] = redacted
        state.last = seq
        if chunk is not None and len(held) >= chunk:
            yield state.flush()


def _piece(run_id: str, source: str, rows: bool) -> RunEvents:
    return RunEvents(run_id, source, rows=[] if rows else None)


@dataclass
class _RunState:
    first: int
    buffer: RunEvents
    last: int | None = None
    #: The seq of the buffer's first event (when it holds any).
    buffer_first: int = 0

    def flush(self) -> RunEvents:
        piece = self.buffer
        self.buffer = _piece(piece.run_id, piece.source, piece.rows is not None)
        return piece


def _validated(source: str, number: int, raw: bytes) -> tuple[Event, dict[str, Any] | None, int]:
    """(event, its JSON object as parsed when usable for its row, secrets redacted) of one
    non-blank line, or the first problem as a located :class:`InputError`.

    The common line takes one orjson parse, a bracket count and a key count (the cheap
    filters of :mod:`procgrade.engine.json_guards`, fed the parsed object), one pydantic
    validation and the redaction filter. orjson refuses what the checks after validation
    look for (bytes that are not UTF-8, NaN, Infinity, numbers that overflow a double), so
    a line orjson cannot parse, or that the filters flag, goes through every check in turn,
    which words the error exactly as before.
    """
    return _checked(source, number, raw)[:3]


def _line_row(source: str, number: int, raw: bytes, unchanged: bool | LineHits) -> tuple[list[Any], int]:
    """(prepared row, secrets redacted) of one non-blank line, or its first problem as a located
    :class:`InputError`; ``unchanged`` as for :func:`_checked`.

    The common line (a kind :func:`procgrade.engine.events.fields_validators` holds, orjson's
    own bytes or at least plain, nothing to redact) has its fields validated without building
    the model, its payload only checked to be an object (orjson's parse of a JSON object is
    already what ``dict[str, Any]`` takes, and validating it copies it whole); its row is then built
    from the fields (:func:`procgrade.engine.stored.prepare_fields_row`): about 0.6 us a line
    less than the model's path, a thirteenth of a line's preparing. Any other line, and a line
    the fields validation refuses, takes the model's path, which words every error as before."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        record = None
    shape = None
    if type(record) is dict:
        kind = record.get("kind")
        validate = _FIELDS_VALIDATORS.get(kind) if type(kind) is str else None
        if validate is not None:
            shape = plain, canonical = _plain_shape(raw, record)
            if plain and canonical is not False and (
                    unchanged is True or unchanged_json_line(raw, unchanged if type(unchanged) is tuple else None)):
                fields = _valid_fields(record, validate)
                if fields is not None:
                    return prepare_fields_row(fields, record, canonical, raw.find(b"null") >= 0), 0
                record = shape = None  # refused; the model's path parses the line again and words the error
    event, record, redacted, canonical = _checked(source, number, raw, unchanged, record, shape)
    return prepare_row(event, record, canonical), redacted


#: Per kind, its fields' validator (:func:`procgrade.engine.events.fields_validators`), for the
#: kinds whose rows :func:`procgrade.engine.stored.prepare_fields_row` builds (filled by
#: :func:`fields_path_ready` on first use: building them takes most of 0.1 s).
_FIELDS_VALIDATORS: dict[str, Any] = {}


def fields_path_ready() -> None:
    """Build the validators of the fields path (:func:`_line_row`) unless built: before the
    first line, and in a process about to fork ingest workers, which then inherit them."""
    if not _FIELDS_VALIDATORS:
        from procgrade.engine.events import fields_validators

        _FIELDS_VALIDATORS.update((kind, validate) for kind, validate in fields_validators().items()
                                  if kind in FIELDS_KINDS)


def _valid_fields(record: dict[str, Any], validate: Any) -> dict[str, Any] | None:
    """The line's fields as validated, ``payload`` the very dict parsed (the fields validators
    hand it back as it is), or None where refused (the model's path then words why). The shared
    texts are interned in ``record`` first, as :func:`_valid_event` does."""
    _intern_shared_text(record)
    try:
        return validate(record)[0]
    except ValidationError:
        return None


def _checked(source: str, number: int, raw: bytes, unchanged: bool | LineHits | None = None,
             parsed: Any = None, shape: tuple[bool, bool | None] | None = None,
             ) -> tuple[Event, dict[str, Any] | None, int, bool | None]:
    """:func:`_validated`, and whether orjson's sorted bytes are RFC 8785 for the parsed object
    (no float, no key outside the BMP), when the line check found out (else None). ``unchanged``:
    what the caller's scan of ``raw`` found (:func:`unchanged_json_lines`: True when redacting it
    changes nothing, else the markers to look at), or None: the line is scanned here.
    ``parsed``: orjson's parse of ``raw`` when the caller has it (None: parsed here), and
    ``shape`` what :func:`_plain_shape` said of it, when the caller asked (None: asked here)."""
    if parsed is not None:
        record = parsed
    else:
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            record = None
    if shape is None:
        shape = _plain_shape(raw, record) if type(record) is dict else (False, None)
    plain, canonical = shape
    if not plain:
        _check_utf8(source, number, raw)
        _check_shape(source, number, raw)
        record = canonical = None
    event = _valid_event(source, number, raw, record if canonical is not False else None)
    if record is None and _NON_JSON_NUMBER.search(raw) is not None:
        _refuse_non_json_numbers(source, number, raw)
    redacted_event, redacted = _redacted(event, raw, record, unchanged)
    return (event, record, 0, canonical) if not redacted else (redacted_event, None, redacted, None)


#: The event adapter's own validator, called directly: ``TypeAdapter.validate_python`` only forwards
#: to it, and its Python frame cost a line 0.4 us of the 3 its validation takes.
_VALIDATOR = event_adapter().validator


#: Envelope fields most lines share a few values of: orjson makes a new string for each line's,
#: where pydantic's JSON parser hands out one cached object per value. Interned, a block's rows
#: marshal each once and the rows a caller keeps hold each once (200,000 bench rows: 47 MB). Not
#: ``kind``: validated against its model's literal, it comes back as that literal's own object.
_SHARED_TEXT = ("run_id", "actor")


def _intern_shared_text(record: dict[str, Any]) -> None:
    """Intern ``record``'s :data:`_SHARED_TEXT` in place: one object per distinct value, as JSON
    mode's string cache gives."""
    for name in _SHARED_TEXT:
        value = record.get(name)
        if type(value) is str:
            record[name] = intern(value)


def _valid_event(source: str, number: int, raw: bytes, record: dict[str, Any] | None) -> Event:
    """The line's event, validated from the object orjson parsed when there is one that holds the
    line's values exactly (Python mode skips parsing the line a second time: 2.8 us a line against
    3.4). The caller passes None where the object may hold a float the line does not: orjson reads
    an integer beyond 64 bits as one, which only a line whose parsed object holds a float can
    hide. Its ``run_id`` and ``actor`` are interned in place first (:data:`_SHARED_TEXT`).
    The models are strict in both modes, so both take and refuse the same values
    (tests/test_native_validation_modes.py); a refused line is validated again from its bytes,
    whose errors are worded for JSON ("Input should be an object", not "a valid dictionary or
    instance of HarnessInfo")."""
    if record is not None:
        _intern_shared_text(record)
        try:
            return _VALIDATOR.validate_python(record)
        except ValidationError:
            pass
    try:
        return _VALIDATOR.validate_json(raw)
    except ValidationError as exc:
        raise _input_error(source, number, exc) from None


#: The shortest text that can nest deeper than MAX_DEPTH: an opening and a closing bracket per
#: level. Shorter lines (three in four of bench/synthetic.py's) skip counting their brackets (0.5 us).
_DEEP_MIN_BYTES = 2 * (MAX_DEPTH + 1)


def _plain_shape(raw: bytes, record: dict[str, Any]) -> tuple[bool, bool | None]:
    """(plain, canonical) of a parsed line. Plain: it neither nests too deep nor repeats a key
    (what :mod:`procgrade.engine.json_guards` checks, without parsing again). Canonical: what
    :func:`procgrade.engine.canonical._orjson_is_canonical` says of the whole object (no float
    anywhere, no key outside the BMP), or None where it was not worth finding out.

    A line that is orjson's own bytes of what it parsed (as orjson, ``JSON.stringify`` and other
    compact writers write it) is plain: a dropped key would be missing from them, and it holds
    too few brackets to nest too deep. Any other line is walked: its containers nest at most
    MAX_DEPTH deep (only looked at when the text is long enough to, :data:`_DEEP_MIN_BYTES`, and
    holds that many brackets, in strings or not), and the text holds as many key endings as the
    parsed object holds keys (the parser keeps one of two equal keys)."""
    # the brackets, counted in one pass, where there is room for them
    deep = len(raw) >= _DEEP_MIN_BYTES and len(raw) - len(raw.translate(None, b"[{")) > MAX_DEPTH
    if not deep and orjson.dumps(record) == raw:
        return True, None
    check_keys = not raw.isascii() or raw.find(b"\\u") >= 0  # (``in`` first tries the needle as an int: an exception)
    canonical = True
    keys, stack = 0, [(record, 1)]
    while stack:
        item, depth = stack.pop()
        if deep and depth > MAX_DEPTH:
            return False, False
        if type(item) is dict:
            keys += len(item)
            if check_keys and canonical:
                for key in item:
                    if not key.isascii() and max(key) > "\uffff":
                        canonical = False
                        break
            values: Any = item.values()
        else:
            values = item
        for value in values:
            kind = type(value)
            if kind is dict or kind is list:
                stack.append((value, depth + 1))
            elif kind is float:
                canonical = False
    return keys == key_endings(raw), canonical


def _check_shape(source: str, number: int, raw: bytes) -> None:
    """Too deep nesting (before any parser recurses) and repeated keys, located."""
    problem = nesting_error(raw)
    if problem is not None:
        raise InputError(source, number, None, problem)
    key = duplicate_key(raw)
    if key is not None:
        raise InputError(source, number, key, "duplicate key: a JSON object must not repeat a key "
                         "(the last value would silently win)")


#: Event fields never redacted: identity, order and kind, and digests.
_NOT_REDACTED = frozenset({"run_id", "seq", "event_id", "ts", "kind", "actor", "stage", "parent_seq"})


def _redacted(event: Event, raw: bytes, record: dict[str, Any] | None = None,
              unchanged: bool | LineHits | None = None) -> tuple[Event, int]:
    """The event with every secret replaced by the redaction marker (the same kinds the harness
    importers redact), and how many. Most lines are decided from their bytes by one scan
    (:func:`unchanged_json_line`; ``unchanged`` is its answer or what it found, when the caller
    scanned already), which show every marker their strings hold unless an escape spells one
    (``\\u0073k-`` is ``sk-``, ``:\\/\\/`` is ``://``): such lines are looked at as parsed."""
    if unchanged is True or unchanged_json_line(raw, unchanged if type(unchanged) is tuple else None):
        return event, 0
    if record is None:
        try:
            record = orjson.loads(raw)  # the fields as written: cheaper to scan than the model
        except orjson.JSONDecodeError:  # e.g. an integer beyond 64 bits: scan the model's dump
            record = event.model_dump(mode="python", exclude_none=True)
    probe = Redactor()
    for name, value in record.items():
        if name not in _NOT_REDACTED:
            probe.value(value)
    if not probe.count:
        return event, 0
    redactor = Redactor()
    dumped = event.model_dump(mode="python", exclude_none=True)
    changed = {name: redactor.value(value) for name, value in dumped.items() if name not in _NOT_REDACTED}
    return event_adapter().validate_python({**dumped, **changed}), redactor.count


def dump_native(events: Iterable[Event]) -> Iterator[bytes]:
    """Native JSONL lines for ``events``: sorted keys, ``None`` left out, values type-faithful
    (a float stays a float), so re-ingesting them stores the very same rows."""
    from procgrade.engine.canonical import faithful_json

    for event in events:
        yield faithful_json(event.model_dump(mode="json", exclude_none=True)) + b"\n"


# pydantic's parser takes NaN, Infinity and overflowing numbers (1e400) into free-form
# fields as non-finite floats; none is JSON (RFC 8259) or has a canonical form. A cheap
# byte search finds candidates (they may just sit inside a string); a strict parse decides.
_NON_JSON_NUMBER = re.compile(rb"NaN|Infinity|[0-9][eE][+]?[0-9]{3}|[0-9]{17}[0-9.]*[eE]|[0-9]{309}")


def _refuse_non_json_numbers(source: str, number: int, raw: bytes) -> None:
    def refuse(token: str) -> None:
        raise InputError(source, number, None, f"invalid JSON: number {token} is not finite JSON")

    def finite(token: str) -> float:
        value = float(token)
        if math.isinf(value):
            refuse(token)
        return value

    json.loads(raw, parse_constant=refuse, parse_float=finite)


def _check_utf8(source: str, number: int, raw: bytes) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(source, number, None,
                         f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}") from None


def _input_error(source: str, number: int, exc: ValidationError) -> InputError:
    error = exc.errors(include_url=False)[0]
    kind, loc, msg = error["type"], error["loc"], error["msg"]
    if kind == "json_invalid":
        return InputError(source, number, None, f"invalid JSON: {error['ctx']['error']}")
    if kind == "union_tag_invalid":
        return InputError(source, number, "kind",
                          f"unknown kind {error['ctx']['tag']!r} (known: {error['ctx']['expected_tags']})")
    if kind == "union_tag_not_found":
        return InputError(source, number, "kind", "missing")
    if not loc:
        return InputError(source, number, None, f"{msg} (an event is a JSON object)")
    field_path = ".".join(str(part) for part in loc[1:]) or "-"
    if kind == "missing":
        return InputError(source, number, field_path, "missing")
    if kind == "extra_forbidden":
        return InputError(source, number, field_path, f"unknown field for kind {loc[0]!r}")
    got = orjson.dumps(error["input"]).decode() if _jsonable(error["input"]) else repr(error["input"])
    if len(got) > 60:
        got = got[:57] + "..."
    reason = msg.removeprefix("Value error, ")
    return InputError(source, number, field_path, f"{reason} (got {got})")


def _jsonable(value: object) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True
