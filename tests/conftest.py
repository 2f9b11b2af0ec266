"""Shared fixtures: every store test runs against SQLite and PostgreSQL.

``store_url`` is an empty database: a fresh SQLite file in ``tmp_path``, or a
fresh schema ``t_<uuid hex>`` in the PostgreSQL database named by
``PROCGRADE_TEST_PG`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``)
whose search_path holds everything (tables, alembic_version, trigger functions);
the schema is dropped at teardown. An unreachable PostgreSQL fails the test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from databases import DATABASES, fresh_url  # noqa: E402

from procgrade.engine.store import EventStore, open_store  # noqa: E402

#: Task packages and hidden suites kept as fixtures are data for the oracles, never tests of procgrade.
collect_ignore = ["fixtures"]


@pytest.fixture(params=DATABASES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_url(request.param, tmp_path / "db") as url:
        yield url


@pytest.fixture
def db_kind(store_url: str) -> str:
    return "sqlite" if store_url.startswith("sqlite") else "postgresql"


@pytest.fixture
def store(store_url: str) -> Iterator[EventStore]:
    opened = open_store(store_url, create=True)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def open_stores(store_url: str) -> Iterator[list[EventStore]]:
    """Close every store a test opens (append to this list)."""
    opened: list[EventStore] = []
    try:
        yield opened
    finally:
        for s in opened:
            s.close()
