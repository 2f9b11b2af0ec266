"""The stored form of an event (one table row) and the mapping to and from the model.

Kept apart from the domain model, as eventsourcing keeps ``StoredEvent`` apart
from its events: the row carries the envelope, the typed fact columns for rules,
the kind's own fields as canonical JSON, the canonical payload with its sha256,
and the chain hash. :func:`to_event` rebuilds the exact model from a row, which
is what export and ``verify-log`` stand on.
"""

from __future__ import annotations

import hashlib
import operator
import re
import typing
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel

from procgrade.engine.canonical import (
    _orjson_is_canonical,
    canonical_and_faithful,
    canonical_json,
    canonical_json_of_typed,
    faithful_json,
    parse_json,
    sha256_hex,
)
from procgrade.engine.chain import link
from procgrade.engine.events import EVENT_KINDS, Event, event_adapter
from procgrade.engine.facts import FACT_COLUMNS, FIELD_EXTRACTORS, extract_facts

__all__ = ["STORED_COLUMNS", "DERIVED_COLUMNS", "FACT_SLICE", "IN_STAGE", "FACTS", "StoredEvent", "to_stored",
           "to_event", "header_bytes", "prepare_row", "prepare_fields_row", "FIELDS_KINDS", "chain_rows",
           "chain_hashes"]

_ENVELOPE = ("run_id", "seq", "event_id", "ts", "kind", "actor", "stage", "parent_seq")
_TRAILER = ("facts", "payload", "payload_sha256", "hash")
#: Columns derived from the run rather than the event alone (see procgrade.engine.stages).
DERIVED_COLUMNS: tuple[str, ...] = ("in_stage",)
#: Column order of the events table as the bulk paths write it.
STORED_COLUMNS: tuple[str, ...] = _ENVELOPE + tuple(FACT_COLUMNS) + DERIVED_COLUMNS + _TRAILER
_envelope_of = operator.attrgetter(*_ENVELOPE)
_fields_envelope = operator.itemgetter(*_ENVELOPE)
_NOT_FACTS = frozenset(_ENVELOPE) | {"payload_sha256"}
#: Where the typed fact columns sit in a stored row.
FACT_SLICE = slice(len(_ENVELOPE), len(_ENVELOPE) + len(FACT_COLUMNS))
#: Where the derived stage sits in a stored row.
IN_STAGE = len(_ENVELOPE) + len(FACT_COLUMNS)
#: Where the kind's own fields (canonical or faithful JSON text) sit in a stored row.
FACTS = IN_STAGE + 1


class StoredEvent(NamedTuple):
    """One row of the events table, in :data:`STORED_COLUMNS` order (as a plain tuple)."""

    row: tuple[Any, ...]

    @property
    def seq(self) -> int:
        return self.row[1]

    @property
    def event_id(self) -> str:
        return self.row[2]

    @property
    def hash(self) -> str:
        return self.row[-1]

    @property
    def payload_sha256(self) -> str:
        return self.row[-2]


_PAYLOAD = frozenset({"payload"})


def _header(event: Event) -> tuple[dict[str, Any], bytes, str]:
    """(header dict, payload bytes to store, payload sha256) of ``event``.

    The sha256 is over the payload's canonical JSON. What is stored is that same
    text when it is faithful (no floats, which canonical JSON may turn into ints),
    else a deterministic type-faithful dump, so reading it back loses nothing.
    """
    header = event.model_dump(exclude_none=True, exclude=_PAYLOAD)  # the payload is read as it is, not copied
    canonical, stored = canonical_and_faithful(event.payload)
    header["payload_sha256"] = payload_sha = sha256_hex(canonical)
    return header, stored, payload_sha


def _canonical(event: Event, fields: dict[str, Any]) -> bytes:
    """Canonical JSON of some of ``event``'s typed fields (a scan only where free-form JSON sits)."""
    if event.FREE_FORM_FIELDS:
        return canonical_json(fields)
    return canonical_json_of_typed(fields)


def header_bytes(event: Event) -> bytes:
    """Canonical bytes of the event with its payload replaced by the payload's sha256."""
    return _canonical(event, _header(event)[0])


def to_stored(event: Event, prev_hash: str, in_stage: int | None = None) -> StoredEvent:
    """The row for ``event`` chained after ``prev_hash``; ``in_stage`` is its derived stage
    (:mod:`procgrade.engine.stages`; not part of the hash, which covers the event as given)."""
    row = prepare_row(event)
    row[IN_STAGE] = in_stage
    row[-1] = link(prev_hash, row[-1])
    return StoredEvent(tuple(row))


def prepare_row(event: Event, record: dict[str, Any] | None = None, canonical: bool | None = None) -> list[Any]:
    """Everything of ``event``'s row that depends on the event alone, as a list in
    :data:`STORED_COLUMNS` order: ``in_stage`` is left None and the hash slot holds the
    canonical header bytes, which :func:`chain_rows` turns into the chain hash (the two
    things that depend on the events before it). Work that can run anywhere, in any order
    (ingest's workers do it), apart from the sequential part.

    ``record`` is the event's JSON object as parsed from its line (orjson), when the caller
    has it: for kinds whose model dump is that object minus its null members (no defaults
    to fill in, no nested models, no free-form fields), the header is built from it
    directly instead of dumping the model, with the very same bytes. ``canonical`` is what
    :func:`procgrade.engine.canonical._orjson_is_canonical` says of ``record`` when the caller
    knows it already (native ingest's line check finds it out); a valid event of these kinds
    holds floats and odd keys only in its payload, so it is what it says of the payload.
    """
    if record is not None and record["kind"] in _DUMP_IS_RECORD:
        return _record_row(record, canonical, _envelope_of(event), extract_facts(event), event.payload)
    header, stored, payload_sha = _header(event)
    header_canonical = _canonical(event, header)
    fact_fields = {k: v for k, v in header.items() if k not in _NOT_FACTS}
    facts = faithful_json(fact_fields) if event.FREE_FORM_FIELDS else canonical_json_of_typed(fact_fields)
    return [*_envelope_of(event), *extract_facts(event), None, facts.decode(), stored.decode(), payload_sha,
            header_canonical]


def prepare_fields_row(fields: dict[str, Any], record: dict[str, Any], canonical: bool | None = None,
                       nulls: bool = True) -> list[Any]:
    """:func:`prepare_row` of a line of a kind :data:`FIELDS_KINDS` holds, from its fields as
    validated without building the model (``fields``: every field of the kind's model, None
    where not given, ``payload`` the very dict of ``record``) and its JSON object as parsed
    (``record``): the same row, byte for byte (tests/test_fields_rows.py). Not for a line whose
    parse may hold a float its text does not (``canonical`` False: :func:`prepare_row` then reads
    the payload from the model validated from the text). ``nulls``: whether ``record`` may hold
    a null (False when the line's text holds no ``null``, which spares looking)."""
    kind = record["kind"]
    keys, values_of = _FACT_VALUES[kind]
    values = values_of(fields)
    fact_fields = dict(zip(keys, values)) if None not in values else {
        key: value for key, value in zip(keys, values) if value is not None}
    return _record_row(record, canonical, _fields_envelope(fields), FIELD_EXTRACTORS[kind](fields), fields["payload"],
                       fact_fields, nulls)


def _record_row(record: dict[str, Any], canonical: bool | None, envelope: tuple[Any, ...],
                facts_columns: tuple[Any, ...], exact_payload: dict[str, Any],
                fact_fields: dict[str, Any] | None = None, nulls: bool = True) -> list[Any]:
    """The row of an event of a :data:`_DUMP_IS_RECORD` kind from its parsed line (see
    :func:`prepare_row`), its envelope and fact columns, and its payload's values as validated
    (which decide where the payload holds floats); ``fact_fields`` and ``nulls`` as the caller
    knows them (else taken from ``record``, which is looked at for nulls)."""
    header = record.copy()
    payload = header.pop("payload", _NO_PAYLOAD)
    header.pop("payload_sha256", None)  # the header holds the digest computed here
    if nulls and None in header.values():
        header = {k: v for k, v in header.items() if v is not None}
    if canonical is None:
        payload_bytes = _sorted_if_canonical(payload)
    else:
        payload_bytes = canonical_json_of_typed(payload) if canonical else None
    if payload_bytes is not None:  # orjson's sorted bytes are RFC 8785 here
        stored = payload_bytes
    else:  # floats (maybe integers beyond 64 bits orjson read as floats): the validated values decide
        payload_bytes, stored = canonical_and_faithful(exact_payload)
    payload_sha = hashlib.sha256(payload_bytes).hexdigest()
    if fact_fields is None:
        fact_fields = {k: header[k] for k in _FACT_KEYS[header["kind"]] if k in header}
    header["payload_sha256"] = payload_sha
    # canonical_json_of_typed, its one call inlined (two Python frames less a line); sorted keys:
    # the insertion order is no matter
    header_canonical = _dumps(header, option=_SORTED_KEYS)
    facts = _dumps(fact_fields, option=_SORTED_KEYS)
    return [*envelope, *facts_columns, None, facts.decode(), stored.decode(), payload_sha, header_canonical]


_dumps = orjson.dumps
_SORTED_KEYS = orjson.OPT_SORT_KEYS


def chain_rows(rows: Sequence[list[Any]], prev_hash: str, stage_of: Callable[[list[Any]], int | None]) -> str:
    """Finish prepared rows in place, in order: the derived stage (``stage_of(row)``) and the
    chain hash after ``prev_hash``; returns the last hash. The sequential part of a row."""
    for row in rows:
        row[IN_STAGE] = stage_of(row)
    return chain_hashes(rows, prev_hash)


def chain_hashes(rows: Sequence[list[Any]], prev_hash: str) -> str:
    """The hash part of :func:`chain_rows` alone: each row's canonical header (its hash slot)
    becomes its chain hash after ``prev_hash``; returns the last hash."""
    prev = bytes.fromhex(prev_hash)
    sha256 = hashlib.sha256
    for row in rows:
        prev = sha256(prev + row[-1]).digest()
        row[-1] = prev.hex()
    return prev.hex()


_NO_PAYLOAD: dict[str, Any] = {}


def _sorted_if_canonical(payload: dict[str, Any]) -> bytes | None:
    """orjson's sorted bytes of a payload parsed by orjson when they are its RFC 8785 form (no
    float, no key outside the Basic Multilingual Plane), else None. Decided from those bytes
    where they show it: ASCII bytes hold no such key, and orjson writes every float with a digit
    followed by ``.``, ``e`` or ``E`` (``1.0``, ``1e+16``, ``5e-324``), so bytes without one hold no
    float. Bytes that show one (a string such as ``"v1.2"`` may) are settled by walking the value."""
    try:
        payload_bytes = _dumps(payload, option=_SORTED_KEYS)  # canonical_json_of_typed, inlined
    except orjson.JSONEncodeError:  # nested deeper than orjson writes: the walk and the model decide
        return None
    if payload_bytes.isascii() and _FLOAT_TEXT.search(payload_bytes) is None:
        return payload_bytes
    return payload_bytes if _orjson_is_canonical(payload) else None


#: What every float looks like in orjson's output; absent, the bytes hold none.
_FLOAT_TEXT = re.compile(rb"[0-9][.eE]")


def _models_in(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_models_in(arg) for arg in typing.get_args(annotation))


def _dump_is_record(cls: type[Event]) -> bool:
    """Is ``model_dump(exclude_none=True)`` of a valid ``cls`` its JSON object minus null
    members? True unless a field has a default other than None (the dump adds it), holds
    a nested model (the dump leaves out its null members too), or is free-form JSON (where
    orjson and pydantic may read a number differently)."""
    if cls.FREE_FORM_FIELDS:
        return False
    for name, info in cls.model_fields.items():
        if name in ("kind", "payload"):
            continue
        if info.default_factory is not None or (not info.is_required() and info.default is not None):
            return False
        if _models_in(info.annotation):
            return False
    return True


#: Kinds whose header :func:`prepare_row` builds from the parsed line.
_DUMP_IS_RECORD = frozenset(name for name, cls in EVENT_KINDS.items() if _dump_is_record(cls))
#: Kinds whose row :func:`prepare_fields_row` builds from the fields of a line: those whose header
#: is built from the parsed line and whose fact columns are read from named fields.
FIELDS_KINDS = frozenset(kind for kind in _DUMP_IS_RECORD if kind in FIELD_EXTRACTORS)
#: The fields of each such kind that go into its row's ``facts`` (all but the envelope, the
#: payload and its digest): looked up by name, not found by testing every key of the line.
_FACT_KEYS = {name: tuple(field for field in EVENT_KINDS[name].model_fields
                          if field not in _NOT_FACTS and field != "payload") for name in _DUMP_IS_RECORD}


def _values_of(keys: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A function giving the values of ``keys`` in a mapping holding them all, as a tuple."""
    if len(keys) == 1:
        key = keys[0]
        return lambda mapping: (mapping[key],)
    return operator.itemgetter(*keys) if keys else lambda mapping: ()


#: Per kind of :data:`FIELDS_KINDS`: its fact keys and the function giving their values from the
#: kind's validated fields (every field there, None where not given).
_FACT_VALUES = {name: (_FACT_KEYS[name], _values_of(_FACT_KEYS[name])) for name in FIELDS_KINDS}


def to_event(row: tuple[Any, ...]) -> Event:
    """Rebuild the validated model from a stored row (raises pydantic.ValidationError)."""
    record: dict[str, Any] = {name: value for name, value in zip(_ENVELOPE, row) if value is not None}
    record.update(parse_json(row[-4]))
    record["payload"] = parse_json(row[-3])
    return event_adapter().validate_python(record)
