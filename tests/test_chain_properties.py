"""Property tests of the hash chain over generated runs (see builders.h_runs for the domain)."""

from __future__ import annotations

import contextlib
import json
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import h_runs, h_text, models, reference_hashes, reference_head
from databases import pg_schema_url, sqlite_url
from procgrade.engine.ingest import ingest_native
from procgrade.engine.native import dump_native
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.stored import STORED_COLUMNS

SETTINGS = settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HASH = STORED_COLUMNS.index("hash")


@contextlib.contextmanager
def sqlite_store() -> Iterator[tuple[EventStore, Path]]:
    with tempfile.TemporaryDirectory(prefix="procgrade-prop-") as tmp:
        store = open_store(sqlite_url(Path(tmp)), create=True)
        try:
            yield store, Path(tmp)
        finally:
            store.close()


@contextlib.contextmanager
def pg_store() -> Iterator[EventStore]:
    with pg_schema_url() as url:
        store = open_store(url, create=True)
        try:
            yield store
        finally:
            store.close()


def hashes(store: EventStore, run_id: str) -> list[str]:
    return [row[HASH] for row in store.stored_events(run_id)]


def shuffled_line(event: dict[str, Any], rng: random.Random) -> bytes:
    """The same JSON object with keys in another order, other spacing and escaping."""
    def shuffle(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            rng.shuffle(items)
            return {k: shuffle(v) for k, v in items}
        if isinstance(value, list):
            return [shuffle(v) for v in value]
        return value
    return json.dumps(shuffle(event), ensure_ascii=rng.random() < 0.5,
                      separators=rng.choice([(",", ":"), (", ", ": "), (" ,", " :  ")])).encode()


# (i) the head is a function of content only ------------------------------------------------------


@SETTINGS
@given(run=h_runs(), seed=st.integers(0, 2**32 - 1))
def test_head_depends_on_content_only(run: list[dict], seed: int) -> None:
    rng = random.Random(seed)
    with sqlite_store() as (one, tmp1), sqlite_store() as (two, tmp2):
        plain = tmp1 / "plain.jsonl"
        plain.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in run))
        other = tmp2 / "other.jsonl"
        other.write_bytes(b"\r\n".join(shuffled_line(e, rng) for e in run) + b"\n\n")
        [a] = ingest_native(one, [plain])
        [b] = ingest_native(two, [other])
        assert a.result.head_hash == b.result.head_hash == reference_head(run)
        assert hashes(one, a.run_id) == hashes(two, a.run_id) == reference_hashes(run)
        assert list(one.stored_events(a.run_id)) == list(two.stored_events(a.run_id))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=h_runs(max_size=8))
def test_head_is_the_same_on_postgresql(run: list[dict]) -> None:
    events = models(run)
    run_id = run[0]["run_id"]
    with sqlite_store() as (lite, _), pg_store() as pg:
        a = lite.append(run_id, events)
        b = pg.append(run_id, events)
        assert a.head_hash == b.head_hash == reference_head(run)
        assert list(lite.stored_events(run_id)) == list(pg.stored_events(run_id))
        # compared as canonical lines: JSON numbers are doubles, so a float such as 3.6e16 may
        # come back as the int with the same canonical digits
        assert b"".join(dump_native(pg.events(run_id))) == b"".join(dump_native(events))


# (ii) changing one event changes its hash and every later one -----------------------------------

MUTATIONS = ["payload", "event_id", "actor", "ts", "text-field", "drop-optional"]


def mutate(event: dict[str, Any], how: str, value: str) -> dict[str, Any] | None:
    """A different valid event, or None when ``how`` does not apply to ``event``."""
    changed = dict(event)
    if how == "payload":
        changed["payload"] = {**event.get("payload", {}), "\x00mutated": value}
    elif how == "event_id":
        changed["event_id"] = event["event_id"] + "\u2202"
    elif how == "actor":
        if event["kind"] == "correction":  # its actor decides whether it opens a round: not a mere relabel
            return None
        changed["actor"] = "system" if event["actor"] != "system" else "agent"
    elif how == "ts":
        changed["ts"] = "1999-12-31T23:59:59Z" if event.get("ts") != "1999-12-31T23:59:59Z" else "2000-01-01T00:00:00Z"
    elif how == "text-field":
        for key in ("text", "command", "claim", "instruction", "reason", "title", "summary", "model"):
            if key in event:
                changed[key] = event[key] + value + "!"
                break
        else:
            return None
    elif how == "drop-optional":
        for key in ("payload", "ts", "stage", "parent_seq", "exit_code", "intent", "status", "model"):
            if key in event and not (key == "stage" and event["kind"] in ("stage_started", "stage_ended")) \
                    and not (key == "payload" and not event["payload"]):
                del changed[key]
                break
        else:
            return None
    return changed


@SETTINGS
@given(data=st.data(), run=h_runs(min_size=1, max_size=10), how=st.sampled_from(MUTATIONS), value=h_text)
def test_changing_one_event_changes_its_hash_and_all_later_ones(data: st.DataObject, run: list[dict],
                                                                how: str, value: str) -> None:
    index = data.draw(st.integers(0, len(run) - 1), label="index")
    changed = mutate(run[index], how, value)
    if changed is None:
        changed = mutate(run[index], "payload", value)
    forged = run[:index] + [changed] + run[index + 1:]
    assert forged[index] != run[index]
    run_id = run[0]["run_id"]
    with sqlite_store() as (one, _), sqlite_store() as (two, _):
        one.append(run_id, models(run))
        two.append(run_id, models(forged))
        original, altered = hashes(one, run_id), hashes(two, run_id)
    assert original[:index] == altered[:index]
    assert all(o != a for o, a in zip(original[index:], altered[index:]))
    assert len(set(altered[index:]) & set(original)) == 0


# (iii) one append or two: the same chain ---------------------------------------------------------


@SETTINGS
@given(data=st.data(), run=h_runs(min_size=2, max_size=12))
def test_split_appends_give_the_same_head(data: st.DataObject, run: list[dict]) -> None:
    split = data.draw(st.integers(1, len(run) - 1), label="split")
    overlap = data.draw(st.integers(0, split), label="overlap")  # the second batch may repeat stored events
    events = models(run)
    run_id = run[0]["run_id"]
    with sqlite_store() as (whole, _), sqlite_store() as (parts, tmp):
        once = whole.append(run_id, events)
        first = parts.append(run_id, events[:split])
        second = parts.append(run_id, events[split - overlap:])
        assert (first.appended, second.appended, second.already_stored) == (split, len(run) - split, overlap)
        assert second.head_hash == once.head_hash == reference_head(run)
        assert list(parts.stored_events(run_id)) == list(whole.stored_events(run_id))
        # and through native ingest of two files
        with sqlite_store() as (files, tmp3):
            a = tmp3 / "a.jsonl"
            a.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in run[:split]))
            b = tmp3 / "b.jsonl"
            b.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in run[split - overlap:]))
            ingest_native(files, [a])
            [r] = ingest_native(files, [b])
            assert r.result.head_hash == once.head_hash


# (iv) export -> re-ingest preserves the head -------------------------------------------------------


@SETTINGS
@given(run=h_runs())
def test_export_reingest_round_trip(run: list[dict]) -> None:
    run_id = run[0]["run_id"]
    with sqlite_store() as (source, tmp), sqlite_store() as (target, _):
        head = source.append(run_id, models(run)).head_hash
        exported = b"".join(dump_native(source.events(run_id)))
        path = tmp / "export.jsonl"
        path.write_bytes(exported)
        [report] = ingest_native(target, [path])
        assert report.result.head_hash == head == reference_head(run)
        assert hashes(target, run_id) == hashes(source, run_id)
        # compared as canonical lines (whether export keeps a float's type is
        # test_store.test_export_then_ingest_stores_the_same_rows)
        assert b"".join(dump_native(target.events(run_id))) == exported


# (v) what is stored reads back as it went in ----------------------------------------------------


def _same_types(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_types(x, y) for x, y in zip(a, b))
    return a == b


h_payload_values = st.recursive(
    st.integers(-10**6, 10**6).map(float) | st.integers(-(2**63), 2**64) | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans() | st.none() | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["a", "x", "n"]) | st.text(max_size=3),
                                                                       children, max_size=3),
    max_leaves=8,
)


@SETTINGS
@given(run=h_runs(max_size=4), payload=st.dictionaries(st.sampled_from(["a", "x", "n"]) | st.text(max_size=3),
                                                      h_payload_values, max_size=4))
def test_stored_events_read_back_type_faithfully(run: list[dict], payload: dict) -> None:
    """The store keeps payloads (and free-form fields) type-faithful: a float stays a float."""
    run = [dict(run[0], payload=payload)] + run[1:]
    events = models(run)
    run_id = run[0]["run_id"]
    with sqlite_store() as (store, _):
        store.append(run_id, events)
        back = list(store.events(run_id))
    for original, read in zip(events, back):
        assert _same_types(read.model_dump(), original.model_dump()), (original, read)
