"""Schema management: Alembic migrations run on the store's own connection."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from procgrade import migrations
from procgrade.engine.errors import SchemaNotReadyError

__all__ = ["alembic_config", "upgrade", "current_revision", "head_revision", "check_ready"]


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    return config


def upgrade(engine: Engine) -> str:
    """Run every pending migration; return the revision the database is now at."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return head_revision()


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def check_ready(engine: Engine) -> None:
    """Raise :class:`SchemaNotReadyError` unless the database is at the head revision."""
    current, head = current_revision(engine), head_revision()
    if current is None:
        raise SchemaNotReadyError("the database has no procgrade schema: run `procgrade init`")
    if current != head:
        raise SchemaNotReadyError(
            f"the database schema is at revision {current}, this procgrade needs {head}: run `procgrade init` to migrate"
        )
