"""Where the store lives: database URLs checked before anything connects.

A mistyped ``--db`` must say what is wrong and what to do, never create an empty
SQLite file behind a read-only command, and never surface a driver's traceback.
:func:`resolve_url` checks the URL's shape and, for SQLite, the file; :func:`connection_problem`
turns the driver's first-connect failure (server down, no such database, bad password,
not a SQLite file) into one :class:`DatabaseUnavailableError`.
"""

from __future__ import annotations

import importlib.util
import string
from pathlib import Path
from typing import TYPE_CHECKING

from procgrade.engine.errors import DatabaseUnavailableError, MissingExtraError, SchemaNotReadyError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["resolve_url", "connection_problem", "shown", "sqlite_path", "check_sqlite_file", "plain_sqlite_file",
           "plain_sqlite_url"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SUPPORTED = "use sqlite:///FILE, a SQLite file path, or postgresql://USER@HOST:PORT/DATABASE"


#: Characters a file name may hold for its ``sqlite:///`` URL to be the name itself: SQLAlchemy
#: percent-escapes others (``@``, ``:``, ``;``, non-ASCII) when it renders the URL, and the URL is
#: what workers and messages use, so such names take SQLAlchemy's path and get its rendering.
_PLAIN = frozenset(string.ascii_letters + string.digits + "/._-+~ ")


def plain_sqlite_file(url: str) -> Path | None:
    """The file of a plain SQLite store URL (``sqlite:///FILE`` or a bare path), else None: any other
    shape (drivers, query strings, escapes, memory databases) is left to SQLAlchemy's URL parser."""
    text = url.strip()
    if not text or any(c in text for c in "?#%"):
        return None
    if "://" not in text:
        return Path(text)
    if not text.startswith("sqlite:///"):
        return None
    database = text.removeprefix("sqlite:///")
    if not database or database == ":memory:":
        return None
    return Path(database)


def plain_sqlite_url(url: str) -> str | None:
    """The URL :func:`resolve_url` gives a plain SQLite store, worked out without importing
    SQLAlchemy (``sqlite:///`` and the path as its parser keeps it), or None when only SQLAlchemy
    can say (see :data:`_PLAIN`)."""
    path = plain_sqlite_file(url)
    if path is None:
        return None
    text = url.strip()
    database = str(path) if "://" not in text else text.removeprefix("sqlite:///")
    if not set(database) <= _PLAIN:
        return None
    return f"sqlite:///{database}"


def shown(url: str | URL) -> str:
    """The URL as it may be printed (no password)."""
    if isinstance(url, str) and plain_sqlite_url(url) == url:
        return url
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url) if isinstance(url, str) else url
        return parsed.render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return str(url)


def sqlite_path(url: URL) -> Path | None:
    """The file of a SQLite URL, or None for an in-memory database."""
    database = url.database
    if not database or database == ":memory:" or url.query.get("mode") == "memory":
        return None
    return Path(database)


def resolve_url(url: str, *, create: bool = False) -> str:
    """The SQLAlchemy URL for ``url`` (SQLAlchemy URL, ``postgresql://`` meaning psycopg 3, or a bare
    SQLite file path), checked: raises :class:`DatabaseUnavailableError` for a malformed URL, an
    unsupported database, a SQLite path that is a folder, lies in a missing folder, is not a SQLite
    file, or does not exist when ``create`` is false (read-only use never creates a file), and
    :class:`MissingExtraError` when PostgreSQL's driver is not installed."""
    plain = plain_sqlite_url(url)
    if plain is not None:  # the common case, answered without importing SQLAlchemy
        path = plain_sqlite_file(url)
        assert path is not None
        check_sqlite_file(path, create=create)
        return plain
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    text = url.strip()
    if not text:
        raise DatabaseUnavailableError(f"the database URL is empty: {_SUPPORTED}")
    if "://" not in text:
        parsed = URL.create("sqlite", database=str(Path(text)))
    else:
        try:
            parsed = make_url(text)
        except (ArgumentError, ValueError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "invalid literal for int()" in reason:
                reason = "the port is not a number"
            raise DatabaseUnavailableError(f"the database URL {text!r} is malformed ({reason}): {_SUPPORTED}") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        _check_sqlite(parsed, create)
    elif backend == "postgresql":
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        if parsed.drivername != "postgresql+psycopg":
            raise DatabaseUnavailableError(
                f"the database URL {shown(parsed)!r} names the driver {parsed.get_driver_name()!r}; procgrade "
                "uses psycopg 3: write postgresql://... or postgresql+psycopg://...")
        if importlib.util.find_spec("psycopg") is None:
            raise MissingExtraError("a PostgreSQL database", "postgres", "psycopg")
    else:
        raise DatabaseUnavailableError(f"unsupported database {backend!r} in {shown(parsed)!r}: {_SUPPORTED}")
    return parsed.render_as_string(hide_password=False)


def _check_sqlite(url: URL, create: bool) -> None:
    path = sqlite_path(url)
    if path is not None:
        check_sqlite_file(path, create=create)


def check_sqlite_file(path: Path, *, create: bool = False) -> None:
    """The checks of a SQLite store's file before anything connects (see :func:`resolve_url`); SQLAlchemy-free,
    so that a read-only command can run them without loading it."""
    where = str(path)
    if path.is_dir():
        raise DatabaseUnavailableError(f"the database {where} is a folder, not a SQLite file: "
                                       f"name a file, e.g. --db {path / 'procgrade.db'}")
    if path.exists():
        if not path.is_file():
            raise DatabaseUnavailableError(f"the database {where} is not a regular file: name a SQLite file")
        try:
            with path.open("rb") as handle:
                head = handle.read(len(_SQLITE_MAGIC))
        except OSError as exc:
            raise DatabaseUnavailableError(f"cannot read the database {where}: {exc.strerror}: "
                                           "check its permissions") from None
        if head and head != _SQLITE_MAGIC:
            raise DatabaseUnavailableError(f"{where} is not a SQLite database: check --db, "
                                           "or name a new file to create one with `procgrade init`")
        return
    if not create:
        raise SchemaNotReadyError(f"no database at {where}: check --db (or $PROCGRADE_DB), "
                                       f"or create one with `procgrade init --db {where}`")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise DatabaseUnavailableError(f"cannot create the database {where}: the folder {parent} {what}: "
                                       "create it first or choose another path")


def connection_problem(url: str, exc: BaseException) -> DatabaseUnavailableError:
    """One line for a driver's failure to open ``url``: what is wrong and what to do."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    detail = _driver_message(exc)
    lowered = detail.lower()
    if parsed.get_backend_name() == "sqlite":
        where = str(sqlite_path(parsed) or ":memory:")
        if "not a database" in lowered or "malformed" in lowered:
            return DatabaseUnavailableError(f"{where} is not a SQLite database (or is damaged): check --db")
        return DatabaseUnavailableError(f"cannot open the SQLite database {where}: {detail}: "
                                        "check the file and its folder's permissions")
    host = parsed.host or "the local socket"
    server = f"{host}:{parsed.port}" if parsed.port else host
    database = parsed.database or parsed.username or "(default)"
    if "does not exist" in lowered and "database" in lowered:
        return DatabaseUnavailableError(
            f"the PostgreSQL server at {server} has no database {database!r}: create it "
            f"(createdb -h {parsed.host or 'localhost'}{f' -p {parsed.port}' if parsed.port else ''} {database}) "
            "or fix --db")
    if "password authentication failed" in lowered or "no password supplied" in lowered or (
            "role" in lowered and "does not exist" in lowered):
        return DatabaseUnavailableError(f"the PostgreSQL server at {server} refused the login ({detail}): "
                                        "fix the user or password in --db")
    if any(s in lowered for s in ("connection refused", "could not connect", "timeout", "timed out",
                                  "no route", "name or service not known", "could not translate host",
                                  "connection failed", "failed to resolve")):
        return DatabaseUnavailableError(f"cannot reach PostgreSQL at {server} ({detail}): start the server, "
                                        "or fix the host and port in --db")
    return DatabaseUnavailableError(f"cannot open the database {shown(parsed)}: {detail}")


def _driver_message(exc: BaseException) -> str:
    """The driver's own message, first meaningful line, without SQLAlchemy's decorations."""
    orig = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("(Background on this error"):
            continue
        for prefix in ("connection failed:", "FATAL:"):
            if line.startswith(prefix):
                line = line[len(prefix):].strip()
        if line.startswith("connection to server at") and "failed:" in line:
            line = line.split("failed:", 1)[1].strip() or line
        return line.rstrip(".")
    return type(orig).__name__
