"""The event model: strict validation, and the JSON Schema of a native line."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from pydantic import ValidationError

from builders import SHA_A, ev, run_started, small_run
from procgrade.engine.events import (
    EVENT_KINDS,
    Command,
    Message,
    StageStarted,
    event_adapter,
    events_json_schema,
    is_model_actor,
)

ADAPTER = event_adapter()


def errors_of(raw: dict | bytes) -> list[dict]:
    with pytest.raises(ValidationError) as info:
        if isinstance(raw, bytes):
            ADAPTER.validate_json(raw)
        else:
            ADAPTER.validate_python(raw)
    return info.value.errors(include_url=False)


def test_small_run_validates_into_the_registered_kinds() -> None:
    events = [ADAPTER.validate_python(e) for e in small_run()]
    assert [type(e) for e in events] == [EVENT_KINDS[e["kind"]] for e in small_run()]
    assert events[4].exit_code == 0 and isinstance(events[4], Command)
    assert events[1].intent == "plan" and isinstance(events[1], Message)


@pytest.mark.parametrize("field,value", [("seq", "1"), ("seq", 1.0), ("seq", True), ("exit_code", "0")])
def test_strict_no_coercion_into_int_fields(field: str, value: object) -> None:
    line = ev("command", 1, command="ls", exit_code=0)
    line[field] = value
    for raw in (line, json.dumps(line).encode()):
        errors = errors_of(raw)
        assert errors[0]["loc"][-1] == field, errors


def test_strict_no_coercion_into_str_fields() -> None:
    errors = errors_of(ev("message", 1, text=5))
    assert errors[0]["loc"] == ("message", "text")


def test_int_where_int_expected_is_accepted_from_json() -> None:
    event = ADAPTER.validate_json(json.dumps(ev("command", 3, command="ls", exit_code=-1)).encode())
    assert event.seq == 3 and event.exit_code == -1


@pytest.mark.parametrize("extra", [{"exit_cod": 0}, {"Command": "ls"}, {"harness": {"name": "h"}}])
def test_extra_keys_are_forbidden(extra: dict) -> None:
    line = ev("command", 1, command="ls", **extra)
    errors = errors_of(line)
    assert errors[0]["type"] == "extra_forbidden"
    assert errors[0]["loc"] == ("command", next(iter(extra)))


def test_extra_keys_are_forbidden_in_nested_models() -> None:
    line = run_started()
    line["harness"] = {"name": "h", "flavour": "x"}
    errors = errors_of(line)
    assert errors[0]["type"] == "extra_forbidden"
    assert errors[0]["loc"] == ("run_started", "harness", "flavour")


@pytest.mark.parametrize("actor", [
    "agent", "harness", "user", "human", "grader", "judge", "system",
    "subagent:w1", "subagent:worker.2@x/y+z-1", "human:alice", "grader:g-1", "judge:j.1",
])
def test_actor_pattern_accepts(actor: str) -> None:
    assert ADAPTER.validate_python(ev("message", 1, actor=actor, text="hi")).actor == actor


@pytest.mark.parametrize("actor", [
    "", "Agent", "agent ", "robot", "subagent", "subagent:", "subagent:-x", "subagent:a b",
    "user:bob", "subagent:" + "a" * 129, "agent\n",
])
def test_actor_pattern_rejects(actor: str) -> None:
    errors = errors_of(ev("message", 1, actor=actor, text="hi"))
    assert errors[0]["loc"] == ("message", "actor")
    assert errors[0]["type"] == "string_pattern_mismatch"


def test_model_actor() -> None:
    assert is_model_actor("agent") and is_model_actor("subagent:w1")
    assert not is_model_actor("harness") and not is_model_actor("human:alice")


@pytest.mark.parametrize("parent", [5, 6, 100])
def test_parent_seq_must_precede_seq(parent: int) -> None:
    errors = errors_of(ev("message", 5, text="x", parent_seq=parent))
    assert errors[0]["loc"] == ("message", "parent_seq")
    assert "earlier seq" in errors[0]["msg"]


def test_parent_seq_earlier_is_fine() -> None:
    assert ADAPTER.validate_python(ev("message", 5, text="x", parent_seq=4)).parent_seq == 4
    assert ADAPTER.validate_python(ev("message", 5, text="x", parent_seq=0)).parent_seq == 0


def test_negative_seq_and_counts_are_rejected() -> None:
    assert errors_of(ev("message", -1, text="x"))[0]["loc"] == ("message", "seq")
    assert errors_of(ev("test_run", 1, passed=-1))[0]["loc"] == ("test_run", "passed")


def test_stage_started_needs_stage() -> None:
    errors = errors_of(ev("stage_started", 1, title="build"))
    assert errors[0]["type"] == "missing" and errors[0]["loc"] == ("stage_started", "stage")
    event = ADAPTER.validate_python(ev("stage_started", 1, stage=2, title="build"))
    assert isinstance(event, StageStarted) and event.stage == 2
    # other kinds take stage as optional
    assert ADAPTER.validate_python(ev("message", 1, text="x")).stage is None


def test_unknown_and_missing_kind() -> None:
    assert errors_of(ev("teleport", 1))[0]["type"] == "union_tag_invalid"
    line = ev("message", 1, text="x")
    del line["kind"]
    assert errors_of(line)[0]["type"] == "union_tag_not_found"


@pytest.mark.parametrize("field,value", [
    ("ts", "yesterday"), ("ts", "2024-05-01 10:00"), ("run_id", "-leading-dash"), ("run_id", ""),
    ("event_id", ""), ("output_sha256", "A" * 64), ("output_sha256", "a" * 63),
])
def test_envelope_and_fact_patterns(field: str, value: str) -> None:
    line = ev("command", 1, command="ls")
    line[field] = value
    assert errors_of(line)[0]["loc"][-1] == field


def test_literal_fields() -> None:
    assert errors_of(ev("file_edit", 1, path="a", edit_kind="append"))[0]["loc"] == ("file_edit", "edit_kind")
    assert errors_of(ev("message", 1, text="x", intent="musing"))[0]["loc"] == ("message", "intent")


def test_models_are_frozen() -> None:
    event = ADAPTER.validate_python(ev("message", 1, text="x"))
    with pytest.raises(ValidationError):
        event.text = "y"  # type: ignore[misc]


# --- JSON Schema -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = events_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    assert cls is jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_schema_declares_draft_2020_12_and_every_kind() -> None:
    schema = events_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    text = json.dumps(schema)
    for kind in EVENT_KINDS:
        assert f'"{kind}"' in text


def test_schema_accepts_good_lines(validator) -> None:
    lines = small_run() + [
        ev("stage_started", 8, stage=0, spec_ref="PRD#1"),
        ev("delegation", 9, worker_id="w1", instruction="do it", context=["a.py"]),
        ev("worker_report", 10, actor="subagent:w1", worker_id="w1", text="done", status="success"),
        ev("job_started", 11, job_id="j", command="sleep 1"),
        ev("job_polled", 12, job_id="j", status="running"),
        ev("job_finished", 13, job_id="j", exit_code=0, output_sha256=SHA_A),
        ev("compaction", 14, actor="harness", tokens_before=10, tokens_after=5),
        ev("correction", 15, actor="user", text="no"),
        ev("stage_ended", 16, stage=0, status="completed"),
    ]
    for good in lines:
        validator.validate(good)
        ADAPTER.validate_python(good)  # and the model agrees


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda d: d.update(seq="1"), id="seq-as-string"),
    pytest.param(lambda d: d.update(exit_code="0"), id="exit_code-as-string"),
    pytest.param(lambda d: d.update(extra_field=1), id="extra-key"),
    pytest.param(lambda d: d.update(kind="teleport"), id="unknown-kind"),
    pytest.param(lambda d: d.update(actor="robot"), id="bad-actor"),
    pytest.param(lambda d: d.pop("command"), id="missing-field"),
    pytest.param(lambda d: d.pop("run_id"), id="missing-envelope"),
    pytest.param(lambda d: d.update(seq=-1), id="negative-seq"),
    pytest.param(lambda d: d.update(output_sha256="xyz"), id="bad-sha"),
])
def test_schema_rejects_bad_lines(validator, mutate) -> None:
    bad = ev("command", 4, command="ls", exit_code=0)
    mutate(bad)
    assert not validator.is_valid(bad)
    with pytest.raises(ValidationError):
        ADAPTER.validate_python(bad)


def test_schema_rejects_stage_started_without_stage(validator) -> None:
    assert not validator.is_valid(ev("stage_started", 1))
    assert validator.is_valid(ev("stage_started", 1, stage=1))


def test_cli_schema_events_prints_the_schema() -> None:
    proc = subprocess.run([sys.executable, "-m", "procgrade.engine.cli", "schema", "events"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    printed = json.loads(proc.stdout)
    assert printed == json.loads(json.dumps(events_json_schema()))
    validator = jsonschema.Draft202012Validator(printed)
    assert validator.is_valid(small_run()[0])
    assert not validator.is_valid({**small_run()[0], "seq": "0"})


@pytest.mark.parametrize(("reward", "ok"), [("1", True), ("0", True), ("0.75", True), ("2/3", True), ("-0.5", True),
                                            ("1.0", False), ("2/2", False), ("4/6", False), ("1/4", False),
                                            ("-0", False), ("0.50", False), ("1e0", False)])
def test_rewards_have_one_spelling(reward: str, ok: bool) -> None:
    """Equal rewards are equal text, so facts and analysis can compare them as text."""
    from procgrade.engine.events import AcceptanceVerdict

    fields = dict(run_id="r", seq=1, event_id="e", actor="grader", verifier="v", status="evaluated", reward=reward)
    if ok:
        assert AcceptanceVerdict(**fields).reward == reward
    else:
        with pytest.raises(ValidationError, match="reward"):
            AcceptanceVerdict(**fields)
