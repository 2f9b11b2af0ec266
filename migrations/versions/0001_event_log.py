"""The run event log: runs, append-only events, and the triggers that keep them so.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_FACT_COLUMNS = [
    ("path", sa.Text), ("new_path", sa.Text), ("edit_kind", sa.Text), ("command", sa.Text), ("cmd_hash", sa.Text), ("exit_code", sa.BigInteger),
    ("outcome", sa.Text), ("job_id", sa.Text), ("worker_id", sa.Text), ("intent", sa.Text),
    ("tests_passed", sa.BigInteger), ("tests_failed", sa.BigInteger), ("tests_errored", sa.BigInteger),
    ("context_count", sa.BigInteger),
]

_SQLITE_TRIGGERS = [
    """CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
       BEGIN SELECT RAISE(ABORT, 'procgrade: events are append-only: UPDATE refused'); END""",
    """CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
       BEGIN SELECT RAISE(ABORT, 'procgrade: events are append-only: DELETE refused'); END""",
    """CREATE TRIGGER runs_refuse_sealed_update BEFORE UPDATE ON runs WHEN OLD.sealed_head_hash IS NOT NULL
       BEGIN SELECT RAISE(ABORT, 'procgrade: run is sealed: UPDATE refused'); END""",
    """CREATE TRIGGER runs_refuse_delete BEFORE DELETE ON runs
       BEGIN SELECT RAISE(ABORT, 'procgrade: runs are never deleted: DELETE refused'); END""",
]

_POSTGRES_TRIGGERS = [
    """CREATE FUNCTION procgrade_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'procgrade: % is append-only: % refused', TG_TABLE_NAME, TG_OP
           USING ERRCODE = 'P0001';
       END $$""",
    """CREATE FUNCTION procgrade_refuse_sealed_change() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF OLD.sealed_head_hash IS NOT NULL THEN
           RAISE EXCEPTION 'procgrade: run % is sealed: UPDATE refused', OLD.run_id USING ERRCODE = 'P0001';
         END IF;
         RETURN NEW;
       END $$""",
    """CREATE TRIGGER events_refuse_change BEFORE UPDATE OR DELETE ON events
       FOR EACH ROW EXECUTE FUNCTION procgrade_refuse_change()""",
    """CREATE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON events
       FOR EACH STATEMENT EXECUTE FUNCTION procgrade_refuse_change()""",
    """CREATE TRIGGER runs_refuse_delete BEFORE DELETE ON runs
       FOR EACH ROW EXECUTE FUNCTION procgrade_refuse_change()""",
    """CREATE TRIGGER runs_refuse_truncate BEFORE TRUNCATE ON runs
       FOR EACH STATEMENT EXECUTE FUNCTION procgrade_refuse_change()""",
    """CREATE TRIGGER runs_refuse_sealed_update BEFORE UPDATE ON runs
       FOR EACH ROW EXECUTE FUNCTION procgrade_refuse_sealed_change()""",
    # Append-only: ANALYZE often, VACUUM almost never (as pyeventsourcing configures its tables).
    """ALTER TABLE events SET (autovacuum_vacuum_threshold = 100000000,
       autovacuum_analyze_threshold = 1000, autovacuum_analyze_scale_factor = 0.01)""",
]


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("harness", sa.Text),
        sa.Column("harness_version", sa.Text),
        sa.Column("model", sa.Text),
        sa.Column("task_id", sa.Text),
        sa.Column("event_count", sa.BigInteger, nullable=False),
        sa.Column("head_hash", sa.Text),
        sa.Column("sealed_event_count", sa.BigInteger),
        sa.Column("sealed_head_hash", sa.Text),
    )
    op.create_table(
        "events",
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("event_id", sa.Text, nullable=False),
        sa.Column("ts", sa.Text),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("stage", sa.Integer),
        sa.Column("parent_seq", sa.BigInteger),
        *(sa.Column(name, type_) for name, type_ in _FACT_COLUMNS),
        sa.Column("facts", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("payload_sha256", sa.Text, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_events"),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sqlite_with_rowid=False,
    )
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_TRIGGERS if dialect == "sqlite" else _POSTGRES_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("procgrade never drops the event log: nothing the user saved is lost")
