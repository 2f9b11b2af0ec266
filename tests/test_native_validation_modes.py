"""Native ingest validates a line from the object orjson parsed (pydantic's Python mode) instead of
parsing its bytes again (JSON mode), where that object holds the line's values exactly. That is
only right while the event it builds is the one JSON mode builds from the bytes, and it refuses
what JSON mode refuses: the event models are strict, which holds the two modes to it, and an
integer beyond 64 bits (which orjson reads as a float) sends the line to JSON mode. These tests
hold ingest's line check to JSON mode for every kind, valid and with any field swapped for another
JSON value, written compactly and spaced out, and keep the errors worded for JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from builders import every_kind_run, h_json, h_runs, line, small_run
from procgrade.engine.errors import InputError
from procgrade.engine.events import event_adapter
from procgrade.engine.native import _checked, parse_native_lines

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = event_adapter()
#: JSON values a field may be swapped for: each JSON type, and the edges strictness decides
SWAPS: list[Any] = [1.0, 1.5, "1", True, False, None, [], {}, "", -1, 0, 2**40, 2**63 - 1, 2**64 + 1, -(10**21) - 3,
                    [2**70 + 1, 1], {"big": 10**25 + 7}, 1e300, "2026-11-01T00:00:01Z",
                    "2026-13-01T00:00:01Z", "\u00e9", {"a": 1.0}, [1, "a"], [None], ["a"], {"a": "b"}, [{"a": 1}]]


def _json_mode(raw: bytes) -> tuple[str, Any]:
    try:
        return "valid", ADAPTER.validate_json(raw).model_dump_json()  # 2**70 + 1 and a float differ here
    except ValidationError:
        return "refused", None


def _line_check(raw: bytes) -> tuple[str, Any]:
    try:
        return "valid", _checked("f.jsonl", 1, raw)[0].model_dump_json()
    except InputError:
        return "refused", None


def _agree(record: dict[str, Any]) -> None:
    """Ingest's line check builds JSON mode's event from ``record``'s line, or refuses it as JSON
    mode does; written as compact writers write it (orjson's own bytes where orjson can write it)
    and spaced out (which takes the walk that checks a line's shape)."""
    for raw in (json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode(),
                json.dumps(record, ensure_ascii=False).encode()):
        assert _line_check(raw) == _json_mode(raw), raw


def _swapped(record: dict[str, Any]) -> list[dict[str, Any]]:
    """``record`` with each field (its payload too, had it none), and each member of an object or
    first item of a list it holds (two levels down), swapped for each of :data:`SWAPS`, and with an
    unknown key added."""
    out = [{**record, "unknown_key": 1}]
    out += [{**record, "payload": value} for value in SWAPS]  # every kind's free-form field, set or not

    def walk(path: tuple[Any, ...], node: Any, depth: int) -> None:
        keys = list(node) if isinstance(node, dict) else [0] if isinstance(node, list) and node else []
        for key in keys:
            for value in SWAPS:
                copy = json.loads(json.dumps(record))
                target = copy
                for step in path:
                    target = target[step]
                target[key] = value
                out.append(copy)
            if depth < 2:
                walk(path + (key,), node[key], depth + 1)

    walk((), record, 0)
    return out


def _fixture_records() -> list[dict[str, Any]]:
    """One record of each kind from the fixtures' native logs and the every-kind runs."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.jsonl")) + sorted((ROOT / "examples").rglob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and {"run_id", "seq", "kind", "event_id"} <= record.keys():
                found.setdefault(record["kind"], record)
    for record in every_kind_run("kinds", 40):
        found.setdefault(record["kind"], orjson.loads(orjson.dumps(record)))
    return [found[kind] for kind in sorted(found)]


@pytest.mark.parametrize("record", _fixture_records(), ids=lambda record: record["kind"])
def test_both_modes_take_and_refuse_the_same_lines_of_each_kind(record: dict[str, Any]) -> None:
    for swapped in _swapped(record):
        _agree(swapped)


def agreement_on_generated_swaps(agree: Callable[[dict[str, Any]], None]) -> Callable[..., None]:
    """A property test: ``agree(record)`` holds for a generated event of a run and for the same
    event with one of its fields (drawn) set to any JSON value."""

    @settings(max_examples=150, deadline=None)
    @given(run=h_runs(max_size=4), position=st.integers(0, 3), value=h_json, data=st.data())
    def test(run: list[dict[str, Any]], position: int, value: Any, data: st.DataObject) -> None:
        record = run[position % len(run)]
        field = data.draw(st.sampled_from(sorted(record)))
        agree(record)
        agree({**record, field: value})

    return test


test_both_modes_agree_on_generated_events_with_any_field_swapped = agreement_on_generated_swaps(_agree)


def test_a_refused_line_is_worded_for_json() -> None:
    events = small_run("r")
    events[0]["harness"] = 1
    with pytest.raises(InputError) as refused:
        parse_native_lines("f.jsonl", [line(event) for event in events])
    assert str(refused.value) == "f.jsonl:1: harness: Input should be an object (got 1)"
