"""Stored rule sets and score documents (append-only, like events).

A score is keyed by (run, rule-set hash, engine version, run head hash): scoring
the same inputs again is a no-op when the document's bytes agree and a
:class:`ScoreDriftError` when they do not; a new rule set or a longer run adds a
new row and never replaces an old one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any

from procgrade.engine.errors import ScoreDriftError, StoreError, UnknownRunError
from procgrade.engine.facts import FACT_COLUMNS
from procgrade.engine.store.base import EventStore
from procgrade.engine.store.score_templates import ScoreFill, ScoreTemplate, pack, unpack

__all__ = ["StoredScore", "ScoreStore", "FACT_ROW_COLUMNS"]

#: What rules read of an event, in this order (rules.predicates.ROW_COLUMNS mirrors it).
FACT_ROW_COLUMNS: tuple[str, ...] = ("seq", "kind", "actor", "stage") + tuple(FACT_COLUMNS) + ("in_stage",)
_SCORE_COLUMNS = ("run_id", "ruleset_hash", "engine_version", "run_head_hash", "run_event_count", "process_score",
                  "document", "document_sha256", "document_template")
#: Runs whose facts one query reads (bound parameters stay far below every database's limit).
RUNS_PER_QUERY = 500


@dataclass(frozen=True)
class StoredScore:
    run_id: str
    ruleset_hash: str
    engine_version: str
    run_head_hash: str
    run_event_count: int
    process_score: str | None
    #: the document whole; every score the store reads back has it. None only in a score handed to
    #: the writer as its ``fill`` alone (a re-score's: the document was hashed where it was made)
    document: str | None
    document_sha256: str
    #: the document as its rule set's template and this run's values, when the scorer made it so:
    #: the store then keeps the template once and the values in the row (engine/store/score_templates.py)
    fill: ScoreFill | None = field(default=None, compare=False, repr=False)

    def whole(self) -> str:
        """The document whole: as given, or its fill's template filled with its values."""
        if self.document is not None:
            return self.document
        if self.fill is None:
            raise ValueError(f"run {self.run_id}: a stored score needs its document or its fill")
        return unpack(self.fill.template, self.fill.values, run_id=self.run_id)


def _fewer_events(run_id: str, count: int) -> StoreError:
    """A run's facts asked for at a count above the events it holds, however the reader saw it."""
    return StoreError(f"run {run_id}: holds fewer events than the {count} asked for; run `procgrade verify-log`",
                      run_id=run_id)


class _LastRunRows:
    """The rows of a query's last run, which no run follows to show it short: running out before
    ``count`` rows raises :class:`StoreError` to whoever reads them (the caller, or the reader's
    drain). Not a generator, so a caller's ``close()`` cannot end the check early."""

    __slots__ = ("_rows", "_left", "_run_id", "_count")

    def __init__(self, rows: Iterator[tuple[Any, ...]], run_id: str, count: int) -> None:
        self._rows, self._left, self._run_id, self._count = rows, count, run_id, count

    def __iter__(self) -> "_LastRunRows":
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = next(self._rows, None)
        if row is None:
            if self._left:
                raise _fewer_events(self._run_id, self._count)
            raise StopIteration
        self._left -= 1
        return row


class ScoreStore:
    """Score-side persistence over an :class:`EventStore`'s database."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def fact_batches(self, run_id: str, *, upto: int | None = None,
                     batch: int = 20_000) -> Iterator[list[tuple[Any, ...]]]:
        """The run's typed fact rows in seq order (the first ``upto`` events, when given), in
        batches: everything rules read, with no JSON parsing."""
        param = self.store.param
        query = f"SELECT {', '.join(FACT_ROW_COLUMNS)} FROM events WHERE run_id = {param}"
        params: tuple[Any, ...] = (run_id,)
        if upto is not None:
            query += f" AND seq < {param}"
            params += (upto,)
        with self.store._reading("procgrade_fact_rows") as cursor:
            cursor.execute(query + " ORDER BY seq", params)
            while True:
                rows = cursor.fetchmany(batch)
                if not rows:
                    break
                yield rows

    def facts_of_runs(self, runs: Sequence[tuple[str, int]], *, batch: int = 20_000,
                      per_query: int = RUNS_PER_QUERY) -> Iterator[tuple[str, Iterator[tuple[Any, ...]]]]:
        """(run id, its first ``count`` fact rows in seq order) for each of ``runs`` (run id, count)
        with a count above 0, many runs per query: one query streams the rows of up to
        ``per_query`` runs ordered by run and seq, so a small run costs its rows, not a query.
        Runs come in the database's order of run ids (its collation, not necessarily the
        caller's): callers key what they make by the run id yielded. Each run's rows must be
        consumed (or dropped) before the next run is asked for.

        The rows hold :data:`FACT_ROW_COLUMNS` only: the stream is split by the counts, not by a
        run-id column read with every row (5-7% of the read). The store gives the runs' order
        (``_runs_in_key_order``: on SQLite the ids sorted, elsewhere a small query for each run's
        seq-0 row ordered by the same column); a run grown since its count was taken has its later
        rows skipped (the first of them has seq ``count``). A count above what the run holds would
        shift the next run's rows onto it: that is caught (the row after a run's slice at neither
        seq 0 nor seq ``count``, or a run's first row not at seq 0, or missing, or the last run's
        rows ending before its count) and raised as :class:`StoreError` before the reader ends."""
        upto = {run_id: count for run_id, count in runs if count > 0}
        ids = list(upto)
        param = self.store.param
        columns = ", ".join(FACT_ROW_COLUMNS)
        for start in range(0, len(ids), per_query):
            part = ids[start:start + per_query]
            where = f"run_id IN ({', '.join([param] * len(part))})"
            order = self.store._runs_in_key_order(part)
            with self.store._reading("procgrade_facts_of_runs") as cursor:
                cursor.execute(f"SELECT {columns} FROM events WHERE {where} ORDER BY run_id, seq", part)
                stream = chain.from_iterable(iter(lambda: cursor.fetchmany(batch), []))
                following = next(stream, None)  # the row after the last run's rows: the next run's first
                for run_id in order:
                    if following is None or following[0] != 0:
                        raise StoreError(f"run {run_id}: its events do not start at seq 0 where the database "
                                         "ordered them: a count exceeds the events stored, or the database "
                                         "orders run ids inconsistently; run `procgrade verify-log`", run_id=run_id)
                    rows = chain((following,), islice(stream, upto[run_id] - 1))
                    if run_id is order[-1]:
                        rows = _LastRunRows(rows, run_id, upto[run_id])
                    yield run_id, rows
                    deque(rows, maxlen=0)  # what the caller left
                    following = next(stream, None)
                    if following is not None and following[0] not in (0, upto[run_id]):  # ran into the next run
                        raise _fewer_events(run_id, upto[run_id])
                    while following is not None and following[0] != 0:  # rows appended since the count
                        following = next(stream, None)

    def fact_rows(self, run_id: str, *, upto: int | None = None) -> Iterator[tuple[Any, ...]]:
        """The run's typed fact rows in seq order, one by one."""
        for rows in self.fact_batches(run_id, upto=upto):
            yield from rows

    def save_ruleset(self, ruleset_hash: str, name: str, version: int, body: str) -> None:
        """Store a rule set once: concurrent savers of the same set all end cleanly (the store's
        write lock serialises them; a set already there is left as it is)."""
        sql = self.store._sql("INSERT INTO rulesets (ruleset_hash, name, version, body) SELECT ?, ?, ?, ? "
                              "WHERE NOT EXISTS (SELECT 1 FROM rulesets WHERE ruleset_hash = ?)")
        with self.store._write_transaction() as tx:
            tx.execute(sql, (ruleset_hash, name, version, body, ruleset_hash))

    def ruleset_body(self, ruleset_hash: str) -> str:
        with self.store._reading() as cursor:
            cursor.execute(self.store._sql("SELECT body FROM rulesets WHERE ruleset_hash = ?"), (ruleset_hash,))
            row = cursor.fetchone()
        if row is None:
            raise UnknownRunError(f"no rule set {ruleset_hash[:16]} is stored")
        return row[0]

    def append_score(self, score: StoredScore) -> bool:
        """Store ``score``; False when the identical document is already stored (by this writer
        or a concurrent one: the check and the insert happen under the store's write lock)."""
        return self.append_scores([score])[0]

    def append_scores(self, scores: Sequence[StoredScore]) -> list[bool]:
        """Store many documents in one transaction (one commit per batch, not per run: the one
        writer's cost is what scoring many small runs comes down to); per document, whether it
        was new. The keys already held are looked up under the write lock, a few hundred per
        query; a held key must hold the same bytes, else :class:`ScoreDriftError` and nothing
        of the batch is written. Idempotent, also for concurrent writers. A document made as a
        :class:`ScoreFill` is stored as its values (its template once per store), any other whole."""
        sql = self.store._sql
        by_set: dict[str, list[str]] = {}
        for score in scores:
            by_set.setdefault(score.ruleset_hash, []).append(score.run_id)
        with self.store._write_transaction() as tx:
            # Look before inserting: the overwrite guards (revision 0005) refuse any insert over a
            # held key on SQLite, an ON CONFLICT clause included.
            held: dict[tuple[str, str, str, str], str] = {}
            for digest, run_ids in by_set.items():
                unique = sorted(set(run_ids))
                for start in range(0, len(unique), RUNS_PER_QUERY):
                    part = unique[start:start + RUNS_PER_QUERY]
                    tx.execute(sql("SELECT run_id, ruleset_hash, engine_version, run_head_hash, document_sha256 "
                                   f"FROM scores WHERE ruleset_hash = ? AND run_id IN ({', '.join('?' * len(part))})"),
                               (digest, *part))
                    held.update(((row[0], row[1], row[2], row[3]), row[4]) for row in tx.fetchall())
            written, new_rows = [], []
            templates: dict[str, ScoreTemplate] = {}
            for score in scores:
                key = (score.run_id, score.ruleset_hash, score.engine_version, score.run_head_hash)
                stored = held.get(key)
                if stored is None:
                    held[key] = score.document_sha256
                    new_rows.append(self._row(score, templates))
                    written.append(True)
                    continue
                if stored != score.document_sha256:
                    raise ScoreDriftError(
                        f"run {score.run_id}: the score under rule set {score.ruleset_hash[:16]} differs from the "
                        f"stored one (stored {stored[:16]}, now {score.document_sha256[:16]})", run_id=score.run_id)
                written.append(False)
            if templates:
                self._save_templates(tx, templates)
            if new_rows:
                self.store._insert_many(tx, "scores", _SCORE_COLUMNS, new_rows)
        return written

    @staticmethod
    def _row(score: StoredScore, templates: dict[str, ScoreTemplate]) -> tuple[Any, ...]:
        """``score``'s row in ``_SCORE_COLUMNS`` order: its values and template when it was made as
        a fill (the template then joins ``templates``), else the document whole."""
        fill = score.fill
        values = None if fill is None else pack(fill)
        digest = None
        if values is not None:
            digest = fill.template.sha256  # type: ignore[union-attr]
            templates[digest] = fill.template  # type: ignore[union-attr]
        elif score.document is None:
            raise StoreError(f"run {score.run_id}: its score's values do not fill its template and its document "
                             "was not given: nothing to store", run_id=score.run_id)
        return (score.run_id, score.ruleset_hash, score.engine_version, score.run_head_hash, score.run_event_count,
                score.process_score, score.document if values is None else values, score.document_sha256, digest)

    def _save_templates(self, tx: Any, templates: dict[str, ScoreTemplate]) -> None:
        """Store the ``templates`` not yet held (under the write lock, like the scores)."""
        digests = sorted(templates)
        tx.execute(self.store._sql("SELECT template_sha256 FROM score_templates "
                                   f"WHERE template_sha256 IN ({', '.join('?' * len(digests))})"), digests)
        held = {row[0] for row in tx.fetchall()}
        missing = [(digest, templates[digest].text, templates[digest].slots)
                   for digest in digests if digest not in held]
        if missing:
            self.store._insert_many(tx, "score_templates", ("template_sha256", "template", "slots"), missing)

    def score_heads(self) -> list[tuple[str, str, int, str]]:
        """(run id, rule-set hash, events covered, run head hash) of every stored score, ordered by
        the scores' key in the database's collation: what a score says of the log, without its document."""
        with self.store._reading() as cursor:
            cursor.execute("SELECT run_id, ruleset_hash, run_event_count, run_head_hash FROM scores "
                           "ORDER BY run_id, ruleset_hash, engine_version, run_head_hash")
            return [tuple(row) for row in cursor.fetchall()]

    def scores(self, run_id: str | None = None) -> list[StoredScore]:
        """Stored scores (of one run, or all), ordered by their key in the database's collation;
        each document whole, however its row keeps it."""
        where, params = ("WHERE run_id = ? ", (run_id,)) if run_id is not None else ("", ())
        with self.store._reading() as cursor:
            cursor.execute(self.store._sql(f"SELECT {', '.join(_SCORE_COLUMNS)} FROM scores {where}"
                                           "ORDER BY run_id, ruleset_hash, engine_version, run_head_hash"), params)
            rows = cursor.fetchall()
            digests = sorted({row[8] for row in rows if row[8] is not None})
            templates: dict[str, ScoreTemplate] = {}
            for start in range(0, len(digests), RUNS_PER_QUERY):
                part = digests[start:start + RUNS_PER_QUERY]
                cursor.execute(self.store._sql("SELECT template_sha256, template, slots FROM score_templates "
                                               f"WHERE template_sha256 IN ({', '.join('?' * len(part))})"), part)
                templates.update((digest, ScoreTemplate(digest, text, slots))
                                 for digest, text, slots in cursor.fetchall())
        out = []
        for *head, document, sha256, digest in rows:
            if digest is not None:
                template = templates.get(digest)
                if template is None:
                    raise StoreError(f"run {head[0]}: its stored score's template {digest[:16]} is not in the store")
                document = unpack(template, document, run_id=head[0])
            out.append(StoredScore(*head, document, sha256))
        return out
