"""Score documents stored as their rule set's template and each run's values (revision 0007).

What a reader gets must be the document scoring the run alone gives, to the byte, however its
row keeps it: rows written as values, rows written whole (before 0007, or by ``score_runs``),
both in one store. The template is stored once per store; a row or template changed behind the
store's back is named, never read as a different document."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from builders import allow_updates, every_kind_run, small_run, write_jsonl
from procgrade.engine.canonical import sha256_hex
from procgrade.engine.errors import StoreError
from procgrade.engine.executors import LocalExecutor
from procgrade.engine.ingest import ingest_native
from procgrade.engine.parallel_scoring import score_many, verify_many
from procgrade.engine.rescoring import compute_score, score_batch, score_runs, stored_score
from procgrade.engine import scoring
from procgrade.engine.scoring import RunScorer, ScoreDocument
from procgrade.engine.store import EventStore
from procgrade.engine.store.score_templates import SEPARATOR, ScoreFill, ScoreTemplate, pack, unpack
from procgrade.engine.store.scores import ScoreStore, StoredScore
from procgrade.rules.identity import ruleset_hash
from procgrade.rules.loading import load_ruleset
from procgrade.rules.model import RuleSet
from procgrade.rules.planted import discover

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ROOT / "tests" / "fixtures" / "planted"


def _fill(store: EventStore, tmp_path: Path) -> list[str]:
    """Planted runs (with violations), every-kind runs of several lengths and an empty run."""
    files = [path for case in discover(PLANTED) for path in (case.fault_path, case.clean_path)]
    files += [write_jsonl(tmp_path / f"kinds-{n}.jsonl", every_kind_run(f"kinds-{n}", n)) for n in (1, 40)]
    files.append(write_jsonl(tmp_path / "awkward.jsonl", small_run("a/b:c@d+e")))
    ingest_native(store, files)
    store.append("empty-run", [])
    return [info.run_id for info in store.runs()]


def _rows(store: EventStore) -> list[tuple[str, str, str | None]]:
    with store.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(text(
            "SELECT run_id, document, document_template FROM scores ORDER BY run_id, ruleset_hash"))]


def test_rescore_stores_values_once_per_template_and_reads_back_each_document(store: EventStore,
                                                                               tmp_path: Path) -> None:
    run_ids = _fill(store, tmp_path)
    ruleset = load_ruleset()
    score_many(store, None, ruleset, executor=LocalExecutor(1), collect=False)
    rows = _rows(store)
    assert len(rows) == len(run_ids)
    assert all(template is not None for _, _, template in rows), "every run's row holds values"
    with store.engine.connect() as conn:
        templates = conn.execute(text("SELECT template_sha256, template, slots FROM score_templates")).all()
    assert len(templates) == 1
    digest, body, slots = templates[0]
    assert sha256_hex(body.encode()) == digest
    stored = {score.run_id: score for score in ScoreStore(store).scores()}
    for run_id, values, _ in rows:
        expected = compute_score(store, ruleset, run_id)  # the reference path, run alone
        assert stored[run_id].document.encode() == expected.canonical, run_id
        assert stored[run_id].document_sha256 == expected.sha256
        assert values.count(SEPARATOR) == slots - 1
        assert len(values) < len(expected.canonical) / 3, "the row keeps the run's values, not the template"
    assert verify_many(store) == (len(run_ids), [])


def test_whole_rows_and_value_rows_live_side_by_side(store: EventStore, tmp_path: Path) -> None:
    run_ids = _fill(store, tmp_path)
    ruleset = load_ruleset()
    score_runs(store, run_ids, ruleset)  # whole documents, as before revision 0007
    newer = ruleset.model_copy(update={"version": ruleset.version + 1})
    score_many(store, None, newer, executor=LocalExecutor(1), collect=False)
    rows = _rows(store)
    assert sum(template is None for _, _, template in rows) == len(run_ids)
    assert sum(template is not None for _, _, template in rows) == len(run_ids)
    by_hash = {ruleset_hash(ruleset): ruleset, ruleset_hash(newer): newer}
    for score in ScoreStore(store).scores():
        assert score.document.encode() == compute_score(store, by_hash[score.ruleset_hash], score.run_id).canonical
    assert verify_many(store) == (2 * len(run_ids), [])
    # re-scoring is a no-op either way: the held bytes are the document's
    assert all(not outcome.written for outcome in score_many(store, None, newer, executor=LocalExecutor(1)))


def test_the_scorers_values_fill_its_template_into_the_document(store: EventStore, tmp_path: Path) -> None:
    run_ids = _fill(store, tmp_path)
    scorer = RunScorer(load_ruleset())
    template = ScoreTemplate.of(scorer.template_text)
    assert scoring._SEPARATOR == SEPARATOR.encode()  # the scorer joins as the store splits
    for run_id in run_ids:
        info = store.run(run_id)
        document, _, values = scorer.filled(ScoreStore(store).fact_batches(run_id), run_id=run_id,
                                            head_hash=info.head_hash or "", event_count=info.event_count)
        assert values is not None and values.count(SEPARATOR.encode()) == template.slots - 1
        assert scorer.template_text % tuple(values.split(SEPARATOR.encode())) == document
        joined = values.decode()
        assert pack(ScoreFill(template, joined)) == joined
        assert unpack(template, joined, run_id=run_id).encode() == document


def _scored_alone(store: EventStore, tmp_path: Path, run_id: str) -> tuple[RuleSet, ScoreDocument, ScoreStore]:
    """The fixture runs stored, ``run_id``'s document under the built-in rule set (not stored), and
    the score store holding that rule set, ready for hand-made score rows."""
    _fill(store, tmp_path)
    ruleset = load_ruleset()
    document = compute_score(store, ruleset, run_id)
    scores = ScoreStore(store)
    scores.save_ruleset(document.ruleset_hash, ruleset.name, ruleset.version, "{}")
    return ruleset, document, scores


def test_values_that_do_not_fit_their_template_are_stored_whole(store: EventStore, tmp_path: Path) -> None:
    _, document, scores = _scored_alone(store, tmp_path, "kinds-40")
    whole = stored_score(document)
    template = ScoreTemplate("0" * 64, "%s and %s", 2)
    extra = StoredScore(**{**whole.__dict__, "fill": ScoreFill(template, f"a{SEPARATOR}b{SEPARATOR}c")})
    assert scores.append_scores([extra]) == [True]
    assert _rows(store) == [("kinds-40", document.canonical.decode(), None)]
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM score_templates")).scalar() == 0
    assert scores.scores()[0].document == whole.document


def test_a_rescore_sends_the_writer_values_and_a_hash_not_the_document(store: EventStore, tmp_path: Path) -> None:
    """What a scoring task hands the one writer for a run is its values and the document's sha256;
    the document whole only where no values stand for it. Told callers still get every document."""
    run_ids = _fill(store, tmp_path)
    ruleset = load_ruleset()
    scorer = RunScorer(ruleset)
    heads = [(info.run_id, info.head_hash or "", info.event_count) for info in store.runs()]
    forms = score_batch(ScoreStore(store), heads, scorer, answer="stored")
    for (run_id, _, _), form in zip(heads, forms):
        expected = compute_score(store, ruleset, run_id)
        assert form.document is None and form.values is not None, run_id
        assert form.sha256 == expected.sha256
        assert form.process == expected.process_score
        assert scorer.template_text % tuple(form.values.split(SEPARATOR.encode())) == expected.canonical
    with pytest.raises(ValueError, match="no answer 'whole'; one of document, canonical, stored"):
        score_batch(ScoreStore(store), heads, scorer, answer="whole")
    told = {outcome.document.run_id: outcome.document.canonical
            for outcome in score_many(store, None, ruleset, executor=LocalExecutor(1))}
    assert told == {run_id: compute_score(store, ruleset, run_id).canonical for run_id in run_ids}


def test_a_score_handed_over_without_its_document_needs_values_that_fit(store: EventStore, tmp_path: Path) -> None:
    ruleset, document, scores = _scored_alone(store, tmp_path, "kinds-40")
    scorer = RunScorer(ruleset)
    template = ScoreTemplate.of(scorer.template_text)
    _, _, values = scorer.filled(scores.fact_batches("kinds-40"), run_id="kinds-40",
                                 head_hash=document.run_head_hash, event_count=document.run_event_count)
    given = {**stored_score(document).__dict__, "document": None}
    fitting = StoredScore(**{**given, "fill": ScoreFill(template, values.decode())})
    assert fitting.whole() == document.canonical.decode()
    short = StoredScore(**{**given, "fill": ScoreFill(template, "1")})
    with pytest.raises(StoreError, match="run kinds-40: its score's values do not fill its template"):
        scores.append_scores([fitting.__class__(**{**given, "run_id": "kinds-1", "fill": fitting.fill}), short])
    assert scores.scores() == [], "nothing of the batch is written"
    assert scores.append_scores([fitting]) == [True]
    assert scores.scores()[0].document == document.canonical.decode()


def test_a_changed_value_is_drift_and_a_changed_template_is_named(store: EventStore, db_kind: str,
                                                                  tmp_path: Path) -> None:
    _fill(store, tmp_path)
    score_many(store, ["kinds-40", "kinds-1"], load_ruleset(), executor=LocalExecutor(1), collect=False)
    allow_updates(store, db_kind, "scores", "score_templates")
    with store.engine.begin() as conn:
        # the run's event count is a value of its own: 40 becomes 41
        conn.execute(text("UPDATE scores SET document = replace(document, :old, :new) WHERE run_id = 'kinds-40'"),
                     {"old": f"{SEPARATOR}40{SEPARATOR}", "new": f"{SEPARATOR}41{SEPARATOR}"})
    checked, drifts = verify_many(store)
    assert checked == 2
    assert [(d.run_id, d.reason) for d in drifts] == [("kinds-40", "recomputed document differs from the stored bytes")]
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE score_templates SET template = template || '%s'"))
    with pytest.raises(StoreError, match=r"run kinds-1: the stored score does not fill its template [0-9a-f]{16}"):
        ScoreStore(store).scores()


def test_unpack_names_the_run_when_the_values_do_not_fit() -> None:
    template = ScoreTemplate.of(b'{"a":%s,"b":"100%%"}')
    assert template.slots == 1
    assert unpack(template, "7", run_id="r") == '{"a":7,"b":"100%"}'
    with pytest.raises(StoreError, match="run r: .* 2 values for its 1 slots"):
        unpack(template, f"7{SEPARATOR}8", run_id="r")
    with pytest.raises(StoreError, match="run r: .*not enough arguments|run r: .*format"):
        unpack(ScoreTemplate(template.sha256, "%s %s %d", 3), f"1{SEPARATOR}2{SEPARATOR}3", run_id="r")


TEMPLATE_OVERWRITES = {
    "sqlite": ["REPLACE INTO score_templates SELECT * FROM score_templates",
               "INSERT INTO score_templates SELECT * FROM score_templates WHERE true "
               "ON CONFLICT (template_sha256) DO UPDATE SET template = 'x'",
               "INSERT OR IGNORE INTO score_templates SELECT * FROM score_templates",
               "UPDATE score_templates SET template = 'x'",
               "DELETE FROM score_templates"],
    "postgresql": ["INSERT INTO score_templates SELECT * FROM score_templates "
                   "ON CONFLICT (template_sha256) DO UPDATE SET template = 'x'",
                   "UPDATE score_templates SET template = 'x'",
                   "DELETE FROM score_templates",
                   "TRUNCATE score_templates CASCADE"],
}


@pytest.mark.parametrize("index", range(5))
def test_every_overwrite_of_a_template_is_refused(store: EventStore, db_kind: str, tmp_path: Path,
                                                  index: int) -> None:
    statements = TEMPLATE_OVERWRITES[db_kind]
    _fill(store, tmp_path)
    score_many(store, ["kinds-40"], load_ruleset(), executor=LocalExecutor(1), collect=False)
    with store.engine.connect() as conn:
        before = conn.execute(text("SELECT * FROM score_templates")).all()
    assert len(before) == 1
    with pytest.raises(Exception, match="procgrade: .*refused"):
        with store.engine.begin() as conn:
            conn.execute(text(statements[index % len(statements)]))
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT * FROM score_templates")).all() == before
    assert ScoreStore(store).scores()[0].document.encode() == compute_score(store, load_ruleset(), "kinds-40").canonical


def test_a_store_scored_before_0007_keeps_its_documents_and_gains_value_rows(tmp_path: Path) -> None:
    """The v1 fixture (revision 0003, every document whole) migrated to the head: its 17 documents
    read back unchanged, a re-score under the current rule set stores values beside them, and all
    34 verify."""
    import shutil

    from procgrade.engine.store import open_store
    from procgrade.engine.store.migrate import upgrade
    from procgrade.engine.store.sqlite import sqlite_engine

    db = tmp_path / "v1.sqlite"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "v1-scores" / "v1.sqlite", db)
    engine = sqlite_engine(f"sqlite:///{db}")
    upgrade(engine)
    engine.dispose()
    store = open_store(f"sqlite:///{db}")
    try:
        before = {(s.run_id, s.ruleset_hash): s.document for s in ScoreStore(store).scores()}
        assert len(before) == 17 and all(template is None for _, _, template in _rows(store))
        score_many(store, None, load_ruleset(), executor=LocalExecutor(1), collect=False)
        after = {(s.run_id, s.ruleset_hash): s.document for s in ScoreStore(store).scores()}
        assert {key: after[key] for key in before} == before
        assert sum(template is not None for _, _, template in _rows(store)) == len(store.runs())
        assert verify_many(store) == (17 + len(store.runs()), [])
    finally:
        store.close()
