"""Collector tokens on SQLite and PostgreSQL: stored hashed, scoped, revocable, through the CLI."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.errors import InputError
from procgrade.engine.tokens import AuthError, TokenStore, tokens


def test_token_cli_create_list_revoke_and_only_the_hash_is_stored(store_url: str, store) -> None:
    runner = CliRunner()
    created = runner.invoke(app, ["token", "create", "--project", "acme/", "--scope", "read", "--label", "ci",
                                  "--db", store_url])
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip().splitlines()[0]
    assert secret.startswith("pgt_")
    token_id, raw = secret[4:].split("_", 1)
    with store.engine.connect() as conn:
        row = conn.execute(select(tokens)).one()
    assert row.secret_sha256 == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in "".join(str(v) for v in row)
    listed = runner.invoke(app, ["token", "list", "--db", store_url])
    assert listed.exit_code == 0 and token_id in listed.stdout and raw not in listed.stdout
    assert "acme/" in listed.stdout and "read" in listed.stdout
    info = TokenStore(store.engine).authenticate(f"Bearer {secret}")
    assert (info.project, info.scope) == ("acme/", "read")
    revoked = runner.invoke(app, ["token", "revoke", token_id, "--db", store_url])
    assert revoked.exit_code == 0, revoked.output
    with pytest.raises(AuthError, match="revoked"):
        TokenStore(store.engine).authenticate(f"Bearer {secret}")


def test_scopes_and_projects(store) -> None:
    tokens_ = TokenStore(store.engine)
    writer = tokens_.authenticate("Bearer " + tokens_.create("team:", "write")[0])
    reader = tokens_.authenticate("Bearer " + tokens_.create("team:", "read")[0])
    assert writer.allows("team:run", "write") and writer.allows("team:run", "read")
    assert reader.allows("team:run", "read") and not reader.allows("team:run", "write")
    assert not writer.allows("teammate:run", "read") and not writer.allows("other/team:run", "read")
    secret = tokens_.create("team:", "write")[0]
    with pytest.raises(AuthError, match="unknown token"):
        tokens_.authenticate("Bearer " + secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    for project, scope in (("team", "write"), ("", "read"), ("x/", "admin")):
        with pytest.raises(InputError):
            tokens_.create(project, scope)
