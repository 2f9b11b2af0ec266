"""Score templates: a rule set's score-document text stored once, each score row only its run's values.

A score row whose ``document_template`` is set holds in ``document`` the values that fill that
template's slots, joined by U+001F (``procgrade.engine.store.score_templates``); rows written
before this revision, and any document that does not fill back exactly, hold the document whole
and no template. ``score_templates`` is append-only like ``scores``.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_SQLITE = [
    """CREATE TRIGGER score_templates_refuse_update BEFORE UPDATE ON score_templates
       BEGIN SELECT RAISE(ABORT, 'procgrade: score_templates are append-only: UPDATE refused'); END""",
    """CREATE TRIGGER score_templates_refuse_delete BEFORE DELETE ON score_templates
       BEGIN SELECT RAISE(ABORT, 'procgrade: score_templates are append-only: DELETE refused'); END""",
    """CREATE TRIGGER score_templates_refuse_overwrite BEFORE INSERT ON score_templates
       WHEN EXISTS (SELECT 1 FROM score_templates WHERE template_sha256 = NEW.template_sha256)
       BEGIN SELECT RAISE(ABORT, 'procgrade: score_templates are append-only: overwrite refused'); END""",
]
_POSTGRES = [
    """CREATE TRIGGER score_templates_refuse_change BEFORE UPDATE OR DELETE ON score_templates
       FOR EACH ROW EXECUTE FUNCTION procgrade_refuse_change()""",
    """CREATE TRIGGER score_templates_refuse_truncate BEFORE TRUNCATE ON score_templates
       FOR EACH STATEMENT EXECUTE FUNCTION procgrade_refuse_change()""",
]


def upgrade() -> None:
    op.create_table(
        "score_templates",
        sa.Column("template_sha256", sa.Text, primary_key=True),
        sa.Column("template", sa.Text, nullable=False),
        sa.Column("slots", sa.Integer, nullable=False),
    )
    # A nullable column without a default: both databases add it in place (SQLite's triggers on
    # scores untouched); written out because Alembic would add SQLite's reference as a separate
    # ALTER, which SQLite has not.
    op.execute("ALTER TABLE scores ADD COLUMN document_template TEXT "
               "REFERENCES score_templates (template_sha256)")
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE if dialect == "sqlite" else _POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("procgrade never drops stored scores: nothing the user saved is lost")
