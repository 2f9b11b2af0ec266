"""Native ingest builds the row of a common line from its fields as validated without building the
model (:func:`procgrade.engine.events.fields_validators`, :func:`procgrade.engine.stored.prepare_fields_row`)
and takes the model's path for every other line. That is only right while both paths give the same
row for every line they take, and the same error for every line they refuse: these tests hold the
fields path to the model's, for every kind, valid and with any field swapped for another JSON value,
written compactly and spaced out, and check that the common lines do take the fields path."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from procgrade.engine import native, stored
from procgrade.engine.errors import InputError
from procgrade.engine.events import EVENT_KINDS, fields_validators
from procgrade.engine.importers.redaction import unchanged_json_lines
from procgrade.engine.native import _checked, _line_row, fields_path_ready
from procgrade.engine.stored import FIELDS_KINDS, prepare_row
from test_native_validation_modes import _fixture_records, _swapped, agreement_on_generated_swaps

fields_path_ready()


def _model_path(raw: bytes) -> tuple[str, Any]:
    try:
        event, record, redacted, canonical = _checked("f.jsonl", 7, raw)
    except InputError as exc:
        return "refused", str(exc)
    return "valid", (prepare_row(event, record, canonical), redacted)


def _ingest_path(raw: bytes) -> tuple[str, Any]:
    try:
        return "valid", _line_row("f.jsonl", 7, raw, unchanged_json_lines([raw])[0])
    except InputError as exc:
        return "refused", str(exc)


def _agree(record: dict[str, Any]) -> None:
    """The line of ``record`` gives the same row (or error) on ingest's path as on the model's,
    written compactly (orjson's own bytes where orjson can write it) and spaced out."""
    for raw in (json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode(),
                json.dumps(record, ensure_ascii=False).encode()):
        assert _ingest_path(raw) == _model_path(raw), raw


@pytest.fixture
def fields_rows(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the rows the fields path built, in order."""
    built: list[str] = []

    def counted(fields: dict[str, Any], record: dict[str, Any], *args: Any) -> list[Any]:
        built.append(record["kind"])
        return stored.prepare_fields_row(fields, record, *args)

    monkeypatch.setattr(native, "prepare_fields_row", counted)
    return built


def test_every_kind_but_those_with_model_validators_takes_the_fields_path() -> None:
    """A kind whose model checks fields against each other (a model validator) needs the model;
    every other kind has a fields validator and a row built from its fields."""
    assert set(fields_validators()) == {name for name, kind in EVENT_KINDS.items()
                                        if kind.__pydantic_core_schema__["type"] == "model"}
    assert {"command", "file_read", "file_edit", "message", "test_run", "stage_started"} <= FIELDS_KINDS
    assert {"grade", "run_started", "acceptance_verdict"}.isdisjoint(FIELDS_KINDS)


@pytest.mark.parametrize("record", _fixture_records(), ids=lambda record: record["kind"])
def test_both_paths_give_the_same_rows_and_errors_for_each_kind(record: dict[str, Any], fields_rows: list[str]) -> None:
    _agree(record)
    if record["kind"] in FIELDS_KINDS:  # its own line, as orjson writes it, took the fields path
        assert fields_rows and fields_rows[0] == record["kind"]
    for swapped in _swapped(record):
        _agree(swapped)


test_both_paths_agree_on_generated_events_with_any_field_swapped = agreement_on_generated_swaps(_agree)


@pytest.mark.parametrize("payload", [{"tool": "bash", "n": 1.5}, {"big": 2**70 + 1}, {"k": None, "v": [None]},
                                     {"\U0001f600": 1, "a": 2}, {}, {"deep": [[[{"x": 1e-7}]]]}])
def test_payloads_with_floats_nulls_odd_keys_or_big_integers_store_the_same_bytes(payload: dict[str, Any]) -> None:
    record = {"run_id": "r", "seq": 3, "event_id": "r/3", "kind": "command", "actor": "agent",
              "command": "pytest -q", "exit_code": None, "payload": payload}
    _agree(record)
    raw = orjson.dumps(record) if "big" not in payload else json.dumps(record).encode()
    assert _ingest_path(raw) == _model_path(raw)


def test_a_line_that_needs_redacting_is_redacted_as_before(fields_rows: list[str]) -> None:
    record = {"run_id": "r", "seq": 3, "event_id": "r/3", "kind": "command", "actor": "agent",
              "command": "curl -H 'Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz0123456789'",
              "payload": {"api_key": "sk-abcdefghijklmnopqrstuvwxyz0123456789"}}
    raw = orjson.dumps(record)
    state, (row, redacted) = _ingest_path(raw)
    assert state == "valid" and redacted >= 1 and "sk-abcdefghij" not in repr(row)
    assert (state, (row, redacted)) == _model_path(raw)
    assert fields_rows == []  # the model's path redacts it


_BASE = '"run_id":"r","seq":3,"event_id":"r/3","kind":"command","actor":"agent","command":"make"'
#: Lines of odd shapes: repeated keys (at the top, in the payload, spelled with an escape, hidden
#: beside a float orjson writes longer than the line did: 1e10 is 13 bytes as orjson writes it),
#: integers beyond 64 bits, escapes, and other separators.
_LINES = [
    '{' + _BASE + ',"exit_code":1,"exit_code":2}',
    '{' + _BASE + ',"payload":{"a":1,"a":2}}',
    '{' + _BASE + ',"payload":{"a":1,"\\u0061":2}}',
    '{' + _BASE + ',"payload":{"f":1e10,"b":1234,"b":2}}',  # as long as orjson writes its parse
    '{' + _BASE + ',"payload":{"f":1e10,"g":1.5}}',
    '{' + _BASE + ',"payload":{"big":18446744073709551616}}',
    '{' + _BASE + ',"payload":{"big":123456789012345678901234567890,"x":1}}',
    '{' + _BASE.replace(",", ", ") + ',"payload":{"a":[1, 2]}}',
    '{' + _BASE + ',\t"payload":{"a":"\\/"}}',
    '{' + _BASE + ',"payload":{"s":"caf\\u00e9","t":"caf\u00e9"}}',
    '{' + _BASE + ',"payload":{}}',
    '{' + _BASE + '}',
]


@pytest.mark.parametrize("text", _LINES)
def test_lines_of_every_shape_get_the_model_paths_row_or_error(text: str) -> None:
    raw = text.encode()
    assert _ingest_path(raw) == _model_path(raw)


def test_a_repeated_key_is_refused_however_the_line_is_written() -> None:
    for text in _LINES[:4]:
        state, error = _ingest_path(text.encode())
        assert state == "refused" and "duplicate key" in error, text
