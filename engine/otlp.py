"""OpenTelemetry GenAI spans (OTLP/HTTP, JSON encoding) mapped to procgrade events.

A harness already instrumented with the GenAI semantic conventions can export its
traces to the collector (``POST /v1/traces``) instead of calling the recorder. The
run is the resource attribute ``procgrade.run_id`` (required). Each span becomes:

============================================  =====================================================
span                                          event
============================================  =====================================================
``gen_ai.operation.name`` = ``execute_tool``  ``command``: ``gen_ai.tool.call.arguments`` (else the
                                              tool name) as the command; status ERROR gives exit
                                              code 1, OK 0, unset none; duration from the span
``invoke_agent``                              ``delegation`` (worker ``gen_ai.agent.name`` or id,
                                              instruction ``gen_ai.agent.description`` or the span
                                              name) then ``worker_report`` (status from the span)
``chat``, ``text_completion``,                ``message`` (the text of ``gen_ai.output.messages``
``generate_content``                          when given as a string, else empty)
anything else                                 ``source_record`` (record type: the span name)
============================================  =====================================================

Every event keeps its span whole as its payload, is ``actor`` ``agent`` (``subagent:<name>``
for a worker report), has id ``otlp-<traceId>-<spanId>`` (``-report`` for the report) and
``parent_seq`` of its parent span when that is in the same export. OTLP has no sequence
numbers: spans of one export take the run's next seqs in order of start time, then span id
(the only order on offer); spans the run already holds (a retried export) are skipped. A run
with no events first gets a ``run_started`` (harness: the resource's ``service.name``).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from procgrade.engine.errors import InputError
from procgrade.engine.events import Event, event_adapter

__all__ = ["run_id_of", "spans_to_events", "append_export", "OTLP_SOURCE"]

OTLP_SOURCE = "otlp"
_CHAT = {"chat", "text_completion", "generate_content"}


def _value(raw: Any) -> Any:
    if not isinstance(raw, dict) or len(raw) != 1:
        return None
    (kind, value), = raw.items()
    if kind == "intValue":
        return int(value)
    if kind in ("stringValue", "boolValue", "doubleValue"):
        return value
    return orjson.dumps(value).decode()


def _attributes(items: Any, where: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise InputError(OTLP_SOURCE, None, f"{where}.attributes", "must be a list")
    out = {}
    for n, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise InputError(OTLP_SOURCE, None, f"{where}.attributes[{n}]", "must be {key, value}")
        out[item["key"]] = _value(item.get("value"))
    return out


def _list(parent: Any, key: str, where: str) -> list[Any]:
    value = parent.get(key, []) if isinstance(parent, dict) else None
    if not isinstance(value, list):
        raise InputError(OTLP_SOURCE, None, f"{where}.{key}", "must be a list")
    return value


def run_id_of(body: Any) -> str:
    """The one run an export is for (every resource must name the same ``procgrade.run_id``)."""
    run_ids = set()
    for r, resource_spans in enumerate(_list(body, "resourceSpans", "")):
        where = f"resourceSpans[{r}]"
        attributes = _attributes((resource_spans.get("resource") or {}).get("attributes"), f"{where}.resource")
        run_id = attributes.get("procgrade.run_id")
        if not isinstance(run_id, str):
            raise InputError(OTLP_SOURCE, None, f"{where}.resource", "needs the string attribute procgrade.run_id")
        run_ids.add(run_id)
    if len(run_ids) != 1:
        raise InputError(OTLP_SOURCE, None, "resourceSpans", f"an export holds the spans of exactly one run (got {len(run_ids)})")
    return run_ids.pop()


def spans_to_events(body: Any, run_id: str, head: int, held_ids: set[str]) -> list[Event]:
    """The events for an export's spans, from seq ``head`` on, leaving out ``held_ids``."""
    spans: list[tuple[int, str, str, dict[str, Any], dict[str, Any], str]] = []
    service = None
    for r, resource_spans in enumerate(_list(body, "resourceSpans", "")):
        resource = _attributes((resource_spans.get("resource") or {}).get("attributes"), f"resourceSpans[{r}].resource")
        service = service or resource.get("service.name")
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", f"resourceSpans[{r}]")):
            for n, span in enumerate(_list(scope_spans, "spans", f"resourceSpans[{r}].scopeSpans[{s}]")):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                if not isinstance(span, dict) or not all(isinstance(span.get(k), str) and span[k] for k in ("traceId", "spanId", "name")):
                    raise InputError(OTLP_SOURCE, None, where, "a span needs traceId, spanId and name")
                try:
                    start = int(span.get("startTimeUnixNano", 0))
                except (TypeError, ValueError):
                    raise InputError(OTLP_SOURCE, None, f"{where}.startTimeUnixNano", "not an integer") from None
                spans.append((start, span["spanId"], where, span, _attributes(span.get("attributes"), where), span["traceId"]))
    spans.sort(key=lambda item: (item[0], item[1]))
    events: list[Event] = []
    seq_of_span: dict[str, int] = {}

    def add(where: str, fields: dict[str, Any]) -> None:
        if fields["event_id"] in held_ids:
            return
        fields = {"run_id": run_id, "seq": head + len(events), **{k: v for k, v in fields.items() if v is not None}}
        try:
            events.append(event_adapter().validate_json(orjson.dumps(fields)))
        except ValidationError as exc:
            from procgrade.engine.native import _input_error

            raise _input_error(OTLP_SOURCE, where, exc) from None  # type: ignore[arg-type]

    if head == 0:
        add("resourceSpans", {"event_id": f"otlp-run-started-{run_id}"[:200], "kind": "run_started", "actor": "harness",
                              "harness": {"name": service if isinstance(service, str) and service else "otlp"},
                              "model": next((a.get("gen_ai.request.model") for *_, a, _t in spans
                                             if isinstance(a.get("gen_ai.request.model"), str)), None)})
    for start, span_id, where, span, attrs, trace_id in spans:
        base = f"otlp-{trace_id}-{span_id}"
        parent = seq_of_span.get(span.get("parentSpanId") or "")
        common = {"actor": "agent", "payload": span, "parent_seq": parent}
        operation = attrs.get("gen_ai.operation.name")
        status = (span.get("status") or {}).get("code")
        failed = status in (2, "STATUS_CODE_ERROR")
        ok = status in (1, "STATUS_CODE_OK")
        if base not in held_ids:
            seq_of_span[span_id] = head + len(events)
        if operation == "execute_tool":
            command = attrs.get("gen_ai.tool.call.arguments") or attrs.get("gen_ai.tool.name") or span["name"]
            end = span.get("endTimeUnixNano")
            duration = (int(end) - start) // 1_000_000 if end is not None and int(end) >= start else None
            add(where, {"event_id": base, "kind": "command", "command": str(command),
                        "exit_code": 1 if failed else 0 if ok else None, "duration_ms": duration, **common})
        elif operation == "invoke_agent":
            worker = str(attrs.get("gen_ai.agent.name") or attrs.get("gen_ai.agent.id") or span["name"])
            add(where, {"event_id": base, "kind": "delegation", "worker_id": worker,
                        "instruction": str(attrs.get("gen_ai.agent.description") or span["name"]), **common})
            from procgrade.engine.recorder import _worker_actor

            add(where, {"event_id": f"{base}-report", "kind": "worker_report", "worker_id": worker, "text": "",
                        "status": "failure" if failed else "success" if ok else None, "payload": {},
                        "actor": _worker_actor(worker), "parent_seq": seq_of_span.get(span_id)})
        elif operation in _CHAT:
            text = attrs.get("gen_ai.output.messages")
            add(where, {"event_id": base, "kind": "message", "text": text if isinstance(text, str) else "",
                        "intent": "other", **common})
        else:
            add(where, {"event_id": base, "kind": "source_record", "record_type": span["name"], **common})
    return events


def append_export(store: Any, body: Any, run_id: str, max_events: int) -> tuple[int, int, Any]:
    """Append an export's new spans to the run: (appended, skipped as already held, the store's result).
    Another writer taking the next seqs meanwhile makes it map again from the new head."""
    from sqlalchemy import select

    from procgrade.engine.errors import SeqConflictError, UnknownRunError
    from procgrade.engine.store.schema import events as events_table

    for _attempt in range(5):
        try:
            head = store.run(run_id).event_count
        except UnknownRunError:
            head = 0
        candidates = [e.event_id for e in spans_to_events(body, run_id, head, set())]
        if len(candidates) > max_events:
            raise InputError(OTLP_SOURCE, None, "resourceSpans", f"an export maps to at most {max_events} events")
        held: set[str] = set()
        with store.engine.connect() as conn:
            for start in range(0, len(candidates), 500):
                chunk = candidates[start:start + 500]
                query = select(events_table.c.event_id).where((events_table.c.run_id == run_id)
                                                              & events_table.c.event_id.in_(chunk))
                held.update(row[0] for row in conn.execute(query))
        events = spans_to_events(body, run_id, head, held)
        if not events:
            return 0, len(held), None
        try:
            return len(events), len(held), store.append(run_id, events)
        except SeqConflictError:
            continue
    raise SeqConflictError(f"run {run_id}: other writers kept taking the next seqs; export again", run_id=run_id)
