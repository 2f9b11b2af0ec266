"""The tables, as SQLAlchemy Core metadata (Alembic in ``migrations/`` owns the DDL).

``events``, ``rulesets``, ``scores`` and ``score_templates`` are append-only: triggers created by the
migrations refuse UPDATE and DELETE in the database itself. ``runs`` is the per-run projection the writer
keeps current (head, count, provenance); once a run is sealed, a trigger refuses
any change to its row. ``seals`` records each run's seal once (written by a trigger), so
a seal cleared behind the triggers' back is still seen by ``verify-log``.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, ForeignKey, Integer, MetaData, PrimaryKeyConstraint, Table, Text

from procgrade.engine.facts import FACT_COLUMNS

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("run_id", Text, primary_key=True),
    Column("harness", Text),
    Column("harness_version", Text),
    Column("model", Text),
    Column("task_id", Text),
    Column("event_count", BigInteger, nullable=False),
    Column("head_hash", Text),
    Column("sealed_event_count", BigInteger),
    Column("sealed_head_hash", Text),
    Column("source_format", Text),
    Column("redactions", BigInteger),
    Column("unparsed", BigInteger),
)

_FACT_TYPES = {"text": Text, "int": BigInteger}

events = Table(
    "events",
    metadata,
    Column("run_id", Text, ForeignKey("runs.run_id"), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", Text, nullable=False, unique=True),
    Column("ts", Text),
    Column("kind", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("stage", Integer),
    Column("parent_seq", BigInteger),
    *(Column(name, _FACT_TYPES[kind]) for name, kind in FACT_COLUMNS.items()),
    Column("in_stage", Integer),
    Column("facts", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("payload_sha256", Text, nullable=False),
    Column("hash", Text, nullable=False),
    PrimaryKeyConstraint("run_id", "seq", name="pk_events"),
)

rulesets = Table(
    "rulesets",
    metadata,
    Column("ruleset_hash", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("body", Text, nullable=False),
)

scores = Table(
    "scores",
    metadata,
    Column("run_id", Text, ForeignKey("runs.run_id"), nullable=False),
    Column("ruleset_hash", Text, ForeignKey("rulesets.ruleset_hash"), nullable=False),
    Column("engine_version", Text, nullable=False),
    Column("run_head_hash", Text, nullable=False),
    Column("run_event_count", BigInteger, nullable=False),
    Column("process_score", Text),
    Column("document", Text, nullable=False),  # the document, or its values when document_template is set
    Column("document_sha256", Text, nullable=False),
    PrimaryKeyConstraint("run_id", "ruleset_hash", "engine_version", "run_head_hash", name="pk_scores"),
    Column("document_template", Text, ForeignKey("score_templates.template_sha256")),
)

#: A score document's text shared by every run of a rule set (engine/store/score_templates.py).
score_templates = Table(
    "score_templates",
    metadata,
    Column("template_sha256", Text, primary_key=True),
    Column("template", Text, nullable=False),
    Column("slots", Integer, nullable=False),
)

seals = Table(
    "seals",
    metadata,
    Column("run_id", Text, ForeignKey("runs.run_id"), primary_key=True),
    Column("event_count", BigInteger, nullable=False),
    Column("head_hash", Text, nullable=False),
)
