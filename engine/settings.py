"""Settings every command shares, in a module that imports nothing: the CLI reads them for its
options and help, and must not load the store's SQLAlchemy and Alembic to do so."""

from __future__ import annotations

__all__ = ["DEFAULT_DB", "DB_ENVVAR"]

#: The store when neither ``--db`` nor ``$PROCGRADE_DB`` names one: a SQLite file in the working directory.
DEFAULT_DB = "sqlite:///procgrade.db"
#: The environment variable that names the store.
DB_ENVVAR = "PROCGRADE_DB"
