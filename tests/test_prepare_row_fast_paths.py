"""The shortcuts of :func:`procgrade.engine.stored.prepare_row` for a row built from its parsed line:
the payload's canonical bytes decided from orjson's own bytes, and the ``facts`` fields looked up
by the kind's field names. Each is held to the walk or the scan it replaces."""

from __future__ import annotations

import json

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from procgrade.engine.canonical import _orjson_is_canonical, canonical_json_of_typed
from procgrade.engine.events import EVENT_KINDS
from procgrade.engine.native import _validated
from procgrade.engine.stored import _DUMP_IS_RECORD, _ENVELOPE, _FACT_KEYS, _sorted_if_canonical, prepare_row

_KEYS = st.one_of(st.text(max_size=4), st.sampled_from(["a", "é", "\U0001f600", "k\U0001f600", "v1.2"]))
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8), st.sampled_from(["v1.2", "3e5", "file_8.py", "1E3", "2.", "x9e"]))
_PAYLOADS = st.dictionaries(_KEYS, st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)), max_leaves=8), max_size=4)


@settings(max_examples=500, deadline=None)
@given(_PAYLOADS)
@example({"f": 1.0, "big": 123456789012345678901234567890})  # orjson reads the integer as a float
@example({"x": 5e-324, "y": -0.0, "z": 1e16})
@example({"\U0001f600": 1, "a": "1.5"})
@example({"path": "file_8.py"})
def test_payload_bytes_are_taken_exactly_when_the_walk_says_they_are_canonical(payload: dict) -> None:
    """As native ingest holds it, a payload parsed by orjson: its sorted bytes are taken as its
    RFC 8785 form exactly when the walk over the value finds no float and no key outside the
    BMP, whether or not a digit before ``.`` or ``e`` in a string sent it to the walk."""
    parsed = orjson.loads(json.dumps(payload, ensure_ascii=False))
    expected = canonical_json_of_typed(parsed) if _orjson_is_canonical(parsed) else None
    assert _sorted_if_canonical(parsed) == expected


def test_a_payload_nested_deeper_than_orjson_writes_is_left_to_the_model() -> None:
    deep: dict = {}
    inner = deep
    for _ in range(300):
        inner["a"] = {}
        inner = inner["a"]
    assert _sorted_if_canonical(deep) is None


def test_fact_keys_are_every_field_of_the_kind_but_envelope_payload_and_digest() -> None:
    for kind in _DUMP_IS_RECORD:
        fields = set(EVENT_KINDS[kind].model_fields)
        assert set(_FACT_KEYS[kind]) == fields - set(_ENVELOPE) - {"payload", "payload_sha256"}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([
    {"kind": "message", "text": "t", "intent": "plan"},
    {"kind": "file_edit", "path": "a.py", "edit_kind": "rename", "new_path": "b.py"},
    {"kind": "file_read", "path": "a.py"},
    {"kind": "command", "command": "pytest -q", "exit_code": 1},
    {"kind": "test_run", "command": "pytest", "passed": 3, "failed": 1},
]), st.dictionaries(st.sampled_from(["stage", "ts", "parent_seq"]), st.none(), max_size=3), _PAYLOADS)
def test_a_row_from_the_parsed_line_is_the_row_from_the_model(fields: dict, nulls: dict, payload: dict) -> None:
    """Whatever the payload holds and whichever members are null, the row built from the parsed
    line is the row built from the validated model alone."""
    record = {"run_id": "r", "seq": 1, "event_id": "e", "actor": "agent", **fields, **nulls,
              "payload": orjson.loads(json.dumps(payload, ensure_ascii=False))}
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()  # mostly orjson's own bytes
    event, parsed, _ = _validated("x.jsonl", 1, line)
    assert parsed is not None and parsed["kind"] in _DUMP_IS_RECORD
    assert prepare_row(event, parsed) == prepare_row(event)
