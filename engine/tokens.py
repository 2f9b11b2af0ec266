"""Collector API tokens: random secrets stored only as their sha256, each scoped to a project and a right.

A token reads ``pgt_<id>_<secret>``. The id finds the row; the secret (32 random
bytes) is compared by its digest in constant time. A plain sha256 suffices because
the secret is random, not a password (nothing to brute-force from a dictionary).

A project is a run-id prefix that ends in ``/`` or ``:`` (``acme/``), so project
``acme/`` never covers run ``acme-evil/1``. ``read`` reads runs and scores; ``write``
also appends and seals (a writer must read the head it appends after).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import Column, Engine, MetaData, Table, Text, insert, select, update

from procgrade.engine.errors import InputError, ProcgradeError

__all__ = ["TokenInfo", "TokenStore", "AuthError", "SCOPES", "check_project"]

SCOPES = ("read", "write")
_PREFIX = "pgt_"
_TOKEN = re.compile(r"^pgt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,198}[/:]$")

_metadata = MetaData()
tokens = Table(
    "tokens", _metadata,
    Column("token_id", Text, primary_key=True),
    Column("secret_sha256", Text, nullable=False),
    Column("project", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("label", Text),
    Column("created_at", Text, nullable=False),
    Column("revoked_at", Text),
)


class AuthError(ProcgradeError):
    """No token, an unknown or revoked one, or one without the right for this run (``status`` 401 or 403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    project: str
    scope: str
    label: str | None
    created_at: str
    revoked_at: str | None

    def allows(self, run_id: str, scope: str) -> bool:
        return self.revoked_at is None and run_id.startswith(self.project) and (scope == "read" or self.scope == "write")


def check_project(project: str) -> str:
    if not _PROJECT.match(project):
        raise InputError("--project", None, "project",
                         f"{project!r} is not a run-id prefix ending in '/' or ':' (for example 'acme/')")
    return project


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


class TokenStore:
    """The ``tokens`` table of a procgrade database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self, project: str, scope: str, label: str | None = None) -> tuple[str, TokenInfo]:
        """A new token: (the secret token text, shown only now; what is stored)."""
        check_project(project)
        if scope not in SCOPES:
            raise InputError("--scope", None, "scope", f"{scope!r} is not one of {', '.join(SCOPES)}")
        token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        info = TokenInfo(token_id, project, scope, label, _now(), None)
        with self.engine.begin() as conn:
            conn.execute(insert(tokens).values(token_id=token_id, secret_sha256=_digest(secret), project=project,
                                               scope=scope, label=label, created_at=info.created_at))
        return f"{_PREFIX}{token_id}_{secret}", info

    def list(self) -> list[TokenInfo]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(tokens.c.token_id, tokens.c.project, tokens.c.scope, tokens.c.label,
                                       tokens.c.created_at, tokens.c.revoked_at)).all()
        return sorted((TokenInfo(*row) for row in rows), key=lambda t: (t.project, t.created_at, t.token_id))

    def revoke(self, token_id: str) -> TokenInfo:
        """Revoke by id (or by the whole token text); the collector refuses it from the next request."""
        token_id = token_id.removeprefix(_PREFIX).split("_")[0]
        with self.engine.begin() as conn:  # revoking a revoked token keeps its first revocation time
            conn.execute(update(tokens).where((tokens.c.token_id == token_id) & tokens.c.revoked_at.is_(None))
                         .values(revoked_at=_now()))
        found = [t for t in self.list() if t.token_id == token_id]
        if not found:
            raise InputError("token", None, "token_id", f"no token {token_id!r}")
        return found[0]

    def authenticate(self, header: str | None) -> TokenInfo:
        """The token an ``Authorization: Bearer ...`` header names, if it is known and not revoked."""
        if not header or not header.startswith("Bearer "):
            raise AuthError(401, "an Authorization: Bearer <token> header is required")
        match = _TOKEN.match(header[len("Bearer "):].strip())
        if match is None:
            raise AuthError(401, "malformed token")
        token_id, secret = match.groups()
        with self.engine.connect() as conn:
            row = conn.execute(select(tokens).where(tokens.c.token_id == token_id)).first()
        if row is None or not hmac.compare_digest(row.secret_sha256, _digest(secret)):
            raise AuthError(401, "unknown token")
        if row.revoked_at is not None:
            raise AuthError(401, f"token {token_id} was revoked")
        return TokenInfo(row.token_id, row.project, row.scope, row.label, row.created_at, row.revoked_at)

    @staticmethod
    def authorize(token: TokenInfo, run_id: str, scope: str) -> None:
        if not token.allows(run_id, scope):
            raise AuthError(403, f"token {token.token_id} ({token.scope}, project {token.project}) "
                                 f"may not {scope} run {run_id}")
