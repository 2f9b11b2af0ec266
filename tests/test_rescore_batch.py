"""Re-scoring in batches (issue 16): many runs per fact query, one reusable monitor and document
template per rule set, many score rows per transaction. Every batched result must be, to the
byte, what scoring each run alone gives: runs with no events, runs cut at a shorter length, run
ids the databases order differently, and runs on either side of a query's boundary."""

from __future__ import annotations

import re
from itertools import islice
from pathlib import Path

import pytest

from builders import every_kind_run, small_run, write_jsonl
from procgrade.engine.errors import ScoreDriftError, StoreError
from procgrade.engine.executors import LocalExecutor
from procgrade.engine.ingest import ingest_native
from procgrade.engine.parallel_scoring import score_many, verify_many
from procgrade.engine.rescoring import compute_score, score_batch, score_runs, stored_score
from procgrade.engine.scoring import RunScorer
from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore
from procgrade.rules.loading import load_ruleset
from procgrade.rules.monitor import RunMonitor
from procgrade.rules.planted import discover, fact_rows
from procgrade.engine.native import read_native

ROOT = Path(__file__).resolve().parent.parent
CORPORA = [ROOT / "tests" / "fixtures" / "planted", ROOT / "tests" / "fixtures" / "planted-v1"]
RULESETS = [None, ROOT / "rules" / "sets" / "default-v1.yaml"]
#: Run ids whose order differs between code points and a locale's collation (case, punctuation).
AWKWARD = ["B-run", "a-run", "A-run", "Z_run", "z-run", "a.run", "a+run", "0run", "a/b:c@d"]


def _corpus_files() -> list[Path]:
    files = []
    for corpus in CORPORA:
        for case in discover(corpus):
            files += [case.fault_path, case.clean_path]
    return files


def _fill(store: EventStore, tmp_path: Path) -> list[str]:
    """The planted corpora, every-kind runs of several lengths, awkward ids and an empty run."""
    made = [write_jsonl(tmp_path / f"awkward-{i}.jsonl", small_run(run_id)) for i, run_id in enumerate(AWKWARD)]
    made += [write_jsonl(tmp_path / f"kinds-{n}.jsonl", every_kind_run(f"kinds-{n}", n)) for n in (1, 2, 40, 97)]
    ingest_native(store, _corpus_files() + made)
    store.append("empty-run", [])
    return [info.run_id for info in store.runs()]


def _heads(store: EventStore) -> list[tuple[str, str, int]]:
    return [(info.run_id, info.head_hash or "", info.event_count) for info in store.runs()]


class _SmallQueries:
    """The store's batched reader with a handful of runs per query: many query boundaries."""

    def __init__(self, store: EventStore, per_query: int) -> None:
        self.scores, self.per_query = ScoreStore(store), per_query

    def facts_of_runs(self, runs):  # noqa: ANN001, ANN201
        return self.scores.facts_of_runs(runs, per_query=self.per_query, batch=7)


@pytest.mark.parametrize("ruleset_path", RULESETS, ids=["default", "default-v1"])
def test_batch_gives_each_runs_own_document(store: EventStore, tmp_path: Path, ruleset_path: Path | None) -> None:
    run_ids = _fill(store, tmp_path)
    assert "empty-run" in run_ids and len(run_ids) > 40
    ruleset = load_ruleset(ruleset_path)
    alone = {run_id: compute_score(store, ruleset, run_id) for run_id in run_ids}
    heads = _heads(store)
    scorer = RunScorer(ruleset)
    for reader in (ScoreStore(store), _SmallQueries(store, 1), _SmallQueries(store, 3), _SmallQueries(store, 500)):
        documents = score_batch(reader, heads, scorer)
        assert [d.run_id for d in documents] == [h[0] for h in heads]
        for document in documents:
            expected = alone[document.run_id]
            assert document.canonical == expected.canonical, document.run_id
            assert document.body == expected.body and document.process_score == expected.process_score
        canonical = score_batch(reader, heads, scorer, answer="canonical")
        assert [c for c, _ in canonical] == [alone[h[0]].canonical for h in heads]
        assert [p for _, p in canonical] == [alone[h[0]].process_score for h in heads]
    assert alone["empty-run"].run_event_count == 0


def test_batch_at_shorter_lengths_matches_each_prefix(store: EventStore, tmp_path: Path) -> None:
    """What verify does: score runs at the length a stored score was made at."""
    _fill(store, tmp_path)
    ruleset = load_ruleset()
    heads = []
    for run_id, _, count in _heads(store):
        upto = count // 2
        heads.append((run_id, (store.hash_at(run_id, upto - 1) if upto else "") or "", upto))
    documents = score_batch(_SmallQueries(store, 4), heads, RunScorer(ruleset))
    for (run_id, _, upto), document in zip(heads, documents):
        assert document.canonical == compute_score(store, ruleset, run_id, upto=upto).canonical, run_id


@pytest.mark.parametrize("per_query", [1, 3, 500])
def test_reader_splits_the_stream_by_counts_whatever_the_caller_takes(store: EventStore, tmp_path: Path,
                                                                        per_query: int) -> None:
    """The batched reader reads no run-id column: each run's rows are its first ``count`` rows of
    the stream, the rest of a longer run (a prefix asked for, or events appended since the count)
    skipped, and a run's rows the caller leaves dropped."""
    _fill(store, tmp_path)
    reader = ScoreStore(store)
    heads = _heads(store)
    counts = [(run_id, [count, count // 2, 1, 0][i % 4] if count else 0) for i, (run_id, _, count) in enumerate(heads)]
    expected = {run_id: list(reader.fact_rows(run_id, upto=count)) for run_id, count in counts if count}
    got: dict[str, list[tuple]] = {}
    for i, (run_id, rows) in enumerate(reader.facts_of_runs(counts, per_query=per_query, batch=7)):
        taken = [0, None, 1][i % 3]  # none, all, or one of its rows
        got[run_id] = list(rows if taken is None else islice(rows, taken))
        assert got[run_id] == expected[run_id][:len(got[run_id])], run_id
        if taken is None:
            assert got[run_id] == expected[run_id], run_id
    assert sorted(got) == sorted(expected)  # each run with a count once, none without


def test_reader_refuses_a_count_beyond_the_events_a_run_holds(store: EventStore, tmp_path: Path) -> None:
    """A count above what a run holds would give it the next run's rows: refused, never scored."""
    _fill(store, tmp_path)
    reader = ScoreStore(store)
    heads = [(run_id, count) for run_id, _, count in _heads(store) if count]
    order = [run_id for run_id, rows in reader.facts_of_runs(heads)]
    counts = dict(heads)
    for inflated in order:  # the last run too, though no run follows it to take rows from
        wrong = [(run_id, count + (run_id == inflated)) for run_id, count in counts.items()]
        for per_query in (1, 3, 500):  # each run the last of its query, some, or only one
            with pytest.raises(StoreError, match="fewer events|do not start at seq 0"):
                for _, rows in reader.facts_of_runs(wrong, per_query=per_query):
                    list(rows)
    with pytest.raises(StoreError, match=re.escape(f"run {order[-1]}: holds fewer events")):  # left unread by the caller
        for _ in reader.facts_of_runs([(run_id, counts[run_id] + (run_id == order[-1])) for run_id in order]):
            pass
    for _, rows in reader.facts_of_runs(heads, per_query=1):  # every run the last of its query
        next(rows)
        getattr(rows, "close", lambda: None)()  # a caller closing what it read in part: no false alarm
    wrong_heads = [(run_id, "", counts[run_id] + (run_id == order[0])) for run_id in order]
    with pytest.raises(StoreError):
        score_batch(reader, wrong_heads, RunScorer(load_ruleset()))


def test_a_run_asked_for_with_events_it_does_not_hold_is_refused(store: EventStore, tmp_path: Path) -> None:
    """A run asked for with a count whose events the store does not hold (an id that names no run,
    sorting first, among the others or last) is refused: never scored as empty, nor given the
    rows of the runs after it. SQLite's reader orders the ids without asking the database, so
    there the runs after it come up short; elsewhere the reader leaves it out and the batch finds
    it missing."""
    _fill(store, tmp_path)
    heads = [head for head in _heads(store) if head[2]]
    scorer = RunScorer(load_ruleset())
    for ghost in ("!ghost", "kinds-3", "\u00e9-ghost", "\U0010ffff"):
        wrong = sorted(heads + [(ghost, "", 3)])
        for reader in (ScoreStore(store), _SmallQueries(store, 1), _SmallQueries(store, 3)):
            with pytest.raises(StoreError, match="holds no events|fewer events|do not start at seq 0"):
                score_batch(reader, wrong, scorer)


def test_rescore_paths_store_the_same_bytes(store: EventStore, tmp_path: Path) -> None:
    run_ids = _fill(store, tmp_path)
    ruleset = load_ruleset()
    alone = [compute_score(store, ruleset, run_id).canonical for run_id in sorted(run_ids)]
    in_process = score_runs(store, run_ids, ruleset)
    assert [o.document.canonical for o in in_process] == alone and all(o.written for o in in_process)
    with LocalExecutor(2) as pool:
        again = score_many(store, None, ruleset, executor=pool)
    assert [o.document.canonical for o in again] == alone and not any(o.written for o in again)
    assert [s.document.encode() for s in ScoreStore(store).scores()] == alone
    assert verify_many(store) == (len(alone), [])


def test_one_transaction_per_batch_all_or_nothing(store: EventStore, tmp_path: Path) -> None:
    run_ids = _fill(store, tmp_path)
    ruleset = load_ruleset()
    first, second = score_runs(store, run_ids[:5], ruleset), score_runs(store, run_ids[5:8], ruleset)
    scores = ScoreStore(store)
    held = len(scores.scores())
    rows = [stored_score(o.document) for o in first + second]
    assert scores.append_scores(rows + rows[:2]) == [False] * (len(rows) + 2)  # idempotent, duplicates too
    new = [stored_score(d) for d in score_batch(scores, _heads(store)[8:11], RunScorer(ruleset))]
    forged = stored_score(second[1].document)
    forged = type(forged)(**{**forged.__dict__, "document_sha256": "0" * 64})
    with pytest.raises(ScoreDriftError):
        scores.append_scores([*new, forged])
    assert len(scores.scores()) == held  # the new rows of the failed batch were not written
    assert scores.append_scores(new) == [True] * len(new)


@pytest.mark.parametrize("ruleset_path", RULESETS, ids=["default", "default-v1"])
def test_reused_monitor_forgets_the_run_before(ruleset_path: Path | None) -> None:
    """A monitor reset between runs gives every finding a fresh one gives (detail kept)."""
    ruleset = load_ruleset(ruleset_path)
    reused = RunMonitor(ruleset)
    for path in _corpus_files():
        rows = fact_rows(read_native(path)[0].events)
        reused.reset()
        reused.feed(rows[: len(rows) // 2])
        reused.feed(rows[len(rows) // 2:])
        fresh = RunMonitor(ruleset)
        fresh.feed(rows)
        assert reused.finish() == fresh.finish(), path
        assert reused.model_events == fresh.model_events


def test_count_bytes_of_the_template_agree_with_formatting_at_the_table_boundaries() -> None:
    from procgrade.engine.scoring import _int_bytes

    for value in (-1, 0, 1, 4095, 4096, 10**20):
        assert _int_bytes(value) == str(value).encode()
