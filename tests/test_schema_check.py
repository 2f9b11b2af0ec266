"""The readiness check every command makes reads the version table without Alembic.

:func:`procgrade.engine.store.migrate.current_revision` replaces Alembic's ``MigrationContext`` on
the path of every command that opens a store; these tests hold the two to the same answer on both
databases (no version table, an empty one, an older revision, the head) and pin that opening a
store that is ready does not import Alembic at all.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from alembic import command
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from procgrade.engine.errors import SchemaNotReadyError
from procgrade.engine.store import open_store
from procgrade.engine.store.migrate import alembic_config, check_ready, current_revision, head_revision, upgrade


def _alembics(engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def _engine_of(url: str):
    if url.startswith("sqlite"):
        from procgrade.engine.store.sqlite import sqlite_engine

        return sqlite_engine(url)
    from procgrade.engine.store.postgres import postgres_engine

    return postgres_engine(url)


def test_the_revision_read_without_alembic_is_alembics(store_url: str) -> None:
    engine = _engine_of(store_url)
    try:
        assert current_revision(engine) is None and _alembics(engine) is None  # no version table
        config = alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0003")
        assert current_revision(engine) == _alembics(engine) == "0003"
        with pytest.raises(SchemaNotReadyError, match=f"at revision 0003, this procgrade needs {head_revision()}"):
            check_ready(engine)
        upgrade(engine)
        assert current_revision(engine) == _alembics(engine) == head_revision()
        check_ready(engine)
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM alembic_version"))
        assert current_revision(engine) is None and _alembics(engine) is None  # an empty version table
        with pytest.raises(SchemaNotReadyError, match="has no procgrade schema"):
            check_ready(engine)
    finally:
        engine.dispose()


_PROBE = """
import json, sys
from procgrade.engine.store import open_store
store = open_store(sys.argv[1])
print(json.dumps({"runs": len(store.runs()), "alembic": sorted(m for m in sys.modules if m.split(".")[0] in ("alembic", "mako"))}))
store.close()
"""


def test_opening_a_ready_store_does_not_import_alembic(store_url: str) -> None:
    open_store(store_url, create=True).close()
    done = subprocess.run([sys.executable, "-c", _PROBE, store_url], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"runs": 0, "alembic": []}
