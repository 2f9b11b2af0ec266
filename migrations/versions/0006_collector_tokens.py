"""Collector API tokens: hashed secrets, each scoped to a project (a run-id prefix) and to read or write.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Only the sha256 of a token's secret is stored; the secret is shown once, at creation.
    op.create_table(
        "tokens",
        sa.Column("token_id", sa.Text, primary_key=True),
        sa.Column("secret_sha256", sa.Text, nullable=False),
        sa.Column("project", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("label", sa.Text),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("revoked_at", sa.Text),
        sa.CheckConstraint("scope IN ('read', 'write')", name="ck_tokens_scope"),
    )


def downgrade() -> None:
    op.drop_table("tokens")
