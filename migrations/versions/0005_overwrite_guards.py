"""Overwrite guards: no row of the log, of a sealed run or of a score is ever replaced; seals are recorded.

SQLite's ``INSERT OR REPLACE`` / ``REPLACE`` deletes the conflicting row without firing any
DELETE trigger (unless ``recursive_triggers`` is on, which the writer of the database chooses),
so a BEFORE INSERT trigger refuses every insert whose key is already held. PostgreSQL has no
REPLACE and its upsert (``ON CONFLICT DO UPDATE``) fires the UPDATE triggers 0001 and 0002 made.

Both databases also get ``seals``: one append-only row per sealed run, written by a trigger when
a run is sealed, so clearing a run's sealed columns (with triggers disabled) is still visible to
``verify-log``; and a run's event count may never go down.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_OVERWRITE = "BEGIN SELECT RAISE(ABORT, 'procgrade: {what}: {verb} refused'); END"

_SQLITE = [
    """CREATE TRIGGER events_refuse_overwrite BEFORE INSERT ON events
       WHEN EXISTS (SELECT 1 FROM events WHERE run_id = NEW.run_id AND seq = NEW.seq)
         OR EXISTS (SELECT 1 FROM events WHERE event_id = NEW.event_id)
       """ + _OVERWRITE.format(what="events are append-only", verb="overwrite"),
    """CREATE TRIGGER runs_refuse_overwrite BEFORE INSERT ON runs
       WHEN EXISTS (SELECT 1 FROM runs WHERE run_id = NEW.run_id)
       """ + _OVERWRITE.format(what="runs are never replaced", verb="overwrite"),
    """CREATE TRIGGER runs_refuse_shrink BEFORE UPDATE ON runs
       WHEN NEW.event_count < OLD.event_count OR NEW.run_id IS NOT OLD.run_id
       """ + _OVERWRITE.format(what="a run log only grows", verb="UPDATE"),
    """CREATE TRIGGER rulesets_refuse_overwrite BEFORE INSERT ON rulesets
       WHEN EXISTS (SELECT 1 FROM rulesets WHERE ruleset_hash = NEW.ruleset_hash)
       """ + _OVERWRITE.format(what="rulesets are append-only", verb="overwrite"),
    """CREATE TRIGGER scores_refuse_overwrite BEFORE INSERT ON scores
       WHEN EXISTS (SELECT 1 FROM scores WHERE run_id = NEW.run_id AND ruleset_hash = NEW.ruleset_hash
                    AND engine_version = NEW.engine_version AND run_head_hash = NEW.run_head_hash)
       """ + _OVERWRITE.format(what="scores are append-only", verb="overwrite"),
    """CREATE TRIGGER seals_refuse_overwrite BEFORE INSERT ON seals
       WHEN EXISTS (SELECT 1 FROM seals WHERE run_id = NEW.run_id)
       """ + _OVERWRITE.format(what="seals are append-only", verb="overwrite"),
    """CREATE TRIGGER seals_refuse_update BEFORE UPDATE ON seals
       """ + _OVERWRITE.format(what="seals are append-only", verb="UPDATE"),
    """CREATE TRIGGER seals_refuse_delete BEFORE DELETE ON seals
       """ + _OVERWRITE.format(what="seals are append-only", verb="DELETE"),
    """CREATE TRIGGER runs_record_seal AFTER UPDATE ON runs
       WHEN OLD.sealed_head_hash IS NULL AND NEW.sealed_head_hash IS NOT NULL
       BEGIN INSERT INTO seals (run_id, event_count, head_hash)
             VALUES (NEW.run_id, NEW.sealed_event_count, NEW.sealed_head_hash); END""",
]

_POSTGRES = [
    """CREATE FUNCTION procgrade_refuse_shrink() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF NEW.event_count < OLD.event_count OR NEW.run_id IS DISTINCT FROM OLD.run_id THEN
           RAISE EXCEPTION 'procgrade: a run''s log only grows: UPDATE of run % refused', OLD.run_id
             USING ERRCODE = 'P0001';
         END IF;
         RETURN NEW;
       END $$""",
    """CREATE FUNCTION procgrade_record_seal() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF OLD.sealed_head_hash IS NULL AND NEW.sealed_head_hash IS NOT NULL THEN
           INSERT INTO seals (run_id, event_count, head_hash)
             VALUES (NEW.run_id, NEW.sealed_event_count, NEW.sealed_head_hash);
         END IF;
         RETURN NULL;
       END $$""",
    """CREATE TRIGGER runs_refuse_shrink BEFORE UPDATE ON runs
       FOR EACH ROW EXECUTE FUNCTION procgrade_refuse_shrink()""",
    """CREATE TRIGGER runs_record_seal AFTER UPDATE ON runs
       FOR EACH ROW EXECUTE FUNCTION procgrade_record_seal()""",
    """CREATE TRIGGER seals_refuse_change BEFORE UPDATE OR DELETE ON seals
       FOR EACH ROW EXECUTE FUNCTION procgrade_refuse_change()""",
    """CREATE TRIGGER seals_refuse_truncate BEFORE TRUNCATE ON seals
       FOR EACH STATEMENT EXECUTE FUNCTION procgrade_refuse_change()""",
]


def upgrade() -> None:
    op.create_table(
        "seals",
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("event_count", sa.BigInteger, nullable=False),
        sa.Column("head_hash", sa.Text, nullable=False),
    )
    # Runs sealed before this revision get their seal row now.
    op.execute("INSERT INTO seals (run_id, event_count, head_hash) SELECT run_id, sealed_event_count, "
               "sealed_head_hash FROM runs WHERE sealed_head_hash IS NOT NULL")
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE if dialect == "sqlite" else _POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("procgrade never drops its guards or seals: nothing the user saved is lost")
