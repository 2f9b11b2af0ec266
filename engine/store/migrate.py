"""Schema management: Alembic migrations run on the store's own connection.

Every command that opens a store first checks that it is at the head revision. That check reads
the version table with one query and the head from the revision files' own assignments
(:func:`schema_head`), so it does not import Alembic and Mako (about 0.15 s, a fifth of a small
ingest's or re-score's start-up). Alembic is imported where it migrates, and answers whenever the
plain reading cannot (a history that is not one straight line, a version table with two rows).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from procgrade import migrations
from procgrade.engine.errors import SchemaNotReadyError

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Engine

__all__ = ["alembic_config", "alembic_head_revision", "check_ready", "check_revision", "current_revision",
           "head_revision", "schema_head", "sqlite_versions", "upgrade"]

#: Alembic's version table (its default name and schema, as migrations/env.py leaves them).
VERSION_TABLE = "alembic_version"
_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(?:(['\"])([^'\"]+)\2|None)\s*$", re.M)


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    return config


def upgrade(engine: Engine) -> str:
    """Run every pending migration; return the revision the database is now at."""
    from alembic import command

    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return head_revision()


def schema_head() -> str | None:
    """The head revision of procgrade's migrations, read from the revision files' assignments (what
    Alembic's script directory computes, without importing it), or None when they are not a plain
    linear history (then the caller asks Alembic)."""
    revisions: dict[str, str | None] = {}
    for path in sorted((Path(migrations.__file__).parent / "versions").glob("*.py")):
        if path.name == "__init__.py":
            continue
        found = {m.group(1): m.group(3) for m in _ASSIGNMENT.finditer(path.read_text(encoding="utf-8"))}
        if "revision" not in found or "down_revision" not in found or found["revision"] is None:
            return None
        revisions[found["revision"]] = found["down_revision"]
    heads = set(revisions) - set(revisions.values())
    return next(iter(heads)) if len(heads) == 1 else None


def alembic_head_revision() -> str:
    """The head revision as Alembic's script directory computes it."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def head_revision() -> str:
    return schema_head() or alembic_head_revision()


def current_revision(engine: Engine) -> str | None:
    """The revision recorded in the database, None when it has no version table (or an empty one)."""
    from sqlalchemy import inspect, text

    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return None
        versions = [row[0] for row in connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))]
        if len(versions) <= 1:
            return versions[0] if versions else None
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(connection).get_current_revision()  # words the error on two heads


def sqlite_versions(cursor: Any) -> list[str] | None:
    """The rows of Alembic's version table read on a ``sqlite3`` cursor (or connection), None when
    the database has no such table: what a SQLite store's revision is read from without SQLAlchemy."""
    found = cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,))
    if found.fetchone() is None:
        return None
    return [row[0] for row in cursor.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall()]


def check_ready(engine: Engine) -> None:
    """Raise :class:`SchemaNotReadyError` unless the database is at the head revision."""
    check_revision(current_revision(engine))


def check_revision(current: str | None) -> None:
    """Raise :class:`SchemaNotReadyError` unless ``current`` (a database's revision, None for none)
    is the head revision."""
    head = head_revision()
    if current is None:
        raise SchemaNotReadyError("the database has no procgrade schema: run `procgrade init`")
    if current != head:
        raise SchemaNotReadyError(
            f"the database schema is at revision {current}, this procgrade needs {head}: run `procgrade init` to migrate"
        )
