"""ViBench 2.0's re-grade protocol, branch by branch, and how its verdicts enter the log and the outcome metrics.

The grades come from a scripted stand-in grader (no browser) on a real started product (a static page served
by ``python -m http.server`` from a fresh copy of its workspace): each grade is pass, fail, a grade whose quote
is not on the recorded screen (discarded: no on-screen evidence), one that broke a grader rule, or a grader
crash (both discarded). Every store test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from procgrade.engine.analysis.dataset import load_runs
from procgrade.engine.analysis.outcome_builds import outcome_builds
from procgrade.engine.analysis.outcome_metrics import pass_at_1, plan_pass_rate
from procgrade.engine.log_verification import verify_log
from procgrade.engine.store import EventStore
from procgrade.oracles.browser_graders import CheckRecord, GradeRecord, GraderRuleBroken, record_step
from procgrade.oracles.browser_grading import grade_browser, grade_task, replay_plan_verdicts
from procgrade.oracles.browser_plans import load_browser_task
from procgrade.oracles.evidence_store import EvidenceStore
from procgrade.oracles.regrade_protocol import MAX_DISCARDED, GradeVote, plan_verdict

PLAN = """id: {id}
title: The home page greets the visitor
steps:
  - title: Open the home page
    actions: [{{goto: /}}]
    checks:
      - says: The page says Hello
        text_visible: Hello
"""


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    root = tmp_path / "hello"
    (root / "plans").mkdir(parents=True)
    (root / "product.yaml").write_text('start: "{python} -m http.server {port} --bind 127.0.0.1"\n'
                                       "health_path: /index.html\nstart_timeout_sec: 20\n")
    for plan_id in ("greeting", "farewell"):
        (root / "plans" / f"{plan_id}.yaml").write_text(PLAN.format(id=plan_id))
    site = root / "builds" / "correct"
    site.mkdir(parents=True)
    (site / "index.html").write_text("<p>Hello</p>")
    return root


class FakeGrader:
    """Returns the scripted grade of each plan, in order: pass, fail, noevidence, rule, crash."""

    name = "scripted"

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = {plan: list(kinds) for plan, kinds in script.items()}
        self.made: list[tuple[str, str]] = []

    def grade(self, plan, session, evidence: EvidenceStore) -> GradeRecord:  # noqa: ANN001
        kind = self.script[plan.id].pop(0)
        self.made.append((plan.id, kind))
        if kind == "rule":
            raise GraderRuleBroken("step 1: a reload the plan does not allow")
        if kind == "crash":
            raise RuntimeError("the browser went away")

        class Obs:
            url = session.base_url + "/"
            text = "Hello"
            snapshot = '- paragraph: Hello'
            screenshot = b"\x89PNG fake " + kind.encode()

        quote = "Goodbye" if kind == "noevidence" else "Hello"
        check = CheckRecord("The page says Hello", kind != "fail", quote)
        step = record_step(evidence, 0, plan.steps[0], plan.users[0], ["open /"], [check], Obs())  # type: ignore[arg-type]
        return GradeRecord(self.name, kind != "fail", [step], failure="step 1: Hello is missing" if kind == "fail" else None)


def _grade(task_dir: Path, tmp_path: Path, script: dict[str, list[str]]):
    grader = FakeGrader(script)
    grading = grade_task(load_browser_task(task_dir), task_dir / "builds" / "correct", grader,  # type: ignore[arg-type]
                         EvidenceStore(tmp_path / "evidence"), plans=list(script), browser=object())
    return grading, grader


def test_a_plan_passing_its_first_grade_is_final(task_dir: Path, tmp_path: Path) -> None:
    grading, grader = _grade(task_dir, tmp_path, {"greeting": ["pass", "fail", "fail"]})
    verdict = grading.plans[0].verdict
    assert grader.made == [("greeting", "pass")]
    assert (verdict.result, verdict.grades, verdict.reason) == ("passed", 1, "passed its first grade (final)")


def test_a_failed_plan_is_regraded_until_three_grades_agree(task_dir: Path, tmp_path: Path) -> None:
    grading, grader = _grade(task_dir, tmp_path, {"greeting": ["fail", "pass", "fail", "fail", "pass"],
                                                  "farewell": ["fail", "pass", "fail", "pass", "pass", "fail"]})
    greeting, farewell = (p.verdict for p in grading.plans)
    assert (greeting.result, greeting.grades, greeting.fails, greeting.passes) == ("failed", 4, 3, 1)
    # A wrong fail on the first grade is outvoted: three of five valid grades pass.
    assert (farewell.result, farewell.grades, farewell.fails, farewell.passes) == ("passed", 5, 2, 3)
    assert [k for _, k in grader.made].count("pass") == 4 and len(grader.made) == 9


def test_discarded_grades_do_not_count_or_vote(task_dir: Path, tmp_path: Path) -> None:
    grading, _ = _grade(task_dir, tmp_path, {"greeting": ["fail", "noevidence", "rule", "fail", "crash", "fail"],
                                             "farewell": ["noevidence", "pass", "fail"]})
    greeting, farewell = grading.plans
    v = greeting.verdict
    assert (v.result, v.grades, v.valid, v.discarded, v.fails) == ("failed", 6, 3, 3, 3)
    reasons = [g.record.discarded for g in greeting.grades]
    assert reasons[0] is None and reasons[3] is None and reasons[5] is None
    assert reasons[1].startswith("no on-screen evidence: step 1: the check 'The page says Hello' quotes 'Goodbye'")
    assert reasons[2] == "grader rule broken: step 1: a reload the plan does not allow"
    assert reasons[4] == "grader error: RuntimeError: the browser went away"
    assert all(g.record.passed is None for g in greeting.grades if g.record.discarded)
    # The first *valid* grade passing is final, whatever was discarded before it.
    assert (farewell.verdict.result, farewell.verdict.grades, farewell.verdict.discarded) == ("passed", 2, 1)


def test_a_plan_whose_every_grade_is_discarded_has_no_grade(task_dir: Path, tmp_path: Path) -> None:
    grading, grader = _grade(task_dir, tmp_path, {"greeting": ["noevidence", "rule"] * 5})
    v = grading.plans[0].verdict
    assert (v.result, v.grades, v.valid, v.discarded) == ("no_grade", MAX_DISCARDED, 0, MAX_DISCARDED)
    assert grading.no_grade == ["greeting"] and len(grader.made) == MAX_DISCARDED


def test_verdict_rules_on_recorded_votes() -> None:
    P, F, D = GradeVote(True), GradeVote(False), GradeVote(None, "no evidence")
    assert plan_verdict([P]).result == "passed"
    assert plan_verdict([F, F, F]).result == "failed"
    assert plan_verdict([F, P, P, P]).result == "passed"
    assert plan_verdict([D, D]).result == "no_grade"
    # Retries for discarded grades ran out before three agreed: strict majority of the valid ones, a tie is no grade.
    assert plan_verdict([F, D, D, D, D, D]).result == "failed"
    assert plan_verdict([F, P, D, D, D, D, D]).result == "no_grade"


def test_no_grade_is_left_out_of_both_scores_and_listed(store: EventStore, task_dir: Path, tmp_path: Path) -> None:
    grader = FakeGrader({"farewell": ["noevidence"] * MAX_DISCARDED, "greeting": ["pass"]})
    verdict = grade_browser(store, task_dir, task_dir / "builds" / "correct", grader=grader,  # type: ignore[arg-type]
                            evidence_dir=tmp_path / "evidence", browser=object())
    kinds = [e.kind for e in verdict.events]
    assert kinds == ["run_started", "browser_grading_started", *["plan_grade"] * MAX_DISCARDED, "test_result",
                     "plan_grade", "test_result", "acceptance_verdict"]
    final = verdict.events[-1]
    assert (final.status, final.reward, final.passed, final.failed, final.skipped) == ("evaluated", "1", 1, 0, 1)
    assert final.details["no_grade"] == ["farewell"]
    results = {e.test_id: (e.outcome, e.message) for e in verdict.events if e.kind == "test_result"}
    assert results["farewell"] == ("skipped", f"no grade: no valid grade among {MAX_DISCARDED} (all discarded)")
    grades = [e for e in verdict.events if e.kind == "plan_grade"]
    assert all(g.passed is None and g.discarded.startswith("no on-screen evidence") for g in grades[:-1])
    assert grades[-1].passed is True and grades[-1].discarded is None and len(grades[-1].evidence) == 5
    assert [g.attempt for g in grades] == [0, 1, 2, 3, 4, 0]

    runs = outcome_builds(load_runs(store))
    (build,) = runs.builds
    assert build.no_grade_plans == ("farewell",) and build.plans_graded == 1 and build.passes is True
    assert pass_at_1(runs.builds) == 1 and plan_pass_rate(runs.builds) == 1
    assert verify_log(store, verdict.run_id).ok
    # The verdicts replay from the log alone.
    events = list(store.events(verdict.run_id))
    assert replay_plan_verdicts(events) == {"farewell": ("no_grade", "no_grade"), "greeting": ("passed", "passed")}
    # Every evidence digest names a stored file with those bytes.
    evidence = EvidenceStore(tmp_path / "evidence")
    for grade in grades:
        for digest in grade.evidence:
            assert hashlib.sha256(evidence.read(digest)).hexdigest() == digest


def test_a_second_grading_of_the_run_is_a_second_check(store: EventStore, task_dir: Path, tmp_path: Path) -> None:
    first = grade_browser(store, task_dir, task_dir / "builds" / "correct", grader=FakeGrader({"greeting": ["pass"]}),  # type: ignore[arg-type]
                          evidence_dir=tmp_path / "ev", plans=["greeting"], browser=object())
    second = grade_browser(store, task_dir, task_dir / "builds" / "correct", first.run_id,
                           grader=FakeGrader({"greeting": ["fail", "fail", "fail"]}),  # type: ignore[arg-type]
                           evidence_dir=tmp_path / "ev", plans=["greeting"], browser=object())
    assert (second.check, second.created_run) == (1, False)
    assert not {e.event_id for e in first.events} & {e.event_id for e in second.events}
    (build,) = outcome_builds(load_runs(store)).builds
    assert build.passes is False  # the latest check decides
    assert replay_plan_verdicts(list(store.events(first.run_id))) == {"greeting": ("failed", "failed")}


def test_a_failed_seed_fails_the_grade_and_is_recorded(task_dir: Path, tmp_path: Path) -> None:
    plans = task_dir / "plans"
    (plans / "seeds").mkdir()
    (plans / "seeds" / "data.json").write_text('{"users": ["alice"]}')
    (plans / "seeds" / "seed.py").write_text(
        "import json, os, sys, urllib.request\n"
        "data = json.load(open(os.path.join(os.environ['SEED_DIR'], 'seeds', 'data.json')))\n"
        "print('seeding', data['users'], 'at', sys.argv[1], os.environ['APP_URL'] == sys.argv[1])\n"
        "urllib.request.urlopen(sys.argv[1] + '/missing-signup-page')\n")
    text = (plans / "greeting.yaml").read_text()
    (plans / "greeting.yaml").write_text(text.replace("steps:", "seed: {script: seeds/seed.py, files: [seeds/data.json]}\nsteps:"))
    grading, grader = _grade(task_dir, tmp_path, {"greeting": ["pass"] * 3})
    outcome = grading.plans[0]
    assert grader.made == []  # the grader never ran: every grade failed at the seed
    assert (outcome.verdict.result, outcome.verdict.grades) == ("failed", 3)
    record = outcome.grades[0].record
    assert record.failure == "seeding failed: the seed script exited 1"
    assert (record.seed["status"], record.seed["exit_code"], record.seed["script"]) == ("failed", 1, "seeds/seed.py")
    log = EvidenceStore(tmp_path / "evidence").read(record.seed["log_sha256"])
    assert b"seeding ['alice'] at http://127.0.0.1:" in log and b"True" in log and b"HTTP Error 404" in log
    assert record.seed["log_sha256"] in record.evidence_digests()


def test_an_unknown_plan_is_a_located_error(task_dir: Path, tmp_path: Path) -> None:
    from procgrade.engine.errors import InputError

    with pytest.raises(InputError, match=r"plans: plan: no plan 'nope' \(plans: farewell, greeting\)"):
        _grade(task_dir, tmp_path, {"nope": ["pass"]})
