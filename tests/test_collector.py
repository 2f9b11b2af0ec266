"""The collector service on a real uvicorn server (subprocess, loopback), over SQLite and PostgreSQL.

Concurrency (one winner per seq), many runs at once, SIGKILL mid-batch, project-scoped tokens
refused in every endpoint, size limits and malformed bodies, and the done-when: a build recorded
through a server killed and restarted once is the same log, hash by hash, as one recorded in-process.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from collector_server import Server, call, run_path
from databases import DATABASES, fresh_url
from recording_harness import two_stage_build

from procgrade.engine.collector_client import HttpTransport
from procgrade.engine.errors import InputError
from procgrade.engine.log_verification import verify_log
from procgrade.engine.native import dump_native, parse_native_lines
from procgrade.engine.recorder import RecordConflictError, Recorder, record
from procgrade.engine.store import open_store

PG_PASSWORD = "pw-never-logged-7f3a"
MAX_BODY, MAX_EVENTS = 200_000, 300


def _with_password(url: str) -> str:
    return url.replace("postgres@", f"postgres:{PG_PASSWORD}@", 1)  # trust auth ignores it; logs must too


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp(f"collector-{request.param}")
    with fresh_url(request.param, directory / "db") as url:
        running = Server(_with_password(url), directory / "server.log", "--max-body", str(MAX_BODY),
                         "--max-events", str(MAX_EVENTS))
        running.start()
        try:
            yield running
        finally:
            running.stop()


@pytest.fixture(params=DATABASES)
def own_server(request: pytest.FixtureRequest, tmp_path: Path):
    with fresh_url(request.param, tmp_path / "db") as url:
        running = Server(url, tmp_path / "server.log")
        running.start()
        try:
            yield running
        finally:
            running.stop()


def _flush_through_conflicts(rec: Recorder) -> int:
    conflicts = 0
    while True:
        try:
            rec.flush()
            return conflicts
        except RecordConflictError:
            conflicts += 1
            rec.resync()


# --- concurrency ---------------------------------------------------------------------------------


def test_concurrent_writers_one_run_exactly_one_wins_each_seq(server: Server) -> None:
    token = server.token("conc/")
    record("conc/run", server.url, token=token, harness="h", clock=None).close()
    writers, per_writer = 4, 10
    barrier = threading.Barrier(writers)
    first_round: dict[int, object] = {}
    failures: list[BaseException] = []

    def write(w: int) -> None:
        try:
            rec = Recorder("conc/run", HttpTransport(server.url, token), clock=None, batch_size=1000)
            rec.message(text=f"writer {w} event 0")
            barrier.wait()  # every writer appends at seq 1 at once
            try:
                rec.flush()
                first_round[w] = "won"
            except RecordConflictError as exc:
                first_round[w] = exc.head.event_count
                rec.resync()
                _flush_through_conflicts(rec)
            for i in range(1, per_writer):
                rec.message(text=f"writer {w} event {i}")
                _flush_through_conflicts(rec)
            rec.close()
        except BaseException as exc:  # reported below, with the thread's traceback
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    # exactly one wins seq 1; each other writer is told a head past it (the winner may have gone on)
    assert list(first_round.values()).count("won") == 1 and len(first_round) == writers
    assert all(head >= 2 for head in first_round.values() if head != "won")
    events = list(server.store.events("conc/run"))
    assert [e.seq for e in events] == list(range(1 + writers * per_writer))
    texts = Counter(e.text for e in events[1:])
    assert texts == Counter(f"writer {w} event {i}" for w in range(writers) for i in range(per_writer))
    for w in range(writers):  # each writer's own events keep their order
        mine = [int(e.text.rsplit(" ", 1)[1]) for e in events[1:] if e.text.startswith(f"writer {w} ")]
        assert mine == list(range(per_writer))
    assert verify_log(server.store, "conc/run").ok


def test_conflict_answer_is_409_with_the_head(server: Server) -> None:
    token = server.token("head/")
    rec = record("head/run", server.url, token=token, harness="h", clock=None)
    rec.message(text="mine")
    rec.close()
    stranger = Recorder("head/run", HttpTransport(server.url, token), clock=None, batch_size=100)
    stranger.next_seq = 1  # as if it had read the head before "mine" went in
    stranger.message(text="theirs")
    body = b"".join(dump_native(stranger.pending))
    status, answer = call(server.url, "POST", run_path("head/run", "events", "?expected_seq=1"), token, body)
    info = server.store.run("head/run")
    assert status == 409 and answer["code"] == "conflict"
    assert (answer["event_count"], answer["head_hash"]) == (2, info.head_hash)
    # the same batch the run already holds is a no-op, not a conflict (a retry after a lost answer)
    held = b"".join(dump_native(list(server.store.events("head/run"))[1:]))
    status, answer = call(server.url, "POST", run_path("head/run", "events", "?expected_seq=1"), token, held)
    assert status == 200 and answer["appended"] == 0 and answer["already_stored"] == 1


def test_many_runs_in_parallel(server: Server) -> None:
    token = server.token("many/")
    failures: list[BaseException] = []

    def build(n: int) -> None:
        try:
            with record(f"many/run-{n}", server.url, token=token, harness="h", clock=None, batch_size=5) as rec:
                for i in range(24):
                    rec.command(command=f"step {i}", exit_code=0)
                rec.end()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=build, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    for n in range(6):
        assert server.store.run(f"many/run-{n}").event_count == 26
        assert verify_log(server.store, f"many/run-{n}").ok


# --- the server killed mid-batch ---------------------------------------------------------------


def test_server_killed_mid_batch_is_all_or_nothing_and_the_retry_completes(own_server: Server) -> None:
    token = own_server.token("kill/")
    for delay in (0.05, 0.6):
        run_id = f"kill/run-{delay}"
        rec = record(run_id, own_server.url, token=token, harness="h", clock=None, batch_size=100_000, retry_for=120)
        for i in range(3000):
            rec.command(command=f"echo {i}", exit_code=0, payload={"i": i})
        done: list[object] = []
        sender = threading.Thread(target=lambda: done.append(rec.flush()))
        sender.start()
        time.sleep(delay)
        own_server.kill()
        count = own_server.store.run(run_id).event_count
        assert count in (1, 3001), f"a killed batch left {count - 1} of its 3000 events"
        own_server.start()
        sender.join(180)
        assert done and done[0].event_count == 3001
        rec.close()
        assert verify_log(own_server.store, run_id).ok


def test_two_stage_build_through_a_killed_server_equals_the_in_process_recording(own_server: Server, tmp_path: Path) -> None:
    token = own_server.token("build/")
    restarts: list[float] = []

    def kill_and_restart_later(stage: int) -> None:
        if stage != 0:
            return
        own_server.kill()
        restarts.append(time.monotonic())
        threading.Timer(1.0, own_server.start, kwargs={"wait": False}).start()

    two_stage_build("build/todo", own_server.url, token=token, between_stages=kill_and_restart_later, retry_for=120)
    assert restarts and own_server.proc is not None and own_server.proc.poll() is None
    local = open_store(f"sqlite:///{tmp_path}/in-process.db", create=True)
    try:
        two_stage_build("build/todo", local)
        served = list(own_server.store.stored_events("build/todo"))
        assert len(served) > 30
        assert served == list(local.stored_events("build/todo"))  # every column, every hash
        assert own_server.store.run("build/todo") == local.run("build/todo")
    finally:
        local.close()
    assert verify_log(own_server.store, "build/todo").ok
    from typer.testing import CliRunner

    from procgrade.engine.cli import app

    result = CliRunner().invoke(app, ["verify-log", "build/todo", "--db", own_server.db_url])
    assert result.exit_code == 0, result.output


# --- tokens --------------------------------------------------------------------------------------

_ENDPOINTS = {
    "append": ("POST", "events", "?expected_seq=1"),
    "read run": ("GET", "runs", ""),
    "read events": ("GET", "events", ""),
    "score": ("GET", "score", ""),
    "seal": ("POST", "seal", ""),
}


@pytest.fixture(scope="module")
def two_projects(server: Server) -> dict[str, str]:
    tokens = {"alpha": server.token("alpha/"), "beta": server.token("beta/"),
              "beta-read": server.token("beta/", "read"), "revoked": server.token("beta/")}
    server.tokens.revoke(tokens["revoked"])
    record("beta/run", server.url, token=tokens["beta"], harness="h", clock=None).close()
    return tokens


def _next_event_body(server: Server, token: str) -> bytes:
    probe = Recorder("beta/run", HttpTransport(server.url, token), clock=None, batch_size=10)
    probe.message(text="intruder")
    return b"".join(dump_native(probe.pending))


@pytest.mark.parametrize("endpoint", sorted(_ENDPOINTS))
def test_a_token_of_another_project_is_refused(server: Server, two_projects: dict[str, str], endpoint: str) -> None:
    method, resource, query = _ENDPOINTS[endpoint]
    body = _next_event_body(server, two_projects["beta"]) if endpoint == "append" else None
    before = server.store.run("beta/run")
    status, answer = call(server.url, method, run_path("beta/run", resource, query), two_projects["alpha"], body)
    assert status == 403 and "may not" in answer["error"]
    # the same request with the project's own write token goes through
    if endpoint not in ("append", "seal"):
        assert call(server.url, method, run_path("beta/run", resource, query), two_projects["beta"], body)[0] == 200
        assert call(server.url, method, run_path("beta/run", resource, query), two_projects["beta-read"], body)[0] == 200
    else:  # a read token may not write
        status, _ = call(server.url, method, run_path("beta/run", resource, query), two_projects["beta-read"], body)
        assert status == 403
    for token in (None, two_projects["revoked"], "pgt_0123456789abcdef_" + "A" * 43, "not-a-token"):
        assert call(server.url, method, run_path("beta/run", resource, query), token, body)[0] == 401
    assert server.store.run("beta/run") == before  # nothing written by any refused request


def test_a_project_prefix_never_covers_a_longer_name(server: Server) -> None:
    token = server.token("gamma/")
    assert call(server.url, "GET", run_path("gamma-evil/run"), token)[0] == 403
    assert call(server.url, "GET", run_path("gamma"), token)[0] == 403
    # a run id is taken literally: "gamma/../x" is a run of gamma/, never the run x
    record("x", server.store, harness="h", clock=None).close()
    assert call(server.url, "GET", run_path("gamma/../x"), token)[0] == 404
    with pytest.raises(InputError, match="ending in '/' or ':'"):
        server.tokens.create("gamma", "write")


# --- limits and malformed input ----------------------------------------------------------------


def test_oversized_bodies_and_batches_are_refused(server: Server) -> None:
    token = server.token("big/")
    record("big/run", server.url, token=token, harness="h", clock=None).close()
    path = run_path("big/run", "events", "?expected_seq=1")
    big = b"x" * (MAX_BODY + 1)
    status, answer = call(server.url, "POST", path, token, big)
    assert status == 413 and "at most" in answer["error"]
    # the same without a Content-Length (chunked): refused while streaming
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", path, body=iter([b"y" * 50_000] * 5), encode_chunked=True,
                 headers={"Authorization": f"Bearer {token}", "Transfer-Encoding": "chunked"})
    response = conn.getresponse()
    assert response.status == 413
    conn.close()
    rec = Recorder("big/run", HttpTransport(server.url, token), clock=None, batch_size=10_000)
    for i in range(MAX_EVENTS + 1):
        rec.message(text=str(i))
    status, answer = call(server.url, "POST", path, token, b"".join(dump_native(rec.pending)))
    assert status == 413 and f"at most {MAX_EVENTS} events" in answer["error"]
    assert server.store.run("big/run").event_count == 1


_MALFORMED = {
    "not json": b'{"run_id": "bad/run", "seq": 1,\n',
    "unknown kind": b'{"run_id":"bad/run","seq":1,"event_id":"e1","kind":"telepathy","actor":"agent"}\n',
    "wrong type": b'{"run_id":"bad/run","seq":1,"event_id":"e1","kind":"command","actor":"agent","command":5}\n',
    "missing field": b'{"run_id":"bad/run","seq":1,"event_id":"e1","kind":"file_edit","actor":"agent","path":"a"}\n',
    "unknown field": b'{"run_id":"bad/run","seq":1,"event_id":"e1","kind":"message","actor":"agent","text":"t","txet":1}\n',
    "gap": (b'{"run_id":"bad/run","seq":1,"event_id":"e1","kind":"message","actor":"agent","text":"t"}\n'
            b'{"run_id":"bad/run","seq":3,"event_id":"e3","kind":"message","actor":"agent","text":"t"}\n'),
    "not utf-8": b'{"run_id":"bad/run","seq":1,"event_id":"e1","kind":"message","actor":"agent","text":"\xff"}\n',
}


@pytest.mark.parametrize("case", sorted(_MALFORMED))
def test_malformed_bodies_get_the_located_errors_of_ingest(server: Server, case: str) -> None:
    token = server.token("bad/")
    if call(server.url, "GET", run_path("bad/run"), token)[0] == 404:
        record("bad/run", server.url, token=token, harness="h", clock=None).close()
    body = _MALFORMED[case]
    status, answer = call(server.url, "POST", run_path("bad/run", "events", "?expected_seq=1"), token, body)
    with pytest.raises(InputError) as ingest_error:
        parse_native_lines("body", body.split(b"\n"))
    assert status == 400
    assert answer["error"] == str(ingest_error.value)
    assert (answer["line"], answer["field"]) == (ingest_error.value.line, ingest_error.value.field)
    assert server.store.run("bad/run").event_count == 1


def test_requests_that_do_not_fit_the_url_are_refused(server: Server) -> None:
    token = server.token("fit/")
    record("fit/run", server.url, token=token, harness="h", clock=None).close()
    line = b'{"run_id":"fit/other","seq":1,"event_id":"e1","kind":"message","actor":"agent","text":"t"}\n'
    status, answer = call(server.url, "POST", run_path("fit/run", "events", "?expected_seq=1"), token, line)
    assert status == 400 and answer["error"] == "body:1: run_id: 'fit/other' is not the run 'fit/run' of the URL"
    line = line.replace(b"fit/other", b"fit/run")
    status, answer = call(server.url, "POST", run_path("fit/run", "events", "?expected_seq=2"), token, line)
    assert status == 400 and "not at expected_seq 2" in answer["error"]
    status, answer = call(server.url, "POST", run_path("fit/run", "events"), token, line)
    assert status == 400 and answer["error"] == "query: expected_seq: missing"
    status, answer = call(server.url, "POST", run_path("fit/run", "events", "?expected_seq=1"), token, b"\n")
    assert status == 400 and "no events" in answer["error"]
    assert call(server.url, "GET", run_path("fit/nothing"), token)[0] == 404


def test_sealed_run_refuses_appends_with_409(server: Server) -> None:
    token = server.token("sealed/")
    rec = record("sealed/run", server.url, token=token, harness="h", clock=None)
    rec.end(seal=True)
    status, answer = call(server.url, "POST", run_path("sealed/run", "seal"), token)
    assert status == 200 and answer["sealed"]
    probe = Recorder("sealed/run", HttpTransport(server.url, token), clock=None, batch_size=10)
    probe.message(text="late")
    status, answer = call(server.url, "POST", run_path("sealed/run", "events", "?expected_seq=2"), token,
                          b"".join(dump_native(probe.pending)))
    assert status == 409 and answer["code"] == "sealed"


def test_score_and_events_endpoints(server: Server) -> None:
    from procgrade.engine.rescoring import compute_score
    from procgrade.rules.loading import load_ruleset

    token = server.token("score/")
    two_stage_build("score/run", server.url, token=token)
    status, answer = call(server.url, "GET", run_path("score/run", "score"), token)
    document = compute_score(server.store, load_ruleset(), "score/run")
    assert status == 200 and answer["document_sha256"] == document.sha256
    status, text = call(server.url, "GET", run_path("score/run", "events", "?after_seq=3&limit=5"), token)
    assert status == 200 and [e.seq for e in parse_native_lines("x", text.encode().split(b"\n"))[0].events] == [4, 5, 6, 7, 8]


def test_health_and_readiness(server: Server) -> None:
    assert call(server.url, "GET", "/healthz") == (200, {"status": "ok"})
    assert call(server.url, "GET", "/readyz") == (200, {"status": "ready"})


def test_load_is_bounded_and_reports_rate_and_p99(server: Server) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from collector_load import load

    token = server.token("load/")
    report = load(server.url, token, project="load/", writers=3, events=300, batch=20, max_seconds=60)
    assert report["events"] == 300 and report["requests"] == 15 + 3
    assert report["events_per_second"] > 0 and report["p99_ms"] >= report["p50_ms"] > 0
    total = sum(server.store.run(f"load/run-{w}").event_count for w in range(3))
    assert total == 300 + 3


def test_no_secret_in_any_log_line(server: Server) -> None:
    """The log of every request made to this server so far, plus some of its own: refused,
    conflicting and failing ones included."""
    token, other = server.token("logged/"), server.token("unlogged/")
    with record("logged/run", server.url, token=token, harness="h", clock=None) as rec:
        rec.message(text="hello")
    call(server.url, "GET", run_path("logged/run"), other)
    call(server.url, "POST", run_path("logged/run", "events", "?expected_seq=1"), token, b"{not json\n")
    call(server.url, "GET", run_path("logged/run", "score"), token)
    time.sleep(0.5)  # the access log line is written after the answer
    log = server.log.read_text()
    assert "POST /v1/events/" in log  # the access log is there and was read
    for secret in server.token_ids:
        assert secret.split("_", 2)[2] not in log  # pgt_<id>_<secret>; the secret may itself hold "_"
    assert PG_PASSWORD not in log and "Bearer" not in log


# --- OpenTelemetry GenAI spans over OTLP/HTTP JSON ------------------------------------------------


def _export(run_id: str) -> bytes:
    def attrs(**values: object) -> list[dict[str, object]]:
        out = []
        for key, value in values.items():
            typed = {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}
            out.append({"key": key.replace("__", "."), "value": typed})
        return out

    trace = "5b8efff798038103d269b633813fc60c"
    spans = [
        {"traceId": trace, "spanId": "a1", "name": "chat gpt-x", "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
         "attributes": attrs(gen_ai__operation__name="chat", gen_ai__request__model="gpt-x",
                             gen_ai__output__messages="I will run the tests.")},
        {"traceId": trace, "spanId": "b2", "parentSpanId": "a1", "name": "execute_tool bash", "startTimeUnixNano": "3000",
         "endTimeUnixNano": "5000003000", "status": {"code": 2},
         "attributes": attrs(gen_ai__operation__name="execute_tool", gen_ai__tool__name="bash",
                             gen_ai__tool__call__arguments="pytest -q")},
        {"traceId": trace, "spanId": "c3", "name": "invoke_agent tester", "startTimeUnixNano": "6000",
         "status": {"code": 1}, "attributes": attrs(gen_ai__operation__name="invoke_agent", gen_ai__agent__name="tester",
                                                     gen_ai__agent__description="write tests")},
        {"traceId": trace, "spanId": "d4", "name": "embeddings", "startTimeUnixNano": "7000"},
    ]
    body = {"resourceSpans": [{"resource": {"attributes": attrs(service__name="my-agent", procgrade__run_id=run_id)},
                               "scopeSpans": [{"scope": {"name": "x"}, "spans": spans[2:]},
                                              {"scope": {"name": "y"}, "spans": spans[:2]}]}]}
    import json

    return json.dumps(body).encode()


def test_otlp_genai_spans_become_events_and_a_retried_export_is_a_no_op(server: Server) -> None:
    token = server.token("otel/")
    status, answer = call(server.url, "POST", "/v1/traces", token, _export("otel/run"),
                          {"Content-Type": "application/json"})
    assert status == 200 and answer["appended"] == 6, answer
    events = list(server.store.events("otel/run"))
    assert [e.kind for e in events] == ["run_started", "message", "command", "delegation", "worker_report",
                                        "source_record"]
    started, chat, tool, delegation, report, other = events
    assert started.harness.name == "my-agent" and started.model == "gpt-x"
    assert chat.text == "I will run the tests." and chat.event_id.endswith("-a1")
    assert (tool.command, tool.exit_code, tool.duration_ms, tool.parent_seq) == ("pytest -q", 1, 5000, 1)
    assert tool.payload["spanId"] == "b2"  # the span is kept whole
    assert (delegation.worker_id, delegation.instruction) == ("tester", "write tests")
    assert (report.actor, report.status, report.parent_seq) == ("subagent:tester", "success", 3)
    assert other.record_type == "embeddings"
    status, answer = call(server.url, "POST", "/v1/traces", token, _export("otel/run"))
    assert status == 200 and (answer["appended"], answer["already_stored"]) == (0, 5)
    assert server.store.run("otel/run").event_count == 6
    assert verify_log(server.store, "otel/run").ok


def test_otlp_export_is_refused_for_another_project_or_without_a_run(server: Server) -> None:
    token = server.token("otel-other/")
    status, answer = call(server.url, "POST", "/v1/traces", token, _export("otel/intruded"))
    assert status == 403
    assert call(server.url, "POST", "/v1/traces", None, _export("otel-other/run"))[0] == 401
    status, answer = call(server.url, "POST", "/v1/traces", token, b'{"resourceSpans": [{"scopeSpans": []}]}')
    assert status == 400 and "procgrade.run_id" in answer["error"]
    status, answer = call(server.url, "POST", "/v1/traces", token, b"{nope")
    assert status == 400 and answer["error"].startswith("otlp: -: invalid JSON")
    assert call(server.url, "GET", run_path("otel/intruded"), server.token("otel/"))[0] == 404


def test_recording_waits_for_a_collector_that_is_not_up_yet(own_server: Server) -> None:
    token = own_server.token("late/")
    own_server.kill()
    threading.Timer(1.0, own_server.start, kwargs={"wait": False}).start()
    with record("late/run", own_server.url, token=token, harness="h", clock=None, retry_for=120) as rec:
        rec.message(text="made it")
    assert own_server.store.run("late/run").event_count == 2
