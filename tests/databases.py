"""Fresh databases for tests: a SQLite file, or a PostgreSQL schema of its own.

Every store test runs against both databases. PostgreSQL being unreachable is a
test failure with a clear message, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_ENV = "PROCGRADE_TEST_PG"
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DATABASES = ("sqlite", "postgresql")


def pg_base_url() -> str:
    return os.environ.get(PG_ENV) or PG_DEFAULT


def _admin_conninfo(base: str) -> str:
    """The libpq URI for the SQLAlchemy URL ``base`` (psycopg takes ``postgresql://``)."""
    scheme, rest = base.split("://", 1)
    return f"postgresql://{rest}"


def _shown(base: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(base).render_as_string(hide_password=True)


def _connect_admin(base: str):
    import psycopg

    try:
        return psycopg.connect(_admin_conninfo(base), autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        problem = str(exc).strip()
    pytest.fail(
        f"PostgreSQL is unreachable at {_shown(base)} ({PG_ENV}): {problem}\n"
        "Every store test runs against both SQLite and PostgreSQL, so this is a failure, not a skip. "
        "Start the server (pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) "
        f"or point {PG_ENV} at one.",
        pytrace=False,
    )


def sqlite_url(directory: Path, name: str = "t.db") -> str:
    return f"sqlite:///{directory}/{name}"


@contextlib.contextmanager
def pg_schema_url() -> Iterator[str]:
    """A URL whose search_path is a fresh schema ``t_<hex>``; the schema is dropped afterwards."""
    from psycopg import sql

    base = pg_base_url()
    schema = f"t_{uuid.uuid4().hex}"
    with _connect_admin(base) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with _connect_admin(base) as admin:
            admin.execute("SET lock_timeout = '20s'")
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@contextlib.contextmanager
def fresh_url(kind: str, directory: Path) -> Iterator[str]:
    """A URL of an empty database of ``kind`` ("sqlite" or "postgresql")."""
    if kind == "sqlite":
        directory.mkdir(parents=True, exist_ok=True)
        yield sqlite_url(directory)
    elif kind == "postgresql":
        with pg_schema_url() as url:
            yield url
    else:  # pragma: no cover - a typo in a test
        raise ValueError(kind)
