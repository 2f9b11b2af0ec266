"""Hypothesis strategies for rule evaluation: small-alphabet runs and random rules.

Runs draw kinds, actors, stages, paths, commands (so ``cmd_hash``), outcomes, worker
and job ids from small alphabets, so activations, targets, resets and deadlines
actually meet, keys repeat and NULL keys occur. The alphabets hold the awkward
cases of SQL text handling: case (``src``/``SRC``), ``LIKE`` wildcards (``s_c``,
``s%c``), non-ASCII (``é``/``É``) and commands that differ only in whitespace
(same ``cmd_hash``, different ``command``).

Rules cover every template with random predicates (kinds, actor classes, equals,
prefix, present, absent, compare), correlations (same column, different columns,
different column types, correlated resets), scope, ``only_first``,
``reset_required``, ``within`` and ``deadline``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from procgrade.engine.events import Event, event_adapter
from procgrade.engine.facts import FACT_COLUMNS, command_hash
from procgrade.engine.stages import StageTracker
from procgrade.rules.model import RuleSet

#: Actors of a run, the model's own most often (default activations match only them).
ACTORS = ("agent",) * 5 + ("subagent:a",) * 2 + ("subagent:b", "harness", "harness", "user", "human", "human:x",
                                                 "grader", "judge:j", "system")
ACTOR_CLASSES = ("model", "agent", "subagent", "harness", "user", "human", "grader", "judge", "system", "any")
PATHS = ("a.py", "src/a.py", "SRC/a.py", "s_c/a.py", "s%c.py", "\u00e9.py", "\u00c9.py")
COMMANDS = ("pytest", "make test", "make  test", "make", "cd x && pytest", "python run.py > a.py 2>&1 &",
            "cat a.py", "tail -n 5 src/a.py", "sleep 5")
WORKERS = ("w1", "w2", "W1")
JOBS = ("j1", "j2")
INTENTS = ("plan", "progress", "other")
SMALL_INTS = (-1, 0, 1, 2, 3)

#: Kinds a run is drawn from (run_started only at seq 0), weighted so relations occur.
HOT_KINDS = ("file_read",) * 4 + ("file_edit",) * 4 + ("command",) * 3 + ("test_run",) * 3 + (
    "message", "message", "completion_claim", "completion_claim", "delegation", "worker_report", "job_started",
    "job_finished")
COLD_KINDS = ("job_polled", "compaction", "correction", "stage_started", "stage_ended", "run_ended")
TRACE_KINDS = HOT_KINDS + COLD_KINDS
RULE_KINDS = tuple(sorted(set(TRACE_KINDS) | {"run_started"}))

#: Values rules compare text columns with (the columns' own alphabets, so they match).
TEXT_VALUES: dict[str, tuple[str, ...]] = {
    "path": PATHS,
    "edit_kind": ("create", "modify", "delete", "rename"),
    "command": COMMANDS,
    "cmd_hash": tuple(sorted({command_hash(c) for c in COMMANDS})),
    "outcome": ("pass", "fail", "error", "success", "failure", "partial"),
    "job_id": JOBS,
    "worker_id": WORKERS,
    "intent": INTENTS,
    "io": ("read", "job_started", "job_finished"),
    "io_path": PATHS,
    "area": (".", "src", "SRC", "s_c"),
    "status": ("completed", "timeout", "error"),
    "cmd_key": tuple(sorted({command_hash(c) for c in ("pytest", "make test", "make")})),
}
PREFIXES = ("src/", "s", "S", "SRC", "s_", "s%", "\u00e9", "\u00c9", "a", "p", "pytest", "make  ", "w", "W", "j",
            "mo", "pa", "f", "plan")
TEXT_COLUMNS = tuple(c for c, kind in FACT_COLUMNS.items() if kind == "text")
INT_COLUMNS = tuple(c for c, kind in FACT_COLUMNS.items() if kind == "int")
ALL_COLUMNS = tuple(FACT_COLUMNS)
#: Columns correlations use (keys that repeat); mixing types is allowed on purpose.
KEY_COLUMNS = ("path",) * 6 + ("cmd_hash",) * 3 + ("io_path", "io_path", "area", "cmd_key", "cmd_key") + (
    "new_path", "command", "outcome", "outcome", "exit_code", "exit_code", "worker_id", "job_id", "context_count",
    "edit_kind", "intent", "tests_failed")

_adapter = event_adapter()


def _maybe(values: Sequence[Any]) -> st.SearchStrategy[Any]:
    return st.none() | st.sampled_from(values)


_ints = st.sampled_from(SMALL_INTS)
_counts = _maybe((0, 1, 2))
_exit = _maybe((0, 1, 2, -1))


def _fields(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """The kind's own fields (None-valued ones are dropped later)."""
    fd = st.fixed_dictionaries
    if kind == "message":
        return fd({"text": st.just("m"), "intent": _maybe(INTENTS)})
    if kind == "command":
        return fd({"command": st.sampled_from(COMMANDS), "exit_code": _exit})
    if kind == "file_read":
        return fd({"path": st.sampled_from(PATHS)})
    if kind == "file_edit":
        return fd({"path": st.sampled_from(PATHS), "edit_kind": st.sampled_from(TEXT_VALUES["edit_kind"]),
                   "new_path": _maybe(PATHS)})
    if kind == "test_run":
        return fd({"command": _maybe(COMMANDS), "passed": _counts, "failed": _counts, "errored": _counts,
                   "exit_code": _exit})
    if kind == "delegation":
        return fd({"worker_id": st.sampled_from(WORKERS), "instruction": st.just("do it"),
                   "context": st.none() | st.lists(st.sampled_from(PATHS), max_size=2)})
    if kind == "worker_report":
        return fd({"worker_id": st.sampled_from(WORKERS), "text": st.just("done"),
                   "status": _maybe(("success", "failure", "partial")),
                   "evidence": st.none() | st.lists(st.sampled_from(PATHS), max_size=2)})
    if kind == "job_started":
        return fd({"job_id": st.sampled_from(JOBS), "command": _maybe(COMMANDS), "output_path": _maybe(PATHS)})
    if kind == "job_polled":
        return fd({"job_id": st.sampled_from(JOBS)})
    if kind == "job_finished":
        return fd({"job_id": st.sampled_from(JOBS), "exit_code": _exit, "output_path": _maybe(PATHS)})
    if kind == "completion_claim":
        return fd({"claim": st.just("done")})
    if kind in ("correction",):
        return fd({"text": st.just("fix")})
    return fd({})


_stage = st.sampled_from((None, 0, 0, 1, 1, 2))


@st.composite
def events_of(draw: st.DrawFn, run_id: str, min_size: int = 0, max_size: int = 40) -> list[Event]:
    """A valid run of ``min_size``..``max_size`` events (run_started first)."""
    n = draw(st.integers(min_size, max_size) | st.integers(max(min_size, max_size // 2), max_size))
    out: list[Event] = []
    stages = StageTracker()
    for seq in range(n):
        kind = "run_started" if seq == 0 else draw(st.sampled_from(TRACE_KINDS))
        line: dict[str, Any] = {"run_id": run_id, "seq": seq, "event_id": f"{run_id}/{seq}", "kind": kind,
                                "actor": draw(st.sampled_from(ACTORS))}
        stage = draw(st.integers(0, 2)) if kind in ("stage_started", "stage_ended") else draw(_stage)
        # stages the markers (or a correction) derive must agree with an event's own stage, or
        # the store refuses the run: keep the drawn stage only where it agrees
        if stages.open is not None and kind != "stage_started" and stage is not None and stage != stages.open \
                and not stages.opens_round(kind, line["actor"]):
            stage = stages.open if kind == "stage_ended" else draw(st.sampled_from((None, stages.open)))
        if stage is not None:
            line["stage"] = stage
        if kind == "run_started":
            line["harness"] = {"name": "h"}
        else:
            line.update({k: v for k, v in draw(_fields(kind)).items() if v is not None})
        event = _adapter.validate_python(line)
        stages.step(event.seq, event.kind, event.actor, event.stage)
        out.append(event)
    return out


def trace(run_id: str, min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[list[Event]]:
    return events_of(run_id, min_size, max_size)


# --- rules -----------------------------------------------------------------------------------------

def _one_or_list(values: Sequence[Any], max_size: int = 3) -> st.SearchStrategy[Any]:
    return st.sampled_from(values) | st.lists(st.sampled_from(values), min_size=1, max_size=max_size)


def _text_value(column: str) -> st.SearchStrategy[str]:
    # now and then a value holding NUL: it can match nothing (PostgreSQL cannot even receive it)
    return st.sampled_from(TEXT_VALUES.get(column, PATHS)) | st.just("src/a.py\x00")


def _equals_value(column: str) -> st.SearchStrategy[Any]:
    single = _ints if FACT_COLUMNS[column] == "int" else _text_value(column)
    return single | st.lists(single, min_size=1, max_size=3)


_rule_kind = st.sampled_from(HOT_KINDS) | st.sampled_from(RULE_KINDS)


_CONDITIONS = ("actor", "actor", "equals", "equals", "prefix", "present", "absent", "compare")
#: Columns conditions usually name (often non-NULL in runs); any column now and then.
_COMMON_COLUMNS = ("path", "path", "outcome", "outcome", "edit_kind", "cmd_hash", "exit_code", "intent", "worker_id",
                   "command")
_column = st.sampled_from(_COMMON_COLUMNS) | st.sampled_from(ALL_COLUMNS)


@st.composite
def predicates(draw: st.DrawFn) -> dict[str, Any]:
    """A predicate: kinds, and mostly no or one further condition (so it matches something)."""
    pred: dict[str, Any] = {"kind": draw(_rule_kind | st.lists(_rule_kind, min_size=1, max_size=4))}
    conditions = draw(st.lists(st.sampled_from(_CONDITIONS), max_size=draw(st.sampled_from((0, 0, 1, 1, 2, 3)))))
    for condition in conditions:
        if condition == "actor":
            pred["actor"] = draw(_one_or_list(ACTOR_CLASSES))
        elif condition == "equals":
            columns = draw(st.lists(_column, min_size=1, max_size=2, unique=True))
            pred["equals"] = {c: draw(_equals_value(c)) for c in columns}
        elif condition == "prefix":
            column = draw(st.sampled_from(("path", "path", "command", "outcome")) | st.sampled_from(TEXT_COLUMNS))
            key = draw(st.sampled_from(("prefix", "prefix", "not_prefix")))
            pred[key] = {column: draw(st.lists(st.sampled_from(PREFIXES) | st.just("s\x00"), min_size=1,
                                               max_size=3))}
        elif condition == "present":
            pred["present"] = draw(st.lists(_column, min_size=1, max_size=2))
        elif condition == "absent":
            pred["absent"] = draw(st.lists(_column, min_size=1, max_size=2))
        else:
            pred["compare"] = draw(st.lists(st.fixed_dictionaries({
                "field": st.sampled_from(("stage", "in_stage", "exit_code", "exit_code") + INT_COLUMNS),
                "op": st.sampled_from(("eq", "ne", "lt", "le", "gt", "ge")),
                "value": _ints,
            }), min_size=1, max_size=2))
    return pred


def any_of(max_size: int = 2) -> st.SearchStrategy[Any]:
    return predicates() | st.lists(predicates(), min_size=1, max_size=max_size)


@st.composite
def correlations(draw: st.DrawFn, with_reset: bool = False) -> Any:
    choice = draw(st.sampled_from((0, 0, 1, 1, 2)))
    if choice == 0:
        return None
    if choice == 1:
        return draw(st.sampled_from(KEY_COLUMNS))
    corr: dict[str, Any] = {"activation": draw(st.sampled_from(KEY_COLUMNS))}
    if draw(st.booleans()):
        # one column, or several (a target relates by any of them, e.g. a rename's path and new_path)
        corr["target"] = draw(st.sampled_from(KEY_COLUMNS) | st.lists(st.sampled_from(KEY_COLUMNS), min_size=1,
                                                                        max_size=3))
    if with_reset and draw(st.sampled_from((True, True, False))):
        corr["reset"] = draw(st.just(corr["activation"]) | st.sampled_from(KEY_COLUMNS))
    return corr


@st.composite
def related(draw: st.DrawFn, other: Any) -> Any:
    """A predicate (or list) for another role: often ``other`` itself or its kinds, so one
    event plays both roles (same-event ordering) and roles interleave."""
    choice = draw(st.sampled_from(("same", "kinds", "fresh", "fresh")))
    if choice == "same":
        return other
    if choice == "kinds":
        first = other if isinstance(other, dict) else other[0]
        return {"kind": first["kind"]}
    return draw(any_of())


TEMPLATE_NAMES = ("count", "existence", "absence", "precedence", "precedence_since", "response",
                  "chain_response", "chain_precedence", "no_repeat", "not_coexistence", "satisfies", "distinct")


@st.composite
def rules_of(draw: st.DrawFn, template: str, rule_id: str) -> dict[str, Any]:
    """One rule (as a dict) of ``template``."""
    rule: dict[str, Any] = {"id": rule_id, "title": "t", "rationale": "r", "template": template,
                            "scope": draw(st.sampled_from(("run", "stage")))}
    if template == "distinct":
        rule.update({"match": draw(any_of()), "key": draw(st.sampled_from(KEY_COLUMNS)),
                     "max": draw(st.integers(0, 3)), "early_percent": draw(st.sampled_from((1, 30, 50, 100)))})
        return rule
    if template in ("count", "existence", "absence"):
        rule["match"] = draw(any_of())
        if draw(st.sampled_from((False, False, True))):
            rule["applies_if"] = draw(any_of())
        if template == "count":
            low = draw(st.integers(0, 3))
            rule["min"] = low
            high = draw(st.none() | st.integers(low, 5))
            if high is not None:
                rule["max"] = high
        return rule
    rule["activation"] = draw(any_of())
    if template == "satisfies":
        rule["require"] = draw(any_of())
        return rule
    if template == "no_repeat":
        rule["key"] = draw(st.sampled_from(KEY_COLUMNS))
        if draw(st.booleans()):
            rule["reset"] = draw(any_of())
        return rule
    rule["target"] = draw(any_of() | related(rule["activation"]))
    if template in ("precedence", "precedence_since", "response"):
        corr = draw(correlations(with_reset=template == "precedence_since"))
        if corr is not None:
            rule["correlate"] = corr
    if template == "precedence":
        rule["only_first"] = draw(st.booleans())
    elif template == "precedence_since":
        rule["reset"] = draw(related(rule["target"]) | related(rule["activation"]))
        rule["reset_required"] = draw(st.booleans())
    elif template == "response":
        if draw(st.booleans()):
            rule["open_at_end"] = draw(st.sampled_from(("violated", "vacuous")))
        if draw(st.booleans()):
            rule["within"] = draw(st.integers(1, 4) | st.integers(1, 12))
        if draw(st.sampled_from((True, True, False))):
            rule["deadline"] = draw(related(rule["target"]) | related(rule["activation"]))
    return rule


#: Templates whose state is subtle enough to deserve extra rules per generated rule set.
RELATIONAL = ("response", "response", "precedence_since", "precedence_since", "precedence", "no_repeat")


@st.composite
def rulesets(draw: st.DrawFn, templates: Sequence[str] = TEMPLATE_NAMES, extra: int = 4) -> RuleSet:
    """A rule set holding one random rule of each of ``templates`` and up to ``extra`` more
    relational ones, in random order."""
    more = draw(st.lists(st.sampled_from(RELATIONAL), max_size=extra)) if extra else []
    order = draw(st.permutations(list(templates) + more))
    rules = [draw(rules_of(template, f"r{i}-{template.replace('_', '-')}")) for i, template in enumerate(order)]
    # now and then template semantics 1 (rule sets scored before issue 10), where the rules can say it
    if draw(st.sampled_from((False, False, True))):
        try:
            return RuleSet.model_validate({"name": "generated", "version": 1, "semantics": 1, "rules": rules})
        except ValueError:
            pass
    return RuleSet.model_validate({"name": "generated", "version": 1, "rules": rules})
