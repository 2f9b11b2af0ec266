"""Stored rule sets and score documents (append-only, like events).

A score is keyed by (run, rule-set hash, engine version, run head hash): scoring
the same inputs again is a no-op when the document's bytes agree and a
:class:`ScoreDriftError` when they do not; a new rule set or a longer run adds a
new row and never replaces an old one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from procgrade.engine.errors import ScoreDriftError, UnknownRunError
from procgrade.engine.facts import FACT_COLUMNS
from procgrade.engine.store.base import EventStore
from procgrade.engine.store.schema import rulesets as rulesets_table
from procgrade.engine.store.schema import scores as scores_table

__all__ = ["StoredScore", "ScoreStore", "FACT_ROW_COLUMNS"]

#: What rules read of an event, in this order (rules.predicates.ROW_COLUMNS mirrors it).
FACT_ROW_COLUMNS: tuple[str, ...] = ("seq", "kind", "actor", "stage") + tuple(FACT_COLUMNS) + ("in_stage",)


@dataclass(frozen=True)
class StoredScore:
    run_id: str
    ruleset_hash: str
    engine_version: str
    run_head_hash: str
    run_event_count: int
    process_score: str | None
    document: str
    document_sha256: str


class ScoreStore:
    """Score-side persistence over an :class:`EventStore`'s database."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.engine = store.engine

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
        from procgrade.engine.store.database_errors import translate

        raw = self.engine.raw_connection()
        try:
            # PostgreSQL: a server-side (named) cursor, so a client holds one batch, never the run.
            cursor = (raw.driver_connection.cursor(name="procgrade_fact_rows")
                      if self.store.dialect == "postgresql" else raw.driver_connection.cursor())
            try:
                cursor.execute(query + " ORDER BY seq", params)
                while True:
                    rows = cursor.fetchmany(batch)
                    if not rows:
                        break
                    yield rows
            except Exception as exc:
                translated = translate(exc)
                if translated is None:
                    raise
                raise translated from exc
            finally:
                cursor.close()
        finally:
            raw.close()

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
        with self.engine.connect() as conn:
            row = conn.execute(
                select(rulesets_table.c.body).where(rulesets_table.c.ruleset_hash == ruleset_hash)
            ).first()
        if row is None:
            raise UnknownRunError(f"no rule set {ruleset_hash[:16]} is stored")
        return row[0]

    def append_score(self, score: StoredScore) -> bool:
        """Store ``score``; False when the identical document is already stored (by this writer
        or a concurrent one: the check and the insert happen under the store's write lock)."""
        sql = self.store._sql
        key = "run_id = ? AND ruleset_hash = ? AND engine_version = ? AND run_head_hash = ?"
        key_values = (score.run_id, score.ruleset_hash, score.engine_version, score.run_head_hash)
        columns = list(score.__dict__)
        with self.store._write_transaction() as tx:
            tx.execute(sql(f"SELECT document_sha256 FROM scores WHERE {key}"), key_values)
            stored = tx.fetchone()
            if stored is None:
                tx.execute(sql(f"INSERT INTO scores ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"),
                           tuple(score.__dict__.values()))
                return True
        if stored[0] != score.document_sha256:
            raise ScoreDriftError(
                f"run {score.run_id}: the score under rule set {score.ruleset_hash[:16]} differs from the "
                f"stored one (stored {stored[0][:16]}, now {score.document_sha256[:16]})",
                run_id=score.run_id)
        return False

    def scores(self, run_id: str | None = None) -> list[StoredScore]:
        query = select(scores_table).order_by(
            scores_table.c.run_id, scores_table.c.ruleset_hash, scores_table.c.engine_version,
            scores_table.c.run_head_hash)
        if run_id is not None:
            query = query.where(scores_table.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [StoredScore(*row) for row in conn.execute(query)]
