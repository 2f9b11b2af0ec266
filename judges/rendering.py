"""A run as a judge reads it: one line per event, each led by its seq, within a token budget.

The view is faithful: events in seq order, each with its round, actor, kind, causation and every
typed field the store holds (never the raw source payload), so a judge can cite seqs and a person
can check each citation with ``procgrade show``. What a rubric does not let the judge see is left
out, and ``grade`` events never appear (human grades are what judges are measured against). A field
longer than :data:`FIELD_CHAR_LIMIT` is clipped with an explicit marker saying how much was cut.
Secrets redacted at ingest stay redacted (the marker passes through), and every line is passed
through the importers' redactor once more, so a native run that was never redacted sends no secret
to a judge either.

A per-round view ends where the next round starts: the judge grades round ``r`` on what had
happened by the end of ``r`` (as the Arena's human did), never with hindsight. The view's *basis*
is its last event: the chain hash there covers everything the judge could have seen, so the same
basis, rubric and parameters give the same judgment (the cache key is built on it).

A view longer than the budget is cut into chunks at event boundaries; the judge reads them in
order, carrying its notes from one chunk to the next (see :mod:`procgrade.judges.prompts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.engine.events import Event, StageStarted
from procgrade.engine.importers.redaction import redact_text
from procgrade.judges.tokens import TokenCounter

__all__ = ["FIELD_CHAR_LIMIT", "RENDERER_VERSION", "Chunk", "RunLog", "View", "read_log", "render_event", "run_rounds", "view_of"]

RENDERER_VERSION = "1"
#: Longest text of one field shown to a judge; longer text is clipped with a marker.
FIELD_CHAR_LIMIT = 4000
_ENVELOPE = {"run_id", "seq", "event_id", "ts", "kind", "actor", "stage", "parent_seq", "payload"}
_INLINE = 80


@dataclass(frozen=True)
class Chunk:
    index: int
    first_seq: int
    last_seq: int
    text: str
    tokens: int


@dataclass(frozen=True)
class View:
    """What one judgment sees: a run (or its first rounds) rendered, in chunks."""

    run_id: str
    round: int | None
    basis_seq: int
    basis_hash: str
    seqs: frozenset[int]
    chunks: tuple[Chunk, ...]
    tokenizer: str
    budget: int
    redacted: int
    clipped: int

    @property
    def digest(self) -> str:
        """sha256 of exactly the text the judge is shown (renderer version and chunk boundaries included)."""
        return sha256_hex(canonical_json({"renderer": RENDERER_VERSION, "chunks": [c.text for c in self.chunks]}))

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.chunks)


@dataclass(frozen=True)
class RunLog:
    """A run's events as read once from the store, with the chain hash of each."""

    run_id: str
    events: tuple[Event, ...]
    hashes: dict[int, str]


def _clip(text: str) -> tuple[str, bool]:
    if len(text) <= FIELD_CHAR_LIMIT:
        return text, False
    return text[:FIELD_CHAR_LIMIT] + f"…[clipped: {len(text) - FIELD_CHAR_LIMIT} more characters]", True


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return canonical_json(value).decode()


def render_event(event: Event) -> tuple[str, int, int]:
    """(the event's text, secrets redacted in it, fields clipped)."""
    head = f"[{event.seq}] {'-' if event.stage is None else f'r{event.stage}'} {event.actor} {event.kind}"
    if event.parent_seq is not None:
        head += f" (after [{event.parent_seq}])"
    fields = event.model_dump(mode="json", exclude_none=True, exclude=_ENVELOPE)
    inline, blocks, clipped = [], [], 0
    for name in sorted(fields):
        text = _value_text(fields[name])
        text, cut = _clip(text)
        clipped += cut
        if len(text) <= _INLINE and "\n" not in text:
            inline.append(f"{name}={text}")
        else:
            body = "\n".join("    " + line for line in text.split("\n"))
            blocks.append(f"  {name}:\n{body}")
    line = head + ("" if not inline else " " + " ".join(inline))
    rendered = "\n".join([line, *blocks])
    rendered, redacted = redact_text(rendered)
    return rendered, redacted, clipped


def run_rounds(log: RunLog) -> list[int]:
    """The run's rounds: the stages it opened (else the stages its events carry), in order."""
    opened = sorted({e.stage for e in log.events if isinstance(e, StageStarted)})
    if opened:
        return opened
    return sorted({e.stage for e in log.events if e.stage is not None and e.kind != "grade"})


def _round_end(log: RunLog, round_: int) -> int:
    """The last seq of ``round_``: just before the next round's stage_started, else the run's end."""
    for event in log.events:
        if isinstance(event, StageStarted) and event.stage > round_:
            return event.seq - 1
    return log.events[-1].seq


def view_of(log: RunLog, kinds: frozenset[str], counter: TokenCounter, budget: int,
            round_: int | None = None) -> View:
    """The view of ``log`` for one judgment: events of ``kinds`` (never grades), up to the end of
    ``round_`` when given, in chunks of at most ``budget`` tokens."""
    if budget < 64:
        raise ValueError(f"a token budget of {budget} cannot hold a rendered event")
    end = log.events[-1].seq if round_ is None else _round_end(log, round_)
    shown = [e for e in log.events if e.seq <= end and e.kind in kinds and e.kind != "grade"]
    if not shown:
        raise ValueError(f"run {log.run_id}: no event the rubric lets the judge see"
                         + (f" by the end of round {round_}" if round_ is not None else ""))
    lines: list[tuple[int, str, int]] = []
    redacted = clipped = 0
    for event in shown:
        text, r, c = render_event(event)
        redacted += r
        clipped += c
        tokens = counter.count(text)
        if tokens > budget:  # one event alone over the budget: cut it to fit, and say so
            keep = max(1, len(text) * (budget - 32) // tokens)
            text = text[:keep] + f"…[clipped to fit the token budget: {len(text) - keep} more characters]"
            tokens = counter.count(text)
            clipped += 1
        lines.append((event.seq, text, tokens))
    chunks: list[Chunk] = []
    current: list[tuple[int, str, int]] = []

    def close() -> None:
        text = "\n".join(t for _, t, _ in current)
        chunks.append(Chunk(len(chunks), current[0][0], current[-1][0], text, counter.count(text)))

    used = 0
    for item in lines:
        if current and used + item[2] + 1 > budget:
            close()
            current, used = [], 0
        current.append(item)
        used += item[2] + 1
    if current:
        close()
    basis = shown[-1].seq
    return View(log.run_id, round_, basis, log.hashes[basis], frozenset(e.seq for e in shown), tuple(chunks),
                counter.name, budget, redacted, clipped)


def read_log(store: Any, run_id: str) -> RunLog:
    """Every event of ``run_id`` with its chain hash, in seq order."""
    from procgrade.engine.stored import to_event

    events: list[Event] = []
    hashes: dict[int, str] = {}
    for row in store.stored_events(run_id):
        event = to_event(row)
        events.append(event)
        hashes[event.seq] = row[-1]
    return RunLog(run_id, tuple(events), hashes)

