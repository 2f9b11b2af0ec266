"""procgrade's own run format: JSONL, one event per line, validated against the event schema.

Reading checks everything that can be checked without the store, and reports
the first problem as ``FILE:LINE: field: reason``: bytes that are not UTF-8,
lines that are not JSON, unknown kinds, wrong types, missing fields, gaps in a
run's seqs, a seq repeated with different content, an event_id reused. An
identical repeated line (a retried write) is skipped and counted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import ValidationError

from engine.errors import InputError
from engine.events import Event, event_adapter

__all__ = ["RunEvents", "read_native", "parse_native_lines", "dump_native"]


@dataclass
class RunEvents:
    """The events of one run as read from one source, with where each came from."""

    run_id: str
    source: str
    events: list[Event] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    duplicates_skipped: int = 0

    def line_of(self, seq: int) -> int:
        return self.lines[seq - self.events[0].seq]


def read_native(path: Path | str) -> list[RunEvents]:
    """Read and validate a native JSONL file; runs in order of first appearance."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from exc
    return parse_native_lines(str(path), data.split(b"\n"))


def parse_native_lines(source: str, lines: Iterable[bytes]) -> list[RunEvents]:
    adapter = event_adapter()
    runs: dict[str, RunEvents] = {}
    seen_ids: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        _check_utf8(source, number, raw)
        try:
            event = adapter.validate_json(raw)
        except ValidationError as exc:
            raise _input_error(source, number, exc) from None
        if _NON_JSON_NUMBER.search(raw) is not None:
            _refuse_non_json_numbers(source, number, raw)
        run = runs.get(event.run_id)
        if run is None:
            run = runs[event.run_id] = RunEvents(event.run_id, source)
        if run.events:
            last = run.events[-1]
            if event.seq <= last.seq:
                earlier = run.events[event.seq - run.events[0].seq] if event.seq >= run.events[0].seq else None
                if earlier is not None and earlier == event:
                    run.duplicates_skipped += 1
                    continue
                if earlier is None:
                    raise InputError(source, number, "seq",
                                     f"run {event.run_id}: seq {event.seq} comes after seq {last.seq}: seqs must ascend")
                raise InputError(source, number, "seq",
                                 f"run {event.run_id}: seq {event.seq} repeated with different content "
                                 f"(first at line {run.line_of(event.seq)})")
            if event.seq != last.seq + 1:
                raise InputError(source, number, "seq",
                                 f"run {event.run_id}: seq {event.seq} follows seq {last.seq}: seqs must be gapless")
        first_line = seen_ids.setdefault(event.event_id, number)
        if first_line != number:
            raise InputError(source, number, "event_id", f"event_id {event.event_id!r} already used at line {first_line}")
        if (event.seq == 0) != (event.kind == "run_started"):
            reason = ("seq 0 must be a run_started event" if event.seq == 0
                      else f"run_started must be seq 0, not seq {event.seq}")
            raise InputError(source, number, "kind", f"run {event.run_id}: {reason}")
        run.events.append(event)
        run.lines.append(number)
    return list(runs.values())


def dump_native(events: Iterable[Event]) -> Iterator[bytes]:
    """Native JSONL lines for ``events``: sorted keys, ``None`` left out, values type-faithful
    (a float stays a float), so re-ingesting them stores the very same rows."""
    from engine.canonical import faithful_json

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
