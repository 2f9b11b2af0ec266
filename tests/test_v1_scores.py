"""Score documents of rule set v1, stored before issue 10, still verify byte for byte.

The fixture (``tests/fixtures/v1-scores``, see its README) was made by the code before
template semantics 2, extractor 2 and migration 0004 existed. Migrating a copy to the
current schema must leave every stored document reproducible, every hash chain intact,
and the kept v1 rule file must re-score the runs into the same bytes on both databases.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from procgrade.engine.ingest import ingest_native
from procgrade.engine.log_verification import verify_log
from procgrade.engine.rescoring import score_runs, verify_scores
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.store.migrate import current_revision, head_revision, upgrade
from procgrade.engine.store.scores import ScoreStore
from procgrade.engine.store.sqlite import sqlite_engine
from procgrade.rules.identity import ruleset_hash
from procgrade.rules.loading import load_ruleset

FIXTURE = Path(__file__).parent / "fixtures" / "v1-scores"
V1_RULES = Path(__file__).parent.parent / "rules" / "sets" / "default-v1.yaml"


def _documents() -> dict[str, str]:
    lines = (FIXTURE / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    return {orjson.loads(line)["run_id"]: line for line in lines}


def test_v1_store_migrates_and_every_stored_score_verifies(tmp_path: Path) -> None:
    db = tmp_path / "v1.sqlite"
    shutil.copyfile(FIXTURE / "v1.sqlite", db)
    engine = sqlite_engine(f"sqlite:///{db}")
    assert current_revision(engine) == "0003"
    upgrade(engine)  # what `procgrade init` does
    engine.dispose()
    store = open_store(f"sqlite:///{db}")
    try:
        checked, drifts = verify_scores(store)
        assert (checked, drifts) == (17, [])
        for info in store.runs():
            report = verify_log(store, info.run_id)
            assert report.ok, (info.run_id, report.problems)
        stored = {s.run_id: s.document for s in ScoreStore(store).scores()}
        assert stored == _documents()
        # the markers-only run: its derived stages are filled in by the migration
        rows = list(ScoreStore(store).fact_rows("v1/stage-markers-only"))
        assert any(r[-1] is not None for r in rows) and all(r[3] is None for r in rows if r[1] in ("file_edit",))
    finally:
        store.close()


def test_v1_rule_file_hashes_as_stored() -> None:
    first = orjson.loads(next(iter(_documents().values())))
    assert ruleset_hash(load_ruleset(V1_RULES)) == first["ruleset"]["hash"]


def test_v1_rule_file_rescores_the_same_bytes_on_both_databases(store: EventStore) -> None:
    ingest_native(store, [FIXTURE / "runs.jsonl"])
    ruleset = load_ruleset(V1_RULES)
    outcomes = score_runs(store, [info.run_id for info in store.runs()], ruleset)
    produced = {o.document.run_id: o.document.canonical.decode() for o in outcomes}
    assert produced == _documents()
    assert all(orjson.loads(line)["format"] == "procgrade.score/1" for line in produced.values())


def test_migration_0004_on_postgresql_keeps_v1_scores_verifying(tmp_path: Path) -> None:
    """The same v1 store, copied into PostgreSQL at revision 0003 row for row, migrates to the
    head and still verifies (the backfill lifts the append-only trigger for itself only)."""
    import sqlite3

    from alembic import command
    from sqlalchemy import text

    from databases import pg_schema_url
    from procgrade.engine.store.migrate import alembic_config
    from procgrade.engine.store.postgres import postgres_engine

    source = sqlite3.connect(FIXTURE / "v1.sqlite")
    with pg_schema_url() as url:
        engine = postgres_engine(url)
        config = alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0003")
        with engine.begin() as connection:
            for table in ("runs", "events", "rulesets", "scores"):
                cursor = source.execute(f"SELECT * FROM {table}")
                columns = [d[0] for d in cursor.description]
                rows = [dict(zip(columns, row)) for row in cursor.fetchall()]
                connection.execute(text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                                        f"({', '.join(':' + c for c in columns)})"), rows)
        upgrade(engine)
        with engine.connect() as connection:
            assert current_revision(engine) == head_revision()
            # the trigger is back: the log refuses changes again
            stages = connection.execute(text("SELECT count(*) FROM events WHERE in_stage IS NOT NULL")).scalar()
        assert stages > 0
        with pytest.raises(Exception, match="append-only"):
            with engine.begin() as connection:
                connection.execute(text("UPDATE events SET in_stage = 9"))
        engine.dispose()
        store = open_store(url)
        try:
            assert verify_scores(store) == (17, [])
            assert all(verify_log(store, info.run_id).ok for info in store.runs())
        finally:
            store.close()
    source.close()
