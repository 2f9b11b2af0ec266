"""Score, re-score and verify stored runs.

Scoring is a pure function per run. :func:`score_runs` scores in this process; spreading
the map over workers or a cluster is :mod:`procgrade.engine.parallel_scoring`'s (one writer,
run order, the same bytes). ``verify`` recomputes every stored score from the stored log prefix and the
stored rule set and compares bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from procgrade.engine import cyclic_gc
from procgrade.engine.canonical import canonical_json
from procgrade.engine.errors import ProcgradeError, StoreError
from procgrade.engine.interrupts import deferred_interrupt
from procgrade.engine.scoring import RunScorer, ScoreDocument, StoredForm, score_document, score_run
from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore, StoredScore
from procgrade.engine.version import __version__ as ENGINE_VERSION
from procgrade.rules.identity import ruleset_document, ruleset_hash
from procgrade.rules.model import SEMANTICS, RuleSet
from procgrade.rules.monitor import Finding, RunMonitor

__all__ = ["ScoreOutcome", "Drift", "StoredForm", "ANSWERS", "score_batch", "score_runs", "verify_scores",
           "ruleset_from_body", "compute_score", "run_findings"]


@dataclass(frozen=True)
class ScoreOutcome:
    document: ScoreDocument
    written: bool


@dataclass(frozen=True)
class Drift:
    run_id: str
    ruleset_hash: str
    reason: str


def compute_score(store: EventStore, ruleset: RuleSet, run_id: str, *, digest: str | None = None,
                  upto: int | None = None) -> ScoreDocument:
    """The score document of ``run_id`` (or of its first ``upto`` events) under ``ruleset``."""
    info = store.run(run_id)
    count = info.event_count if upto is None else upto
    batches = ScoreStore(store).fact_batches(run_id, upto=upto)
    head = info.head_hash if upto is None or upto == info.event_count else store.hash_at(run_id, upto - 1)
    return score_run(ruleset, batches, run_id=run_id, head_hash=head or "", event_count=count,
                     ruleset_digest=digest)


#: What :func:`score_batch` gives per run, by name: the :class:`RunScorer` method that makes it.
ANSWERS = {"document": RunScorer.score, "canonical": RunScorer.canonical, "stored": RunScorer.stored}


def score_batch(facts: Any, runs: Sequence[tuple[str, str, int]],
                scorers: RunScorer | Mapping[str, RunScorer], *, answer: str = "document") -> list[Any]:
    """What ``scorers`` (one for all, or one per run id) make of ``runs`` ((run id, head hash,
    event count), each run once, scored at that length), in that order: per run its
    :class:`ScoreDocument` (``answer="document"``); its (canonical bytes, process score), what a
    worker sends back to be compared (``"canonical"``); or its :class:`StoredForm`, what a
    worker sends back to be stored (``"stored"``).

    ``facts`` is a store's or an archive's fact reader: one with ``facts_of_runs`` reads the
    batch in a few queries (many runs per query), any other run by run (``fact_batches``).
    Either way each run's document is what scoring it alone gives, to the byte."""
    heads = {run_id: (head, count) for run_id, head, count in runs}
    if len(heads) != len(runs):
        raise ValueError("score_batch: a run appears twice in one batch")
    method = ANSWERS.get(answer)
    if method is None:
        raise ValueError(f"score_batch: no answer {answer!r}; one of {', '.join(ANSWERS)}")
    if isinstance(scorers, RunScorer):
        make = method.__get__(scorers)  # one scorer: its method bound once, not looked up per run

        def made(run_id: str, batches: Any, head: str, count: int) -> Any:
            return make(batches, run_id=run_id, head_hash=head, event_count=count)
    else:
        def made(run_id: str, batches: Any, head: str, count: int) -> Any:
            return method(scorers[run_id], batches, run_id=run_id, head_hash=head, event_count=count)

    documents: dict[str, Any] = {}
    read_many = getattr(facts, "facts_of_runs", None)
    if read_many is not None:
        for run_id, rows in read_many([(run_id, count) for run_id, _, count in runs]):
            head, count = heads[run_id]
            documents[run_id] = made(run_id, (rows,), head, count)
    out = []
    for run_id, head, count in runs:
        document = documents.pop(run_id, None)
        if document is None:  # a run without events (or a reader of one run at a time)
            if read_many is not None and count > 0:  # the reader found none of its events
                raise StoreError(f"run {run_id}: holds no events, though {count} were asked for; "
                                 "run `procgrade verify-log`", run_id=run_id)
            document = made(run_id, () if read_many is not None else facts.fact_batches(run_id, upto=count),
                            head, count)
        out.append(document)
    return out


def run_findings(store: EventStore, ruleset: RuleSet, run_id: str) -> tuple[dict[str, list[Finding]], ScoreDocument]:
    """Every finding of every rule on the run's whole log (each activation with its verdict and the
    seqs that decided it), and the score document made from them: what ``explain`` and the
    report show. Not stored."""
    info = store.run(run_id)
    monitor = RunMonitor(ruleset)
    for rows in ScoreStore(store).fact_batches(run_id):
        monitor.feed(rows)
    findings = monitor.finish()
    document = score_document(ruleset, findings, run_id=run_id, head_hash=info.head_hash or "",
                              event_count=info.event_count, model_events=monitor.model_events)
    return findings, document


def score_runs(
    store: EventStore, run_ids: Sequence[str], ruleset: RuleSet, *,
    progress: Callable[[str], None] | None = None,
) -> list[ScoreOutcome]:
    """Score ``run_ids`` (sorted) in this process and store the documents; identical re-scores are
    no-ops. Scoring on several workers, or a cluster, goes through :mod:`procgrade.engine.parallel_scoring`."""
    scores = ScoreStore(store)
    digest = ruleset_hash(ruleset)
    body = canonical_json(ruleset_document(ruleset)).decode()
    scores.save_ruleset(digest, ruleset.name, ruleset.version, body)
    ordered = sorted(set(run_ids))
    held = {info.run_id: info for info in store.runs()} if len(ordered) > 50 else {}
    infos = [held.get(run_id) or store.run(run_id) for run_id in ordered]  # unknown runs fail before any work
    scorer = RunScorer(ruleset, digest)
    outcomes: list[ScoreOutcome] = []
    with cyclic_gc.paused():
        for chunk in _batches([(info.run_id, info.head_hash or "", info.event_count) for info in infos]):
            documents = score_batch(scores, chunk, scorer)
            # A Ctrl-C waits for the commit and its report: "N stored" is then exact.
            with deferred_interrupt():
                written = scores.append_scores([stored_score(document) for document in documents])
                for document, new in zip(documents, written):
                    outcomes.append(ScoreOutcome(document, new))
                    if progress is not None:
                        progress(document.run_id)
    return outcomes


#: A batch of runs scored and stored together in this process: one read query, one commit.
BATCH_EVENTS = 50_000


def _batches(heads: list[tuple[str, str, int]]) -> list[list[tuple[str, str, int]]]:
    """Consecutive batches of about :data:`BATCH_EVENTS` events and at most ``RUNS_PER_QUERY`` runs."""
    from procgrade.engine.store.scores import RUNS_PER_QUERY

    batches: list[list[tuple[str, str, int]]] = []
    current: list[tuple[str, str, int]] = []
    weight = 0
    for head in heads:
        current.append(head)
        weight += max(1, head[2])
        if weight >= BATCH_EVENTS or len(current) >= RUNS_PER_QUERY:
            batches.append(current)
            current, weight = [], 0
    if current:
        batches.append(current)
    return batches


def stored_score(document: ScoreDocument) -> StoredScore:
    """The row that stores ``document``."""
    return StoredScore(document.run_id, document.ruleset_hash, document.engine_version, document.run_head_hash,
                       document.run_event_count, _score_text(document), document.canonical.decode(),
                       document.sha256)


def _score_text(document: ScoreDocument) -> str | None:
    value = document.process_score
    return None if value is None else f"{value.numerator}/{value.denominator}"


def ruleset_from_body(body: str) -> RuleSet:
    """Rebuild a stored rule set (its canonical body) for this engine."""
    document = orjson.loads(body)
    pair = (document.get("semantics_version"), document.get("extractor_version"))
    semantics = next((number for number, version in SEMANTICS.items() if (version, version) == pair), None)
    if semantics is None:
        raise ProcgradeError(
            f"rule set {document.get('name')} was stored under template semantics "
            f"{pair[0]} and extractor {pair[1]}; this engine evaluates "
            + ", ".join(f"semantics {v} with extractor {v}" for v in SEMANTICS.values()))
    return RuleSet.model_validate({**{k: document[k] for k in ("name", "version", "description", "rules")},
                                   "semantics": semantics})


def verify_scores(store: EventStore, run_ids: Sequence[str] | None = None) -> tuple[int, list[Drift]]:
    """Recompute every stored score (of ``run_ids``, default all); return (checked, drifts)."""
    scores = ScoreStore(store)
    wanted = None if run_ids is None else set(run_ids)
    if wanted is not None:
        for run_id in sorted(wanted):
            store.run(run_id)
    checked, drifts = 0, []
    rulesets: dict[str, RuleSet | str] = {}
    for stored in scores.scores():
        if wanted is not None and stored.run_id not in wanted:
            continue
        checked += 1
        if stored.engine_version != ENGINE_VERSION:
            drifts.append(Drift(stored.run_id, stored.ruleset_hash,
                                f"scored by engine {stored.engine_version}; this is {ENGINE_VERSION}: "
                                "verify with that version"))
            continue
        if stored.ruleset_hash not in rulesets:
            try:
                rebuilt = ruleset_from_body(scores.ruleset_body(stored.ruleset_hash))
                if ruleset_hash(rebuilt) != stored.ruleset_hash:
                    raise ProcgradeError("the stored rule set no longer hashes to its key")
                rulesets[stored.ruleset_hash] = rebuilt
            except ProcgradeError as exc:
                rulesets[stored.ruleset_hash] = str(exc)
        ruleset = rulesets[stored.ruleset_hash]
        if isinstance(ruleset, str):
            drifts.append(Drift(stored.run_id, stored.ruleset_hash, ruleset))
            continue
        document = compute_score(store, ruleset, stored.run_id, digest=stored.ruleset_hash,
                                 upto=stored.run_event_count)
        if document.canonical.decode() != stored.document:
            reason = "recomputed document differs from the stored bytes"
            if document.run_head_hash != stored.run_head_hash:
                reason = "the run's log changed: its head at the scored length differs"
            drifts.append(Drift(stored.run_id, stored.ruleset_hash, reason))
        elif document.sha256 != stored.document_sha256:
            drifts.append(Drift(stored.run_id, stored.ruleset_hash, "stored document_sha256 does not match its bytes"))
    return checked, drifts
