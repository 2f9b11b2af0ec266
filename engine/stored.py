"""The stored form of an event (one table row) and the mapping to and from the model.

Kept apart from the domain model, as eventsourcing keeps ``StoredEvent`` apart
from its events: the row carries the envelope, the typed fact columns for rules,
the kind's own fields as canonical JSON, the canonical payload with its sha256,
and the chain hash. :func:`to_event` rebuilds the exact model from a row, which
is what export and ``verify-log`` stand on.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from procgrade.engine.canonical import canonical_and_faithful, canonical_json, canonical_json_of_typed, faithful_json, parse_json, sha256_hex
from procgrade.engine.chain import link
from procgrade.engine.events import Event, event_adapter
from procgrade.engine.facts import FACT_COLUMNS, extract_facts

__all__ = ["STORED_COLUMNS", "DERIVED_COLUMNS", "FACT_SLICE", "IN_STAGE", "StoredEvent", "to_stored", "to_event", "header_bytes"]

_ENVELOPE = ("run_id", "seq", "event_id", "ts", "kind", "actor", "stage", "parent_seq")
_TRAILER = ("facts", "payload", "payload_sha256", "hash")
#: Columns derived from the run rather than the event alone (see procgrade.engine.stages).
DERIVED_COLUMNS: tuple[str, ...] = ("in_stage",)
#: Column order of the events table as the bulk paths write it.
STORED_COLUMNS: tuple[str, ...] = _ENVELOPE + tuple(FACT_COLUMNS) + DERIVED_COLUMNS + _TRAILER
_envelope_of = operator.attrgetter(*_ENVELOPE)
_NOT_FACTS = frozenset(_ENVELOPE) | {"payload_sha256"}
#: Where the typed fact columns sit in a stored row.
FACT_SLICE = slice(len(_ENVELOPE), len(_ENVELOPE) + len(FACT_COLUMNS))
#: Where the derived stage sits in a stored row.
IN_STAGE = len(_ENVELOPE) + len(FACT_COLUMNS)


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


def _header(event: Event) -> tuple[dict[str, Any], bytes, str]:
    """(header dict, payload bytes to store, payload sha256) of ``event``.

    The sha256 is over the payload's canonical JSON. What is stored is that same
    text when it is faithful (no floats, which canonical JSON may turn into ints),
    else a deterministic type-faithful dump, so reading it back loses nothing.
    """
    header = event.model_dump(exclude_none=True)
    canonical, stored = canonical_and_faithful(header.pop("payload"))
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
    header, payload, payload_sha = _header(event)
    event_hash = link(prev_hash, _canonical(event, header))
    fact_fields = {k: v for k, v in header.items() if k not in _NOT_FACTS}
    facts = faithful_json(fact_fields) if event.FREE_FORM_FIELDS else canonical_json_of_typed(fact_fields)
    return StoredEvent(
        _envelope_of(event) + extract_facts(event) + (in_stage, facts.decode(), payload.decode(), payload_sha, event_hash)
    )


def to_event(row: tuple[Any, ...]) -> Event:
    """Rebuild the validated model from a stored row (raises pydantic.ValidationError)."""
    record: dict[str, Any] = {name: value for name, value in zip(_ENVELOPE, row) if value is not None}
    record.update(parse_json(row[-4]))
    record["payload"] = parse_json(row[-3])
    return event_adapter().validate_python(record)
