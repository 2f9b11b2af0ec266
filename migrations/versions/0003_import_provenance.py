"""Imported runs: the source format, and the counts of redacted secrets and unparsed records.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (no batch rebuild): the runs table's triggers and rows stay as they are.
    op.add_column("runs", sa.Column("source_format", sa.Text))
    op.add_column("runs", sa.Column("redactions", sa.BigInteger))
    op.add_column("runs", sa.Column("unparsed", sa.BigInteger))


def downgrade() -> None:
    raise NotImplementedError("procgrade never drops stored provenance: nothing the user saved is lost")
