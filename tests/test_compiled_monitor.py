"""The compiled rule monitor (generated code per actor class and kind) against the interpreted one,
the reference: the same findings (every verdict, seq, stage and cited seq, in order), the same
tallies and model-event counts, over generated rules of every template and the shipped rule sets,
on runs fed one after another into one reused monitor; and the same score-document bytes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procgrade.engine.events import event_adapter
from procgrade.engine.facts import extract_facts
from procgrade.engine.scoring import RunScorer, score_run
from procgrade.rules.compiled import CompiledMonitor, generated_source
from procgrade.rules.loading import load_ruleset
from procgrade.rules.model import RuleSet
from procgrade.rules.monitor import RunMonitor
from procgrade.rules.predicates import ROW_COLUMNS, PrefixMemo

sys.path.insert(0, str(Path(__file__).parent))
from builders import h_runs  # noqa: E402
from rule_traces import ACTORS, rulesets, trace  # noqa: E402

SHIPPED = sorted((Path(__file__).parent.parent / "rules" / "sets").glob("*.yaml"))
_adapter = event_adapter()


def rows_of(events: list[Any], in_stages: list[int | None]) -> list[tuple[Any, ...]]:
    """Fact rows as the store reads them; the derived stage (``in_stage``) drawn apart from the
    event's own, so stage-scoped rules of both semantics see varied partitions."""
    return [(e.seq, e.kind, e.actor, e.stage, *extract_facts(e), in_stages[i % len(in_stages)])
            for i, e in enumerate(events)]


def assert_agree(ruleset: RuleSet, runs: list[list[tuple[Any, ...]]], batch: int = 7) -> None:
    """Both monitors, each reused across ``runs`` (reset between), in both detail modes; rows fed
    in batches of ``batch``. The compiled monitor's ``finish_in_place`` (what scoring reads) is held
    to the same findings, on a monitor of its own."""
    for detail in (True, False):
        reference, compiled = RunMonitor(ruleset, detail=detail), CompiledMonitor(ruleset, detail=detail)
        in_place = CompiledMonitor(ruleset, detail=detail)
        for rows in runs:
            reference.reset()
            compiled.reset()
            in_place.reset()
            for start in range(0, len(rows), batch):
                reference.feed(rows[start:start + batch])
                compiled.feed(rows[start:start + batch])
                in_place.feed(rows[start:start + batch])
            assert compiled.model_events == reference.model_events
            expected, got = reference.finish(), compiled.finish()
            assert in_place.finish_in_place() == expected
            assert list(got) == list(expected)
            for rule_id in expected:
                assert got[rule_id] == expected[rule_id], (rule_id, detail)
                assert [type(f) for f in got[rule_id]] == [type(f) for f in expected[rule_id]]
            assert compiled.tallies() == reference.tallies()


in_stage_lists = st.lists(st.sampled_from((None, 0, 1, 2)), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ruleset=rulesets(), runs=st.lists(st.tuples(trace("compiled"), in_stage_lists), min_size=1, max_size=3),
       batch=st.sampled_from((1, 3, 50)))
def test_generated_rules_agree_with_the_interpreted_monitor(ruleset: RuleSet, runs: list, batch: int) -> None:
    assert_agree(ruleset, [rows_of(events, stages) for events, stages in runs], batch)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(SHIPPED), runs=st.lists(st.tuples(trace("shipped", max_size=60), in_stage_lists),
                                                    min_size=1, max_size=3))
def test_shipped_rule_sets_agree_with_the_interpreted_monitor(path: Path, runs: list) -> None:
    assert_agree(load_ruleset(path), [rows_of(events, stages) for events, stages in runs])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(SHIPPED), lines=st.lists(h_runs(max_size=20), min_size=1, max_size=3),
       stages=in_stage_lists)
def test_builder_runs_give_the_same_documents(path: Path, lines: list, stages: list) -> None:
    """Runs drawn by ``tests/builders.py`` (any kind, any actor, any field): the scorer on the
    compiled monitor writes exactly the bytes the interpreted monitor's document has."""
    ruleset = load_ruleset(path)
    runs = [rows_of([_adapter.validate_python(line) for line in run], stages) for run in lines]
    assert_agree(ruleset, runs)
    scorer = RunScorer(ruleset)
    for number, rows in enumerate(runs):
        head = f"{number:064x}"
        document = scorer.score([rows], run_id=f"run-{number}", head_hash=head, event_count=len(rows))
        reference = score_run(ruleset, [rows], run_id=f"run-{number}", head_hash=head, event_count=len(rows))
        assert document.canonical == reference.canonical


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ruleset=rulesets(), events=trace("doc"), stages=in_stage_lists)
def test_generated_rules_give_the_same_documents(ruleset: RuleSet, events: list, stages: list) -> None:
    rows = rows_of(events, stages)
    document = RunScorer(ruleset).score([rows], run_id="r", head_hash="h", event_count=len(rows))
    reference = score_run(ruleset, [rows], run_id="r", head_hash="h", event_count=len(rows))
    assert document.canonical == reference.canonical


def test_the_compiled_monitor_really_generates_code_for_the_default_rule_set() -> None:
    """Guards the fast path itself: every rule of the default set has a generated form (none
    falls back to its interpreted handler), and a row of a kind no rule reads has no function."""
    monitor = CompiledMonitor(load_ruleset(), detail=False)
    made = generated_source(monitor.monitors, "file_edit", "agent", monitor)
    assert made is not None
    source, _ = made
    assert "(interpreted)" not in source and source.count("# ") >= 5
    assert generated_source(monitor.monitors, "compaction", "harness", monitor) is None


def test_rules_without_a_generated_form_are_fed_by_their_interpreted_handler() -> None:
    ruleset = RuleSet.model_validate({"name": "chains", "version": 1, "rules": [
        {"id": "chain", "title": "t", "rationale": "r", "template": "chain_response",
         "activation": {"kind": "command"}, "target": {"kind": "test_run"}},
        {"id": "per-stage", "title": "t", "rationale": "r", "template": "absence", "scope": "stage",
         "match": {"kind": "file_edit"}},
    ]})
    monitor = CompiledMonitor(ruleset, detail=False)
    made = generated_source(monitor.monitors, "command", "agent", monitor)
    assert made is not None and made[0].count("(interpreted)") == 2
    blank = (None,) * (len(ROW_COLUMNS) - 4)
    rows = [(0, "run_started", "harness", None, *blank), (1, "command", "agent", 0, *blank),
            (2, "test_run", "agent", 0, *blank), (3, "command", "agent", 1, *blank), (4, "command", "agent", 1, *blank)]
    assert_agree(ruleset, [rows, rows[:2]])


@settings(max_examples=50, deadline=None)
@given(actors=st.lists(st.sampled_from(ACTORS), min_size=1, max_size=5))
def test_actors_of_one_class_share_one_function(actors: list[str]) -> None:
    monitor = CompiledMonitor(load_ruleset(), detail=False)
    for seq, actor in enumerate(actors):
        monitor.feed([(seq, "file_read", actor, None, *([None] * (len(ROW_COLUMNS) - 4)))])
    by_class: dict[str, Any] = {}
    for actor in actors:
        table = monitor._dispatch[actor][1]
        assert by_class.setdefault(actor.split(":", 1)[0], table) is table


@settings(max_examples=200, deadline=None)
@given(prefixes=st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=4),
       texts=st.lists(st.text(max_size=5) | st.text(min_size=250, max_size=300), min_size=1, max_size=30))
def test_prefix_memo_says_what_startswith_says(prefixes: list[str], texts: list[str]) -> None:
    class Small(PrefixMemo):
        __slots__ = ()
        LIMIT = 7  # starts afresh often

    memo = Small(tuple(sorted(prefixes)))
    for text in texts + texts:
        verdict = memo.seen.get(text) or memo.learn(text)
        assert verdict == (1 if text.startswith(tuple(prefixes)) else 2)
        assert len(memo.seen) <= 7
        assert all(len(t) <= PrefixMemo.LONGEST for t in memo.seen)
