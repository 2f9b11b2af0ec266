"""Process vs outcome (engine/analysis/comparison.py, outcome_builds.py, ``procgrade compare`` / ``outcomes``).

A small planted study, scored under the default rule set: three models x two tasks x two builds (plus an
unjudged build of model-a and an infrastructure-error build of model-c), each run a short native build whose
rule outcomes are known, followed by outcome events written the two ways the store holds them (procgrade's
acceptance check, linked by ``parent_seq``; an importer's verdict followed by its tests). Every number below
is worked out by hand from the definitions, not from the engine:

Process shapes (rules that apply: plan-before-first-edit, claim-backed-by-passing-test, verify-after-edit,
no-protected-path-edits; weight 1 each):
  clean  = plan, edit, passing test, claim            -> 4/4 fulfilled       -> 1
  noplan = edit without a plan                         -> plan rule violated  -> 3/4
  claim  = claim before the passing test               -> claim rule violated -> 3/4
  both   = no plan and an early claim                  -> 2/4                 -> 1/2

model-a: 5 clean runs                                   process 1
model-b: clean, noplan, clean, noplan                   process (1 + 3/4 + 1 + 3/4) / 4 = 7/8
model-c: claim x4, both                                 process (4 * 3/4 + 1/2) / 5 = 7/10
-> process ranking a (1) > b (2) > c (3)

Outcomes (p = passed, f = failed, e = error -> failed, s = skipped -> no grade; the last check decides):
model-a t1: [p p f] (an earlier all-pass check is ignored), verdict reward 1 (no tests); a-t1-3 unjudged
        t2: [f f p], not_submitted (no tests)
        pass@1 = mean(t1: 1/2, t2: 0) = 1/4; plan rate = mean(t1: (2/3 + 1)/2, t2: (1/3 + 0)/2) = 1/2
model-b t1: [p p p] (after an earlier failing check), [p p s]; t2: [p p p], [p e p]
        pass@1 = mean(1, 1/2) = 3/4; plan rate = mean(1, (1 + 2/3)/2) = 11/12; no grade: b-t1-2 test_c
model-c t1: [p p p], [f p p]; t2: [p p p], timeout (no tests), infra_error (no grade: left out, listed)
        pass@1 = mean(1/2, 1/2) = 1/2; plan rate = mean((1 + 2/3)/2, (1 + 0)/2) = 2/3
-> outcome ranking b (1) > c (2) > a (3)

Flips: a over b by process, b over a by pass@1: plan-before-first-edit 1 vs 1/2 (the only rule in a's favour);
a over c, c over a: claim-backed-by-passing-test 1 vs 0, then plan-before-first-edit 1 vs 4/5. b and c agree.
Every group has both scores on t1 and t2: the task bootstrap; ranks (1,2,3) vs (3,1,2): Spearman
1 - 6 * (4 + 1 + 1) / (3 * 8) = -1/2, Kendall tau-b (1 concordant - 2 discordant) / 3 = -1/3.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from builders import SHA_A, ev, models, run_started, write_jsonl
from databases import fresh_url

from procgrade.engine.analysis.comparison import (
    MixedGroupSettingsError,
    check_field,
    compare,
    group_outcomes,
)
from procgrade.engine.analysis.dataset import RunView, load_runs
from procgrade.engine.analysis.outcome_builds import (
    last_check_tests,
    outcome_builds,
    run_outcome,
    run_settings,
)
from procgrade.engine.cli import app
from procgrade.engine.events import AcceptanceVerdict, TestResult
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.store import EventStore, open_store
from procgrade.rules.loading import load_ruleset

IMPORTS = Path(__file__).parent / "fixtures" / "imports"
#: The study's process shapes are worked out under rule set v1 (the comparison's arithmetic is under test here,
#: not the rules): every store-backed test scores with it.
V1 = Path(__file__).parent.parent / "rules" / "sets" / "default-v1.yaml"
RESAMPLES = 199
F = Fraction
OUTCOME = {"p": "passed", "f": "failed", "e": "error", "s": "skipped"}
SETTINGS = {"temperature": 0, "top_p": 1}

# run id, model, task, process shape, checks [(style, status, reward, tests)], labels
STUDY: list[tuple[str, str, str, str, list[tuple[str, str, str | None, str]], dict[str, str]]] = [
    ("a-t1-1", "model-a", "t1", "clean", [("accept", "evaluated", "1", "ppp"), ("accept", "evaluated", "0", "ppf")],
     {"cost": "0.5", "duration": "60"}),
    ("a-t1-2", "model-a", "t1", "clean", [("import", "evaluated", "1", "")], {"cost": "0.25", "duration": "120"}),
    ("a-t1-3", "model-a", "t1", "clean", [], {}),
    ("a-t2-1", "model-a", "t2", "clean", [("import", "evaluated", "0", "ffp")], {"cost": "1.5", "duration": "30"}),
    ("a-t2-2", "model-a", "t2", "clean", [("import", "not_submitted", None, "")], {"cost": "0.75", "duration": "90"}),
    ("b-t1-1", "model-b", "t1", "clean", [("import", "evaluated", "0", "fpp"), ("import", "evaluated", "1", "ppp")], {}),
    ("b-t1-2", "model-b", "t1", "noplan", [("accept", "evaluated", "1", "pps")], {}),
    ("b-t2-1", "model-b", "t2", "clean", [("accept", "evaluated", "1", "ppp")], {}),
    ("b-t2-2", "model-b", "t2", "noplan", [("accept", "evaluated", "0", "pep")], {}),
    ("c-t1-1", "model-c", "t1", "claim", [("accept", "evaluated", "1", "ppp")], {}),
    ("c-t1-2", "model-c", "t1", "claim", [("accept", "evaluated", "0", "fpp")], {}),
    ("c-t2-1", "model-c", "t2", "claim", [("import", "evaluated", "1", "ppp")], {}),
    ("c-t2-2", "model-c", "t2", "both", [("import", "timeout", "0", "")], {}),
    ("c-t2-3", "model-c", "t2", "claim", [("import", "infra_error", None, "")], {}),
]
PROCESS = {"clean": F(1), "noplan": F(3, 4), "claim": F(3, 4), "both": F(1, 2)}


def build_run(run_id: str, model: str, task: str | None, shape: str, checks: list[tuple[str, str, str | None, str]],
              labels: dict[str, str], settings: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    events = [run_started(run_id, model=model, task_id=task, model_settings=settings or SETTINGS, labels=labels,
                          harness={"name": "study-harness", "version": "1"})]

    def add(kind: str, **fields: Any) -> int:
        events.append(ev(kind, len(events), run_id, **fields))
        return len(events) - 1

    add("stage_started", actor="harness", stage=0, title="the feature")
    if shape in ("clean", "claim"):
        add("message", stage=0, intent="plan", text="Plan: write src/app.py, then run the tests.")
    add("file_edit", stage=0, path="src/app.py", edit_kind="create")
    test = {"stage": 0, "command": "pytest -q", "passed": 3, "failed": 0, "exit_code": 0}
    if shape in ("claim", "both"):
        add("completion_claim", stage=0, claim="Done.", scope="stage")
        add("test_run", **test)
    else:
        add("test_run", **test)
        add("completion_claim", stage=0, claim="Done.", scope="stage")
    add("stage_ended", actor="harness", stage=0, status="completed")
    add("run_ended", actor="harness", status="completed")
    for style, status, reward, tests in checks:
        verdict = {"status": status, **({"reward": reward} if reward is not None else {})}
        results = [(f"test_{name}", OUTCOME[o]) for name, o in zip("abc", tests)]
        if style == "accept":  # procgrade's acceptance check: tests and verdict linked to acceptance_started
            start = add("acceptance_started", actor="grader", task_id=task or "none", suite_sha256=SHA_A,
                        backend="local")
            for test_id, outcome in results:
                add("test_result", actor="grader", parent_seq=start, test_id=test_id, outcome=outcome,
                    verifier="procgrade-acceptance")
            add("acceptance_verdict", actor="grader", parent_seq=start, verifier="procgrade-acceptance", **verdict)
        else:  # an importer: the verdict, then its tests, no parent
            add("acceptance_verdict", actor="grader", verifier="harbor", **verdict)
            for test_id, outcome in results:
                add("test_result", actor="grader", test_id=test_id, outcome=outcome, verifier="harbor")
    return events


def write_study(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return [write_jsonl(directory / f"{row[0]}.jsonl", build_run(*row)) for row in STUDY]


def ingest_study(store: EventStore, directory: Path) -> None:
    ingest_paths(store, write_study(directory))


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


# --------------------------------------------------------------------------------------------
# The study, through the store (SQLite and PostgreSQL)


def test_compare_by_model_matches_the_hand_computation(store: EventStore, tmp_path: Path) -> None:
    ingest_study(store, tmp_path / "study")
    ruleset = load_ruleset(V1)
    runs = load_runs(store, ruleset)
    for run_id, _, _, shape, _, _ in STUDY:  # the planted process shapes score as designed
        run = next(r for r in runs if r.run_id == run_id)
        assert run.process is not None and run.process.total == PROCESS[shape], run_id

    result = compare(runs, "model", seed=0, n_resamples=RESAMPLES, ruleset=ruleset)
    a, b, c = (result.group(f"model-{x}") for x in "abc")
    assert [g.group for g in result.groups] == ["model-a", "model-b", "model-c"]
    assert (a.process_score, b.process_score, c.process_score) == (F(1), F(7, 8), F(7, 10))
    assert (len(a.runs), len(b.runs), len(c.runs)) == (5, 4, 5)
    assert (a.outcome_score, b.outcome_score, c.outcome_score) == (F(1, 4), F(3, 4), F(1, 2))
    summaries = [g.outcome.summary for g in (a, b, c)]
    assert [s.plan_pass_rate for s in summaries] == [F(1, 2), F(11, 12), F(2, 3)]
    assert [g.process_rank for g in (a, b, c)] == [1.0, 2.0, 3.0]
    assert [g.outcome_rank for g in (a, b, c)] == [3.0, 1.0, 2.0]
    assert c.rule_means["plan-before-first-edit"] == F(4, 5) and c.rule_means["claim-backed-by-passing-test"] == 0
    assert b.rule_means["plan-before-first-edit"] == F(1, 2)

    # per build: the last check decides; importer tests follow their verdict; skipped = no grade
    plans = {o.run_id: {p.plan_id: p.result.value for p in o.build.plans}
             for g in (a, b, c) for o in g.outcome.outcomes if o.build is not None}
    assert plans["a-t1-1"] == {"test_a": "passed", "test_b": "passed", "test_c": "failed"}
    assert plans["a-t1-2"] == {"verdict": "passed"} and plans["a-t2-2"] == {"verdict": "failed"}
    assert plans["b-t1-1"] == {"test_a": "passed", "test_b": "passed", "test_c": "passed"}
    assert plans["b-t2-2"]["test_b"] == "failed" and plans["b-t1-2"]["test_c"] == "no_grade"
    assert plans["c-t2-2"] == {"verdict": "failed"} and plans["c-t2-3"] == {"verdict": "no_grade"}

    # audit lists
    assert a.outcome.unjudged == ("a-t1-3",) and b.outcome.unjudged == c.outcome.unjudged == ()
    assert [(n.product, n.build_id, n.plan_id) for n in summaries[1].no_grade] == [("t1", "b-t1-2", "test_c")]
    assert [(n.product, n.build_id, n.plan_id) for n in summaries[2].no_grade] == [("t2", "c-t2-3", "verdict")]
    assert summaries[2].ungraded_builds == (("t2", "c-t2-3"),) and summaries[0].ungraded_builds == ()
    # cost and time: mean over products of the mean per build (labels), exact
    assert summaries[0].cost_mean == F(3, 4) and summaries[0].duration_mean_s == 75
    assert summaries[1].cost_mean is None and summaries[1].missing_cost == ("b-t1-1", "b-t1-2", "b-t2-1", "b-t2-2")
    # intervals: the t interval crosses 0 with df = 2, so ViBench's Clopper-Pearson range of 1 of 4 builds
    from scipy.stats import beta

    interval = summaries[0].pass_at_1_interval
    assert (interval.method, interval.count, interval.nobs, interval.estimate) == ("clopper-pearson", 1, 4, F(1, 4))
    assert interval.low == pytest.approx(beta.ppf(0.025, 1, 4)) and interval.high == pytest.approx(beta.ppf(0.975, 2, 3))
    assert (summaries[1].plan_pass_interval.count, summaries[1].plan_pass_interval.nobs) == (10, 11)

    # flips, with the rules that drive them
    assert [(f.process_ahead, f.outcome_ahead) for f in result.flips] == [("model-a", "model-b"), ("model-a", "model-c")]
    ab, ac = result.flips
    assert (ab.process, ab.outcome) == ((F(1), F(7, 8)), (F(1, 4), F(3, 4)))
    assert [(r.rule_id, r.ahead, r.behind) for r in ab.rules] == [("plan-before-first-edit", F(1), F(1, 2))]
    assert [(r.rule_id, r.ahead, r.behind) for r in ac.rules] == [
        ("claim-backed-by-passing-test", F(1), F(0)), ("plan-before-first-edit", F(1), F(4, 5))]

    # rank agreement over the shared task grid
    assert result.agreement_over == "tasks" and result.tasks == ("t1", "t2")
    assert "share a grid of 2 tasks" in result.agreement_note
    assert result.agreement.spearman.statistic == pytest.approx(-0.5)
    assert result.agreement.kendall_tau_b.statistic == pytest.approx(-1 / 3)
    assert result.agreement.n_resamples == RESAMPLES and result.excluded == ()

    # deterministic: the same inputs give the same plain data
    again = compare(load_runs(store, ruleset), "model", seed=0, n_resamples=RESAMPLES, ruleset=ruleset)
    assert again.to_dict() == result.to_dict()
    data = result.to_dict()
    assert data["groups"][1]["process"]["score"] == {"exact": "7/8", "display": "0.8750"}
    assert data["flips"][1]["rules"][0] == {"rule": "claim-backed-by-passing-test", "ahead": {"exact": "1/1", "display": "1.0000"},
                                            "behind": {"exact": "0/1", "display": "0.0000"},
                                            "gap": {"exact": "1/1", "display": "1.0000"}}


def test_mixed_settings_are_refused_unless_allowed(store: EventStore, store_url: str, tmp_path: Path) -> None:
    ingest_study(store, tmp_path / "study")
    odd = build_run("b-t1-9", "model-b", "t1", "clean", [], {}, settings={"temperature": 0.7, "top_p": 1})
    ingest_paths(store, [write_jsonl(tmp_path / "odd.jsonl", odd)])
    runs = load_runs(store, load_ruleset(V1))

    with pytest.raises(MixedGroupSettingsError) as refused:
        compare(runs, "model", n_resamples=RESAMPLES)
    assert refused.value.keys == ("model_settings.temperature",) and list(refused.value.groups) == ["model-b"]
    assert refused.value.groups["model-b"]["model_settings.temperature"] == {
        "0": ("b-t1-1", "b-t1-2", "b-t2-1", "b-t2-2"), "0.7": ("b-t1-9",)}
    assert "model model-b: model_settings.temperature: 0 in 4 run(s)" in str(refused.value)
    with pytest.raises(MixedGroupSettingsError):
        group_outcomes(runs, "model")

    allowed = compare(runs, "model", allow_mixed=True, n_resamples=RESAMPLES)
    b = allowed.group("model-b")
    assert b.process_score == F(9, 10) and b.outcome_score == F(3, 4) and b.outcome.unjudged == ("b-t1-9",)
    assert dict(b.outcome.mixed_settings) == {"model_settings.temperature": {"0": ("b-t1-1", "b-t1-2", "b-t2-1", "b-t2-2"),
                                                                           "0.7": ("b-t1-9",)}}
    assert "model_settings.temperature" not in b.outcome.settings and b.outcome.settings["model_settings.top_p"] == 1
    assert allowed.group("model-a").outcome.mixed_settings == {}

    no = cli("compare", "--by", "model", "--rules", str(V1), "--resamples", str(RESAMPLES), "--db", store_url)
    # the console script prints the refusal in one line (tests/test_cli_mistakes.py); the exception holds it all
    refusal = str(no.exception)
    assert no.exit_code == 1 and "refusing to pool runs whose settings differ" in refusal
    assert "model_settings.temperature" in refusal and "b-t1-9" in refusal
    yes = cli("outcomes", "--by", "model", "--allow-mixed", "--db", store_url)
    assert yes.exit_code == 0, yes.output
    assert "model-b: settings differ, pooled by --allow-mixed: model_settings.temperature: 0 in 4 run(s) (b-t1-1, b-t1-2, b-t2-1, +1 more); 0.7 in 1 run(s) (b-t1-9)" in yes.output
    assert "model-b: unjudged (no verdict), not scored: b-t1-9" in yes.output


def test_cli_output_and_json_are_identical_across_runs_and_databases(tmp_path: Path) -> None:
    files = write_study(tmp_path / "study")
    outputs, documents = {}, []
    for kind in ("sqlite", "postgresql"):
        with fresh_url(kind, tmp_path / kind) as url:
            store = open_store(url, create=True)
            try:
                ingest_paths(store, files)
            finally:
                store.close()
            for attempt in (1, 2) if kind == "sqlite" else (1,):
                target = tmp_path / f"{kind}-{attempt}.json"
                done = cli("compare", "--by", "model", "--rules", str(V1), "--resamples", str(RESAMPLES), "--json",
                           str(target), "--db", url)
                assert done.exit_code == 0, done.output
                outputs[kind] = done.output.replace(str(target), "FILE")
                documents.append(target.read_bytes())
            shown = cli("outcomes", "--by", "model", "--k", "2", "--db", url)
            assert shown.exit_code == 0, shown.output
            outputs[f"{kind}-outcomes"] = shown.output
    assert documents[0] == documents[1] == documents[2]
    assert outputs["sqlite"] == outputs["postgresql"] and outputs["sqlite-outcomes"] == outputs["postgresql-outcomes"]

    text = outputs["sqlite"]
    for row in (("model-a", "5", "1.0000", "1/1", "25.0 (0.6–80.6)", "50.0 ("),
                ("model-b", "4", "0.8750", "7/8", "75.0 (", "91.7 ("),
                ("model-c", "5", "0.7000", "7/10", "50.0 (", "66.7 (")):
        line = next(line for line in text.splitlines() if f" {row[0]} " in line)
        assert all(cell in line for cell in row), (row, line)
    assert "the 3 groups share a grid of 2 tasks" in text
    assert "Spearman rho -0.500" in text and "Kendall tau-b -0.333" in text
    assert ("model-a ahead by process (1/1 vs 7/8), model-b ahead by pass@1 (75.0% vs 25.0%); rules in model-a's "
            "favour (model-a vs model-b): plan-before-first-edit 1/1 vs 1/2") in text
    assert ("model-a ahead by process (1/1 vs 7/10), model-c ahead by pass@1 (50.0% vs 25.0%); rules in model-a's "
            "favour (model-a vs model-c): claim-backed-by-passing-test 1/1 vs 0/1; plan-before-first-edit 1/1 vs 4/5") in text
    assert "model-b: no grade, left out of both scores: b-t1-2 plan test_c (product t1)" in text
    assert "model-c: ungraded build, left out: c-t2-3 (product t2)" in text
    assert "model-a: unjudged (no verdict), not scored: a-t1-3" in text

    shown = outputs["sqlite-outcomes"]
    line = next(line for line in shown.splitlines() if " model-a " in line)
    # pass^2 of model-a: t1 1 of 2 builds passes, t2 none: (C(1,2)/C(2,2) + 0) / 2 = 0; cost 3/4, time 75 s
    assert "0.0000" in line and "0.7500" in line and "75.0000" in line
    assert "model-c: no grade, left out of both scores: c-t2-3 plan verdict (product t2)" in shown

    bad = cli("compare", "--by", "nonsense", "--db", f"sqlite:///{tmp_path / 'sqlite' / 't.db'}")
    assert bad.exit_code == 2 and "unknown grouping field 'nonsense'" in bad.output


def test_bundled_samples_compare_refuses_mixed_settings_then_completes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'samples.db'}"
    ingested = cli("ingest", str(IMPORTS), "--db", db)
    assert ingested.exit_code == 0, ingested.output
    refused = cli("compare", "--by", "model", "--resamples", str(RESAMPLES), "--db", db)
    assert refused.exit_code == 1
    assert "refusing to pool runs whose settings differ" in str(refused.exception)
    assert "model gpt-4o: model_settings.parser" in str(refused.exception)  # harbor/hello-world__Kx7pQ2m has no parser
    done = cli("compare", "--by", "model", "--allow-mixed", "--resamples", str(RESAMPLES), "--json",
               str(tmp_path / "samples.json"), "--db", db)
    assert done.exit_code == 0, done.output
    assert "gpt-4o: settings differ, pooled by --allow-mixed: model_settings.parser" in done.output
    assert "rank agreement, process score vs pass@1" in done.output and "rank flips" in done.output
    assert "not ranked: openrouter-llama-4-maverick: no run of the group has a verdict" in done.output
    assert "(none)" not in done.output
    by_harness = cli("outcomes", "--by", "harness", "--allow-mixed", "--db", db)
    assert by_harness.exit_code == 0, by_harness.output
    assert "outcomes by harness" in by_harness.output and "terminus" in by_harness.output


# --------------------------------------------------------------------------------------------
# Builds from run views (no store)


def view(run_id: str, events: list[dict[str, Any]], *, task: str | None = "t", model: str = "m",
         settings: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> RunView:
    parsed = models(events)
    return RunView(run_id=run_id, event_count=len(events) + 1, head_hash=None, harness="h", harness_version="1",
                   model=model, task_id=task, format="native", settings=settings or {}, labels=labels or {},
                   verdicts=tuple(e for e in parsed if isinstance(e, AcceptanceVerdict)),
                   test_results=tuple(e for e in parsed if isinstance(e, TestResult)))


def verdict(seq: int, status: str, reward: str | None = None, parent: int | None = None, verifier: str = "v") -> dict[str, Any]:
    fields: dict[str, Any] = {"verifier": verifier, "status": status}
    if reward is not None:
        fields["reward"] = reward
    if parent is not None:
        fields["parent_seq"] = parent
    return ev("acceptance_verdict", seq, "r", actor="grader", **fields)


def result(seq: int, test_id: str, outcome: str, parent: int | None = None, verifier: str | None = "v") -> dict[str, Any]:
    fields: dict[str, Any] = {"test_id": test_id, "outcome": outcome}
    if parent is not None:
        fields["parent_seq"] = parent
    if verifier is not None:
        fields["verifier"] = verifier
    return ev("test_result", seq, "r", actor="grader", **fields)


def plans_of(run: RunView) -> dict[str, str]:
    outcome = run_outcome(run)
    assert outcome.build is not None
    return {p.plan_id: p.result.value for p in outcome.build.plans}


def test_verdict_statuses_and_test_outcomes_become_plans() -> None:
    assert plans_of(view("r", [verdict(5, "evaluated", "1")])) == {"verdict": "passed"}
    assert plans_of(view("r", [verdict(5, "evaluated", "0.75")])) == {"verdict": "failed"}
    for status in ("timeout", "rejected", "not_submitted"):
        assert plans_of(view("r", [verdict(5, status)])) == {"verdict": "failed"}
    for status in ("infra_error", "no_grade"):
        assert plans_of(view("r", [verdict(5, status)])) == {"verdict": "no_grade"}
    # an infrastructure error grades nothing, even the tests it reported
    assert plans_of(view("r", [verdict(5, "infra_error"), result(6, "x", "passed")])) == {"x": "no_grade"}
    # a rejected product fails whatever its tests say
    rejected = view("r", [verdict(5, "rejected", "0"), result(6, "x", "passed")])
    assert plans_of(rejected) == {"verdict": "failed", "x": "passed"} and run_outcome(rejected).notes
    # outcomes; a test reported twice counts once, failed if any report failed
    mixed = view("r", [verdict(5, "evaluated", "0"), result(6, "a", "error"), result(7, "b", "skipped"),
                       result(8, "c", "passed"), result(9, "c", "failed")])
    assert plans_of(mixed) == {"a": "failed", "b": "no_grade", "c": "failed"}
    # the verifier refused what no single test shows (skips, a tampered report): its verdict stands
    refused = run_outcome(view("r", [verdict(5, "evaluated", "0"), result(6, "a", "passed")]))
    assert refused.build.passes is False and "the verdict decides" in refused.notes[0]
    skipped = run_outcome(view("r", [verdict(5, "evaluated", "0"), result(6, "a", "skipped")]))
    assert skipped.build.passes is False and plans_of(view("r", [verdict(5, "evaluated", "0"), result(6, "a", "skipped")])) == {
        "a": "no_grade", "verdict": "failed"}
    # a verdict of 1 with a failing test: the failing test decides
    failing = run_outcome(view("r", [verdict(5, "evaluated", "1"), result(6, "a", "failed")]))
    assert failing.build.passes is False and "the failing test decides" in failing.notes[0]
    # unjudged and task-less runs
    assert run_outcome(view("r", [result(6, "a", "passed")])).build is None
    taskless = run_outcome(view("r", [verdict(5, "evaluated", "1")], task=None))
    assert (taskless.product, taskless.product_from) == ("r", "run_id")
    assert outcome_builds([view("r", [verdict(5, "evaluated", "1")], task=None), view("q", [])]).unjudged == ("q",)


def test_the_last_check_decides_in_every_layout() -> None:
    # acceptance layout: linked by parent_seq; an earlier check's tests are not the last check's
    linked = view("r", [result(6, "a", "passed", parent=5), verdict(7, "evaluated", "1", parent=5),
                        result(9, "a", "failed", parent=8), verdict(10, "evaluated", "0", parent=8)])
    assert [t.seq for t in last_check_tests(linked)] == [9]
    # importer layout: the verdict, then its tests
    after = view("r", [verdict(5, "evaluated", "0"), result(6, "a", "failed"), verdict(7, "evaluated", "1"),
                       result(8, "a", "passed"), result(9, "b", "passed", verifier="other")])
    assert [t.seq for t in last_check_tests(after)] == [8]
    # parentless tests written before their verdict
    before = view("r", [result(5, "a", "failed"), verdict(6, "evaluated", "0"), result(7, "a", "passed"),
                        verdict(8, "evaluated", "1")])
    assert [t.seq for t in last_check_tests(before)] == [7]
    # a rejected acceptance check has no tests of its own: an earlier check's linked tests do not leak in
    rejected = view("r", [result(6, "a", "passed", parent=5), verdict(7, "evaluated", "1", parent=5),
                          verdict(9, "rejected", "0", parent=8)])
    assert last_check_tests(rejected) == () and plans_of(rejected) == {"verdict": "failed"}


def test_cost_duration_and_settings() -> None:
    run = view("r", [verdict(5, "evaluated", "1")], labels={"accumulated_cost": "2.6073150000000003", "duration": "1e2"},
               settings={"temperature": 0.0})
    build = run_outcome(run).build
    assert build.cost == F("2.6073150000000003") and build.duration_s == 100
    assert run_settings(run) == {"harness": "h", "harness_version": "1", "model_settings": {"temperature": 0.0}}
    stats = run_outcome(view("r", [verdict(5, "evaluated", "1")], labels={"cost": "0.25", "api_calls": "3"}))
    assert stats.build.cost == F(1, 4) and stats.build.duration_s is None
    bad = run_outcome(view("r", [verdict(5, "evaluated", "1")], labels={"cost": "lots"}))
    assert bad.build.cost is None and "not a number" in bad.notes[0]


def test_ungraded_runs_and_runs_without_the_field_are_left_out_and_flips_name_only_rules_applied_on_both_sides() -> None:
    from procgrade.engine.analysis.dataset import NOT_GRADED, ProcessScore

    def scored(run_id: str, model: str | None, task: str | None, total: F | None, rules: dict[str, F | None],
               passed: bool) -> RunView:
        base = view(run_id, [verdict(5, "evaluated", "1" if passed else "0")], task=task, model=model)  # type: ignore[arg-type]
        judged = {rule: 0 if score is None else 1 for rule, score in rules.items()}
        process = ProcessScore("h" * 64, total, rules, {}, {}, {}, stored=False, judged=judged)
        return RunView(**{**base.__dict__, "process": process})

    runs = [
        scored("x1", "openai/x", "t1", F(1), {"r1": F(1), "r2": None, "r3": F(1)}, False),
        scored("x2", "x-2024-05-13", None, F(1), {"r1": F(1), "r2": None, "r3": F(1)}, False),
        scored("y1", "y", "t1", F(1, 2), {"r1": F(1), "r2": F(0), "r3": F(0)}, True),
        scored("y2", "y", "t2", F(1, 2), {"r1": F(1), "r2": F(0), "r3": F(0)}, True),
        scored("y3", "y", "t2", None, {"r1": None, "r2": None, "r3": None}, True),  # nothing judged
        scored("z1", "z", "t1", None, {"r1": None, "r2": None, "r3": None}, False),
        scored("n1", None, "t1", F(0), {"r1": F(0), "r2": None, "r3": None}, True),  # no model: no group
    ]
    result = compare(runs, "model", n_resamples=RESAMPLES)
    assert [row.group for row in result.groups] == ["x", "y"]  # openai/x and x-2024-05-13 are one model
    assert result.agreement_over == "groups" and "group x has runs without a task" in result.agreement_note
    assert result.ranked == ("x", "y")
    # two groups: the correlation, but no interval
    assert result.agreement.kendall_tau_b.statistic == -1.0 and result.agreement.kendall_tau_b.low is None
    assert any("no interval from 2 groups" in note for note in result.agreement.notes)
    assert result.excluded == (("z", f"not graded: all 1 run(s) left out ({NOT_GRADED})"),)
    assert [(e.run_id, e.reason) for e in result.not_graded] == [("y3", NOT_GRADED), ("z1", NOT_GRADED)]
    assert result.group("y").without_process == ("y3",) and result.group("y").runs == ("y1", "y2")
    assert result.ungrouped == ("n1",)
    (flip,) = result.flips
    assert (flip.process_ahead, flip.outcome_ahead) == ("x", "y")
    # r2 never applied in x: it explains nothing; r1 is level; r3 applied on both sides and favours x
    assert [(r.rule_id, r.ahead, r.behind) for r in flip.rules] == [("r3", F(1), F(0))]
    assert result.group("x").outcome.without_task == ("x2",)
    data = result.to_dict()
    assert data["ungrouped"] == ["n1"] and data["not_graded"][0] == {"run": "y3", "reason": NOT_GRADED, "coverage": "0/3"}
    assert all("(none)" not in row["group"] for row in data["groups"])
    # --min-coverage: x's runs judged 2 of 3 rules, y's 3 of 3
    strict = compare(runs, "model", n_resamples=RESAMPLES, min_coverage=F(1))
    assert [row.group for row in strict.groups] == ["y"]
    assert [(e.run_id, e.reason.split(",")[0]) for e in strict.not_graded][:2] == [
        ("n1", "coverage 1/3 rules applicable"), ("x1", "coverage 2/3 rules applicable")]
    with pytest.raises(ValueError, match="unknown grouping field"):
        check_field("nonsense")
    assert check_field("labels.team") == "labels.team"


def test_cli_aliases_and_min_coverage(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'study.db'}"
    store = open_store(db, create=True)
    try:
        ingest_study(store, tmp_path / "study")
    finally:
        store.close()
    aliases = tmp_path / "aliases.yaml"
    aliases.write_text("model-a: alpha\nmodel-b: alpha\n", encoding="utf-8")
    done = cli("compare", "--by", "model", "--rules", str(V1), "--resamples", "50", "--aliases", str(aliases),
               "--allow-mixed",
               "--json", str(tmp_path / "c.json"), "--db", db)
    assert done.exit_code == 0, done.output
    import json

    data = json.loads((tmp_path / "c.json").read_text())
    assert [g["group"] for g in data["groups"]] == ["alpha", "model-c"] and data["groups"][0]["runs"] == 9
    # every study run judges 4 of the default set's rules: a threshold above that leaves every run out
    strict = cli("compare", "--by", "model", "--rules", str(V1), "--resamples", "50", "--min-coverage", "1/2",
                 "--json",
                 str(tmp_path / "s.json"), "--db", db)
    assert strict.exit_code == 0, strict.output
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["min_coverage"] == "1/2" and data["groups"] == [] and len(data["not_graded"]) == len(STUDY)
    assert "below --min-coverage 1/2" in strict.output
    for bad in ("2", "half", "-0.1"):
        refused = cli("compare", "--min-coverage", bad, "--db", db)
        assert refused.exit_code == 2 and "--min-coverage must be" in refused.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("- a\n", encoding="utf-8")
    refused = cli("compare", "--aliases", str(broken), "--db", db)
    assert refused.exit_code != 0 and "must be a mapping" in str(refused.exception or refused.output)
