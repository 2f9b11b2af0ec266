"""Live recording: a harness logs each action as it happens, to a local store or a collector.

``record(run_id, target, harness=..., model=...)`` opens a run and returns a
:class:`Recorder` with one method per event kind (``rec.command(...)``,
``rec.file_edit(...)``, ...; each takes the kind's own fields, validated by the
same models and with the same located errors as ingest) and context managers
that emit start and end events (``stage``, ``job``, ``delegate``).

Why it is safe to retry and to share a run:
- seqs are gapless: the recorder numbers events from the run's head;
- event ids are deterministic: ``<seq>-<sha256 of the event without its id>``, so a
  retried append is the same event and the store treats it as a no-op;
- the store gives each seq to one writer: an append at a seq another writer already
  filled is refused (:class:`RecordConflictError`, with the run's head), and
  :meth:`Recorder.resync` renumbers the unsent events after that head.

The target is an :class:`~procgrade.engine.store.EventStore`, a database URL, or an
``http(s)://`` collector URL (``procgrade serve``), for which a token is needed.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import inspect
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from pydantic import ValidationError

from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.engine.errors import InputError, ProcgradeError, SeqConflictError, StoreError
from procgrade.engine.events import ACTOR_PATTERN, EVENT_KINDS, Event, event_adapter

__all__ = ["record", "Recorder", "RecordConflictError", "Head", "StoreTransport", "event_id_for", "utc_clock"]

_ENVELOPE = ("run_id", "seq", "event_id", "kind")


@dataclass(frozen=True)
class Head:
    """Where a run stands: how many events it holds, the last one's chain hash, sealed or not."""

    event_count: int
    head_hash: str | None
    sealed: bool = False


class RecordConflictError(SeqConflictError):
    """Another writer holds the seq this append wanted; ``head`` says where the run now stands."""

    def __init__(self, message: str, *, run_id: str, seq: int | None, head: Head) -> None:
        super().__init__(message, run_id=run_id, seq=seq)
        self.head = head


class TransientError(ProcgradeError):
    """The collector could not be reached or answered 5xx: the same append may be retried."""


class Transport(Protocol):
    def head(self, run_id: str) -> Head: ...

    def append(self, run_id: str, events: list[Event], expected_seq: int) -> Head: ...

    def seal(self, run_id: str) -> Head: ...

    def close(self) -> None: ...


def utc_clock() -> str:
    """The current UTC time, RFC 3339 with milliseconds (informational, never used for order)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def event_id_for(fields: dict[str, Any]) -> str:
    """``<seq>-<first 32 hex of sha256(canonical JSON of the event without event_id)>``: the same
    event always gets the same id (retries are no-ops), different events never share one."""
    body = {k: v for k, v in fields.items() if k != "event_id" and v is not None}
    return f"{fields['seq']}-{sha256_hex(canonical_json(body))[:32]}"


class StoreTransport:
    """Appends straight into an :class:`EventStore` (one transaction per batch)."""

    def __init__(self, store: Any, *, owned: bool = False) -> None:
        self.store, self.owned = store, owned

    def head(self, run_id: str) -> Head:
        from procgrade.engine.errors import UnknownRunError

        try:
            info = self.store.run(run_id)
        except UnknownRunError:
            return Head(0, None)
        return Head(info.event_count, info.head_hash, info.sealed)

    def append(self, run_id: str, events: list[Event], expected_seq: int) -> Head:
        from procgrade.engine.errors import ConflictError

        try:
            result = self.store.append(run_id, events)
        except ConflictError as exc:
            head = self.head(run_id)
            raise RecordConflictError(f"{exc} (the run now holds {head.event_count} events)",
                                      run_id=run_id, seq=exc.seq, head=head) from exc
        return Head(result.event_count, result.head_hash, result.sealed)

    def seal(self, run_id: str) -> Head:
        info = self.store.seal(run_id)
        return Head(info.event_count, info.head_hash, info.sealed)

    def close(self) -> None:
        if self.owned:
            self.store.close()


class Recorder:
    """Records one run. Use as a context manager (or call :meth:`close`) so buffered events are sent.

    Every event method sends the event at once (``batch_size=1``, the default: a crash loses
    nothing); with a larger ``batch_size`` events are sent when that many are waiting, on
    :meth:`flush`, and on close. A transient failure (collector down) is retried with the same
    events for up to ``retry_for`` seconds, then raised with the events still waiting.
    """

    def __init__(self, run_id: str, transport: Transport, *, clock: Callable[[], str | None] | None = utc_clock,
                 actor: str = "agent", batch_size: int = 1, retry_for: float = 60.0) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.run_id, self.transport, self.clock = run_id, transport, clock
        self.actor, self.batch_size, self.retry_for = actor, batch_size, retry_for
        head = self._retrying(lambda: transport.head(run_id))
        self.next_seq = head.event_count
        self.head = head
        self.pending: list[Event] = []
        self._stages: list[int] = []

    # --- the generic path ---------------------------------------------------------------------

    def emit(self, kind: str, /, **fields: Any) -> Event:
        """Validate and record one event of ``kind`` at the next seq; return it."""
        if kind not in EVENT_KINDS:
            raise InputError("recorder", f"seq {self.next_seq}", "kind", f"unknown kind {kind!r} (known: {sorted(EVENT_KINDS)})")
        for name in _ENVELOPE:
            if name in fields:
                raise InputError("recorder", f"seq {self.next_seq}", name, "set by the recorder, not by the caller")
        fields.setdefault("actor", self.actor)
        if self._stages and "stage" not in fields:
            fields["stage"] = self._stages[-1]
        if "ts" not in fields and self.clock is not None:
            fields["ts"] = self.clock()
        event = self._build(kind, self.next_seq, fields)
        self.pending.append(event)
        self.next_seq += 1
        if len(self.pending) >= self.batch_size:
            self.flush()
        return event

    def _build(self, kind: str, seq: int, fields: dict[str, Any]) -> Event:
        body = {"run_id": self.run_id, "seq": seq, "kind": kind,
                **{k: v for k, v in fields.items() if v is not None}}
        try:
            orjson.dumps(body)
        except TypeError as exc:
            raise InputError("recorder", f"seq {seq}", None, f"not JSON: {exc}") from None
        body["event_id"] = "pending"
        try:
            event = event_adapter().validate_json(orjson.dumps(body))
        except ValidationError as exc:
            from procgrade.engine.native import _input_error

            raise _input_error("recorder", f"seq {seq}", exc) from None  # type: ignore[arg-type]
        # The id is a digest of the validated event as stored, so anyone can recompute it from the log.
        return event.model_copy(update={"event_id": event_id_for(event.model_dump(mode="json", exclude_none=True))})

    def flush(self) -> Head:
        """Send the waiting events as one all-or-nothing batch (retrying transient failures)."""
        if not self.pending:
            return self.head
        batch = list(self.pending)
        self.head = self._retrying(lambda: self.transport.append(self.run_id, batch, batch[0].seq))
        self.pending.clear()
        return self.head

    def _retrying(self, call: Callable[[], Head]) -> Head:
        """``call()``, repeated with backoff while the collector is unreachable, up to ``retry_for`` s.
        Safe because every call is idempotent (reads, appends of identical events, sealing)."""
        deadline = time.monotonic() + self.retry_for
        delay = 0.05
        while True:
            try:
                return call()
            except TransientError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def resync(self) -> Head:
        """After a :class:`RecordConflictError`: read the run's head and renumber the unsent
        events after it (their ids follow; a ``parent_seq`` pointing into them moves along)."""
        head = self._retrying(lambda: self.transport.head(self.run_id))
        old_first = self.pending[0].seq if self.pending else self.next_seq
        shift = head.event_count - old_first
        renumbered: list[Event] = []
        for event in self.pending:
            fields = event.model_dump(mode="json", exclude_none=True)
            for name in _ENVELOPE:
                fields.pop(name, None)
            parent = fields.get("parent_seq")
            if parent is not None and parent >= old_first:
                fields["parent_seq"] = parent + shift
            renumbered.append(self._build(event.kind, event.seq + shift, fields))
        self.pending = renumbered
        self.next_seq = head.event_count + len(renumbered)
        self.head = head
        return head

    # --- structure ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def stage(self, index: int, *, title: str | None = None, spec_ref: str | None = None,
              actor: str = "harness") -> Iterator[Event]:
        """``stage_started`` now, ``stage_ended`` (completed, or failed on an exception) at the end;
        events recorded inside carry ``stage=index``."""
        started = self.emit("stage_started", stage=index, title=title, spec_ref=spec_ref, actor=actor)
        self._stages.append(index)
        status = "completed"
        try:
            yield started
        except BaseException:
            status = "failed"
            raise
        finally:
            self._stages.pop()
            self.emit("stage_ended", stage=index, status=status, actor=actor, parent_seq=started.seq)

    @contextlib.contextmanager
    def job(self, job_id: str, *, command: str | None = None, output_path: str | None = None,
            **envelope: Any) -> Iterator["JobHandle"]:
        """``job_started`` now, ``job_finished`` at the end with what :meth:`JobHandle.finish` set."""
        started = self.emit("job_started", job_id=job_id, command=command, output_path=output_path, **envelope)
        handle = JobHandle(self, job_id, started.seq, output_path)
        try:
            yield handle
        finally:
            self.emit("job_finished", job_id=job_id, exit_code=handle.exit_code, output_path=handle.output_path,
                      output_sha256=handle.output_sha256, parent_seq=started.seq, **envelope)

    @contextlib.contextmanager
    def delegate(self, worker_id: str, instruction: str, *, context: list[str] | None = None,
                 **envelope: Any) -> Iterator["DelegationHandle"]:
        """``delegation`` now, the worker's ``worker_report`` at the end (actor ``subagent:<worker_id>``):
        the text :meth:`DelegationHandle.report` gave, or a failure naming the exception."""
        started = self.emit("delegation", worker_id=worker_id, instruction=instruction, context=context, **envelope)
        handle = DelegationHandle()
        try:
            yield handle
        except BaseException as exc:
            if handle.text is None:
                handle.report(f"{type(exc).__name__}: {exc}", status="failure")
            raise
        finally:
            if handle.text is None:
                handle.report("", status=None)
            self.emit("worker_report", worker_id=worker_id, text=handle.text, status=handle.status,
                      evidence=handle.evidence, actor=_worker_actor(worker_id), parent_seq=started.seq)

    # --- the end ------------------------------------------------------------------------------

    def end(self, status: str | None = "completed", reason: str | None = None, *, seal: bool = False,
            actor: str = "harness") -> Head:
        """Record ``run_ended``, send everything, and optionally seal the run."""
        self.emit("run_ended", status=status, reason=reason, actor=actor)
        head = self.flush()
        if seal:
            head = self.head = self._retrying(lambda: self.transport.seal(self.run_id))
        return head

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.transport.close()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JobHandle:
    def __init__(self, recorder: Recorder, job_id: str, seq: int, output_path: str | None) -> None:
        self._recorder, self.job_id, self.seq = recorder, job_id, seq
        self.exit_code: int | None = None
        self.output_path, self.output_sha256 = output_path, None

    def poll(self, status: str | None = None, **envelope: Any) -> Event:
        return self._recorder.emit("job_polled", job_id=self.job_id, status=status, parent_seq=self.seq, **envelope)

    def finish(self, exit_code: int | None = None, *, output_path: str | None = None,
               output_sha256: str | None = None) -> None:
        self.exit_code = exit_code
        self.output_path = output_path or self.output_path
        self.output_sha256 = output_sha256


class DelegationHandle:
    def __init__(self) -> None:
        self.text: str | None = None
        self.status: str | None = None
        self.evidence: list[str] | None = None

    def report(self, text: str, *, status: str | None = "success", evidence: list[str] | None = None) -> None:
        self.text, self.status, self.evidence = text, status, evidence


def _worker_actor(worker_id: str) -> str:
    import re

    actor = f"subagent:{worker_id}"
    return actor if re.match(ACTOR_PATTERN, actor) else "harness"


# --- one method per event kind, with the kind's own fields as its signature ----------------------

def _kind_method(kind: str, model: type[Event]) -> Callable[..., Event]:
    def method(self: Recorder, **fields: Any) -> Event:
        return self.emit(kind, **fields)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for name, info in model.model_fields.items():
        if name in _ENVELOPE:
            continue
        default = inspect.Parameter.empty if info.is_required() and name != "actor" else None
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=info.annotation))
    method.__signature__ = inspect.Signature(params, return_annotation=model)  # type: ignore[attr-defined]
    method.__name__ = method.__qualname__ = kind
    method.__doc__ = f"Record a ``{kind}`` event ({model.__name__}): {(model.__doc__ or '').strip()}"
    return method


for _kind, _model in sorted(EVENT_KINDS.items()):
    if _kind != "run_started" and not hasattr(Recorder, _kind):
        setattr(Recorder, _kind, _kind_method(_kind, _model))


# --- opening a run ----------------------------------------------------------------------------

def record(run_id: str, target: Any, *, harness: str, harness_version: str | None = None,
           harness_commit: str | None = None, model: str | None = None, task_id: str | None = None,
           model_settings: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
           token: str | None = None, resume: bool = False, clock: Callable[[], str | None] | None = utc_clock,
           actor: str = "agent", batch_size: int = 1, retry_for: float = 60.0, **run_started: Any) -> Recorder:
    """Open run ``run_id`` for recording at ``target`` (an EventStore, a database URL, or a
    collector's ``http(s)://`` URL with ``token``) and record its ``run_started``.

    A run that already holds events is refused unless ``resume`` is set (then recording
    continues after its head, and no new ``run_started`` is written). Further ``run_started``
    fields (``dataset_hash``, ``image``) go in ``run_started``. A recorder is for one thread:
    give each concurrent writer its own (they share the run safely through the store).
    """
    transport = open_transport(target, token=token, retry_for=retry_for)
    try:
        recorder = Recorder(run_id, transport, clock=clock, actor=actor, batch_size=batch_size, retry_for=retry_for)
        if recorder.next_seq == 0:
            info = {"name": harness, "version": harness_version, "commit": harness_commit}
            recorder.emit("run_started", actor="harness", model=model, task_id=task_id, model_settings=model_settings,
                          labels=labels, harness={k: v for k, v in info.items() if v is not None}, **run_started)
            recorder.flush()
        elif not resume:
            raise StoreError(f"run {run_id} already holds {recorder.next_seq} events: pass resume=True to continue it",
                             run_id=run_id)
    except BaseException:
        transport.close()
        raise
    return recorder


def open_transport(target: Any, *, token: str | None = None, retry_for: float = 60.0) -> Transport:
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        from procgrade.engine.collector_client import HttpTransport

        if not token:
            raise ProcgradeError("a collector URL needs a token (procgrade token create)")
        return HttpTransport(target, token)
    if isinstance(target, str):
        from procgrade.engine.store import open_store

        return StoreTransport(open_store(target, create=True), owned=True)
    return StoreTransport(target)
