"""Template semantics 2 on both back-ends: applicability, derived stages, ``distinct``,
``open_at_end`` and ``not_prefix``; each expectation checked on the monitor and the SQL
twin alike (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

from test_rules_sql_backend import _build, _e, _fresh_run_id, _ruleset, both_backends, check

from procgrade.engine.store import EventStore
from procgrade.rules.monitor import Finding

EDIT = {"kind": "file_edit"}


def test_absence_applies_only_where_the_guarded_activity_happened(store: EventStore) -> None:
    rule = {"template": "absence", "match": {"kind": "file_edit", "prefix": {"path": ["/"]}}}
    # no model edit at all (a grades-only or acceptance-only run): vacuous, cites nothing
    check(store, rule, [_e("message", actor="harness"), _e("file_edit", actor="harness", path="/x", edit_kind="modify")],
          [("vacuous", None, None, ())], semantics=2)
    check(store, rule, [_e("file_edit", path="a.py", edit_kind="modify")], [("fulfilled", None, None, ())], semantics=2)
    check(store, rule, [_e("file_edit", path="/etc/x", edit_kind="modify")], [("violated", None, None, (1,))],
          semantics=2)
    # semantics 1 (rule set v1) kept its old meaning: judged in every run
    check(store, rule, [_e("message", actor="harness")], [("fulfilled", None, None, ())], semantics=1)


def test_existence_and_count_apply_where_the_model_did_anything(store: EventStore) -> None:
    rule = {"template": "existence", "match": {"kind": "completion_claim"}}
    check(store, rule, [_e("completion_claim", actor="harness")], [("vacuous", None, None, ())], semantics=2)
    check(store, rule, [_e("message"), _e("completion_claim", actor="harness")], [("violated", None, None, ())],
          semantics=2)
    check(store, {**rule, "applies_if": {"kind": "file_edit"}}, [_e("message")], [("vacuous", None, None, ())],
          semantics=2)
    check(store, {"template": "count", "scope": "stage", "match": EDIT, "min": 1}, [
        _e("stage_started", actor="harness", stage=0),          # 1
        _e("message"),                                          # 2 in stage 0 (derived)
        _e("stage_ended", actor="harness", stage=0),            # 3
        _e("stage_started", actor="harness", stage=1),          # 4
        _e("message", actor="user"),                            # 5 stage 1: no model event
        _e("stage_ended", actor="harness", stage=1),            # 6
    ], [("violated", None, 0, ()), ("vacuous", None, 1, ())], semantics=2)


def test_stage_scope_reads_the_stage_derived_from_markers(store: EventStore) -> None:
    rule = {"template": "response", "scope": "stage", "activation": EDIT, "target": {"kind": "test_run"}}
    specs = [
        _e("stage_started", actor="harness", stage=0),          # 1
        _e("file_edit", path="a", edit_kind="modify"),          # 2 (no stage of its own)
        _e("test_run", command="pytest", passed=1),             # 3
        _e("stage_ended", actor="harness", stage=0),            # 4
        _e("correction", actor="human", text="the pane is blank"),  # 5 opens round 1
        _e("file_edit", path="a", edit_kind="modify"),          # 6
    ]
    check(store, rule, specs, [("fulfilled", 2, 0, (2, 3)), ("violated", 6, 1, (6,))], semantics=2)
    check(store, rule, specs, [], semantics=1)  # v1: only the events' own stage counts


def test_distinct_counts_keys_in_the_early_window(store: EventStore) -> None:
    rule = {"template": "distinct", "match": {"kind": "file_edit", "not_prefix": {"path": ["repro"]}},
            "key": "path", "max": 1, "early_percent": 50}
    specs = [
        _e("file_edit", path="a", edit_kind="modify"),          # 1 rank 1
        _e("file_edit", path="repro.py", edit_kind="create"),   # 2 exempt
        _e("file_edit", path="b", edit_kind="modify"),          # 3 rank 3
        _e("file_edit", path="a", edit_kind="modify", actor="harness"),  # 4 not the model's
        _e("message"), _e("message"), _e("message"),            # 5-7
        _e("file_edit", path="c", edit_kind="modify"),          # 8 rank 7 of 7: late
    ]
    check(store, rule, specs, [("violated", None, None, (1, 3))], semantics=2)
    check(store, {**rule, "max": 2}, specs, [("fulfilled", None, None, (1, 3))], semantics=2)
    check(store, {**rule, "early_percent": 1}, specs[4:], [("vacuous", None, None, ())], semantics=2)


def test_response_open_at_end_vacuous_only_when_no_deadline_came(store: EventStore) -> None:
    rule = {"template": "response", "correlate": "worker_id", "open_at_end": "vacuous",
            "activation": {"kind": "delegation"}, "target": {"kind": "worker_report"},
            "deadline": {"kind": "completion_claim"}}
    check(store, rule, [_e("delegation", worker_id="w", context=["a"])], [("vacuous", 1, None, (1,))], semantics=2)
    check(store, rule, [_e("delegation", worker_id="w"), _e("completion_claim")], [("violated", 1, None, (1, 2))],
          semantics=2)
    check(store, rule, [_e("delegation", worker_id="w"), _e("worker_report", actor="subagent:w", worker_id="w")],
          [("fulfilled", 1, None, (1, 2))], semantics=2)


def test_not_prefix_keeps_null_columns_and_excludes_prefixes(store: EventStore) -> None:
    rule = {"template": "satisfies", "activation": {"kind": "command"},
            "require": {"kind": "command", "not_prefix": {"command": ["sleep", "ls"]}}}
    check(store, rule, [_e("command", command="sleep 5"), _e("command", command="make"),
                        _e("command", command="lsof")],
          [("violated", 1, None, (1,)), ("fulfilled", 2, None, (2,)), ("violated", 3, None, (3,))], semantics=2)


def test_job_output_from_the_command_line_relates_reads_to_the_job(store: EventStore) -> None:
    rule = {"template": "precedence_since", "reset_required": True,
            "correlate": {"activation": "io_path", "target": "io_path", "reset": "io_path"},
            "activation": {"kind": ["file_read", "command"], "equals": {"io": "read"}},
            "target": {"kind": "job_finished"},
            "reset": {"kind": ["job_started", "command"], "equals": {"io": "job_started"}}}
    check(store, rule, [
        _e("command", command="python train.py > out.log 2>&1 &"),    # 1 job writing out.log
        _e("command", command="sleep 30; cat out.log"),                # 2 read while running
        _e("job_finished", actor="harness", job_id="j", output_path="./out.log"),  # 3
        _e("command", command="tail -n 5 out.log"),                    # 4 read after the finish
        _e("file_read", path="other.log"),                             # 5 no job writes it
    ], [("violated", 2, None, (1, 2)), ("fulfilled", 4, None, (3, 4)), ("vacuous", 5, None, (5,))], semantics=2)


def test_stage_marked_run_without_per_event_stage_scores_as_tagged(store: EventStore) -> None:
    """Issue 10's done-when: a native run marking stages only with stage_started/stage_ended
    scores exactly as the same run with every event tagged."""
    from procgrade.engine.rescoring import compute_score
    from procgrade.rules.loading import load_ruleset

    def run(run_id: str, tagged: bool) -> list[Any]:
        specs = []
        for stage in (0, 1):
            inner = [_e("message", intent="plan"), _e("file_read", path="src/a.py"),
                     _e("file_edit", path="src/a.py", edit_kind="modify"), _e("test_run", command="pytest", passed=1),
                     _e("completion_claim")]
            if stage == 1:
                inner = inner[1:3]  # stage 1: an unplanned, unverified edit
            specs.append(_e("stage_started", actor="harness", stage=stage))
            specs += [{**spec, "stage": stage} if tagged else spec for spec in inner]
            specs.append(_e("stage_ended", actor="harness", stage=stage))
        return _build(run_id, specs)

    ruleset = _ruleset({"template": "response", "scope": "stage", "activation": EDIT, "target": {"kind": "test_run"}},
                       {"template": "precedence", "scope": "stage", "only_first": True, "activation": EDIT,
                        "target": {"kind": "message", "equals": {"intent": "plan"}}}, semantics=2)
    tagged, marked = _fresh_run_id("tagged"), _fresh_run_id("marked")
    store.append(tagged, run(tagged, True))
    store.append(marked, run(marked, False))
    for rules in (ruleset, load_ruleset()):
        a, b = compute_score(store, rules, tagged), compute_score(store, rules, marked)
        assert a.body["rules"] == b.body["rules"] and a.process_score == b.process_score
    sql_t, mon_t = both_backends(store, ruleset, tagged)
    sql_m, mon_m = both_backends(store, ruleset, marked)
    assert sql_t == mon_t == sql_m == mon_m
    assert [f.verdict for f in mon_m["r0"]] == ["fulfilled", "violated"]
    assert mon_m["r1"] == [Finding("r1", "fulfilled", 4, 0, (2, 4)), Finding("r1", "violated", 10, 1, (10,))]
