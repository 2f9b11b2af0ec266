"""``procgrade serve`` and ``procgrade token create/list/revoke``: the collector's command line."""

import sys
from typing import Annotated, Any, Optional

import typer
from rich.text import Text

from procgrade.engine.settings import DEFAULT_DB
from procgrade.engine.tables import Table
from procgrade.engine.terminal import out

__all__ = ["register"]

db_option = Annotated[
    str,
    typer.Option("--db", envvar="PROCGRADE_DB", help="Database URL (sqlite:///FILE, postgresql://...) or a SQLite file path."),
]
default_db = DEFAULT_DB

token_app = typer.Typer(help="API tokens of the collector service: scoped to a project (run-id prefix), read or write.",
                        no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``serve`` and the ``token`` group to the main ``procgrade`` app."""

    @app.command("serve")
    def serve_command(
        host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback unless you mean otherwise).")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8765,
        rules: Annotated[Optional[str], typer.Option("--rules", help="Rule set for GET /v1/score (default: the built-in one).")] = None,
        max_body: Annotated[int, typer.Option("--max-body", min=1, help="Largest request body, bytes.")] = 16 * 1024 * 1024,
        max_events: Annotated[int, typer.Option("--max-events", min=1, help="Most events in one append batch.")] = 10_000,
        db: db_option = default_db,
    ) -> None:
        """Run the collector service: harnesses append events over HTTP with a token (needs the serve extra)."""
        try:
            from procgrade.engine.collector import serve
        except ImportError as exc:
            raise typer.BadParameter(f"the collector needs the serve extra: pip install 'procgrade[serve]' ({exc})")
        serve(db, host=host, port=port, rules=rules, max_body=max_body, max_events=max_events)

    @token_app.command("create")
    def token_create(
        project: Annotated[str, typer.Option("--project", help="Run-id prefix ending in '/' or ':' (acme/).", show_default=False)],
        scope: Annotated[str, typer.Option("--scope", help="read, or write (appends and seals; reads too).")] = "write",
        label: Annotated[Optional[str], typer.Option("--label", help="A note saying whose token it is.")] = None,
        db: db_option = default_db,
    ) -> None:
        """Create a token and print it once (only its hash is stored)."""
        with _tokens(db) as tokens:
            secret, info = tokens.create(project, scope, label)
        print(secret)
        print(f"token {info.token_id}: {info.scope} on project {info.project} (shown once; store it now)", file=sys.stderr)

    @token_app.command("list")
    def token_list(db: db_option = default_db) -> None:
        """List tokens (ids, projects, scopes; never secrets)."""
        with _tokens(db) as tokens:
            infos = tokens.list()
        table = Table("id", "project", "scope", "label", "created", "revoked")
        for t in infos:
            table.add_row(t.token_id, Text(t.project), t.scope, Text(t.label or ""), t.created_at, t.revoked_at or "")
        out.print(table)

    @token_app.command("revoke")
    def token_revoke(token_id: Annotated[str, typer.Argument(help="The token's id (or the token itself).")],
                     db: db_option = default_db) -> None:
        """Revoke a token: the collector refuses it from the next request on."""
        with _tokens(db) as tokens:
            info = tokens.revoke(token_id)
        out.print(f"token {info.token_id} revoked at {info.revoked_at}")

    app.add_typer(token_app, name="token")


class _tokens:
    def __init__(self, db: str) -> None:
        self.db = db

    def __enter__(self) -> Any:
        from procgrade.engine.store import open_store
        from procgrade.engine.tokens import TokenStore

        self.store = open_store(self.db, create=True)
        return TokenStore(self.store.engine)

    def __exit__(self, *exc: object) -> None:
        self.store.close()
