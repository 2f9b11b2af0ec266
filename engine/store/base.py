"""The event store: append whole runs, idempotently, and read them back in seq order.

One small interface (:class:`EventStore`) with one subclass per database
(``sqlite.py``, ``postgres.py``) that supplies only what differs: how a writer
takes the run's lock, the bulk insert path, and parameter style. The rest of
procgrade never knows which database it talks to.

Append protocol (one transaction per run):
1. lock the run's row (creating it when new);
2. events at seqs the run already holds must be exactly the stored ones (the
   chain hash proves it): they are a no-op; anything else there is a conflict;
3. the rest must continue the run without a gap and go in by the bulk path;
4. the run's head (count, hash, provenance) moves forward; sealing records it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from procgrade.engine.chain import GENESIS
from procgrade.engine.errors import (
    EventIdConflictError,
    RunSealedError,
    SeqConflictError,
    StoreError,
    UnknownRunError,
)
from procgrade.engine.events import Event
from procgrade.engine.store.run_info import RUN_COLUMNS, AppendResult, RunInfo
from procgrade.engine.stages import StageConflict, StageTracker, tracker_after
from procgrade.engine.canonical import parse_json
from procgrade.engine.stored import FACTS, IN_STAGE, STORED_COLUMNS, chain_hashes, prepare_row, to_event

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = ["EventStore", "RunInfo", "AppendResult"]

#: Ids one ``IN (...)`` list holds: far below every database's limit of bound values.
IDS_PER_QUERY = 500


def _id_chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    """``ids`` in lists of at most :data:`IDS_PER_QUERY`, in order."""
    for start in range(0, len(ids), IDS_PER_QUERY):
        yield list(ids[start:start + IDS_PER_QUERY])


class EventStore:
    """Append-only store of run event logs in one database.

    Every query of the store is plain SQL on a driver connection (``?`` placeholders, see
    :meth:`_sql`). The connections come from a SQLAlchemy engine, or, for a SQLite file, straight
    from ``sqlite3`` (:meth:`_direct_connections`), so a command that only reads and scores
    never imports SQLAlchemy. :attr:`engine` is built on first use, for callers that speak
    SQLAlchemy (migrations, the SQL rule backend, set queries of reports)."""

    dialect: str = ""
    param: str = "?"
    #: The driver's exceptions for a unique-key violation on insert.
    integrity_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, url: str) -> None:
        #: The database's URL as :func:`procgrade.engine.store.normalize_url` gives it (with any password).
        self.url = url
        self._engine: Engine | None = None
        self._direct = self._direct_connections(url)

    @property
    def engine(self) -> Engine:
        """SQLAlchemy's engine for this database, made on first use."""
        if self._engine is None:
            self._engine = self._make_engine(self.url)
        return self._engine

    def _make_engine(self, url: str) -> Engine:
        raise NotImplementedError

    def _direct_connections(self, url: str) -> Any:
        """A source of driver connections that needs no SQLAlchemy (``raw_connection()``,
        ``dispose()``), or None: the engine's pool then serves the store's own queries too."""
        return None

    def _raw_connection(self) -> Any:
        """A driver connection (SQLAlchemy's pooled proxy or its like): failing to get one raises
        :func:`procgrade.engine.store.database_errors.translate`'s one-line error."""
        from procgrade.engine.store.database_errors import translated

        source = self._direct if self._direct is not None else self.engine
        with translated():
            return source.raw_connection()

    # --- writing -------------------------------------------------------------------------------

    def append(self, run_id: str, events: Sequence[Event], *, seal: bool = False) -> AppendResult:
        """Append ``events`` (consecutive seqs, all of ``run_id``) in one transaction.

        Events the run already holds identically are skipped; a different event
        at a held seq raises :class:`SeqConflictError`; a sealed run takes no new
        events (:class:`RunSealedError`). Nothing is written unless all succeed.
        """
        return self.append_runs([(run_id, events)], seal=seal)[0]

    def append_runs(
        self, batches: Sequence[tuple[str, Sequence[Event]]], *, seal: bool = False
    ) -> list[AppendResult]:
        """Append several runs' events in one transaction: all of them, or none."""
        with self.writer() as writer:
            return [writer.append(run_id, events, seal=seal) for run_id, events in batches]

    @contextlib.contextmanager
    def writer(self, *, bulk: bool = False) -> Iterator["RunWriter"]:
        """One write transaction for many appends: committed when the block ends, rolled
        back (nothing written) if it raises. Lets a caller stream input run by run. ``bulk``
        (an import's) lets a SQLite store that holds no runs yet write it without the WAL
        (:mod:`procgrade.engine.store.sqlite_first_load`)."""
        with self._write_transaction(bulk=bulk) as tx:
            yield RunWriter(self, tx)

    def _append_in(self, tx: Any, run_id: str, events: Sequence[Event], seal: bool,
                   redactions: Mapping[int, int] | None = None,
                   trackers: dict[str, tuple[int, StageTracker]] | None = None) -> AppendResult:
        return self._append_rows_in(tx, run_id, [prepare_row(event) for event in events], seal, redactions, trackers)

    def _append_rows_in(self, tx: Any, run_id: str, rows: list[list[Any]], seal: bool,
                        redactions: Mapping[int, int] | None = None,
                        trackers: dict[str, tuple[int, StageTracker]] | None = None) -> AppendResult:
        """Append prepared rows (:func:`procgrade.engine.stored.prepare_row`, consecutive seqs of
        ``run_id``): derive their stages, chain them, and insert what the run does not hold."""
        info = self._lock_run(tx, run_id)
        first = rows[0][1] if rows else info.event_count
        if first > info.event_count:
            held = f"the run holds seqs 0..{info.event_count - 1}" if info.event_count else "a run starts at seq 0"
            raise SeqConflictError(f"run {run_id}: seq {first} leaves a gap: {held}", run_id=run_id, seq=first)
        prev = GENESIS if first == 0 else self._stored_hashes(tx, run_id, first - 1, first - 1)[0][2]
        # A writer streaming one run in pieces hands over the derivation's state from the piece
        # before, so the stored prefix is not read again for every piece.
        cached = trackers.get(run_id) if trackers is not None else None
        if first == 0:
            tracker = StageTracker()
        elif cached is not None and cached[0] == first:
            tracker = cached[1]
        else:
            tracker = tracker_after(self._stored_envelopes(tx, run_id, first), strict=True)
        step = tracker.step

        def stage_of(row: list[Any]) -> int | None:
            try:
                return step(row[1], row[4], row[5], row[6])
            except StageConflict as exc:
                raise StoreError(f"run {run_id}: seq {row[1]}: {exc}", run_id=run_id, seq=row[1]) from None

        _derive_stages(rows, tracker, stage_of)
        chain_hashes(rows, prev)
        if trackers is not None and rows:
            trackers[run_id] = (rows[-1][1] + 1, tracker)
        held = max(0, min(len(rows), info.event_count - first))
        overlap, new = rows[:held], rows[held:]
        if overlap:
            self._check_overlap(tx, run_id, overlap)
        if new and info.sealed:
            raise RunSealedError(
                f"run {run_id} is sealed at {info.sealed_event_count} events; seq {new[0][1]} cannot be appended",
                run_id=run_id, seq=new[0][1],
            )
        if new and new[0][1] == 0 and new[0][4] != "run_started":
            raise StoreError(f"run {run_id}: seq 0 must be a run_started event, got {new[0][4]}",
                             run_id=run_id, seq=0)
        if new:
            # A savepoint, so a refused insert leaves the transaction usable to explain itself.
            tx.execute("SAVEPOINT procgrade_append")
            try:
                self._insert_rows(tx, new)
            except self.integrity_errors as exc:
                tx.execute("ROLLBACK TO SAVEPOINT procgrade_append")
                raise self._explain_conflict(tx, run_id, new) from exc
            tx.execute("RELEASE SAVEPOINT procgrade_append")
        count = info.event_count + len(new)
        head = new[-1][-1] if new else info.head_hash
        provenance = _provenance(new[0]) if new and new[0][1] == 0 else None
        if new and redactions:
            redacted = sum(redactions.get(r[1], 0) for r in new)
            if redacted:
                provenance = {**(provenance or {}), "redactions": (info.redactions or 0) + redacted}
        sealing = seal and not info.sealed
        if new or sealing:
            self._update_run(tx, run_id, count, head, provenance, sealing)
        return AppendResult(run_id, len(new), len(overlap), count, head, info.sealed or seal, sealing)

    def seal(self, run_id: str) -> RunInfo:
        """Record the run's current head as final; later appends are refused."""
        with self._write_transaction() as tx:
            info = self._lock_run(tx, run_id, create=False)
            if not info.sealed:
                self._update_run(tx, run_id, info.event_count, info.head_hash, None, True)
        return self.run(run_id)

    def _check_overlap(self, tx: Any, run_id: str, overlap: list[list[Any]]) -> None:
        stored = self._stored_hashes(tx, run_id, overlap[0][1], overlap[-1][1])
        for incoming, (seq, event_id, stored_hash) in zip(overlap, stored):
            if incoming[-1] == stored_hash:
                continue
            if incoming[2] != event_id:
                raise SeqConflictError(
                    f"run {run_id}: seq {seq} already holds event {event_id!r}; "
                    f"event {incoming[2]!r} cannot take its place (another writer appended first?)",
                    run_id=run_id, seq=seq,
                )
            raise EventIdConflictError(
                f"run {run_id}: event {event_id!r} at seq {seq} is already stored with different content",
                run_id=run_id, seq=seq,
            )

    def _explain_conflict(self, tx: Any, run_id: str, new: list[list[Any]]) -> StoreError:
        first_seq: dict[str, int] = {}
        for r in new:
            event_id, seq = r[2], r[1]
            earlier = first_seq.setdefault(event_id, seq)
            if earlier != seq:
                return EventIdConflictError(
                    f"run {run_id}: event_id {event_id!r} at seq {seq} is also given to run {run_id} seq {earlier}",
                    run_id=run_id, seq=seq)
        clashes = self._event_owners(tx, list(first_seq))
        if clashes:
            event_id, owner, seq = clashes[0]
            mine = first_seq[event_id]
            return EventIdConflictError(
                f"run {run_id}: event_id {event_id!r} is already stored (run {owner}, seq {seq})",
                run_id=run_id, seq=mine,
            )
        return SeqConflictError(
            f"run {run_id}: seqs {new[0][1]}..{new[-1][1]} were appended by another writer meanwhile",
            run_id=run_id, seq=new[0][1],
        )

    # --- reading -------------------------------------------------------------------------------

    def create_schema(self) -> str:
        """Give a database without procgrade's schema the head schema (Alembic migrates it from
        nothing); return the revision it is now at."""
        from procgrade.engine.store.migrate import upgrade

        return upgrade(self.engine)

    def schema_revision(self) -> str | None:
        """The schema revision recorded in the database (None when it has none)."""
        from procgrade.engine.store.migrate import current_revision

        return current_revision(self.engine)

    def runs(self, run_ids: Sequence[str] | None = None) -> list[RunInfo]:
        """Every run (or those of ``run_ids`` that are stored, :data:`IDS_PER_QUERY` a query), sorted by run id
        in code-point order (never the database's collation, which differs between SQLite and
        PostgreSQL locales)."""
        select = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
        rows: list[Any] = []
        with self._reading() as cursor:
            if run_ids is None:
                cursor.execute(select)
                rows = cursor.fetchall()
            else:
                for part in _id_chunks(sorted(set(run_ids))):
                    cursor.execute(self._sql(f"{select} WHERE run_id IN ({', '.join('?' * len(part))})"), part)
                    rows.extend(cursor.fetchall())
        return sorted((RunInfo(*row) for row in rows), key=lambda info: info.run_id)

    def run_heads(self) -> list[tuple[str, str, int]]:
        """(run id, head hash or "", event count) of every run, in run id code-point order as
        :meth:`runs` gives them: the three columns re-scoring needs, without the rest."""
        with self._reading() as cursor:
            cursor.execute("SELECT run_id, head_hash, event_count FROM runs")
            rows = cursor.fetchall()
        return sorted(((run_id, head or "", count) for run_id, head, count in rows), key=itemgetter(0))

    def seals(self) -> dict[str, tuple[int, str]]:
        """Run id to (event count, head hash) as the ``seals`` table recorded each run's sealing
        (once, by a trigger): what :mod:`procgrade.engine.integrity` holds the runs' columns against."""
        with self._reading() as cursor:
            cursor.execute("SELECT run_id, event_count, head_hash FROM seals")
            return {run_id: (count, head) for run_id, count, head in cursor.fetchall()}

    def run(self, run_id: str) -> RunInfo:
        with self._reading() as cursor:
            info = self._select_run(cursor, run_id)
        if info is None:
            raise UnknownRunError(f"no run {run_id!r} in the store")
        return info

    def stored_events(self, run_id: str, batch: int = 10_000) -> Iterator[tuple[Any, ...]]:
        """Raw rows of ``run_id`` in seq order (columns as :data:`STORED_COLUMNS`)."""
        with self._reading("procgrade_stored_events") as cursor:
            cursor.execute(self._sql(f"SELECT {', '.join(STORED_COLUMNS)} FROM events WHERE run_id = ? ORDER BY seq"),
                           (run_id,))
            while rows := cursor.fetchmany(batch):
                yield from rows

    def stored_where(self, *, run_ids: Sequence[str] | None = None, kinds: Sequence[str] | None = None,
                     seq_below: int | None = None, event_ids: Sequence[str] | None = None,
                     batch: int = 10_000) -> Iterator[tuple[Any, ...]]:
        """Raw rows (columns as :data:`STORED_COLUMNS`) of every stored event that matches all the
        filters given: any of ``run_ids`` or any of ``event_ids`` (not both; neither: every run), any
        of ``kinds``, ``seq < seq_below``. One query for all runs, or one per :data:`IDS_PER_QUERY` listed ids, rather than one per
        run; each run's rows come in seq order, the runs of a query in the database's order of run ids."""
        if run_ids is not None and event_ids is not None:
            raise ValueError("stored_where: give run_ids or event_ids, not both")
        conditions: list[str] = []
        params: list[Any] = []
        if kinds is not None:
            if not kinds:
                return
            conditions.append(f"kind IN ({', '.join('?' * len(kinds))})")
            params.extend(kinds)
        if seq_below is not None:
            conditions.append("seq < ?")
            params.append(seq_below)
        column, listed = ("run_id", run_ids) if run_ids is not None else ("event_id", event_ids)
        parts: list[list[str] | None] = [None] if listed is None else list(_id_chunks(listed))
        for part in parts:
            where, values = list(conditions), list(params)
            if part is not None:
                where.append(f"{column} IN ({', '.join('?' * len(part))})")
                values.extend(part)
            sql = f"SELECT {', '.join(STORED_COLUMNS)} FROM events"
            if where:
                sql += " WHERE " + " AND ".join(where)
            with self._reading("procgrade_stored_where") as cursor:
                cursor.execute(self._sql(sql + " ORDER BY run_id, seq"), values)
                while rows := cursor.fetchmany(batch):
                    yield from rows

    def events_between(self, run_id: str, low: int, high: int) -> Iterator[Event]:
        """The run's events with ``low <= seq <= high``, in seq order (a window of a huge run)."""
        with self._reading() as cursor:
            cursor.execute(self._sql(f"SELECT {', '.join(STORED_COLUMNS)} FROM events "
                                     "WHERE run_id = ? AND seq >= ? AND seq <= ? ORDER BY seq"), (run_id, low, high))
            rows = cursor.fetchall()
        for row in rows:
            yield to_event(tuple(row))

    def hash_at(self, run_id: str, seq: int) -> str | None:
        """The chain hash stored at ``seq`` of the run (None when there is no such event)."""
        with self._reading() as cursor:
            cursor.execute(self._sql("SELECT hash FROM events WHERE run_id = ? AND seq = ?"), (run_id, seq))
            row = cursor.fetchone()
        return None if row is None else row[0]

    def events(self, run_id: str) -> Iterator[Event]:
        """The run's events, rebuilt as validated models, in seq order."""
        for row in self.stored_events(run_id):
            yield to_event(row)

    def close(self) -> None:
        if self._direct is not None:
            self._direct.dispose()
        if self._engine is not None:
            self._engine.dispose()

    # --- what each database supplies -------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self, name: str | None = None) -> Iterator[Any]:
        """A driver cursor on a connection of its own, closed with it; database errors come out as
        procgrade's. With a ``name``, PostgreSQL's cursor is a server-side one, so a client holding a
        stream of rows holds one batch, never the run or the runs."""
        from procgrade.engine.store.database_errors import translated

        raw = self._raw_connection()
        try:
            cursor = (raw.driver_connection.cursor(name=name) if name and self.dialect == "postgresql"
                      else raw.driver_connection.cursor())
            try:
                with translated():
                    yield cursor
            finally:
                cursor.close()
        finally:
            raw.close()

    @contextlib.contextmanager
    def _write_transaction(self, *, bulk: bool = False) -> Iterator[Any]:
        """One transaction on a driver cursor, the store's only write path: every procgrade
        writer of a database queues on one lock first (see ``_begin``), so writers never
        deadlock; driver errors leave as one-line :class:`StoreError`s. ``bulk``: see
        :meth:`_bulk_mode`."""
        from procgrade.engine.store.database_errors import translate

        raw = self._raw_connection()
        try:
            try:
                end_bulk = self._bulk_mode(raw) if bulk else None
                try:
                    cursor = self._begin(raw)
                    yield cursor
                    raw.commit()
                except BaseException:
                    with contextlib.suppress(Exception):
                        raw.rollback()
                    raise
                finally:
                    if end_bulk is not None:
                        end_bulk()
            except BaseException as exc:
                translated = translate(exc) if isinstance(exc, Exception) else None
                if translated is not None:
                    raise translated from exc
                raise
        finally:
            with contextlib.suppress(Exception):
                raw.close()

    def _bulk_mode(self, raw: Any) -> Callable[[], None] | None:
        """Set ``raw`` up, before its transaction begins, for one large write; return what undoes
        it after the transaction, or None where nothing changes (the default)."""
        return None

    def _begin(self, raw: Any) -> Any:
        raise NotImplementedError

    def _insert_rows(self, tx: Any, rows: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    def _insert_many(self, tx: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` (values in ``columns`` order) into ``table``: one statement per row
        here; a database with a cheaper bulk form overrides it."""
        tx.executemany(self._sql(values_insert(table, tuple(columns), 1)), rows)

    def _lock_run(self, tx: Any, run_id: str, create: bool = True) -> RunInfo:
        raise NotImplementedError

    # --- shared SQL on the driver cursor -------------------------------------------------------

    def _sql(self, text: str) -> str:
        return text.replace("?", self.param)

    def _runs_in_key_order(self, run_ids: Sequence[str]) -> list[str]:
        """``run_ids`` in the order ``ORDER BY run_id`` gives them (the database's collation, which
        may be a locale's): asked of the database, each run's seq-0 row, so a run without events
        is left out."""
        with self._reading() as cursor:
            cursor.execute(self._sql(f"SELECT run_id FROM events WHERE run_id IN ({', '.join('?' * len(run_ids))}) "
                                     "AND seq = 0 ORDER BY run_id"), list(run_ids))
            return [run_id for (run_id,) in cursor.fetchall()]

    def _select_run(self, tx: Any, run_id: str, suffix: str = "") -> RunInfo | None:
        tx.execute(self._sql(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?{suffix}"), (run_id,))
        row = tx.fetchone()
        return RunInfo(*row) if row is not None else None

    def _stored_hashes(self, tx: Any, run_id: str, low: int, high: int) -> list[tuple[int, str, str]]:
        tx.execute(
            self._sql("SELECT seq, event_id, hash FROM events WHERE run_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"),
            (run_id, low, high),
        )
        return [tuple(r) for r in tx.fetchall()]

    def _stored_envelopes(self, tx: Any, run_id: str, upto: int) -> list[tuple[int, str, str, int | None]]:
        """(seq, kind, actor, stage) of the run's first ``upto`` stored events: the stage
        derivation's state is replayed from them to continue an append."""
        tx.execute(self._sql("SELECT seq, kind, actor, stage FROM events WHERE run_id = ? AND seq < ? ORDER BY seq"),
                   (run_id, upto))
        return [tuple(r) for r in tx.fetchall()]

    def _event_owners(self, tx: Any, event_ids: list[str]) -> list[tuple[str, str, int]]:
        """Who holds these event ids, as the open transaction sees it (its own earlier runs too)."""
        found: list[tuple[str, str, int]] = []
        for chunk in _id_chunks(event_ids):
            tx.execute(self._sql(f"SELECT event_id, run_id, seq FROM events WHERE event_id IN "
                                 f"({', '.join('?' * len(chunk))})"), tuple(chunk))
            found.extend(tuple(r) for r in tx.fetchall())
        return sorted(found, key=lambda r: (r[1], r[2]))

    def _update_run(
        self, tx: Any, run_id: str, count: int, head: str | None,
        provenance: dict[str, Any] | None, seal: bool,
    ) -> None:
        sets = ["event_count = ?", "head_hash = ?"]
        params: list[Any] = [count, head]
        if provenance:
            for name, value in provenance.items():
                sets.append(f"{name} = ?")
                params.append(value)
        if seal:
            sets += ["sealed_event_count = ?", "sealed_head_hash = ?"]
            params += [count, head or GENESIS]
        tx.execute(self._sql(f"UPDATE runs SET {', '.join(sets)} WHERE run_id = ?"), (*params, run_id))


class RunWriter:
    """Appends within one open transaction (see :meth:`EventStore.writer`).

    A run may come in several consecutive pieces (a streaming reader flushes every few
    thousand events); event ids reused across pieces or runs are refused by the database's
    unique key and explained from inside the transaction, so the writer keeps nothing per event.
    """

    def __init__(self, store: EventStore, tx: Any) -> None:
        self._store, self._tx = store, tx
        #: Per run: the next seq and the stage derivation's state after the last piece appended.
        self._trackers: dict[str, tuple[int, StageTracker]] = {}

    def append(self, run_id: str, events: Sequence[Event], *, seal: bool = False,
               redactions: Mapping[int, int] | None = None) -> AppendResult:
        """Append; ``redactions`` maps seq to secrets redacted from that event (counted on the run)."""
        _check_consecutive(run_id, events)
        return self._store._append_in(self._tx, run_id, events, seal, redactions, self._trackers)

    def append_rows(self, run_id: str, rows: list[list[Any]], *, seal: bool = False,
                    redactions: Mapping[int, int] | None = None) -> AppendResult:
        """:meth:`append` for rows already prepared (:func:`procgrade.engine.stored.prepare_row`),
        as native ingest's workers make them: consecutive seqs of ``run_id``."""
        _check_consecutive_rows(run_id, rows)
        return self._store._append_rows_in(self._tx, run_id, rows, seal, redactions, self._trackers)

    def seal(self, run_id: str) -> RunInfo:
        """Seal the run at its current head, in this transaction."""
        info = self._store._lock_run(self._tx, run_id, create=False)
        if not info.sealed:
            self._store._update_run(self._tx, run_id, info.event_count, info.head_hash, None, True)
        return self._store._select_run(self._tx, run_id) or info


def _check_consecutive(run_id: str, events: Sequence[Event]) -> None:
    for i, event in enumerate(events):
        if event.run_id != run_id:
            raise StoreError(f"event {event.event_id!r} belongs to run {event.run_id}, not {run_id}",
                             run_id=run_id, seq=event.seq)
        if i and event.seq != events[i - 1].seq + 1:
            raise StoreError(f"run {run_id}: seq {event.seq} does not follow seq {events[i - 1].seq}",
                             run_id=run_id, seq=event.seq)


#: Kinds that open, close or may open a stage: a piece holding none of them keeps the stage state.
_STAGE_KINDS = frozenset({"stage_started", "stage_ended", "correction"})


def _derive_stages(rows: list[list[Any]], tracker: StageTracker, stage_of: Callable[[list[Any]], int | None]) -> None:
    """Set each row's derived stage, as ``stage_of`` (the tracker's step) would row by row: the
    stretches between markers (stage_started, stage_ended, correction) at once, the markers, and
    any stretch the shortcut does not cover (a conflict: ``stage_of`` words the error), by step."""
    kinds = [row[4] for row in rows]
    if _STAGE_KINDS.isdisjoint(kinds):
        if not _stretch_in_bulk(rows, tracker):
            for row in rows:
                row[IN_STAGE] = stage_of(row)
        return
    start = 0
    for at in [at for at, kind in enumerate(kinds) if kind in _STAGE_KINDS] + [len(rows)]:
        if at > start:
            stretch = rows[start:at]
            if not _stretch_in_bulk(stretch, tracker):
                for row in stretch:
                    row[IN_STAGE] = stage_of(row)
        if at < len(rows):
            rows[at][IN_STAGE] = stage_of(rows[at])
        start = at + 1


def _stretch_in_bulk(rows: list[list[Any]], tracker: StageTracker) -> bool:
    """Set the derived stage of rows holding no marker at once, as ``tracker.step`` row by row
    would: each is in the open stage (which any stage it carries must equal) or, with none open,
    in its own stage. False (nothing set) otherwise, a conflict included."""
    stages = [row[6] for row in rows]
    open_stage = tracker.open
    if open_stage is None:
        derived = stages
        given = [stage for stage in stages if stage is not None]
        top = max(given) if given else None
    elif stages.count(None) + stages.count(open_stage) == len(stages):
        derived = [open_stage] * len(rows)
        top = open_stage if rows else None
    else:
        return False
    for row, stage in zip(rows, derived):
        row[IN_STAGE] = stage
    if top is not None and (tracker.highest is None or top > tracker.highest):
        tracker.highest = top
    return True


def _check_consecutive_rows(run_id: str, rows: list[list[Any]]) -> None:
    if rows:  # the common case at once; else row by row, which words the error
        first = rows[0][1]
        if [row[0] for row in rows].count(run_id) == len(rows) and \
                [row[1] for row in rows] == list(range(first, first + len(rows))):
            return
    for i, row in enumerate(rows):
        if row[0] != run_id:
            raise StoreError(f"event {row[2]!r} belongs to run {row[0]}, not {run_id}", run_id=run_id, seq=row[1])
        if i and row[1] != rows[i - 1][1] + 1:
            raise StoreError(f"run {run_id}: seq {row[1]} does not follow seq {rows[i - 1][1]}",
                             run_id=run_id, seq=row[1])


def _provenance(first: list[Any]) -> dict[str, Any]:
    """The run's provenance from its run_started row (the kind's fields as stored: the model
    dump, defaults included, so nothing is lost by reading them back)."""
    if first[4] != "run_started":
        return {}
    fields = parse_json(first[FACTS])
    harness, imported = fields["harness"], fields.get("imported")
    return {
        "harness": harness["name"],
        "harness_version": harness.get("version"),
        "model": fields.get("model"),
        "task_id": fields.get("task_id"),
        **({"source_format": imported["format"], "redactions": imported["redactions"],
            "unparsed": imported["unparsed"]} if imported is not None else {}),
    }


@lru_cache(maxsize=256)
def values_insert(table: str, columns: tuple[str, ...], rows: int) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...), ...`` for ``rows`` rows (``?`` placeholders:
    :meth:`EventStore._sql` gives them the database's style)."""
    one = f"({', '.join('?' * len(columns))})"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * rows)}"
