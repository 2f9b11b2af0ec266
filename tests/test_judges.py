"""The LLM-judge layer against a scripted OpenAI-compatible server on loopback (tests/judge_stub.py).

The client under test is the product's own (the ``openai`` package over HTTP); only the server is
scripted. Every store test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from judge_stub import Reply, StubServer, verdict_for
from sqlalchemy import select
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.errors import InputError
from procgrade.engine.events import Grade
from procgrade.engine.grades import import_grades
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.rescoring import score_runs
from procgrade.engine.store import EventStore
from procgrade.engine.store.schema import events as events_table
from procgrade.engine.stored import STORED_COLUMNS, to_event
from procgrade.judges.client import Endpoint, OpenAIChatModel, Price, RetryPolicy, resolve_endpoint
from procgrade.judges.judging import (
    JudgeSettings,
    ReplayMissingError,
    Spending,
    judge_actor,
    judge_runs,
    plan_runs,
)
from procgrade.judges.rendering import read_log, render_event, view_of
from procgrade.judges.rubric import PROCESS_KINDS, load_rubric, parse_rubric, rubric_json_schema
from procgrade.judges.tokens import token_counter
from procgrade.rules.loading import load_ruleset

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"
GRADES = Path(__file__).parent / "fixtures" / "grades"
KEY = "sk-test-NEVERSTORED0123456789abcdef"
RUN = "todo-app-demo"
#: The example run has rounds 0 and 1: 6 per-round dimensions x 2 rounds, the fix effect on round 1,
#: and 3 whole-run dimensions.
ARENA_JUDGMENTS = 16


def grades(store: EventStore, run_id: str | None = None) -> list[Grade]:
    query = select(*(events_table.c[n] for n in STORED_COLUMNS)).where(events_table.c.kind == "grade")
    if run_id is not None:
        query = query.where(events_table.c.run_id == run_id)
    with store.engine.connect() as conn:
        rows = conn.execute(query.order_by(events_table.c.run_id, events_table.c.seq)).all()
    return [to_event(tuple(r)) for r in rows]  # type: ignore[misc]


def judge(store: EventStore, stub: StubServer, run_ids: list[str] | None = None, *, model: str = "stub-judge",
          rubric: str = "arena", price: Price | None = None, attempts: int = 4, timeout: float = 10.0,
          **settings: Any) -> tuple[Any, list[float]]:
    """Judge through the real client against ``stub``; returns the summary and the waits between retries."""
    loaded, source = load_rubric(rubric)
    endpoint = Endpoint(model=model, base_url=stub.url, api_key=KEY, price=price)
    options = JudgeSettings(**{"concurrency": 2, **settings})
    counter = token_counter(model)
    waits: list[float] = []
    client = OpenAIChatModel(endpoint, RetryPolicy(attempts=attempts, timeout=timeout), sleep=waits.append)
    try:
        plans = plan_runs(store, run_ids or [RUN], loaded, endpoint, options, counter)
        summary = judge_runs(store, plans, loaded, source, client, endpoint, options, counter,
                             Spending(endpoint, options.max_cost, options.max_total_tokens))
    finally:
        client.close()
    return summary, waits


@pytest.fixture
def example(store: EventStore) -> EventStore:
    ingest_paths(store, [EXAMPLE])
    return store


# --- rubrics ------------------------------------------------------------------------------------------


def test_the_arena_rubric_is_valid_and_mirrors_the_arena_sheet() -> None:
    rubric, _ = load_rubric("arena")
    by_layer = {(d.layer, rubric.item_of(d), d.per) for d in rubric.dimensions}
    for check in ("requirement_understanding", "context_preservation", "implementation_path",
                  "constraint_adherence", "next_round_readiness"):
        assert ("check", check, "round") in by_layer
    assert ("round", None, "round") in by_layer and ("fix_effect", None, "fix_round") in by_layer
    fix = rubric.dimension("fix_effect")
    assert sorted(lv.value for lv in fix.scale.levels) == [-2, -1, 0]
    round_score = rubric.dimension("round_score")
    assert [lv.value for lv in sorted(round_score.scale.levels, key=lambda lv: lv.value)] == [-2, -1, 0, 1]
    for pattern in ("knowledge_gap_handling", "tool_use_quality", "scope_adherence"):
        assert ("pattern", pattern, "run") in by_layer
    assert rubric.cite and "grade" not in rubric.sees.kinds()


def test_schema_rubric_prints_the_json_schema_the_arena_rubric_meets() -> None:
    import jsonschema
    from ruamel.yaml import YAML

    result = CliRunner().invoke(app, ["schema", "rubric"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema == json.loads(json.dumps(rubric_json_schema()))
    document = YAML(typ="safe").load((ROOT / "judges" / "rubrics" / "arena.yaml").read_text())
    jsonschema.validate(document, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**document, "cite": "yes"}, schema)


@pytest.mark.parametrize("edit, line, field, reason", [
    ("  - id: a\n    title: A\n    question: Q?\n    per: run\n    layer: check\n    scale: {kind: binary, "
     "passed: p, failed: f}\n    weight: 2\n", 14, "dimensions[0].weight", "unknown field"),
    ("  - id: a\n    title: A\n    question: Q?\n    per: run\n    layer: check\n    scale:\n      kind: ordinal\n"
     "      levels:\n        - {value: 1, standard: good}\n        - {value: 3, standard: bad}\n",
     13, "dimensions[0].scale", "contiguous"),
])
def test_a_bad_rubric_is_refused_naming_file_line_and_field(edit: str, line: int, field: str, reason: str) -> None:
    text = ("name: t\nversion: 1\ndescription: d\ninstructions: i\nsees:\n  events: [message]\n"
            "dimensions:\n" + edit)
    with pytest.raises(InputError) as caught:
        parse_rubric(text, "bad.yaml")
    assert caught.value.source == "bad.yaml" and caught.value.field == field, str(caught.value)
    assert caught.value.line == line and reason in caught.value.reason, str(caught.value)


def test_a_rubric_cannot_show_grades_to_a_judge() -> None:
    text = ("name: t\nversion: 1\ndescription: d\ninstructions: i\nsees:\n  events: [message, grade]\n"
            "dimensions:\n  - {id: a, title: A, question: Q, per: run, layer: check,"
            " scale: {kind: binary, passed: p, failed: f}}\n")
    with pytest.raises(InputError) as caught:
        parse_rubric(text, "r.yaml")
    assert caught.value.field == "sees.events[1]" and caught.value.line == 6


# --- rendering ----------------------------------------------------------------------------------------


def test_rendering_keeps_seqs_redactions_and_rounds_and_never_shows_grades(example: EventStore) -> None:
    from procgrade.engine.events import Message

    info = example.run(RUN)
    extra = [
        Message(run_id=RUN, seq=info.event_count, event_id="m-secret", actor="agent", stage=1,
                text="export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789 and [REDACTED-SECRET]"),
        Grade(run_id=RUN, seq=info.event_count + 1, event_id="g-human", actor="human:alice", layer="check",
              item="context_preservation", passed=False, stage=1, rationale="HUMAN-ONLY-RATIONALE"),
    ]
    example.append(RUN, extra)
    log = read_log(example, RUN)
    counter = token_counter("gpt-4o-mini")
    whole = view_of(log, frozenset(PROCESS_KINDS), counter, 100_000)
    text = "\n".join(c.text for c in whole.chunks)
    assert "sk-proj-abcdefghijklmnop" not in text and "[REDACTED-SECRET]" in text and whole.redacted >= 1
    assert "HUMAN-ONLY-RATIONALE" not in text and info.event_count + 1 not in whole.seqs
    assert whole.basis_seq == info.event_count and whole.basis_hash == log.hashes[info.event_count]
    for event in log.events[:-1]:
        assert f"[{event.seq}] " in text
    round0 = view_of(log, frozenset(PROCESS_KINDS), counter, 100_000, round_=0)
    assert max(round0.seqs) < min(e.seq for e in log.events if e.kind == "stage_started" and e.stage == 1)
    small = view_of(log, frozenset(PROCESS_KINDS), counter, 300)
    assert len(small.chunks) > 1 and all(c.tokens <= 300 for c in small.chunks)
    assert [c.first_seq for c in small.chunks] == sorted(c.first_seq for c in small.chunks)
    assert "\n".join(c.text for c in small.chunks) == text  # chunks cut at event boundaries, nothing lost
    assert small.digest != whole.digest
    line, _, _ = render_event(log.events[0])
    assert line.startswith("[0] - harness run_started")


# --- judging, caching, replay -------------------------------------------------------------------------


def score_bytes(store: EventStore) -> list[bytes]:
    ruleset = load_ruleset()
    return [o.document.canonical for o in score_runs(store, [RUN], ruleset)]


def test_judge_then_rescore_twice_and_judge_again_asks_nothing_and_scores_the_same_bytes(example: EventStore) -> None:
    with StubServer() as stub:
        summary, _ = judge(example, stub)
        assert stub.count == ARENA_JUDGMENTS and not summary.stopped and not summary.failed
        assert summary.runs[0].appended == ARENA_JUDGMENTS and summary.runs[0].graded == ARENA_JUDGMENTS
        first, second = score_bytes(example), score_bytes(example)
        assert first == second
        head = example.run(RUN).head_hash
        again, _ = judge(example, stub)
        assert stub.count == ARENA_JUDGMENTS  # no further request
        assert again.runs[0].appended == 0 and again.runs[0].held == ARENA_JUDGMENTS and again.calls == 0
        assert example.run(RUN).head_hash == head
        assert score_bytes(example) == first
    verdicts = grades(example, RUN)
    assert len(verdicts) == ARENA_JUDGMENTS
    grade = next(g for g in verdicts if g.item == "requirement_understanding" and g.stage == 1)
    assert grade.actor == "judge:stub-judge" and grade.passed is True and grade.status == "graded"
    assert grade.sheet == "judge/arena" and grade.sample == 0 and grade.evidence and grade.parent_seq is not None
    record = grade.payload["judge"]
    for name in ("rubric", "prompt_sha256", "input_sha256", "cache_key", "basis", "params", "calls", "usage"):
        assert record[name], name
    assert record["params"]["temperature"] == 0.0 and record["params"]["seed"] == 0
    assert record["calls"][0]["response"]["content"] == json.loads(json.dumps(record["calls"][0]["response"]))["content"]
    assert record["calls"][0]["parsed"] == record["verdict"]
    assert grade.event_id == f"judge:{record['cache_key']}"
    assert [g.stage for g in verdicts if g.layer == "fix_effect"] == [1]  # fix rounds only
    score = next(g for g in verdicts if g.layer == "round" and g.stage == 0)
    assert (score.value, score.scale_min, score.scale_max) == (1, -2, 1)


def test_the_key_is_sent_but_never_stored(example: EventStore) -> None:
    with StubServer() as stub:
        judge(example, stub, dimensions=("scope_adherence",))
        assert stub.headers[0]["authorization"] == f"Bearer {KEY}"
    with example.engine.connect() as conn:
        rows = conn.execute(select(events_table)).all()
    assert KEY not in repr(rows) and "NEVERSTORED" not in repr(rows)
    assert "NEVERSTORED" not in repr(Endpoint(model="m", api_key=KEY))


def test_replay_only_uses_recorded_verdicts_and_names_what_is_missing(example: EventStore) -> None:
    with StubServer() as stub:
        with pytest.raises(ReplayMissingError) as caught:
            judge(example, stub, replay_only=True)
        assert stub.count == 0 and not grades(example)
        message = str(caught.value)
        assert f"run {RUN}" in message and "dimension requirement_understanding round 0" in message
        judge(example, stub, dimensions=("tool_use_quality",))
        replayed, _ = judge(example, stub, dimensions=("tool_use_quality",), replay_only=True)
        assert stub.count == 1 and replayed.runs[0].held == 1 and replayed.runs[0].appended == 0
        with pytest.raises(ReplayMissingError, match="dimension tool_use_quality"):
            judge(example, stub, dimensions=("tool_use_quality",), replay_only=True, temperature=0.5)


def test_a_changed_parameter_or_a_grown_run_is_judged_anew(example: EventStore) -> None:
    from procgrade.engine.events import Message

    with StubServer() as stub:
        judge(example, stub, dimensions=("scope_adherence",))
        judge(example, stub, dimensions=("scope_adherence",), seed=7)
        assert stub.count == 2
        info = example.run(RUN)
        example.append(RUN, [Message(run_id=RUN, seq=info.event_count, event_id="late", actor="agent", text="more")])
        judge(example, stub, dimensions=("scope_adherence",))
        assert stub.count == 3
    assert len({g.payload["judge"]["cache_key"] for g in grades(example)}) == 3


# --- failure modes of the endpoint --------------------------------------------------------------------


def test_429_is_retried_after_what_retry_after_asks(example: EventStore) -> None:
    def script(request: dict[str, Any], n: int) -> Reply:
        if n == 0:
            return Reply(status=429, headers={"Retry-After": "7"})
        return Reply(verdict_for(request))

    with StubServer(script) as stub:
        summary, waits = judge(example, stub, dimensions=("scope_adherence",))
        assert stub.count == 2 and waits == [7.0]
    (grade,) = grades(example)
    assert grade.status == "graded"
    assert grade.payload["judge"]["calls"][0]["response"]["retries"] == ["HTTP 429"]


def test_500s_are_retried_with_backoff_and_a_dead_endpoint_leaves_the_run_unjudged(example: EventStore) -> None:
    def flaky(request: dict[str, Any], n: int) -> Reply:
        return Reply(status=500) if n < 2 else Reply(verdict_for(request))

    with StubServer(flaky) as stub:
        summary, waits = judge(example, stub, dimensions=("scope_adherence",))
        assert stub.count == 3 and waits == [1.0, 2.0] and not summary.failed
    before = example.run(RUN)
    with StubServer(lambda request, n: Reply(status=503)) as stub:
        summary, waits = judge(example, stub, dimensions=("tool_use_quality",), attempts=3)
        assert stub.count == 3 and len(waits) == 2
    assert summary.runs[0].failed and "HTTP 503" in summary.runs[0].failed
    assert example.run(RUN).event_count == before.event_count  # nothing of the run written


def test_a_request_that_times_out_is_retried(example: EventStore) -> None:
    def slow_first(request: dict[str, Any], n: int) -> Reply:
        return Reply(verdict_for(request), delay=6.0 if n == 0 else 0.0)

    with StubServer(slow_first) as stub:
        summary, waits = judge(example, stub, dimensions=("scope_adherence",), timeout=2.0)
        assert stub.count == 2 and len(waits) == 1
    (grade,) = grades(example)
    assert grade.payload["judge"]["calls"][0]["response"]["retries"] == ["timeout after 2 s"]


def test_a_response_body_that_is_not_json_is_a_transport_failure_retried(example: EventStore) -> None:
    def garbled(request: dict[str, Any], n: int) -> Reply:
        return Reply(body=b"<html>gateway</html>") if n == 0 else Reply(verdict_for(request))

    with StubServer(garbled) as stub:
        judge(example, stub, dimensions=("scope_adherence",))
        assert stub.count == 2
    (grade,) = grades(example)
    assert grade.status == "graded"


def test_a_client_error_is_not_retried(example: EventStore) -> None:
    with StubServer(lambda request, n: Reply(status=401)) as stub:
        summary, waits = judge(example, stub, concurrency=1)
        assert stub.count == 1 and waits == []
    assert summary.stopped and "HTTP 401" in summary.stopped and not grades(example)


@pytest.mark.parametrize("bad, reason", [
    ("{not json", "not JSON"),
    ('{"value": 1, "rationale": "r"}', "does not meet the schema"),
    ('{"value": 5, "rationale": "r", "evidence": [1]}', "does not meet the schema at value"),
    ('{"value": 1, "rationale": "r", "evidence": [9999]}', "not shown: 9999"),
    ('{"value": 1, "rationale": "r", "evidence": []}', "cites no seq"),
])
def test_a_reply_that_cannot_be_counted_is_re_asked_then_recorded_as_no_grade(
        example: EventStore, bad: str, reason: str) -> None:
    with StubServer(lambda request, n: Reply(bad if n < 1 else verdict_for(request))) as stub:
        judge(example, stub, dimensions=("scope_adherence",), reasks=2)
        assert stub.count == 2  # discarded once, re-asked once
    (grade,) = grades(example)
    assert grade.status == "graded" and grade.value == 1
    calls = grade.payload["judge"]["calls"]
    assert reason in calls[0]["discarded"] and calls[0]["response"]["content"] == bad and "parsed" in calls[1]

    with StubServer(lambda request, n: Reply(bad)) as stub:
        summary, _ = judge(example, stub, dimensions=("tool_use_quality",), reasks=2)
        assert stub.count == 3
    no_grade = next(g for g in grades(example) if g.item == "tool_use_quality")
    assert no_grade.status == "no_grade" and no_grade.value is None and no_grade.passed is None
    assert "3 verdict replies discarded" in no_grade.rationale and reason in no_grade.rationale
    assert summary.runs[0].no_grade == 1 and summary.runs[0].graded == 0


def test_no_grade_is_left_out_of_calibration(example: EventStore) -> None:
    from procgrade.engine.analysis.calibration import calibrate_store

    with StubServer(lambda request, n: Reply("nope")) as stub:
        judge(example, stub, dimensions=("scope_adherence",), reasks=0)
    human = Grade(run_id=RUN, seq=example.run(RUN).event_count, event_id="h1", actor="human:alice",
                  layer="pattern", item="scope_adherence", value=0, scale_min=-2, scale_max=1)
    example.append(RUN, [human])
    (layer,) = calibrate_store(example, "human", ["judge:stub-judge"], layer="pattern").layers
    assert layer.comparisons == () and "judge:stub-judge graded nothing on layer pattern" in layer.notes


# --- samples and aggregation --------------------------------------------------------------------------


def test_k_samples_are_aggregated_by_majority_and_lower_median_before_their_samples(example: EventStore) -> None:
    def by_seed(request: dict[str, Any], n: int) -> Reply:
        seed = request["seed"]
        return Reply(verdict_for(request, passed=seed != 1, value=[1, -2, 0][seed]))

    with StubServer(by_seed) as stub:
        judge(example, stub, dimensions=("requirement_understanding", "scope_adherence"), samples=3)
        assert stub.count == 3 * 3
        again, _ = judge(example, stub, dimensions=("requirement_understanding", "scope_adherence"), samples=3)
        assert stub.count == 3 * 3 and again.runs[0].appended == 0 and again.runs[0].held == 9
    events = grades(example)
    check = [g for g in events if g.item == "requirement_understanding" and g.stage == 0]
    assert [g.sample for g in check] == [None, 0, 1, 2]  # the aggregate comes first: calibrate reads it
    assert check[0].passed is True and [g.passed for g in check[1:]] == [True, False, True]
    assert check[0].payload["judge"]["aggregate"]["method"] == "majority"
    pattern = [g for g in events if g.item == "scope_adherence"]
    assert pattern[0].value == 0 and [g.value for g in pattern[1:]] == [1, -2, 0]
    assert "lower median of 3 valid sample(s) of 3" in pattern[0].rationale


def test_a_tie_among_valid_samples_is_no_grade(example: EventStore) -> None:
    def script(request: dict[str, Any], n: int) -> Reply:
        seed = request["seed"]
        return Reply("garbage" if seed == 2 else verdict_for(request, passed=seed == 0))

    with StubServer(script) as stub:
        judge(example, stub, dimensions=("requirement_understanding",), samples=3, reasks=0)
    aggregate = next(g for g in grades(example) if g.sample is None and g.stage == 0)
    assert aggregate.status == "no_grade" and "a tie (1 pass, 1 fail)" in aggregate.rationale


# --- caps ---------------------------------------------------------------------------------------------


def test_the_cost_cap_stops_cleanly_between_runs(store: EventStore) -> None:
    ingest_paths(store, [GRADES / "arena-runs.jsonl"])
    runs = ["arena/gguf-swift/model-a", "arena/gguf-swift/model-c"]
    price = Price(Fraction(1), Fraction(1))  # $1 per million tokens each way
    with StubServer() as stub:
        # one dimension, two rounds in model-a: the worst case of a call is under 2,000 tokens
        summary, _ = judge(store, stub, runs, price=price, dimensions=("requirement_understanding",),
                           max_tokens=256, max_cost=Fraction(25, 10000))
        asked = stub.count
    assert summary.stopped and "cost cap ($0.0025)" in summary.stopped and "model-c" in summary.stopped
    assert [r.run_id for r in summary.runs] == ["arena/gguf-swift/model-a"] and asked == 2
    assert summary.not_reached == ["arena/gguf-swift/model-c"]
    assert summary.cost is not None and summary.cost <= Fraction(25, 10000)
    assert not grades(store, "arena/gguf-swift/model-c")


def test_the_token_cap_stops_cleanly(example: EventStore) -> None:
    with StubServer() as stub:
        summary, _ = judge(example, stub, max_total_tokens=500)
        assert stub.count == 0
    assert summary.stopped and "token cap (500)" in summary.stopped and not grades(example)


def test_max_cost_needs_prices() -> None:
    from procgrade.engine.errors import ProcgradeError

    with pytest.raises(ProcgradeError, match="--price-input"):
        Spending(Endpoint(model="m"), Fraction(1), None)


# --- settings -----------------------------------------------------------------------------------------


def test_endpoint_settings_come_from_flags_then_environment_then_config(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PROCGRADE_JUDGE_MODEL", "PROCGRADE_JUDGE_BASE_URL", "PROCGRADE_JUDGE_API_KEY", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "PROCGRADE_JUDGE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "judge.toml"
    config.write_text('model = "from-file"\nbase_url = "http://user:pw@127.0.0.1:9/v1?x=1"\n'
                      'api_key_env = "MY_KEY"\nprice_input = "0.15"\nprice_output = "0.6"\n')
    monkeypatch.setenv("MY_KEY", "k-file")
    endpoint = resolve_endpoint(config=config)
    assert (endpoint.model, endpoint.api_key) == ("from-file", "k-file")
    assert endpoint.price == Price(Fraction(15, 100), Fraction(6, 10))
    assert endpoint.shown_url() == "http://127.0.0.1:9/v1" and "pw" not in repr(endpoint.record())
    monkeypatch.setenv("PROCGRADE_JUDGE_MODEL", "from-env")
    assert resolve_endpoint(config=config).model == "from-env"
    assert resolve_endpoint(model="from-flag", config=config).model == "from-flag"
    config.write_text('model = "m"\napi_key = "sk-in-a-file"\n')
    with pytest.raises(InputError, match="api_key_env"):
        resolve_endpoint(config=config)


def test_judge_actor_is_a_valid_actor_for_any_model_name() -> None:
    assert judge_actor("gpt-4o-mini") == "judge:gpt-4o-mini"
    assert judge_actor("qwen2.5:7b") == "judge:qwen2.5_7b"
    assert judge_actor("meta-llama/Llama-3.1-8B") == "judge:meta-llama/Llama-3.1-8B"


# --- commands -----------------------------------------------------------------------------------------


def test_dry_run_prints_the_prompt_its_tokens_and_the_cost_and_calls_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/d.db"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "--db", db, str(EXAMPLE)]).exit_code == 0
    result = runner.invoke(app, ["judge", RUN, "--db", db, "--model", "gpt-4o-mini", "--dry-run",
                                 "--price-input", "0.15", "--price-output", "0.60"],
                           env={"OPENAI_API_KEY": "", "PROCGRADE_JUDGE_API_KEY": ""})
    assert result.exit_code == 0, result.output
    assert "--- the first prompt: run todo-app-demo, dimension requirement_understanding, round 0" in result.stdout
    assert "[3] r0 agent file_read path=specs/stage-0.md" in result.stdout
    assert "bpe-openai/o200k_base" in result.stdout and "estimated cost at most $" in result.stdout
    assert f"{ARENA_JUDGMENTS} call(s) to make" in result.stdout


def test_judge_command_against_the_stub_and_agreement_between_two_judges(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/c.db"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "--db", db, str(EXAMPLE)]).exit_code == 0

    def opinionated(request: dict[str, Any], n: int) -> Reply:
        return Reply(verdict_for(request, passed=request["model"] == "judge-a", value=0))

    with StubServer(opinionated) as stub:
        for model in ("judge-a", "judge-b"):
            result = runner.invoke(app, ["judge", RUN, "--db", db, "--model", model, "--base-url", stub.url,
                                         "--dimension", "requirement_understanding", "--dimension", "round_score"],
                                   env={"PROCGRADE_JUDGE_API_KEY": KEY})
            assert result.exit_code == 0, result.output
            assert "4 call(s)" in result.stdout and KEY not in result.output
        assert stub.count == 8
        rescored = [runner.invoke(app, ["rescore", "--all", "--db", db]) for _ in range(2)]
        assert all(r.exit_code == 0 for r in rescored)
        assert " new " in rescored[0].stdout and " new " not in rescored[1].stdout  # the same bytes: stored once
        result = runner.invoke(app, ["judge", RUN, "--db", db, "--model", "judge-a", "--base-url", stub.url,
                                     "--dimension", "requirement_understanding", "--dimension", "round_score"],
                               env={"PROCGRADE_JUDGE_API_KEY": KEY})
        assert result.exit_code == 0 and "0 call(s)" in result.stdout and stub.count == 8
        assert runner.invoke(app, ["verify", "--db", db]).exit_code == 0
    result = runner.invoke(app, ["judge", "agreement", "--db", db])
    assert result.exit_code == 0, result.output
    assert "requirement_understanding (check requirement_understanding): 2 graders" in result.stdout
    assert "0.0%" in result.stdout and "100.0%" in result.stdout  # disagree on checks, agree on the score


def test_judge_grades_feed_calibrate_like_any_grader(store: EventStore) -> None:
    from procgrade.engine.analysis.calibration import calibrate_store

    ingest_paths(store, [GRADES / "arena-runs.jsonl"])
    import_grades(store, [GRADES / "arena-gguf.csv"])
    with StubServer() as stub:
        judge(store, stub, ["arena/gguf-swift/model-a", "arena/gguf-swift/model-c"],
              dimensions=("requirement_understanding", "context_preservation"))
    result = calibrate_store(store, "human", ["judge:stub-judge"], layer="check")
    (layer,) = result.layers
    comparison = next(c for c in layer.comparisons if c.group is None)
    assert comparison.candidate == "judge:stub-judge" and comparison.n == 12  # 2 checks x 6 rounds in all
    result = CliRunner().invoke(app, ["calibrate", "--db", store.engine.url.render_as_string(hide_password=False),
                                      "--candidate", "judge:stub-judge", "--layer", "check"])
    assert result.exit_code == 0, result.output


# --- kill -9 mid-run ----------------------------------------------------------------------------------


def test_a_judge_killed_mid_run_leaves_nothing_of_that_run(store_url: str, store: EventStore) -> None:
    ingest_paths(store, [EXAMPLE])
    before = store.run(RUN)

    def stall_after_five(request: dict[str, Any], n: int) -> Reply:
        return Reply(verdict_for(request), delay=60.0 if n >= 5 else 0.0)

    with StubServer(stall_after_five) as stub:
        env = {**os.environ, "PROCGRADE_JUDGE_API_KEY": KEY}
        process = subprocess.Popen(
            [sys.executable, "-m", "procgrade.engine.cli", "judge", RUN, "--db", store_url, "--model", "stub",
             "--base-url", stub.url, "--concurrency", "1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
        try:
            deadline = time.monotonic() + 60
            while stub.count < 6 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            assert stub.count == 6, process.stderr.read() if process.poll() is not None else stub.count
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    after = store.run(RUN)
    assert (after.event_count, after.head_hash) == (before.event_count, before.head_hash)
    assert not grades(store, RUN)
    assert [e.seq for e in store.events(RUN)] == list(range(before.event_count))


def test_an_echoed_key_is_scrubbed_before_anything_is_stored(example: EventStore) -> None:
    def echo(request: dict[str, Any], n: int) -> Reply:
        return Reply(f"your key is {KEY}" if n == 0 else verdict_for(request))

    with StubServer(echo) as stub:
        judge(example, stub, dimensions=("scope_adherence",))
    with example.engine.connect() as conn:
        rows = conn.execute(select(events_table)).all()
    assert "NEVERSTORED" not in repr(rows)
    (grade,) = grades(example)
    assert grade.payload["judge"]["calls"][0]["response"]["content"] == "your key is [REDACTED-SECRET]"


def test_without_structured_output_the_schema_goes_into_the_prompt(example: EventStore) -> None:
    with StubServer() as stub:
        judge(example, stub, dimensions=("scope_adherence",), response_format="none")
        (request,) = stub.requests
    assert "response_format" not in request
    assert "The reply's JSON Schema: {" in request["messages"][1]["content"]
    (grade,) = grades(example)
    assert grade.status == "graded" and grade.payload["judge"]["params"]["response_format"] == "none"


def test_a_long_run_is_read_in_chunks_with_carried_notes(example: EventStore) -> None:
    with StubServer() as stub:
        judge(example, stub, dimensions=("scope_adherence",), context_tokens=1024, max_tokens=64)
        requests = list(stub.requests)
    assert len(requests) > 1
    assert all("notes" in r["response_format"]["json_schema"]["schema"]["properties"] for r in requests[:-1])
    assert "Your notes from the earlier parts of the log:\nnoted (seqs" in requests[1]["messages"][1]["content"]
    (grade,) = grades(example)
    record = grade.payload["judge"]
    assert record["renderer"]["chunks"] == len(requests) and [c["purpose"] for c in record["calls"]] == (
        ["notes"] * (len(requests) - 1) + ["verdict"])
    assert set(grade.evidence) <= set(range(example.run(RUN).event_count))


def test_without_the_tokens_extra_counts_are_a_stated_overestimate() -> None:
    counter = token_counter("gpt-4o-mini", prefer_estimate=True)
    assert counter.name == "estimate/3-bytes" and not counter.exact
    assert counter.count("abcd") == 2 and counter.count("é") == 1 and counter.count("") == 0
    text = "[12] r0 agent command command=pytest -q exit_code=1\n" * 20
    assert counter.count(text) >= token_counter("gpt-4o-mini").count(text)


def test_a_sealed_run_replays_its_verdicts_but_takes_no_new_ones(example: EventStore) -> None:
    with StubServer() as stub:
        judge(example, stub, dimensions=("scope_adherence",))
        example.seal(RUN)
        replayed, _ = judge(example, stub, dimensions=("scope_adherence",), replay_only=True)
        assert not replayed.failed and replayed.runs[0].held == 1
        refused, _ = judge(example, stub, dimensions=("tool_use_quality",))
        assert stub.count == 1
    assert refused.runs[0].failed and "sealed" in refused.runs[0].failed


def _rubric_file(tmp_path: Path, extra: str) -> str:
    path = tmp_path / "r.yaml"
    path.write_text("name: mine\nversion: 1\ndescription: d\ninstructions: grade it\n" + extra)
    return str(path)


def test_what_a_judge_sees_and_whether_it_must_cite_come_from_the_rubric(example: EventStore, tmp_path: Path) -> None:
    from procgrade.engine.events import AcceptanceVerdict

    info = example.run(RUN)
    example.append(RUN, [AcceptanceVerdict(run_id=RUN, seq=info.event_count, event_id="v", actor="grader",
                                           verifier="hidden-tests", status="evaluated", reward="1")])
    dims = ("dimensions:\n  - {id: works, title: Works, question: Does it work?, per: run, layer: outcome,"
            " scale: {kind: binary, passed: p, failed: f}}\n")
    seen = _rubric_file(tmp_path, "sees: {events: [message], outcomes: [acceptance_verdict]}\ncite: false\n" + dims)
    with StubServer(lambda request, n: Reply(verdict_for(request, evidence=[]))) as stub:
        judge(example, stub, rubric=seen)
        (request,) = stub.requests
    log = next(m["content"] for m in request["messages"] if m["role"] == "user")
    assert "acceptance_verdict" in log and "file_edit" not in log and " message " in log
    (grade,) = grades(example)
    assert grade.status == "graded" and grade.evidence == [] and grade.layer == "outcome" and grade.item == "works"
    assert grade.sheet == "judge/mine"

    default = _rubric_file(tmp_path, dims)
    with StubServer(lambda request, n: Reply(verdict_for(request, evidence=[]))) as stub:
        judge(example, stub, rubric=default, reasks=0, model="other")
        log = next(m["content"] for m in stub.requests[0]["messages"] if m["role"] == "user")
    assert "acceptance_verdict" not in log and "file_edit" in log  # default: every process event, no outcome
    refused = next(g for g in grades(example) if g.actor == "judge:other")
    assert refused.status == "no_grade" and "cites no seq" in refused.rationale


def test_retry_after_is_read_in_seconds_milliseconds_or_as_an_http_date() -> None:
    import email.utils

    from procgrade.judges.client import _retry_after

    assert _retry_after({"retry-after": "3"}) == 3.0 and _retry_after({"retry-after-ms": "250"}) == 0.25
    assert _retry_after({"retry-after": "soon"}) is None and _retry_after({}) is None
    later = _retry_after({"retry-after": email.utils.formatdate(time.time() + 120, usegmt=True)})
    assert later is not None and 100 < later <= 120


def test_two_judges_appending_the_same_verdicts_write_them_once(example: EventStore) -> None:
    """A second process judged the same run meanwhile: its verdicts are the same events, held once."""
    loaded, source = load_rubric("arena")
    with StubServer() as stub:
        endpoint = Endpoint(model="stub-judge", base_url=stub.url, api_key=KEY)
        options = JudgeSettings(dimensions=("scope_adherence", "tool_use_quality"))
        counter = token_counter("stub-judge")
        plans = plan_runs(example, [RUN], loaded, endpoint, options, counter)  # planned before the other judged
        judge(example, stub, dimensions=("tool_use_quality",))  # the other process, one of the two verdicts
        client = OpenAIChatModel(endpoint, RetryPolicy(attempts=1))
        try:
            summary = judge_runs(example, plans, loaded, source, client, endpoint, options, counter,
                                 Spending(endpoint, None, None))
        finally:
            client.close()
    assert summary.runs[0].appended == 1 and not summary.failed
    keys = [g.payload["judge"]["cache_key"] for g in grades(example)]
    assert len(keys) == len(set(keys)) == 2
