"""Score, re-score and verify many runs through an executor, from the store or an archive.

Workers only compute: each task reads its chunk of runs' fact rows (from the store at a
URL, or from a columnar archive) and returns the canonical score documents. The driver is
the one writer: it stores the documents in run order as tasks come back in task order, so
the rows written never depend on the executor, the chunking, the worker count or on a
retried task (a retry's result replaces the lost one; it is never seen twice). Stores
are idempotent besides: an identical document already stored is a no-op.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import orjson

from procgrade.engine import cyclic_gc
from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.engine.errors import InputError, ProcgradeError
from procgrade.engine.interrupts import deferred_interrupt
from procgrade.engine.executors import Executor, LocalExecutor, plan_chunks
from procgrade.engine.rescoring import Drift, ScoreOutcome, ruleset_from_body, score_batch
from procgrade.engine.scoring import RunScorer, ScoreDocument
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.store.score_templates import ScoreFill, ScoreTemplate
from procgrade.engine.store.scores import ScoreStore, StoredScore
from procgrade.engine.version import __version__ as ENGINE_VERSION
from procgrade.rules.identity import ruleset_document, ruleset_hash
from procgrade.rules.model import RuleSet

__all__ = ["FactSource", "score_many", "verify_many", "verify_archive_many"]

#: (run id, head hash, event count): what a task needs to know of a run it scores.
RunHead = tuple[str, str, int]


@dataclass(frozen=True)
class FactSource:
    """Where workers read fact rows: ``store`` (a database URL) or ``archive`` (a path or URL)."""

    kind: str
    location: str

    def open(self) -> Any:
        if self.kind == "store":
            return _StoreFacts(open_store(self.location))
        if self.kind == "archive":
            from procgrade.engine.archive import open_archive

            return open_archive(self.location)
        raise ValueError(self.kind)


class _StoreFacts:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.scores = ScoreStore(store)

    def fact_batches(self, run_id: str, *, upto: int | None = None) -> Any:
        return self.scores.fact_batches(run_id, upto=upto)

    def facts_of_runs(self, runs: Sequence[tuple[str, int | None]]) -> Any:
        return self.scores.facts_of_runs(runs)

    def hash_at(self, run_id: str, seq: int) -> str | None:
        return self.store.hash_at(run_id, seq)

    def close(self) -> None:
        self.store.close()


class _DriverFacts(_StoreFacts):
    """The driver's own open store, read by tasks that run in the driver's process."""

    def close(self) -> None:  # the driver's store stays open: the driver closes it
        pass


@dataclass(frozen=True)
class _DriverSource:
    """A :class:`FactSource` for tasks run in the driver's process: they read through the driver's
    open store rather than each opening the database anew (about 9 ms an open, checks included)."""

    store: EventStore

    def open(self) -> Any:
        return _DriverFacts(self.store)


def store_source(store: EventStore) -> FactSource:
    return FactSource("store", store.url)


# --- tasks (run in workers) --------------------------------------------------------------------


_SCORERS = threading.local()


def scorer_for(body: str, digest: str | None = None) -> RunScorer:
    """The scorer of a stored rule-set body, made once per body in this thread (a worker scores
    many tasks of one rule set: it parses, hashes and compiles the set once)."""
    cache = getattr(_SCORERS, "by_body", None)
    if cache is None:
        cache = _SCORERS.by_body = {}
    scorer = cache.get(body)
    if scorer is None:
        if len(cache) >= 8:
            cache.clear()
        ruleset = ruleset_from_body(body)
        scorer = cache[body] = RunScorer(ruleset, digest or ruleset_hash(ruleset))
    return scorer


def score_task(source: FactSource, body: str,
               runs: list[RunHead]) -> list[tuple[str, str, int, str | None, str, bytes | None, bytes | None]]:
    """Score documents of ``runs`` (each at its given length): per run what the store keeps of it
    (:class:`procgrade.engine.scoring.StoredForm`): its process score as text, its sha256, and
    the values that fill the rule set's template into it (joined by U+001F) or, where there are
    none, the document's canonical bytes. The chunk's facts are read many runs per query."""
    scorer = scorer_for(body)
    facts = source.open()
    try:
        with cyclic_gc.paused():  # in a worker process too
            forms = score_batch(facts, runs, scorer, answer="stored")
        return [(run_id, head, count, _score_text(process), digest, values, document)
                for (run_id, head, count), (process, digest, values, document) in zip(runs, forms)]
    finally:
        facts.close()


def verify_task(source: FactSource, bodies: dict[str, str], items: list[tuple[str, str, int]]) -> list[bytes]:
    """Recompute stored scores: ``items`` are (run id, rule-set hash, scored length)."""
    facts = source.open()
    scorers = {digest: scorer_for(body, digest) for digest, body in bodies.items()}
    try:
        heads = [(run_id, (facts.hash_at(run_id, count - 1) if count else "") or "", count)
                 for run_id, _, count in items]
        with cyclic_gc.paused():
            if len({run_id for run_id, _, _ in items}) == len(items):  # each run once: read them in batches
                by_run = {run_id: scorers[digest] for run_id, digest, _ in items}
                return [document for document, _ in score_batch(facts, heads, by_run, answer="canonical")]
            return [score_batch(facts, [head], scorers[digest], answer="canonical")[0][0]
                    for head, (_, digest, _) in zip(heads, items)]
    finally:
        facts.close()


def verify_archive_task(location: str, run_ids: list[str]) -> list[tuple[str, int, list[str]]]:
    from procgrade.engine.archive import open_archive, verify_archived_run

    archive = open_archive(location)
    return [(r.run_id, r.events_checked, r.problems)
            for r in (verify_archived_run(archive, run_id) for run_id in run_ids)]


# --- drivers (the one writer) ------------------------------------------------------------------


def document_from_canonical(canonical: bytes, digest: str, *, run_id: str | None = None,
                            head: str | None = None, count: int | None = None,
                            process: str | None = None) -> ScoreDocument:
    """Rebuild a worker's document in the driver (the canonical bytes travel unchanged). Given the
    run's head, length and process score as the worker sent them, the bytes are not parsed here
    (the document parses them if its body is ever asked for)."""
    if run_id is None or head is None or count is None:
        body = orjson.loads(canonical)
        score = body["process_score"]
        value = None if score is None else Fraction(int(score["num"]), int(score["den"]))
        return ScoreDocument(body["run_id"], digest, ENGINE_VERSION, body["run_head_hash"], body["run_event_count"],
                             value, body, canonical)
    numerator, _, denominator = (process or "").partition("/")
    value = None if process is None else Fraction(int(numerator), int(denominator))
    return ScoreDocument(run_id, digest, ENGINE_VERSION, head, count, value, None, canonical)


def score_many(store: EventStore, run_ids: Sequence[str] | None, ruleset: RuleSet, *,
               executor: Executor | None = None, archive: str | None = None,
               on_events: Callable[[int], None] | None = None,
               on_plan: Callable[[int, int], None] | None = None,
               on_outcome: Callable[[ScoreOutcome], None] | None = None,
               collect: bool = True) -> list[ScoreOutcome]:
    """Score ``run_ids`` (default: every run of the archive, or of the store) and store the
    documents in run order. With ``archive``, fact rows come from the archive; the store
    must hold each run at the archived head (the scores table refers to its runs).

    ``on_plan(runs, events)`` is told the work before it starts; ``on_events(n)`` as it is done;
    ``on_outcome`` each stored document, in run order. ``collect=False`` returns nothing, so the
    driver's memory does not grow with the archive (a parsed document is ~90 KB)."""
    executor = executor or LocalExecutor()
    scores = ScoreStore(store)
    digest = ruleset_hash(ruleset)
    body = canonical_json(ruleset_document(ruleset)).decode()
    heads = _archive_heads(store, archive, run_ids) if archive else _store_heads(store, run_ids)
    scores.save_ruleset(digest, ruleset.name, ruleset.version, body)
    source = FactSource("archive", archive) if archive else store_source(store)
    weights = [max(1, count) for _, _, count in heads]
    if on_plan is not None:
        on_plan(len(heads), sum(count for _, _, count in heads))
    executor = executor.for_events(sum(weights))
    chunks = plan_chunks(heads, weights, executor.workers)
    if archive is None and type(executor) is LocalExecutor and (executor.workers == 1 or len(chunks) < 2):
        source = _DriverSource(store)  # type: ignore[assignment]  # the tasks run here, in order
    tasks = [(source, body, chunk) for chunk in chunks]
    chunk_weights = [sum(max(1, count) for _, _, count in chunk) for chunk in chunks]
    outcomes: list[ScoreOutcome] = []
    told = on_outcome is not None or collect
    template = ScoreTemplate.of(scorer_for(body, digest).template_text)  # the workers' template: same body, same text
    with cyclic_gc.paused():  # rows, documents: no cycles (engine/cyclic_gc.py)
        for results in executor.map(score_task, tasks, weights=chunk_weights, on_done=on_events):
            # a document that values stand for is not made here: the writer stores the values
            rows = [StoredScore(run_id, digest, ENGINE_VERSION, head, count, process,
                                None if document is None else document.decode(), sha256,
                                None if values is None else ScoreFill(template, values.decode()))
                    for run_id, head, count, process, sha256, values, document in results]
            # a Ctrl-C waits until the task's documents are stored and told: what the caller counts is
            # exactly what the store holds
            with deferred_interrupt():
                written = store_scores(store, rows)
                if not told:  # nobody is told the documents: none is made
                    continue
                for row, (run_id, head, count, process, *_), new in zip(rows, results, written):
                    document = document_from_canonical(row.whole().encode(), digest, run_id=run_id, head=head,
                                                       count=count, process=process)
                    outcome = ScoreOutcome(document, new)
                    if on_outcome is not None:
                        on_outcome(outcome)
                    if collect:
                        outcomes.append(outcome)
    return outcomes


def store_scores(store: EventStore, rows: Sequence[StoredScore]) -> list[bool]:
    """Store a task's documents in one transaction (:meth:`ScoreStore.append_scores`): per row,
    whether it was new; a held key with other bytes is :class:`ScoreDriftError`, nothing written."""
    return ScoreStore(store).append_scores(rows)


def _score_text(value: Fraction | None) -> str | None:
    return None if value is None else f"{value.numerator}/{value.denominator}"


def _store_heads(store: EventStore, run_ids: Sequence[str] | None) -> list[RunHead]:
    """Every run's head in one query (unknown runs fail before any work)."""
    if run_ids is None:
        return store.run_heads()
    wanted = sorted(set(run_ids))
    held = {info.run_id: info for info in store.runs(wanted)}
    infos = [held.get(run_id) or store.run(run_id) for run_id in wanted]  # store.run names an unknown one
    return [(info.run_id, info.head_hash or "", info.event_count) for info in infos]


def _archive_heads(store: EventStore, location: str, run_ids: Sequence[str] | None) -> list[RunHead]:
    from procgrade.engine.archive import open_archive

    archive = open_archive(location)
    runs = archive.runs if run_ids is None else [archive.run(run_id) for run_id in sorted(set(run_ids))]
    held = {info.run_id: info for info in store.runs()}  # one query, not one per run
    heads = []
    for run in runs:
        info = held.get(run.run_id) or store.run(run.run_id)  # an unknown run: UnknownRunError
        if info.sealed_head_hash != run.head_hash:
            raise InputError(location, None, f"run {run.run_id}", f"archived at head {run.head_hash[:16]}, "
                             f"the store holds it at {str(info.sealed_head_hash or info.head_hash)[:16]}")
        heads.append((run.run_id, run.head_hash, run.event_count))
    return heads


def verify_many(store: EventStore, run_ids: Sequence[str] | None = None, *, executor: Executor | None = None,
                archive: str | None = None,
                on_events: Callable[[int], None] | None = None) -> tuple[int, list[Drift]]:
    """Recompute every stored score (of ``run_ids``, default all) through ``executor`` and
    byte-compare with the stored document; return (checked, drifts) in the store's order."""
    executor = executor or LocalExecutor()
    scores = ScoreStore(store)
    wanted = None if run_ids is None else set(run_ids)
    if wanted is not None:
        for run_id in sorted(wanted):
            store.run(run_id)
    stored = [s for s in scores.scores() if wanted is None or s.run_id in wanted]
    drifts: dict[int, Drift] = {}
    bodies: dict[str, str] = {}
    problems: dict[str, str] = {}
    todo: list[tuple[int, StoredScore]] = []
    for i, score in enumerate(stored):
        if score.engine_version != ENGINE_VERSION:
            drifts[i] = Drift(score.run_id, score.ruleset_hash, f"scored by engine {score.engine_version}; this is "
                              f"{ENGINE_VERSION}: verify with that version")
            continue
        if score.ruleset_hash not in bodies and score.ruleset_hash not in problems:
            try:
                body = scores.ruleset_body(score.ruleset_hash)
                if ruleset_hash(ruleset_from_body(body)) != score.ruleset_hash:
                    raise ProcgradeError("the stored rule set no longer hashes to its key")
                bodies[score.ruleset_hash] = body
            except ProcgradeError as exc:
                problems[score.ruleset_hash] = str(exc)
        if score.ruleset_hash in problems:
            drifts[i] = Drift(score.run_id, score.ruleset_hash, problems[score.ruleset_hash])
            continue
        todo.append((i, score))
    source = FactSource("archive", archive) if archive else store_source(store)
    weights = [max(1, s.run_event_count) for _, s in todo]
    executor = executor.for_events(sum(weights))
    chunks = plan_chunks(todo, weights, executor.workers)
    tasks = [(source, {s.ruleset_hash: bodies[s.ruleset_hash] for _, s in chunk},
              [(s.run_id, s.ruleset_hash, s.run_event_count) for _, s in chunk]) for chunk in chunks]
    chunk_weights = [sum(max(1, s.run_event_count) for _, s in chunk) for chunk in chunks]
    for chunk, results in zip(chunks, executor.map(verify_task, tasks, weights=chunk_weights, on_done=on_events)):
        for (i, score), canonical in zip(chunk, results):
            if canonical.decode() != score.document:
                reason = "recomputed document differs from the stored bytes"
                if orjson.loads(canonical)["run_head_hash"] != score.run_head_hash:
                    reason = "the run's log changed: its head at the scored length differs"
                drifts[i] = Drift(score.run_id, score.ruleset_hash, reason)
            elif sha256_hex(canonical) != score.document_sha256:
                drifts[i] = Drift(score.run_id, score.ruleset_hash, "stored document_sha256 does not match its bytes")
    return len(stored), [drifts[i] for i in sorted(drifts)]


def verify_archive_many(location: str, run_ids: Sequence[str] | None = None, *, executor: Executor | None = None,
                        on_events: Callable[[int], None] | None = None,
                        on_plan: Callable[[int, int], None] | None = None) -> list[tuple[str, int, list[str]]]:
    """``archive verify`` through an executor: (run id, events checked, problems) per run, in run order."""
    from procgrade.engine.archive import open_archive

    executor = executor or LocalExecutor()
    archive = open_archive(location)
    runs = archive.runs if run_ids is None else [archive.run(run_id) for run_id in sorted(set(run_ids))]
    if on_plan is not None:
        on_plan(len(runs), sum(run.event_count for run in runs))
    weights = [max(1, run.event_count) for run in runs]
    # Verification rebuilds each event (~20x the cost of scoring it): smaller chunks do as well,
    # and workers pay for less work (counted as ten times its events, as the chunks are).
    from procgrade.engine import executors

    executor = executor.for_events(10 * sum(weights))
    chunks = plan_chunks([run.run_id for run in runs], weights, executor.workers,
                         min_weight=max(1, executors.MIN_TASK_EVENTS // 10))
    chunk_weights = [sum(max(1, archive.run(r).event_count) for r in chunk) for chunk in chunks]
    out: list[tuple[str, int, list[str]]] = []
    for results in executor.map(verify_archive_task, [(location, chunk) for chunk in chunks],
                                weights=chunk_weights, on_done=on_events):
        out.extend(results)
    return out
