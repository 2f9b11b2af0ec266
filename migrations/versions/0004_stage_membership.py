"""Stage membership derived from the log (``in_stage``) and the fact columns of extractor 2.

Adds ``in_stage`` (see ``engine/stages.py``) and the columns extractor 2 added (``io_path``,
``io``, ``status``, ``area``, ``cmd_key``), then fills them for the events already stored,
computed from each stored event exactly as an append computes them now (stage conflicts in
old logs resolved in favour of the event's own ``stage``, as ``verify-log`` does). Nothing
else in any row changes: payloads, hashes and the version-1 fact columns stay byte for byte,
so stored score documents and hash chains still verify.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_NEW_COLUMNS = [("io_path", sa.Text), ("io", sa.Text), ("status", sa.Text), ("area", sa.Text), ("cmd_key", sa.Text)]

_SQLITE_REFUSE_UPDATE = """CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
       BEGIN SELECT RAISE(ABORT, 'procgrade: events are append-only: UPDATE refused'); END"""


def upgrade() -> None:
    # Plain ADD COLUMN (no batch rebuild): rows, triggers and the table's identity stay.
    for name, type_ in _NEW_COLUMNS:
        op.add_column("events", sa.Column(name, type_))
    op.add_column("events", sa.Column("in_stage", sa.Integer))
    bind = op.get_bind()
    dialect = bind.dialect.name
    # The append-only trigger guards the log against changes; this backfill writes only the
    # new, derived columns, so it is lifted for the backfill alone, in this transaction.
    if dialect == "sqlite":
        op.execute("DROP TRIGGER events_refuse_update")
    else:
        op.execute("ALTER TABLE events DISABLE TRIGGER events_refuse_change")
    _backfill(bind)
    if dialect == "sqlite":
        op.execute(_SQLITE_REFUSE_UPDATE)
    else:
        op.execute("ALTER TABLE events ENABLE TRIGGER events_refuse_change")


def _backfill(bind: sa.engine.Connection) -> None:
    from procgrade.engine.facts import FACT_COLUMNS, extract_facts
    from procgrade.engine.stages import StageTracker
    from procgrade.engine.stored import to_event

    names = [name for name, _ in _NEW_COLUMNS]
    positions = [list(FACT_COLUMNS).index(name) for name in names]
    update = sa.text(
        f"UPDATE events SET {', '.join(f'{n} = :{n}' for n in names)}, in_stage = :in_stage "
        "WHERE run_id = :run_id AND seq = :seq")
    run_ids = [row[0] for row in bind.execute(sa.text("SELECT run_id FROM runs ORDER BY run_id"))]
    for run_id in run_ids:
        rows = bind.execute(sa.text(
            "SELECT run_id, seq, event_id, ts, kind, actor, stage, parent_seq, facts, payload, payload_sha256, hash "
            "FROM events WHERE run_id = :run_id ORDER BY seq"), {"run_id": run_id}).all()
        stages = StageTracker(strict=False)
        changes = []
        for row in rows:
            event = to_event(tuple(row))
            facts = extract_facts(event)
            values = {name: facts[i] for name, i in zip(names, positions)}
            values["in_stage"] = stages.step(event.seq, event.kind, event.actor, event.stage)
            if any(v is not None for v in values.values()):
                changes.append({**values, "run_id": run_id, "seq": event.seq})
        for start in range(0, len(changes), 1000):
            bind.execute(update, changes[start:start + 1000])


def downgrade() -> None:
    raise NotImplementedError("procgrade never drops stored facts: nothing the user saved is lost")
