"""The event model: the envelope every event carries and one model per kind.

This module is the single place where event kinds are declared. A kind is a
pydantic model that subclasses :class:`Event`, fixes ``kind`` to a literal and
adds its typed fact fields; ``@event_kind`` registers it, and the discriminated
union :data:`AnyEvent` (and so the JSON Schema and native ingest) is built from
the registry. Later kinds (outcomes, grades, judge verdicts) are added here the
same way.

Models are strict (a JSON string is not an int) and forbid unknown keys, so a
typo in a producer's field name is an error, not a silently dropped fact.
Optional fields default to ``None`` and are left out of the canonical form, so
adding an optional field never changes the hash of an existing event.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime as _datetime
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationInfo, field_validator, model_validator

__all__ = [
    "Event",
    "AnyEvent",
    "EVENT_KINDS",
    "MODEL_ACTOR_PATTERN",
    "event_kind",
    "event_adapter",
    "build_event_validators",
    "fields_validators",
    "events_json_schema",
    "is_model_actor",
]

#: Who did it. The model is ``agent`` or ``subagent:<id>``; everything else is not the model.
ACTOR_PATTERN = r"^(agent|harness|user|human|grader|judge|system|(subagent|human|grader|judge):[A-Za-z0-9][A-Za-z0-9._@/+-]{0,127})$"
MODEL_ACTOR_PATTERN = re.compile(r"^(agent|subagent:.+)$")
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,199}$"
# RFC 3339 date-time; informational only, never used for order.
TS_PATTERN = r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"


# The texts of TS_PATTERN that name a real instant (what :func:`is_instant` decides), as one
# pattern: ASCII digits (but in the fraction, which is_instant ignores, any digit TS_PATTERN's
# \d takes), years 0001-9999, each month's days (29 February in leap years), hours
# 0-23, minutes 0-59, seconds 0-60, offsets within a day. Checked by pydantic's own regex engine,
# not by a Python call per event (a third of an event's validation);
# ``tests/test_instant_fast_path.py`` holds it to is_instant.
_YEAR = r"(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_MONTH_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
              r"|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_LEAP_DAY = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29"
REAL_TS_PATTERN = (rf"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})[Tt ](?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)"
                   r"(?:\.\d{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$")
_NOT_REAL_INSTANT = "not a real RFC 3339 instant (month, day, hour, minute, second or offset out of range)"


class _RealInstant:
    """Annotation: a text of TS_PATTERN must also be a real instant (REAL_TS_PATTERN), else the
    error says so in the words of the Python check it replaces (its type is now ``real_instant``,
    was ``value_error``). The JSON Schema, in both modes, keeps TS_PATTERN."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        real = core_schema.custom_error_schema(core_schema.str_schema(pattern=REAL_TS_PATTERN),
                                               custom_error_type="real_instant",
                                               custom_error_message=_NOT_REAL_INSTANT)
        return core_schema.chain_schema([handler(source), real])

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        return handler(schema["steps"][0])  # TS_PATTERN in both modes (a chain shows its last step when serialising)


def is_instant(text: str) -> bool:
    """Whether ``text`` (already matching :data:`TS_PATTERN`) names a real instant: month 1-12,
    a day the month has, hours 0-23, minutes 0-59, seconds 0-60 (a leap second), offsets
    within a day. ``2026-13-45T25:61:61Z`` matches the pattern and is none of these.

    Every event's ``ts`` comes here, so the common ASCII form is decided by comparing its digit
    pairs, with each date checked once (a log holds few dates); anything else takes the full
    parse (``tests/test_instant_fast_path.py`` holds the two equal)."""
    if _ASCII_INSTANT.fullmatch(text) is None:
        return _parsed_instant(text)
    real_date = _REAL_DATES.get(text[:10])
    if real_date is None:
        real_date = _real_date(text[:10])
    if not real_date or text[11:13] > "23" or text[14:16] > "59" or text[17:19] > "60":
        return False
    return text[-1] in "Zz" or (text[-5:-3] < "24" and text[-2:] < "60")


_ASCII_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII)
#: YYYY-MM-DD -> is it a real date (at most a few thousand remembered).
_REAL_DATES: dict[str, bool] = {}


def _real_date(date: str) -> bool:
    try:
        _datetime.fromisoformat(date)
    except ValueError:
        real = False
    else:
        real = True
    if len(_REAL_DATES) < 4096:
        _REAL_DATES[date] = real
    return real


def _parsed_instant(text: str) -> bool:
    """:func:`is_instant` by a full parse (what it always did)."""
    date, time = text[:10], text[11:]
    zone_at = max(time.rfind("+"), time.rfind("-"), time.upper().rfind("Z"))
    clock, zone = time[:zone_at], time[zone_at:].upper()
    hms = clock.split(".")[0]
    if hms.endswith(":60"):  # RFC 3339 allows a leap second; datetime does not
        hms = hms[:-2] + "59"
    try:
        _datetime.fromisoformat(f"{date}T{hms}{'+00:00' if zone == 'Z' else zone}")
    except ValueError:
        return False
    return zone == "Z" or int(zone[1:3]) < 24 and int(zone[4:6]) < 60


Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
# Integers and strings that land in typed columns must fit them in both databases:
# 64-bit integers, 32-bit stage indexes, and no NUL character (PostgreSQL text cannot hold it).
Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
NonNegative = Annotated[int, Field(ge=0, le=2**63 - 1)]
StageIndex = Annotated[int, Field(ge=0, le=2**31 - 1, description="Stage or round index.")]
ColumnText = Annotated[str, Field(pattern=r"^[^\x00]*$")]
Text = Annotated[str, Field(max_length=10_000_000)]


def is_model_actor(actor: str) -> bool:
    """True for actors whose decisions the model controls (``agent``, ``subagent:<id>``)."""
    return MODEL_ACTOR_PATTERN.match(actor) is not None


class _Strict(BaseModel):
    # defer_build: each kind's validator is built on its first use, not at import (about 80 ms),
    # so commands that only read the store (rescore, report, runs) never pay for it
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class Event(_Strict):
    """The envelope. ``seq`` is the only order rules use; ``ts`` is informational."""

    #: Fields other than ``payload`` whose values are free-form JSON (may hold floats or
    #: any object keys); every other field is typed str/int/bool or lists of them.
    FREE_FORM_FIELDS: ClassVar[frozenset[str]] = frozenset()

    run_id: Annotated[str, Field(pattern=RUN_ID_PATTERN, description="The run (stream) this event belongs to.")]
    seq: Annotated[int, Field(ge=0, le=2**63 - 1, description="Gapless position in the run, from 0.")]
    event_id: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00]*$", description="Client id; a retried append with the same id is a no-op.")]
    ts: Annotated[Annotated[str, Field(pattern=TS_PATTERN), _RealInstant()] | None,
                  Field(description="RFC 3339 time; informational only.")] = None
    kind: str
    actor: Annotated[str, Field(pattern=ACTOR_PATTERN, description="agent, subagent:<id>, harness, user, human, grader, judge, system.")]
    stage: StageIndex | None = None
    parent_seq: Annotated[int | None, Field(ge=0, le=2**63 - 1, description="Causation: the seq of the event that caused this one.")] = None
    payload: Annotated[dict[str, Any], Field(description="The raw source record, kept whole.")] = Field(default_factory=dict)

    @field_validator("parent_seq")
    @classmethod
    def _parent_precedes(cls, value: int | None, info: ValidationInfo) -> int | None:
        seq = info.data.get("seq")
        if value is not None and seq is not None and value >= seq:
            raise ValueError(f"must be an earlier seq than {seq}, got {value}")
        return value



EVENT_KINDS: dict[str, type[Event]] = {}


def event_kind(cls: type[Event]) -> type[Event]:
    """Register an event kind under the literal value of its ``kind`` field."""
    name = cls.model_fields["kind"].default
    if not isinstance(name, str) or name in EVENT_KINDS:
        raise TypeError(f"{cls.__name__}: kind must be a unique literal with a default, got {name!r}")
    EVENT_KINDS[name] = cls
    return cls


# --- provenance and structure ---------------------------------------------------------------


class HarnessInfo(_Strict):
    name: Annotated[ColumnText, Field(min_length=1)]
    version: ColumnText | None = None
    commit: ColumnText | None = None


class ImportInfo(_Strict):
    """Where an imported run came from and what the importer did to it."""

    format: Annotated[ColumnText, Field(min_length=1, description="The importer that read the run.")]
    importer_version: Annotated[ColumnText, Field(min_length=1)]
    files: list[ColumnText] = Field(description="The source files, relative to the imported path, primary first.")
    records: NonNegative = Field(description="Source records read.")
    unparsed: NonNegative = Field(default=0, description="Malformed records kept as unparsed events.")
    redactions: NonNegative = Field(default=0, description="Secrets replaced by the redaction marker before storing.")


@event_kind
class RunStarted(Event):
    """Opens a run (always seq 0) and records its provenance."""

    FREE_FORM_FIELDS: ClassVar[frozenset[str]] = frozenset({"model_settings", "labels"})

    kind: Literal["run_started"] = "run_started"
    harness: HarnessInfo
    model: ColumnText | None = None
    model_settings: dict[str, Any] | None = None
    task_id: ColumnText | None = None
    dataset_hash: str | None = None
    image: str | None = None
    labels: dict[str, str] | None = None
    imported: ImportInfo | None = Field(default=None, description="Set when an importer made the run from a harness log.")


@event_kind
class StageStarted(Event):
    """A stage or round begins; ``stage`` on the envelope is its index (required here)."""

    kind: Literal["stage_started"] = "stage_started"
    stage: StageIndex
    spec_ref: str | None = Field(default=None, description="The stage's spec or PRD reference.")
    title: str | None = None


@event_kind
class StageEnded(Event):
    kind: Literal["stage_ended"] = "stage_ended"
    stage: StageIndex
    status: Literal["completed", "failed", "aborted"] | None = None


@event_kind
class RunEnded(Event):
    """How the run ended. ``gave_up``: the model stopped without finishing (it forfeited or
    exited on its own); ``budget_exhausted``: the harness stopped it at a cost, turn or
    context limit; ``timeout``: the harness killed it at a time limit; ``aborted``: stopped
    from outside otherwise (a user interrupt). ``reason`` keeps the harness's raw words."""

    kind: Literal["run_ended"] = "run_ended"
    status: Literal["completed", "failed", "aborted", "gave_up", "budget_exhausted", "timeout", "error"] | None = None
    reason: str | None = None


# --- what the model (or user, or harness) did -----------------------------------------------


@event_kind
class Message(Event):
    kind: Literal["message"] = "message"
    text: Text
    intent: Literal["plan", "progress", "question", "answer", "summary", "reasoning", "other"] | None = None


@event_kind
class Command(Event):
    kind: Literal["command"] = "command"
    command: Annotated[ColumnText, Field(max_length=10_000_000)]
    exit_code: Int64 | None = None
    duration_ms: NonNegative | None = None
    output_sha256: Sha256Hex | None = None
    cwd: str | None = None


@event_kind
class FileRead(Event):
    kind: Literal["file_read"] = "file_read"
    path: Annotated[ColumnText, Field(min_length=1)]


@event_kind
class FileEdit(Event):
    kind: Literal["file_edit"] = "file_edit"
    path: Annotated[ColumnText, Field(min_length=1)]
    edit_kind: Literal["create", "modify", "delete", "rename"]
    diff_sha256: Sha256Hex | None = None
    new_path: ColumnText | None = Field(default=None, description="Target path of a rename.")


@event_kind
class TestRun(Event):
    """A test suite run. Counts are given when the output shows them."""

    __test__ = False  # not a pytest test class
    kind: Literal["test_run"] = "test_run"
    command: Annotated[ColumnText, Field(max_length=10_000_000)] | None = None
    passed: NonNegative | None = None
    failed: NonNegative | None = None
    errored: NonNegative | None = None
    skipped: NonNegative | None = None
    exit_code: Int64 | None = None
    duration_ms: NonNegative | None = None
    output_sha256: Sha256Hex | None = None


@event_kind
class Delegation(Event):
    kind: Literal["delegation"] = "delegation"
    worker_id: Annotated[ColumnText, Field(min_length=1)]
    instruction: Text
    context: list[str] | None = Field(default=None, description="Paths and specs handed to the worker.")


@event_kind
class WorkerReport(Event):
    kind: Literal["worker_report"] = "worker_report"
    worker_id: Annotated[ColumnText, Field(min_length=1)]
    text: Text
    status: Literal["success", "failure", "partial"] | None = None
    evidence: list[ColumnText] | None = Field(default=None, description="Evidence the report cites (paths), primary first.")


@event_kind
class JobStarted(Event):
    kind: Literal["job_started"] = "job_started"
    job_id: Annotated[ColumnText, Field(min_length=1)]
    command: Annotated[ColumnText, Field(max_length=10_000_000)] | None = None
    output_path: ColumnText | None = Field(default=None, description="Where the job writes its result.")


@event_kind
class JobPolled(Event):
    kind: Literal["job_polled"] = "job_polled"
    job_id: Annotated[ColumnText, Field(min_length=1)]
    status: Literal["running", "finished", "unknown"] | None = None


@event_kind
class JobFinished(Event):
    kind: Literal["job_finished"] = "job_finished"
    job_id: Annotated[ColumnText, Field(min_length=1)]
    exit_code: Int64 | None = None
    output_path: ColumnText | None = Field(default=None, description="Where the job wrote its result.")
    output_sha256: Sha256Hex | None = None


@event_kind
class Compaction(Event):
    """The context was compacted (by the model on request, or by the harness on its own)."""

    kind: Literal["compaction"] = "compaction"
    tokens_before: NonNegative | None = None
    tokens_after: NonNegative | None = None
    summary: Text | None = None


@event_kind
class CompletionClaim(Event):
    kind: Literal["completion_claim"] = "completion_claim"
    claim: Text = Field(description="What is claimed done.")
    scope: Literal["step", "stage", "run"] | None = None


@event_kind
class Correction(Event):
    """Feedback given between rounds (by a user or human grader)."""

    kind: Literal["correction"] = "correction"
    text: Text


# --- what an importer kept without process meaning ------------------------------------------


@event_kind
class Unparsed(Event):
    """A malformed source record the format tolerates: kept raw and counted, never dropped."""

    kind: Literal["unparsed"] = "unparsed"
    reason: Text
    record: ColumnText | None = Field(default=None, description="Where it was: FILE:RECORD.")


@event_kind
class SourceRecord(Event):
    """A well-formed source record with no process meaning (session metadata, usage, state
    updates): kept so nothing of the original is lost; no rule reads it."""

    kind: Literal["source_record"] = "source_record"
    record_type: Annotated[ColumnText, Field(min_length=1, description="The source's own type name for the record.")]


# --- outcomes --------------------------------------------------------------------------------

def _canonical_reward(text: str) -> str:
    from fractions import Fraction

    from procgrade.engine.exact import rational_text

    canonical = rational_text(Fraction(text))
    if text != canonical:
        raise ValueError(f"reward {text!r} must be written {canonical!r} (one spelling per value)")
    return text


#: An exact reward in its one canonical spelling: "1", "0", "0.75", "2/3" (never "1.0" or "4/6"),
#: so equal rewards are equal text.
Reward = Annotated[str, Field(pattern=r"^-?(0|[1-9][0-9]*)((\.[0-9]*[1-9])|(/[1-9][0-9]*))?$"),
                   AfterValidator(_canonical_reward)]


@event_kind
class AcceptanceStarted(Event):
    """A hidden-test acceptance check begins on a submitted workspace."""

    kind: Literal["acceptance_started"] = "acceptance_started"
    task_id: Annotated[ColumnText, Field(min_length=1)]
    suite_sha256: Sha256Hex = Field(description="Hash of the hidden suite (test and support files, names and bytes).")
    backend: Annotated[ColumnText, Field(min_length=1, description="The sandbox back-end: docker, local.")]
    workspace_sha256: Sha256Hex | None = Field(default=None, description="Hash of the submitted workspace as judged.")
    milestone: ColumnText | None = None


@event_kind
class DenylistScan(Event):
    """The static scan of the workspace's own imports against the task's denylist, run
    before any hidden test is injected."""

    kind: Literal["denylist_scan"] = "denylist_scan"
    status: Literal["passed", "rejected"]
    files_scanned: NonNegative
    findings: list[ColumnText] | None = Field(default=None, description="FILE:LINE: banned name, one per hit.")


@event_kind
class AcceptanceVerdict(Event):
    """The verdict of an outcome check on the run's product (hidden tests, a benchmark's
    verifier, an eval scorer). Kept apart: evaluated (reward says how it went), rejected
    (denylist), not submitted, timeout, infrastructure error, and no grade."""

    FREE_FORM_FIELDS: ClassVar[frozenset[str]] = frozenset({"rewards", "details"})

    kind: Literal["acceptance_verdict"] = "acceptance_verdict"
    verifier: Annotated[ColumnText, Field(min_length=1, description="What produced it: swe-bench, harbor, inspect, procgrade-acceptance, ...")]
    status: Literal["evaluated", "rejected", "not_submitted", "timeout", "infra_error", "no_grade"]
    reward: Reward | None = Field(default=None, description="1 accepted, 0 not; fractional where the verifier grades partially.")
    rewards: dict[str, Reward] | None = Field(default=None, description="Named rewards when the verifier gives several.")
    scorer: ColumnText | None = None
    value: ColumnText | None = Field(default=None, description="The scorer's own verdict value (C, I, resolved, ...).")
    passed: NonNegative | None = None
    failed: NonNegative | None = None
    errored: NonNegative | None = None
    skipped: NonNegative | None = None
    suite_sha256: Sha256Hex | None = None
    duration_ms: NonNegative | None = None
    explanation: Text | None = None
    details: dict[str, Any] | None = None


@event_kind
class TestResult(Event):
    """One test's result in an outcome check (hidden test, FAIL_TO_PASS, parser result)."""

    __test__ = False  # not a pytest test class
    kind: Literal["test_result"] = "test_result"
    test_id: Annotated[ColumnText, Field(min_length=1)]
    outcome: Literal["passed", "failed", "error", "skipped"]
    group: ColumnText | None = Field(default=None, description="The suite's grouping: FAIL_TO_PASS, PASS_TO_PASS, a file, ...")
    verifier: ColumnText | None = None
    duration_ms: NonNegative | None = None
    message: Text | None = None


@event_kind
class BrowserGradingStarted(Event):
    """Browser grading of the final product begins: a task's test plans, graded in Chromium
    (:mod:`procgrade.oracles.browser_grading`); its plan grades, plan verdicts (``test_result``) and the overall
    ``acceptance_verdict`` name this event as their parent."""

    kind: Literal["browser_grading_started"] = "browser_grading_started"
    task_id: Annotated[ColumnText, Field(min_length=1)]
    plans_sha256: Sha256Hex = Field(description="Hash of the product spec, every plan and every seed file.")
    grader: Annotated[ColumnText, Field(min_length=1, description="scripted, agent, ...")]
    workspace_sha256: Sha256Hex | None = Field(default=None, description="Hash of the graded workspace.")
    plans: list[ColumnText] = Field(description="The plan ids graded, in order.")


@event_kind
class PlanGrade(Event):
    """One grade of one test plan (ViBench 2.0's protocol: a discarded grade does not count). ``passed`` is
    absent when the grade is discarded; ``evidence`` lists the digests of its evidence files (screenshots,
    page text, accessibility snapshots, quotes, start and seed logs) in the evidence store."""

    FREE_FORM_FIELDS: ClassVar[frozenset[str]] = frozenset({"details"})

    kind: Literal["plan_grade"] = "plan_grade"
    plan_id: Annotated[ColumnText, Field(min_length=1)]
    attempt: NonNegative = Field(description="0 for the plan's first grade.")
    grader: Annotated[ColumnText, Field(min_length=1)]
    passed: bool | None = None
    discarded: Text | None = Field(default=None, description="Why the grade was discarded.")
    failure: Text | None = Field(default=None, description="The first failing step and check.")
    model: ColumnText | None = None
    evidence: list[Sha256Hex] = Field(default_factory=list)
    duration_ms: NonNegative | None = None
    details: dict[str, Any] | None = Field(default=None, description="Steps, actions, checks and quotes.")

    @model_validator(mode="after")
    def _discarded_or_judged(self) -> "PlanGrade":
        if (self.passed is None) == (self.discarded is None):
            raise ValueError("a plan grade either has passed (true/false) or is discarded, not both or neither")
        return self


# --- grades: people and judges grading the run ----------------------------------------------

#: The layers of a grade the engine knows. The Arena's human grade (seed 002): a per-round score (-2..+1), a
#: fix-effect score on fix rounds (-2..0), five binary checks per round, rubric dimensions and
#: eight behaviour patterns over the whole task, and a 5-point overall grade; DevAI's
#: requirement-level judgments (satisfied or not) and preferences; and a whole-run outcome.
#: A study may name any other layer (grade schema v2): its items then declare their scale.
GRADE_LAYERS = ("round", "fix_effect", "check", "rubric", "pattern", "overall", "requirement", "preference",
                "outcome")
#: A layer name: one of :data:`GRADE_LAYERS` or a study's own (``trajectory``, ``safety``).
LAYER_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
#: How an item is graded: ``passed`` (binary), ``value`` on ``scale_min..scale_max`` (ordinal), or
#: ``label`` among ``categories`` (nominal).
GRADE_SCALES = ("binary", "ordinal", "nominal")


@event_kind
class Grade(Event):
    """One grade on one dimension of the run, by a person (``human``, ``human:<id>``) or a
    judge (``judge``, ``judge:<id>``); the round it grades is the envelope's ``stage``.
    Binary grades set ``passed``; ordinal grades set ``value`` on ``scale_min..scale_max``;
    nominal grades set ``label`` among ``categories``. An abstention (``Unsure``, ``N/A``) sets
    ``abstained`` to the value written and no label: it is kept, and never counted."""

    kind: Literal["grade"] = "grade"
    layer: Annotated[str, Field(pattern=LAYER_PATTERN, description="round, fix_effect, check, rubric, pattern, "
                                "overall, requirement, preference, outcome, or a study's own layer.")]
    item: ColumnText | None = Field(default=None, description="Check, rubric dimension, pattern or requirement id.")
    value: Int64 | None = None
    scale_min: Int64 | None = None
    scale_max: Int64 | None = None
    passed: bool | None = None
    label: ColumnText | None = Field(default=None, description="A nominal grade: one of categories.")
    scale: Literal["binary", "ordinal", "nominal"] | None = Field(
        default=None, description="The item's declared scale (grade schema v2; unset: binary when passed, else ordinal).")
    categories: list[ColumnText] | None = Field(default=None, description="A nominal item's categories.")
    abstained: ColumnText | None = Field(default=None, description="The abstention written (Unsure, N/A): no label.")
    annotation: Annotated[int | None, Field(ge=1, le=1000, description="Order of this annotation of the item in "
                                            "the study: 1 primary, 2 secondary, ...")] = None
    criteria: Text | None = Field(default=None, description="The standard graded against.")
    prerequisites: list[ColumnText] | None = Field(default=None, description="Items this one depends on (DevAI's DAG).")
    category: ColumnText | None = None
    rationale: Text | None = None
    shortcomings: Text | None = None
    sheet: ColumnText | None = Field(default=None, description="The grade sheet or judgment set it came from.")
    evidence: list[NonNegative] | None = Field(default=None, description="Seqs of this run's events the grade cites.")
    sample: NonNegative | None = Field(default=None, description="Which of a judge's k samples this is, from 0 (unset: "
                                       "not a sample, or the aggregate of the samples that follow it).")
    status: Literal["graded", "no_grade"] | None = Field(default=None, description="no_grade: the grader gave no "
                                                         "valid grade (left out of every statistic, kept for audit).")

    @model_validator(mode="after")
    def _on_scale(self) -> "Grade":
        if self.status == "no_grade" and (self.value is not None or self.passed is not None):
            raise ValueError("a no_grade grade holds neither value nor passed")
        low, high, value = self.scale_min, self.scale_max, self.value
        if low is not None and high is not None and low > high:
            raise ValueError(f"scale_min {low} is above scale_max {high}")
        if value is not None and ((low is not None and value < low) or (high is not None and value > high)):
            raise ValueError(f"value {value} is outside the scale {low}..{high}")
        given = [name for name in ("value", "passed", "label") if getattr(self, name) is not None]
        if self.abstained is not None and given:
            raise ValueError(f"an abstention gives no {given[0]}")
        if len(given) > 1:
            raise ValueError(f"one grade gives one of value, passed and label, not {' and '.join(given)}")
        if self.label is not None and self.categories is not None and self.label not in self.categories:
            raise ValueError(f"label {self.label!r} is not one of the categories {', '.join(self.categories)}")
        expected = {"binary": "passed", "ordinal": "value", "nominal": "label"}.get(self.scale or "")
        if expected is not None and given and given[0] != expected:
            raise ValueError(f"a {self.scale} grade gives {expected}, not {given[0]}")
        return self

    @property
    def kind_of_scale(self) -> str:
        """The grade's scale: declared, else binary when it gives ``passed``, nominal with a ``label``, else ordinal."""
        if self.scale is not None:
            return self.scale
        return "binary" if self.passed is not None else "nominal" if self.label is not None else "ordinal"


def _build_union() -> Any:
    members = tuple(EVENT_KINDS[name] for name in sorted(EVENT_KINDS))
    return Annotated[Union[members], Field(discriminator="kind")]  # type: ignore[valid-type]


#: Every registered kind, discriminated on ``kind``. Declare new kinds above this line.
AnyEvent = _build_union()


@functools.cache
def event_adapter() -> TypeAdapter[Event]:
    """The validator for one event of any registered kind (built on first use)."""
    return TypeAdapter(AnyEvent)


def build_event_validators() -> None:
    """Build every validator now: a process about to fork workers that validate events calls
    this, so the workers inherit them instead of each building its own."""
    event_adapter()
    for kind in EVENT_KINDS.values():
        kind.model_rebuild()


@functools.cache
def fields_validators() -> dict[str, Any]:
    """Per kind, for kinds whose model validates field by field (no model validator): a function
    that validates a mapping's fields as the model does (strict, no unknown key, the same field
    validators) and returns ``(fields, None, names given)``, the fields a dict (every field,
    defaults filled in), instead of building the model: a third less than the model's
    validation (1.25 us against 1.83 for a command), and the model is of no use to native
    ingest's workers (they need the row, not the event). Made from the model's own core schema
    and configuration, so the two cannot drift (tests/test_fields_rows.py), with one change: a
    ``payload`` given must be a dict and is handed back as it is, not copied member by member
    (``dict[str, Any]`` takes any dict of a JSON parse: copying it took a sixth of a common
    line's validation). Its error is worded otherwise than the model's; callers that report
    errors take them from the model."""
    from pydantic_core import SchemaValidator, core_schema

    build_event_validators()
    validators = {}
    for name, kind in EVENT_KINDS.items():
        schema = kind.__pydantic_core_schema__
        if schema["type"] == "model" and schema["schema"]["type"] == "model-fields":
            fields = schema["schema"]
            payload = fields["fields"]["payload"]
            assert payload["schema"]["type"] == "default" and payload["schema"]["schema"]["type"] == "dict", name
            fields = {**fields, "fields": {**fields["fields"], "payload": {**payload, "schema": {
                **payload["schema"], "schema": core_schema.is_instance_schema(dict)}}}}
            validators[name] = SchemaValidator(fields, schema.get("config")).validate_python
    return validators


def events_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one native event line."""
    schema = event_adapter().json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "procgrade native event"
    return schema
