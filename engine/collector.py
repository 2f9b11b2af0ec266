"""The collector service (``procgrade serve``): harnesses append events over HTTP as they happen.

Endpoints (every ``/v1`` request carries ``Authorization: Bearer <token>``; the run id
comes last in the path so one holding ``/`` is unambiguous):

- ``POST /v1/events/<run>?expected_seq=N`` appends a batch: the body is native JSONL (the
  lines ``procgrade ingest`` reads, validated by the same parser with the same located
  errors, ``body:LINE: field: reason``), its first seq must be ``N``. All or nothing: one
  store transaction. Resending a stored batch is a no-op (200); a seq another writer holds
  is 409 with the run's head (``event_count``, ``head_hash``); a sealed run is 409 ``sealed``.
- ``GET /v1/runs/<run>``: the run's head and provenance; ``GET /v1/events/<run>?after_seq=&limit=``:
  its events as native JSONL; ``GET /v1/score/<run>``: its score under the server's rule set
  (computed, not stored); ``POST /v1/seal/<run>``: seal it.
- ``POST /v1/traces``: OpenTelemetry GenAI spans, OTLP/HTTP JSON, mapped to events (``engine/otlp.py``).
- ``GET /healthz`` (the process answers), ``GET /readyz`` (the database answers at the right schema).

A read token reads, a write token also appends and seals; either only within its project.
Bodies above ``max_body`` bytes and batches above ``max_events`` events are refused (413)
before anything is parsed or written. Nothing logged holds a token or a database password.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from procgrade.engine.errors import ConflictError, InputError, RunSealedError, StoreError, UnknownRunError
from procgrade.engine.native import dump_native, parse_native_lines
from procgrade.engine.tokens import AuthError, TokenStore

__all__ = ["create_app", "serve", "DEFAULT_PORT", "MAX_BODY", "MAX_EVENTS"]

log = logging.getLogger("procgrade.collector")

DEFAULT_PORT = 8765
MAX_BODY = 16 * 1024 * 1024
MAX_EVENTS = 10_000
READ_LIMIT = 10_000


class _Refused(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body = status, body


def _json(status: int, body: Any) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _error(status: int, message: str, **extra: Any) -> _Refused:
    return _Refused(status, {"error": message, **extra})


def create_app(db: str, *, rules: str | None = None, max_body: int = MAX_BODY, max_events: int = MAX_EVENTS) -> Starlette:
    """The ASGI app over the store at ``db`` (opened, and given the schema if empty, at startup)."""
    from procgrade.engine.store import open_store

    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        store = await run_in_threadpool(open_store, db, create=True)
        state["store"], state["tokens"] = store, TokenStore(store.engine)
        try:
            yield
        finally:
            store.close()

    def endpoint(scope: str | None) -> Callable[[Callable[..., Awaitable[Response]]], Callable[[Request], Awaitable[Response]]]:
        """Authenticate and authorise (scope ``read``/``write`` on the path's run), map errors to answers."""
        def wrap(handler: Callable[..., Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
            @functools.wraps(handler)
            async def guarded(request: Request) -> Response:
                try:
                    if scope is None:
                        return await handler(request)
                    run_id = request.path_params["run_id"]
                    tokens: TokenStore = state["tokens"]
                    token = await run_in_threadpool(tokens.authenticate, request.headers.get("authorization"))
                    tokens.authorize(token, run_id, scope)
                    return await handler(request, run_id)
                except _Refused as refused:
                    return _json(refused.status, refused.body)
                except AuthError as exc:
                    return _json(exc.status, {"error": str(exc)})
                except InputError as exc:
                    return _json(400, {"error": str(exc), "source": exc.source, "line": exc.line,
                                       "field": exc.field, "reason": exc.reason})
                except UnknownRunError as exc:
                    return _json(404, {"error": str(exc)})
            return guarded
        return wrap

    def store() -> Any:
        return state["store"]

    async def head_body(run_id: str) -> dict[str, Any]:
        try:
            info = await run_in_threadpool(store().run, run_id)
        except UnknownRunError:
            return {"event_count": 0, "head_hash": None, "sealed": False}
        return {"event_count": info.event_count, "head_hash": info.head_hash, "sealed": info.sealed}

    @endpoint("write")
    async def append_events(request: Request, run_id: str) -> Response:
        expected = _int_param(request, "expected_seq", required=True)
        body = await _read_limited(request, max_body)
        lines = body.split(b"\n")
        if sum(1 for line in lines if line.strip()) > max_events:
            raise _error(413, f"a batch holds at most {max_events} events")
        runs = parse_native_lines("body", lines)
        if not runs:
            raise InputError("body", None, None, "no events")
        if len(runs) > 1 or runs[0].run_id != run_id:
            stray = next(r for r in runs if r.run_id != run_id)
            raise InputError("body", stray.lines[0], "run_id", f"{stray.run_id!r} is not the run {run_id!r} of the URL")
        batch = runs[0]
        if batch.events[0].seq != expected:
            raise InputError("body", batch.lines[0], "seq",
                             f"the batch starts at seq {batch.events[0].seq}, not at expected_seq {expected}")
        try:
            result = await run_in_threadpool(store().append, run_id, batch.events)
        except RunSealedError as exc:
            raise _error(409, str(exc), code="sealed", seq=exc.seq, **await head_body(run_id)) from None
        except ConflictError as exc:
            raise _error(409, str(exc), code="conflict", seq=exc.seq, **await head_body(run_id)) from None
        except StoreError as exc:
            where = batch.line_of(exc.seq) if exc.seq is not None and batch.events[0].seq <= exc.seq <= batch.events[-1].seq else None
            raise InputError("body", where, "seq" if where else None, str(exc)) from None
        return _json(200, {"run_id": run_id, "appended": result.appended, "already_stored": result.already_stored,
                           "event_count": result.event_count, "head_hash": result.head_hash, "sealed": result.sealed})

    @endpoint("read")
    async def read_run(request: Request, run_id: str) -> Response:
        info = await run_in_threadpool(store().run, run_id)
        return _json(200, {"run_id": info.run_id, "harness": info.harness, "harness_version": info.harness_version,
                           "model": info.model, "task_id": info.task_id, "event_count": info.event_count,
                           "head_hash": info.head_hash, "sealed": info.sealed,
                           "sealed_event_count": info.sealed_event_count, "sealed_head_hash": info.sealed_head_hash})

    @endpoint("read")
    async def read_events(request: Request, run_id: str) -> Response:
        after = _int_param(request, "after_seq", default=-1)
        limit = _int_param(request, "limit", default=READ_LIMIT)
        if after < -1 or not 1 <= limit <= READ_LIMIT:
            raise InputError("query", None, "limit" if after >= -1 else "after_seq",
                             f"after_seq is -1 or more, limit 1..{READ_LIMIT}")

        def lines() -> bytes:
            store().run(run_id)  # 404 for an unknown run
            out = []
            for event in store().events(run_id):
                if event.seq > after:
                    out.append(event)
                    if len(out) >= limit:
                        break
            return b"".join(dump_native(out))

        return Response(await run_in_threadpool(lines), media_type="application/x-ndjson")

    @endpoint("read")
    async def read_score(request: Request, run_id: str) -> Response:
        from procgrade.engine.rescoring import compute_score

        ruleset = state.get("ruleset")
        if ruleset is None:
            from procgrade.rules.loading import load_ruleset

            ruleset = state["ruleset"] = await run_in_threadpool(load_ruleset, rules)
        document = await run_in_threadpool(compute_score, store(), ruleset, run_id)
        score = document.process_score
        return _json(200, {"run_id": run_id, "ruleset": ruleset.name, "ruleset_hash": document.ruleset_hash,
                           "run_event_count": document.run_event_count, "run_head_hash": document.run_head_hash,
                           "process_score": None if score is None else {"num": str(score.numerator), "den": str(score.denominator)},
                           "document_sha256": document.sha256, "document": orjson.loads(document.canonical)})

    @endpoint("write")
    async def seal_run(request: Request, run_id: str) -> Response:
        info = await run_in_threadpool(store().seal, run_id)
        return _json(200, {"run_id": run_id, "event_count": info.event_count, "head_hash": info.head_hash,
                           "sealed": info.sealed})

    async def otlp_traces(request: Request) -> Response:
        """OTLP/HTTP JSON traces of one run (resource attribute ``procgrade.run_id``): see ``engine/otlp.py``."""
        from procgrade.engine.otlp import OTLP_SOURCE, append_export, run_id_of

        try:
            tokens: TokenStore = state["tokens"]
            token = await run_in_threadpool(tokens.authenticate, request.headers.get("authorization"))
            body = await _read_limited(request, max_body)
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise InputError(OTLP_SOURCE, None, None, f"invalid JSON: {exc}") from None
            run_id = run_id_of(data)
            tokens.authorize(token, run_id, "write")
            appended, skipped, _ = await run_in_threadpool(append_export, store(), data, run_id, max_events)
        except _Refused as refused:
            return _json(refused.status, refused.body)
        except AuthError as exc:
            return _json(exc.status, {"error": str(exc)})
        except InputError as exc:
            return _json(400, {"error": str(exc), "source": exc.source, "line": exc.line, "field": exc.field,
                               "reason": exc.reason})
        except RunSealedError as exc:
            return _json(409, {"error": str(exc), "code": "sealed"})
        except ConflictError as exc:
            return _json(409, {"error": str(exc), "code": "conflict"})
        return _json(200, {"partialSuccess": {}, "run_id": run_id, "appended": appended, "already_stored": skipped})

    async def healthz(request: Request) -> Response:
        return _json(200, {"status": "ok"})

    async def readyz(request: Request) -> Response:
        from procgrade.engine.store.migrate import check_ready

        try:
            await run_in_threadpool(check_ready, store().engine)
        except Exception as exc:  # any database failure means not ready; say which, without the URL
            return _json(503, {"status": "not ready", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]})
        return _json(200, {"status": "ready"})

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/v1/events/{run_id:path}", append_events, methods=["POST"]),
        Route("/v1/events/{run_id:path}", read_events, methods=["GET"]),
        Route("/v1/runs/{run_id:path}", read_run, methods=["GET"]),
        Route("/v1/score/{run_id:path}", read_score, methods=["GET"]),
        Route("/v1/seal/{run_id:path}", seal_run, methods=["POST"]),
        Route("/v1/traces", otlp_traces, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _int_param(request: Request, name: str, *, required: bool = False, default: int = 0) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        if required:
            raise InputError("query", None, name, "missing")
        return default
    try:
        return int(raw)
    except ValueError:
        raise InputError("query", None, name, f"not an integer (got {raw[:40]!r})") from None


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise _error(400, "Content-Length is not a number")
        if int(declared) > limit:
            raise _error(413, f"the body is {declared} bytes; at most {limit} are taken")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _error(413, f"the body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def shown_url(db: str) -> str:
    """The database URL without its password, for logs."""
    from sqlalchemy.engine import make_url

    from procgrade.engine.store import normalize_url

    return make_url(normalize_url(db)).render_as_string(hide_password=True)


def serve(db: str, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, rules: str | None = None,
          max_body: int = MAX_BODY, max_events: int = MAX_EVENTS) -> None:
    """Run the collector on uvicorn until interrupted."""
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # readiness checks would log each probe
    if not _is_loopback(host):
        log.warning("listening on %s: reachable beyond this machine; put TLS in front of it", host)
    log.info("procgrade collector on http://%s:%d, database %s", host, port, shown_url(db))
    app = create_app(db, rules=rules, max_body=max_body, max_events=max_events)
    uvicorn.run(app, host=host, port=port, log_level="info", server_header=False, date_header=False)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> None:
    """``python -m procgrade.engine.collector --db URL [--host H] [--port P]`` (what ``procgrade serve`` runs)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m procgrade.engine.collector")
    parser.add_argument("--db", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--rules")
    parser.add_argument("--max-body", type=int, default=MAX_BODY)
    parser.add_argument("--max-events", type=int, default=MAX_EVENTS)
    args = parser.parse_args(argv)
    serve(args.db, host=args.host, port=args.port, rules=args.rules, max_body=args.max_body, max_events=args.max_events)


if __name__ == "__main__":
    main()
