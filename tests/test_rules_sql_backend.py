"""The SQL back-end (rules/sql.py) against the canonical monitor (rules/monitor.py).

1. Generated runs and generated rules of every template: ``evaluate_sql`` equals
   ``monitor.evaluate`` over the run's fact rows, on SQLite and PostgreSQL.
2. The default rule set on generated runs: identical findings.
3. Hand-written runs per template with the findings the monitor's documented
   semantics call for, asserted of both back-ends (a misunderstanding shared by
   both would still be caught).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from procgrade.engine.events import Event, event_adapter
from procgrade.engine.store import EventStore
from rule_traces import rulesets, trace
from procgrade.rules.loading import load_ruleset
from procgrade.rules.model import RuleSet
from procgrade.rules.monitor import MAX_CITED, Finding, evaluate
from procgrade.rules.predicates import ROW_COLUMNS
from procgrade.rules.sql import compile_rule, evaluate_sql

_run_numbers = itertools.count()


def _fresh_run_id(prefix: str = "gen") -> str:
    return f"{prefix}-{next(_run_numbers)}"


def fact_rows(store: EventStore, run_id: str) -> list[tuple[Any, ...]]:
    """The run's fact rows in ROW_COLUMNS order, read from the events table by seq."""
    query = text(f"SELECT {', '.join(ROW_COLUMNS)} FROM events WHERE run_id = :run_id ORDER BY seq")
    with store.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query, {"run_id": run_id})]


def both_backends(store: EventStore, ruleset: RuleSet, run_id: str) -> tuple[dict, dict]:
    return evaluate_sql(store, ruleset, run_id), evaluate(ruleset, fact_rows(store, run_id))


def assert_same(sql: dict[str, list[Finding]], canonical: dict[str, list[Finding]], ruleset: RuleSet) -> None:
    assert list(sql) == list(canonical) == [rule.id for rule in ruleset.rules]
    for rule in ruleset.rules:
        assert sql[rule.id] == canonical[rule.id], (
            f"rule {rule.id}: {rule.model_dump(exclude_defaults=True)}")


_GENERATED = settings(max_examples=100, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


# --- 1. generated rules of every template on generated runs ------------------------------------


@_GENERATED
@given(data=st.data())
def test_generated_rules_agree_with_monitor(store: EventStore, data: st.DataObject) -> None:
    run_id = _fresh_run_id()
    events = data.draw(trace(run_id), label="events")
    ruleset = data.draw(rulesets(), label="ruleset")
    store.append(run_id, events)
    sql, canonical = both_backends(store, ruleset, run_id)
    assert_same(sql, canonical, ruleset)


# --- 2. the default rule set -------------------------------------------------------------------

_DEFAULT = load_ruleset()
_DEFAULT_V1 = load_ruleset(Path(__file__).parent.parent / "rules" / "sets" / "default-v1.yaml")


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_default_ruleset_agrees_with_monitor(store: EventStore, data: st.DataObject) -> None:
    run_id = _fresh_run_id("default")
    events = data.draw(trace(run_id), label="events")
    store.append(run_id, events)
    for ruleset in (_DEFAULT, _DEFAULT_V1):
        sql, canonical = both_backends(store, ruleset, run_id)
        assert_same(sql, canonical, ruleset)


def test_default_ruleset_agrees_with_monitor_on_the_bundled_real_runs(store: EventStore) -> None:
    """The recorded Claude Code runs of the Terminal-Bench sample (real command lines: inline
    snippets, installs, heredocs) give the same findings on both back-ends under rule set v2."""
    from procgrade.engine.ingest import ingest_paths

    sample = Path(__file__).parent / "fixtures" / "imports" / "terminal-bench-claude-code"
    ingest_paths(store, [sample / "data" / "traj"])
    recorded = [info.run_id for info in store.runs()
                if any(e.actor == "agent" for e in store.events(info.run_id))]
    assert len(recorded) == 60
    for run_id in recorded:
        sql, canonical = both_backends(store, _DEFAULT, run_id)
        assert_same(sql, canonical, _DEFAULT)


def test_runs_do_not_leak_into_each_other(store: EventStore) -> None:
    """Two runs in one store: each is judged on its own events only."""
    ruleset = _ruleset({"template": "precedence", "correlate": "path",
                        "activation": {"kind": "file_edit"}, "target": {"kind": "file_read"}},
                       {"template": "count", "match": {"kind": "file_edit"}, "max": 1})
    store.append("a", _build("a", [_e("file_read", path="x.py")]))
    store.append("b", _build("b", [_e("file_edit", path="x.py", edit_kind="modify")]))
    sql, canonical = both_backends(store, ruleset, "b")
    assert sql == canonical
    assert sql["r0"] == [Finding("r0", "violated", 1, None, (1,))]
    assert sql["r1"] == [Finding("r1", "fulfilled", None, None, (1,))]


def test_all_rules_read_one_snapshot_while_a_writer_appends(store: EventStore) -> None:
    """Events appended while ``evaluate_sql`` runs (after its first rule's query) are seen by
    no rule: every rule judges the run as it stood, like the monitor's single read."""
    from sqlalchemy import event

    ruleset = _ruleset(*({"template": "count", "match": {"kind": "file_read"}} for _ in range(3)))
    run_id = _fresh_run_id("snapshot")
    first = _build(run_id, [_e("file_read", path="a.py")])
    store.append(run_id, first)
    later = _build(run_id, [_e("file_read", path="a.py")] * 4)[len(first):]
    fired: list[int] = []

    def append_once(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "WITH ev" in statement and not fired:
            fired.append(1)
            store.append(run_id, later)  # its own connection and transaction, committed

    event.listen(store.engine, "after_cursor_execute", append_once)
    try:
        sql = evaluate_sql(store, ruleset, run_id)
    finally:
        event.remove(store.engine, "after_cursor_execute", append_once)
    assert fired and store.run(run_id).event_count == 5
    assert [f.cited for r in ("r0", "r1", "r2") for f in sql[r]] == [(1,), (1,), (1,)]
    assert evaluate_sql(store, ruleset, run_id)["r2"][0].cited == (1, 2, 3, 4)


# --- the SQL itself ----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(ruleset=rulesets())
def test_compiled_sql_uses_no_exists_no_like_and_binds_every_value(ruleset: RuleSet) -> None:
    for rule in ruleset.rules:
        compiled = compile_rule(rule)
        upper = compiled.sql.upper()
        assert "EXISTS" not in upper and " LIKE " not in upper and " IN (SELECT" not in upper
        # every frame is anchored at the partition's start (suffixes run over the reversed
        # order): PostgreSQL re-aggregates a MIN/MAX frame whose head moves, per row
        assert "FOLLOWING" not in upper
        if rule.template not in ("satisfies", "not_coexistence"):
            assert " OVER (PARTITION BY RUN_ID" in upper
        # the only literals are the verdict names: every rule value is a bound parameter
        assert set(re.findall(r"'[^']*'", compiled.sql)) <= {"'fulfilled'", "'violated'", "'vacuous'"}
        assert all(name.startswith("p") for name in compiled.params)


def test_hostile_values_are_bound_not_spliced(store: EventStore) -> None:
    hostile = "x'; DROP TABLE events; --"
    ruleset = _ruleset(
        {"template": "existence", "match": {"kind": "file_read", "equals": {"path": [hostile, "a.py"]}}},
        {"template": "existence", "match": {"kind": "file_read", "prefix": {"path": [hostile]}}},
    )
    assert all(hostile not in compile_rule(rule).sql for rule in ruleset.rules)
    run = _build("hostile", [_e("file_read", path=hostile), _e("file_read", path="a.py")])
    store.append("hostile", run)
    sql, canonical = both_backends(store, ruleset, "hostile")
    assert sql == canonical
    assert sql["r0"] == [Finding("r0", "fulfilled", None, None, (1, 2))]
    assert sql["r1"] == [Finding("r1", "fulfilled", None, None, (1,))]


def test_nul_in_rule_values_matches_nothing(store: EventStore) -> None:
    """A stored column never holds NUL (PostgreSQL cannot receive it as a parameter either):
    such a value is compiled to false instead of failing on PostgreSQL."""
    ruleset = _ruleset(
        {"template": "count", "match": {"kind": "file_read", "equals": {"path": ["a.py\x00", "b.py"]}}},
        {"template": "count", "match": {"kind": "file_read", "equals": {"path": "a.py\x00"}}},
        {"template": "count", "match": {"kind": "file_read", "prefix": {"path": ["a\x00", "b"]}}},
        {"template": "count", "match": {"kind": "file_read", "prefix": {"path": ["a\x00"]}}},
    )
    store.append("nul", _build("nul", [_e("file_read", path="a.py"), _e("file_read", path="b.py")]))
    sql, canonical = both_backends(store, ruleset, "nul")
    assert sql == canonical
    assert [f.cited for r in ("r0", "r1", "r2", "r3") for f in sql[r]] == [(2,), (), (2,), ()]


def test_extreme_integers(store: EventStore) -> None:
    """64-bit values in rules and columns bind on both databases; rule bounds beyond 64 bits
    (``within``, count ``min``/``max`` are unbounded in the model) behave as the monitor's."""
    big = 2**63 - 1
    ruleset = _ruleset(
        {"template": "count", "match": {"kind": "command", "equals": {"exit_code": [big, -big]}}},
        {"template": "count", "match": {"kind": "command", "compare": [{"field": "exit_code", "op": "ge",
                                                                         "value": big}]}},
        {"template": "count", "match": {"kind": "command", "compare": [{"field": "stage", "op": "lt",
                                                                         "value": big}]}},
        {"template": "count", "match": {"kind": "command"}, "min": 2**70},
        {"template": "count", "match": {"kind": "command"}, "min": 1, "max": 2**70},
        {"template": "count", "match": {"kind": "command"}, "max": big},
        {"template": "response", "activation": {"kind": "command"}, "target": {"kind": "message"},
         "within": 2**70},
        {"template": "response", "activation": {"kind": "command"}, "target": {"kind": "message"},
         "within": big},
    )
    run = _build("ints", [_e("command", command="a", exit_code=big, stage=2**31 - 1),
                          _e("command", command="b", exit_code=-(2**63)),
                          _e("command", command="c", exit_code=-big),
                          _e("message")])
    store.append("ints", run)
    sql, canonical = both_backends(store, ruleset, "ints")
    assert sql == canonical
    assert [f.cited for f in sql["r0"]] == [(1, 3)]
    assert [f.cited for f in sql["r1"]] == [(1,)]
    assert [f.cited for f in sql["r2"]] == [(1,)]
    assert [f.verdict for r in ("r3", "r4", "r5") for f in sql[r]] == ["violated", "fulfilled", "fulfilled"]
    assert [f.verdict for f in sql["r6"] + sql["r7"]] == ["fulfilled"] * 6


# --- 3. hand-written runs per template ---------------------------------------------------------


def _e(kind: str, actor: str = "agent", stage: int | None = None, **fields: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": kind, "actor": actor, **fields}
    if stage is not None:
        spec["stage"] = stage
    return spec


_TEXT_DEFAULTS = {"message": {"text": "m"}, "delegation": {"instruction": "go"}, "worker_report": {"text": "r"},
                  "completion_claim": {"claim": "done"}, "correction": {"text": "c"}}


def _build(run_id: str, specs: list[dict[str, Any]]) -> list[Event]:
    """run_started (harness, seq 0) followed by ``specs`` at seqs 1, 2, ..."""
    lines = [{"kind": "run_started", "actor": "harness", "harness": {"name": "h"}}] + specs
    adapter = event_adapter()
    return [adapter.validate_python({**_TEXT_DEFAULTS.get(spec["kind"], {}), **spec, "run_id": run_id,
                                     "seq": seq, "event_id": f"{run_id}/{seq}"})
            for seq, spec in enumerate(lines)]


def _ruleset(*rules: dict[str, Any], semantics: int = 1) -> RuleSet:
    """Hand-written rule sets: template semantics 1 unless asked (the tests below written for
    it keep guarding rule sets of v1; semantics 2's differences have their own tests)."""
    full = [{"id": f"r{i}", "title": "t", "rationale": "r", **rule} for i, rule in enumerate(rules)]
    return RuleSet.model_validate({"name": "hand", "version": 1, "semantics": semantics, "rules": full})


Expected = list[tuple[str, int | None, int | None, tuple[int, ...]]]


def check(store: EventStore, rule: dict[str, Any], specs: list[dict[str, Any]], expected: Expected,
          semantics: int = 1) -> None:
    """Both back-ends give exactly ``expected`` (verdict, seq, stage, cited) for ``rule`` on the run."""
    run_id = _fresh_run_id("hand")
    store.append(run_id, _build(run_id, specs))
    ruleset = _ruleset(rule, semantics=semantics)
    sql, canonical = both_backends(store, ruleset, run_id)
    want = [Finding("r0", verdict, seq, stage, cited) for verdict, seq, stage, cited in expected]
    assert canonical["r0"] == want, "monitor"
    assert sql["r0"] == want, "sql"


EDIT = {"kind": "file_edit"}


def test_count_per_stage(store: EventStore) -> None:
    specs = [
        _e("file_edit", stage=0, path="a", edit_kind="modify"),             # 1
        _e("file_edit", stage=0, path="b", edit_kind="modify"),             # 2
        _e("file_edit", stage=0, actor="subagent:a", path="c", edit_kind="create"),  # 3
        _e("message", stage=1, text="m"),                                   # 4
        _e("file_edit", path="d", edit_kind="modify"),                      # 5: no stage, outside every stage
        _e("file_edit", stage=2, actor="harness", path="e", edit_kind="modify"),  # 6: not the model
        _e("file_edit", stage=3, path="f", edit_kind="modify"),             # 7
    ]
    check(store, {"template": "count", "scope": "stage", "match": EDIT, "min": 1, "max": 2}, specs, [
        ("violated", None, 0, (1, 2, 3)),
        ("violated", None, 1, ()),
        ("violated", None, 2, ()),
        ("fulfilled", None, 3, (7,)),
    ])
    check(store, {"template": "count", "match": EDIT, "min": 1, "max": 5}, specs,
          [("fulfilled", None, None, (1, 2, 3, 5, 7))])


def test_count_cites_the_first_matches_only(store: EventStore) -> None:
    specs = [_e("file_read", path=f"p{i}") for i in range(MAX_CITED + 3)]
    check(store, {"template": "count", "match": {"kind": "file_read"}, "max": 3}, specs,
          [("violated", None, None, tuple(range(1, MAX_CITED + 1)))])


def test_scope_level_templates_on_an_empty_run(store: EventStore) -> None:
    """Scope run has exactly one partition even with no events; scope stage has none."""
    for template, verdict in (("count", "fulfilled"), ("existence", "violated"), ("absence", "fulfilled")):
        run_id = _fresh_run_id("empty")
        store.append(run_id, [])
        ruleset = _ruleset({"template": template, "match": EDIT},
                           {"template": template, "scope": "stage", "match": EDIT},
                           {"template": "not_coexistence", "activation": EDIT, "target": {"kind": "message"}})
        sql, canonical = both_backends(store, ruleset, run_id)
        assert sql == canonical == {
            "r0": [Finding("r0", verdict, None, None, ())],
            "r1": [],
            "r2": [Finding("r2", "vacuous", None, None, ())],
        }


def test_prefixes_are_exact_and_case_sensitive(store: EventStore) -> None:
    """No LIKE semantics: ``_`` and ``%`` are literal, case matters (ASCII and beyond)."""
    specs = [
        _e("file_edit", path="src/a.py", edit_kind="modify"),    # 1: "s_" would LIKE-match
        _e("file_edit", path="SRC/a.py", edit_kind="modify"),    # 2
        _e("file_edit", path="s%c.py", edit_kind="modify"),      # 3
        _e("file_edit", path="\u00c9t\u00e9.py", edit_kind="modify"),  # 4: É
        _e("file_edit", path="sx", edit_kind="modify"),          # 5: "s%" would LIKE-match
    ]
    check(store, {"template": "count", "match": {"kind": "file_edit", "prefix": {"path": ["s_", "src/"]}}},
          specs, [("fulfilled", None, None, (1,))])
    check(store, {"template": "count", "match": {"kind": "file_edit", "prefix": {"path": ["s%"]}}},
          specs, [("fulfilled", None, None, (3,))])
    check(store, {"template": "absence", "match": {"kind": "file_edit", "prefix": {"path": ["\u00e9", "Src"]}}},
          specs, [("fulfilled", None, None, ())])
    check(store, {"template": "existence", "match": {"kind": "file_edit", "prefix": {"path": ["\u00c9"]}}},
          specs, [("fulfilled", None, None, (4,))])


def test_actor_classes(store: EventStore) -> None:
    specs = [_e("message", actor=a) for a in ("agent", "subagent:x", "harness", "human", "human:bob",
                                                 "judge:j", "user", "system")]
    check(store, {"template": "count", "match": {"kind": "message"}}, specs, [("fulfilled", None, None, (1, 2))])
    check(store, {"template": "count", "match": {"kind": "message", "actor": ["human", "judge"]}}, specs,
          [("fulfilled", None, None, (4, 5, 6))])
    check(store, {"template": "count", "match": {"kind": "message", "actor": "subagent"}}, specs,
          [("fulfilled", None, None, (2,))])
    check(store, {"template": "count", "match": {"kind": "message", "actor": "any"}}, specs,
          [("fulfilled", None, None, tuple(range(1, 9)))])


def test_predicate_conditions(store: EventStore) -> None:
    specs = [
        _e("command", command="make", exit_code=0),      # 1
        _e("command", command="make", exit_code=2),      # 2
        _e("command", command="make"),                   # 3: exit_code NULL
        _e("test_run", exit_code=-1, failed=1),          # 4
    ]
    cmd = ["command", "test_run"]
    check(store, {"template": "count", "match": {"kind": cmd, "compare": [{"field": "exit_code", "op": "ne",
                                                                           "value": 0}]}},
          specs, [("fulfilled", None, None, (2, 4))])
    check(store, {"template": "count", "match": {"kind": cmd, "absent": ["exit_code"]}}, specs,
          [("fulfilled", None, None, (3,))])
    check(store, {"template": "count", "match": {"kind": cmd, "present": ["outcome", "cmd_hash"]}}, specs,
          [("fulfilled", None, None, (1, 2))])
    check(store, {"template": "count", "match": {"kind": cmd, "equals": {"outcome": "fail", "exit_code": [2, -1]}}},
          specs, [("fulfilled", None, None, (2, 4))])
    check(store, {"template": "count", "match": {"kind": cmd, "compare": [{"field": "stage", "op": "ge",
                                                                           "value": 0}]}},
          specs, [("fulfilled", None, None, ())])


READ_BEFORE_EDIT = {"template": "precedence", "correlate": "path",
                    "activation": {"kind": "file_edit"}, "target": [{"kind": "file_read"}, {"kind": "file_edit"}]}


def test_precedence_correlated(store: EventStore) -> None:
    check(store, READ_BEFORE_EDIT, [
        _e("file_read", path="a.py"),                             # 1
        _e("file_edit", path="a.py", edit_kind="modify"),         # 2 fulfilled by 1
        _e("file_edit", path="b.py", edit_kind="modify"),         # 3 violated: it is its own target only later
        _e("file_edit", path="b.py", edit_kind="modify"),         # 4 fulfilled by 3
        _e("file_read", path="c.py", actor="harness"),            # 5 targets match anyone
        _e("file_edit", path="c.py", edit_kind="modify", actor="harness"),  # 6 activations: the model only
        _e("file_edit", path="c.py", edit_kind="modify", actor="subagent:w"),  # 7 fulfilled by 6
    ], [
        ("fulfilled", 2, None, (1, 2)),
        ("violated", 3, None, (3,)),
        ("fulfilled", 4, None, (3, 4)),
        ("fulfilled", 7, None, (6, 7)),
    ])


def test_precedence_null_keys_and_mixed_columns(store: EventStore) -> None:
    rule = {"template": "precedence", "correlate": {"activation": "path", "target": "path"},
            "activation": {"kind": "worker_report"}, "target": {"kind": ["file_read", "worker_report"]}}
    check(store, rule, [
        _e("file_read", path="a.py"),                                            # 1
        _e("worker_report", actor="subagent:w", worker_id="w", evidence=["a.py"]),  # 2 fulfilled by 1
        _e("worker_report", actor="subagent:w", worker_id="w"),                  # 3 NULL key: vacuous
        _e("worker_report", actor="subagent:w", worker_id="w", evidence=["b.py"]),  # 4 violated
    ], [("fulfilled", 2, None, (1, 2)), ("vacuous", 3, None, (3,)), ("violated", 4, None, (4,))])
    # keys of different column types never meet: exit_code 1 is not path "1"
    check(store, {"template": "precedence", "correlate": {"activation": "path", "target": "exit_code"},
                  "activation": {"kind": "file_edit"}, "target": {"kind": "command"}}, [
        _e("command", command="c", exit_code=1),
        _e("file_edit", path="1", edit_kind="modify"),
    ], [("violated", 2, None, (2,))])
    check(store, {"template": "precedence", "correlate": {"activation": "worker_id", "target": "job_id"},
                  "activation": {"kind": "delegation"}, "target": {"kind": "job_finished"}}, [
        _e("job_finished", job_id="w1"),
        _e("delegation", worker_id="w1"),
        _e("delegation", worker_id="w2"),
    ], [("fulfilled", 2, None, (1, 2)), ("violated", 3, None, (3,))])


def test_precedence_only_first_per_stage(store: EventStore) -> None:
    plan = {"kind": "message", "actor": "model", "equals": {"intent": "plan"}}
    check(store, {"template": "precedence", "scope": "stage", "only_first": True, "activation": EDIT,
                  "target": plan}, [
        _e("file_edit", stage=0, path="a", edit_kind="create"),   # 1 violated (first of stage 0)
        _e("message", stage=0, intent="plan"),                   # 2
        _e("file_edit", stage=0, path="a", edit_kind="modify"),   # 3 not judged
        _e("message", intent="plan"),                            # 4 no stage: outside every stage
        _e("file_edit", stage=1, path="b", edit_kind="create"),   # 5 violated: stage 0's plan is not stage 1's
        _e("message", stage=2, intent="plan", actor="harness"),  # 6 not the model
        _e("message", stage=2, intent="plan", actor="subagent:x"),  # 7
        _e("file_edit", stage=2, path="c", edit_kind="create"),   # 8 fulfilled by 7
        _e("file_edit", path="c", edit_kind="create"),            # 9 no stage: ignored
    ], [("violated", 1, 0, (1,)), ("violated", 5, 1, (5,)), ("fulfilled", 8, 2, (7, 8))])


CLAIM_BACKED = {"template": "precedence_since", "activation": {"kind": "completion_claim"},
                "target": {"kind": "test_run", "actor": "model", "equals": {"outcome": "pass"}},
                "reset": {"kind": "file_edit", "actor": "model"}}


def test_precedence_since(store: EventStore) -> None:
    check(store, CLAIM_BACKED, [
        _e("completion_claim"),                                   # 1 no target, no reset: violated
        _e("test_run", passed=3, exit_code=0),                    # 2
        _e("completion_claim"),                                   # 3 fulfilled by 2
        _e("file_edit", path="a", edit_kind="modify"),            # 4 reset
        _e("completion_claim"),                                   # 5 violated, citing the reset
        _e("test_run", passed=3, exit_code=0, actor="harness"),   # 6 not the model's test run
        _e("completion_claim"),                                   # 7 still violated
        _e("test_run", passed=1),                                 # 8
        _e("completion_claim"),                                   # 9 fulfilled by 8
    ], [
        ("violated", 1, None, (1,)),
        ("fulfilled", 3, None, (2, 3)),
        ("violated", 5, None, (4, 5)),
        ("violated", 7, None, (4, 7)),
        ("fulfilled", 9, None, (8, 9)),
    ])


def test_precedence_since_target_and_reset_in_one_event(store: EventStore) -> None:
    """A target that is also a reset is not after the reset: stale (the monitor records the
    target, then the reset, both at the same seq; fulfilment needs target > reset)."""
    check(store, {"template": "precedence_since", "activation": {"kind": "completion_claim"},
                  "target": EDIT, "reset": EDIT}, [
        _e("file_edit", path="a", edit_kind="modify"),
        _e("completion_claim"),
    ], [("violated", 2, None, (1, 2))])


def test_precedence_since_correlated_reset_required(store: EventStore) -> None:
    rule = {"template": "precedence_since", "correlate": {"activation": "path", "target": "path", "reset": "path"},
            "reset_required": True, "activation": {"kind": "file_read"}, "target": {"kind": "job_finished"},
            "reset": {"kind": "job_started"}}
    check(store, rule, [
        _e("file_read", path="out.txt"),                                      # 1 no reset yet: vacuous
        _e("job_started", job_id="j", output_path="out.txt"),                 # 2
        _e("file_read", path="out.txt"),                                      # 3 violated (reset 2)
        _e("job_finished", job_id="j", output_path="out.txt"),                # 4
        _e("file_read", path="out.txt"),                                      # 5 fulfilled by 4
        _e("job_started", job_id="k", output_path="other.txt"),               # 6 another key's reset
        _e("file_read", path="out.txt"),                                      # 7 still fulfilled
        _e("job_started", job_id="k"),                                        # 8 reset without key: nothing
        _e("file_read", path="other.txt"),                                    # 9 violated (reset 6)
    ], [
        ("vacuous", 1, None, (1,)),
        ("violated", 3, None, (2, 3)),
        ("fulfilled", 5, None, (4, 5)),
        ("fulfilled", 7, None, (4, 7)),
        ("violated", 9, None, (6, 9)),
    ])


FAILING_TEST = {"kind": "test_run", "equals": {"outcome": ["fail", "error"]}}
PASSING_TEST = {"kind": "test_run", "actor": "model", "equals": {"outcome": "pass"}}


def test_response_correlated(store: EventStore) -> None:
    check(store, {"template": "response", "correlate": "cmd_hash", "activation": FAILING_TEST,
                  "target": PASSING_TEST}, [
        _e("test_run", command="pytest", failed=1),          # 1 fulfilled by 4
        _e("test_run", command="make test", errored=1),      # 2 never passes: violated
        _e("test_run", command="pytest", failed=2),          # 3 fulfilled by 4 too
        _e("test_run", command="pytest", passed=5),          # 4
        _e("test_run", failed=1),                            # 5 no command: NULL key, vacuous
        _e("test_run", passed=1),                            # 6 NULL target key resolves nothing
    ], [
        ("fulfilled", 1, None, (1, 4)),
        ("violated", 2, None, (2,)),
        ("fulfilled", 3, None, (3, 4)),
        ("vacuous", 5, None, (5,)),
    ])


def test_response_within(store: EventStore) -> None:
    rule = {"template": "response", "activation": {"kind": "file_edit"}, "target": {"kind": "test_run"},
            "within": 2}
    check(store, rule, [
        _e("file_edit", path="a", edit_kind="modify"),   # 1
        _e("message"),                                    # 2
        _e("test_run"),                                   # 3: 3 - 1 = 2, in time
        _e("file_edit", path="a", edit_kind="modify"),   # 4
        _e("message"),                                    # 5
        _e("message"),                                    # 6
        _e("test_run"),                                   # 7: 7 - 4 = 3, late: violated citing it
        _e("file_edit", path="a", edit_kind="modify"),   # 8 never followed
    ], [("fulfilled", 1, None, (1, 3)), ("violated", 4, None, (4, 7)), ("violated", 8, None, (8,))])


def test_response_deadline(store: EventStore) -> None:
    rule = {"template": "response", "correlate": "worker_id", "activation": {"kind": "delegation"},
            "target": {"kind": "worker_report"}, "deadline": {"kind": "completion_claim", "actor": "agent"}}
    check(store, rule, [
        _e("delegation", worker_id="w1"),                                   # 1 fulfilled by 3
        _e("delegation", worker_id="w2"),                                   # 2 violated by deadline 5
        _e("worker_report", actor="subagent:w1", worker_id="w1"),           # 3
        _e("completion_claim", actor="subagent:z"),                         # 4 not a deadline (not agent)
        _e("completion_claim"),                                             # 5 deadline
        _e("worker_report", actor="subagent:w2", worker_id="w2"),           # 6 too late for 2
        _e("delegation", worker_id="w1"),                                   # 7 never answered
    ], [("fulfilled", 1, None, (1, 3)), ("violated", 2, None, (2, 5)), ("violated", 7, None, (7,))])


def test_response_target_and_deadline_in_one_event(store: EventStore) -> None:
    """The monitor resolves with the target first: the same event as target wins over it as a
    deadline, for its own key; other keys' activations meet the deadline."""
    rule = {"template": "response", "correlate": "path", "activation": {"kind": "file_read"},
            "target": {"kind": "file_edit"}, "deadline": {"kind": "file_edit"}}
    check(store, rule, [
        _e("file_read", path="a"),                        # 1 fulfilled by 3
        _e("file_read", path="b"),                        # 2 violated by deadline 3
        _e("file_edit", path="a", edit_kind="modify"),    # 3 target for a, deadline for all
        _e("file_edit", path="c", edit_kind="modify"),    # 4
    ], [("fulfilled", 1, None, (1, 3)), ("violated", 2, None, (2, 3))])


def test_response_activation_is_not_its_own_target_or_deadline(store: EventStore) -> None:
    rule = {"template": "response", "activation": EDIT, "target": EDIT, "deadline": EDIT}
    check(store, rule, [
        _e("file_edit", path="a", edit_kind="modify"),    # 1 fulfilled by 2
        _e("file_edit", path="b", edit_kind="modify"),    # 2 none after it
    ], [("fulfilled", 1, None, (1, 2)), ("violated", 2, None, (2,))])


def test_response_per_stage(store: EventStore) -> None:
    rule = {"template": "response", "scope": "stage", "activation": EDIT, "target": {"kind": "test_run",
                                                                                      "actor": "model"}}
    check(store, rule, [
        _e("file_edit", stage=0, path="a", edit_kind="modify"),   # 1 violated: the test run is in stage 1
        _e("file_edit", stage=1, path="a", edit_kind="modify"),   # 2 fulfilled by 4
        _e("test_run"),                                           # 3 no stage
        _e("test_run", stage=1),                                  # 4
        _e("test_run", stage=0, actor="harness"),                 # 5 not the model
    ], [("violated", 1, 0, (1,)), ("fulfilled", 2, 1, (2, 4))])


def test_chain_response(store: EventStore) -> None:
    rule = {"template": "chain_response", "scope": "stage", "activation": {"kind": "file_edit"},
            "target": {"kind": "test_run"}}
    check(store, rule, [
        _e("file_edit", stage=0, path="a", edit_kind="modify"),   # 1 next in stage 0 is 3: fulfilled
        _e("message", stage=1),                                   # 2 another stage
        _e("test_run", stage=0),                                  # 3
        _e("file_edit", stage=0, path="a", edit_kind="modify"),   # 4 next in stage 0 is 6: violated
        _e("test_run"),                                           # 5 no stage: ignored
        _e("file_edit", stage=0, path="a", edit_kind="modify"),   # 6 next is 7: fulfilled
        _e("test_run", stage=0),                                  # 7
        _e("file_edit", stage=1, path="a", edit_kind="modify"),   # 8 last of stage 1: violated
    ], [
        ("fulfilled", 1, 0, (1, 3)),
        ("violated", 4, 0, (4, 6)),
        ("fulfilled", 6, 0, (6, 7)),
        ("violated", 8, 1, (8,)),
    ])


def test_chain_precedence(store: EventStore) -> None:
    rule = {"template": "chain_precedence", "activation": {"kind": "completion_claim"},
            "target": {"kind": "test_run"}}
    check(store, rule, [
        _e("completion_claim"),          # 1 previous is run_started: violated
        _e("test_run"),                  # 2
        _e("completion_claim"),          # 3 fulfilled
        _e("completion_claim"),          # 4 previous is a claim: violated
    ], [("violated", 1, None, (0, 1)), ("fulfilled", 3, None, (2, 3)), ("violated", 4, None, (3, 4))])
    check(store, {**rule, "scope": "stage"}, [
        _e("completion_claim", stage=4),  # first of its stage: nothing before it
    ], [("violated", 1, 4, (1,))])


def test_no_repeat(store: EventStore) -> None:
    rule = {"template": "no_repeat", "key": "cmd_hash",
            "activation": [{"kind": "command", "equals": {"outcome": "fail"}}, FAILING_TEST],
            "reset": {"kind": "file_edit", "actor": "model"}}
    check(store, rule, [
        _e("command", command="make test", exit_code=1),     # 1 fulfilled (first)
        _e("command", command="make  test", exit_code=2),    # 2 same cmd_hash: violated
        _e("command", command="make test", exit_code=0),     # 3 passes: not an activation
        _e("file_edit", path="a", edit_kind="modify"),       # 4 reset
        _e("command", command="make test", exit_code=1),     # 5 fulfilled (reset since 2)
        _e("test_run", failed=1),                            # 6 no command: vacuous
        _e("command", command="make test", exit_code=1),     # 7 violated by 5
        _e("file_edit", path="a", edit_kind="modify", actor="harness"),  # 8 not a reset
        _e("test_run", command="make test", failed=1),       # 9 violated by 7
    ], [
        ("fulfilled", 1, None, (1,)),
        ("violated", 2, None, (1, 2)),
        ("fulfilled", 5, None, (5,)),
        ("vacuous", 6, None, (6,)),
        ("violated", 7, None, (5, 7)),
        ("violated", 9, None, (7, 9)),
    ])


def test_no_repeat_activation_that_is_also_a_reset(store: EventStore) -> None:
    """Within one event the activation is judged first, then the reset is recorded: the
    event does not excuse itself, but it does excuse the next repeat."""
    rule = {"template": "no_repeat", "key": "path", "activation": EDIT, "reset": EDIT}
    check(store, rule, [
        _e("file_edit", path="a", edit_kind="modify"),
        _e("file_edit", path="a", edit_kind="modify"),
    ], [("fulfilled", 1, None, (1,)), ("fulfilled", 2, None, (2,))])
    check(store, {"template": "no_repeat", "key": "path", "scope": "stage", "activation": EDIT}, [
        _e("file_edit", stage=0, path="a", edit_kind="modify"),
        _e("file_edit", stage=1, path="a", edit_kind="modify"),
        _e("file_edit", stage=0, path="a", edit_kind="modify"),
    ], [("fulfilled", 1, 0, (1,)), ("fulfilled", 2, 1, (2,)), ("violated", 3, 0, (1, 3))])


def test_not_coexistence(store: EventStore) -> None:
    rule = {"template": "not_coexistence", "scope": "stage", "activation": {"kind": "file_edit"},
            "target": {"kind": "correction", "actor": "human"}}
    check(store, rule, [
        _e("file_edit", stage=0, path="a", edit_kind="modify"),  # 1
        _e("file_edit", stage=0, path="b", edit_kind="modify"),  # 2
        _e("correction", stage=1, actor="human:bob"),            # 3
        _e("file_edit", stage=1, path="a", edit_kind="modify"),  # 4
        _e("correction", stage=1, actor="human"),                # 5
        _e("stage_ended", stage=1, actor="harness"),             # 6 (closes the round the corrections opened)
        _e("message", stage=2),                                  # 7
        _e("correction", actor="human"),                         # 8 no stage of its own
    ], [
        ("fulfilled", None, 0, (1,)),
        ("violated", None, 1, (3, 4)),
        ("vacuous", None, 2, ()),
    ])


def test_not_coexistence_one_event_matching_both(store: EventStore) -> None:
    """One event matching both predicates makes both occur: violated, citing its seq twice
    (the monitor cites the first of each; recorded here so a change is noticed)."""
    check(store, {"template": "not_coexistence", "activation": EDIT, "target": EDIT}, [
        _e("file_edit", path="a", edit_kind="modify"),
    ], [("violated", None, None, (1, 1))])


def test_satisfies(store: EventStore) -> None:
    rule = {"template": "satisfies", "activation": {"kind": "delegation"},
            "require": {"kind": "delegation", "compare": [{"field": "context_count", "op": "ge", "value": 1}]}}
    check(store, rule, [
        _e("delegation", worker_id="w", context=["spec.md"]),
        _e("delegation", worker_id="w"),
        _e("delegation", worker_id="w", actor="harness", context=[]),
    ], [("fulfilled", 1, None, (1,)), ("violated", 2, None, (2,))])


def test_default_ruleset_on_a_hand_written_run(store: EventStore) -> None:
    run_id = _fresh_run_id("default-hand")
    specs = [
        _e("message", stage=0, intent="plan"),                                       # 1
        _e("file_read", stage=0, path="src/a.py"),                                   # 2
        _e("file_edit", stage=0, path="src/a.py", edit_kind="modify"),               # 3
        _e("test_run", stage=0, command="pytest", failed=1),                         # 4
        _e("test_run", stage=0, command="pytest", failed=1),                         # 5 repeat, no edit
        _e("file_edit", stage=0, path="src/b.py", edit_kind="modify"),               # 6 unread
        _e("test_run", stage=0, command="pytest", passed=4),                         # 7
        _e("completion_claim", stage=0),                                             # 8
        _e("delegation", stage=1, worker_id="w1"),                                   # 9 no context
        _e("worker_report", stage=1, actor="subagent:w1", worker_id="w1", evidence=["src/c.py"]),  # 10
        _e("file_edit", stage=1, path="/etc/passwd", edit_kind="modify"),            # 11 protected, deadline
    ]
    store.append(run_id, _build(run_id, specs))
    sql, canonical = both_backends(store, _DEFAULT_V1, run_id)
    assert_same(sql, canonical, _DEFAULT_V1)
    F = Finding
    assert sql["read-before-edit"] == [F("read-before-edit", "fulfilled", 3, None, (2, 3)),
                                       F("read-before-edit", "violated", 6, None, (6,)),
                                       F("read-before-edit", "violated", 11, None, (11,))]
    assert sql["no-repeated-failing-command"] == [F("no-repeated-failing-command", "fulfilled", 4, None, (4,)),
                                                  F("no-repeated-failing-command", "violated", 5, None, (4, 5))]
    assert sql["recover-from-failing-test"] == [F("recover-from-failing-test", "fulfilled", 4, None, (4, 7)),
                                                F("recover-from-failing-test", "fulfilled", 5, None, (5, 7))]
    assert sql["reread-evidence-after-report"] == [F("reread-evidence-after-report", "violated", 10, None,
                                                     (10, 11))]
    assert sql["claim-backed-by-passing-test"] == [F("claim-backed-by-passing-test", "fulfilled", 8, None, (7, 8))]
    assert sql["no-protected-path-edits"] == [F("no-protected-path-edits", "violated", None, None, (11,))]
    assert sql["verify-after-edit"] == [F("verify-after-edit", "fulfilled", 3, 0, (3, 4)),
                                        F("verify-after-edit", "fulfilled", 6, 0, (6, 7)),
                                        F("verify-after-edit", "violated", 11, 1, (11,))]
    assert sql["plan-before-first-edit"] == [F("plan-before-first-edit", "fulfilled", 3, 0, (1, 3)),
                                             F("plan-before-first-edit", "violated", 11, 1, (11,))]
    assert sql["delegate-with-context"] == [F("delegate-with-context", "violated", 9, None, (9,))]
    assert sql["report-before-dependent-claim"] == [F("report-before-dependent-claim", "fulfilled", 9, None,
                                                      (9, 10))]
