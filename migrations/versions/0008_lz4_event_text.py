"""PostgreSQL keeps an event's payload and fields compressed with LZ4 instead of pglz.

Tool outputs of tens of kilobytes go to TOAST compressed, and pglz took most of the server's time
for them. Ingesting 55 MB of 10-100 KB command events (bench/ingest.py's large-payload case) took
the server 1.0-1.4 s of CPU with pglz and 0.22-0.27 s with LZ4: 29-39 MB/s of input against
76-88 MB/s, for a table of 18.5 MB instead of 14.9. LZ4 also reads back faster. Values already
stored keep their compression (PostgreSQL reads both); only new values are written with LZ4.
Nothing changes on SQLite, nor on a PostgreSQL server without per-column compression (before 14)
or built without LZ4, where pglz stays.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

#: Whether this server can compress a column with LZ4: the compression setting exists (PostgreSQL
#: 14 and later) and offers it (the server was built with LZ4).
_LZ4_OFFERED = "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"


def _lz4_here() -> bool:
    """A PostgreSQL server that offers LZ4 (else this revision changes nothing)."""
    bind = op.get_bind()
    return bind.dialect.name == "postgresql" and bool(bind.execute(sa.text(_LZ4_OFFERED)).scalar())


def upgrade() -> None:
    if _lz4_here():  # catalog only: no row is rewritten, so this is instant on a store of any size
        op.execute("ALTER TABLE events ALTER COLUMN payload SET COMPRESSION lz4, "
                   "ALTER COLUMN facts SET COMPRESSION lz4")


def downgrade() -> None:
    if _lz4_here():
        op.execute("ALTER TABLE events ALTER COLUMN payload SET COMPRESSION default, "
                   "ALTER COLUMN facts SET COMPRESSION default")
