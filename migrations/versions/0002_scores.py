"""Scores: rule sets by content hash and append-only score documents.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_SQLITE = [
    """CREATE TRIGGER {table}_refuse_update BEFORE UPDATE ON {table}
       BEGIN SELECT RAISE(ABORT, 'procgrade: {table} are append-only: UPDATE refused'); END""",
    """CREATE TRIGGER {table}_refuse_delete BEFORE DELETE ON {table}
       BEGIN SELECT RAISE(ABORT, 'procgrade: {table} are append-only: DELETE refused'); END""",
]
_POSTGRES = [
    """CREATE TRIGGER {table}_refuse_change BEFORE UPDATE OR DELETE ON {table}
       FOR EACH ROW EXECUTE FUNCTION procgrade_refuse_change()""",
    """CREATE TRIGGER {table}_refuse_truncate BEFORE TRUNCATE ON {table}
       FOR EACH STATEMENT EXECUTE FUNCTION procgrade_refuse_change()""",
]


def upgrade() -> None:
    op.create_table(
        "rulesets",
        sa.Column("ruleset_hash", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.create_table(
        "scores",
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("ruleset_hash", sa.Text, sa.ForeignKey("rulesets.ruleset_hash"), nullable=False),
        sa.Column("engine_version", sa.Text, nullable=False),
        sa.Column("run_head_hash", sa.Text, nullable=False),
        sa.Column("run_event_count", sa.BigInteger, nullable=False),
        sa.Column("process_score", sa.Text),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("document_sha256", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "ruleset_hash", "engine_version", "run_head_hash", name="pk_scores"),
    )
    dialect = op.get_bind().dialect.name
    for table in ("rulesets", "scores"):
        for statement in _SQLITE if dialect == "sqlite" else _POSTGRES:
            op.execute(statement.format(table=table))


def downgrade() -> None:
    raise NotImplementedError("procgrade never drops stored scores: nothing the user saved is lost")
