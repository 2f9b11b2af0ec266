"""Browser grading of the final product: every plan of a task, each grade on a fresh product, the re-grade
protocol, and the outcome events.

Per grade (ViBench 2.0, Appendix C and Figure 3): start the product from a fresh copy of the workspace on an
empty database (:mod:`procgrade.oracles.product_server`), run the plan's seed script against it (a failed seed fails the
grade, with its log kept), and let the grader operate Chromium (:mod:`procgrade.oracles.browser_graders`). A product
that does not start fails the grade with its start log kept as evidence. A grade whose evidence is not on
screen, or whose grader broke a rule or crashed, is discarded. :mod:`procgrade.oracles.regrade_protocol` decides when
to grade again and the plan's verdict.

:func:`grade_browser` appends to one run, in one transaction: ``browser_grading_started``; per plan, one
``plan_grade`` per grade and the plan's verdict as a ``test_result`` (``passed``, ``failed``, or ``skipped``
for ``no grade``; group ``browser-plan``); and an ``acceptance_verdict`` of verifier ``procgrade-browser``
(reward 1 when at least one plan is graded and every graded plan passed; ``no_grade`` when none is). So
``procgrade outcomes`` and ``compare`` read pass@1 and plan pass rate per build, with no-grade plans left out
and listed, like any other outcome check. Evidence files go to the content-addressed evidence store beside the
database; :func:`replay_plan_verdicts` recomputes every plan's verdict from the log alone.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procgrade.engine.events import Event, PlanGrade, TestResult
from procgrade.oracles.browser_graders import (
    BrowserSession,
    Grader,
    GradeRecord,
    GraderRuleBroken,
    evidence_problem,
    launch_chromium,
    make_grader,
)
from procgrade.oracles.browser_plans import BrowserTask, Plan, load_browser_task
from procgrade.oracles.evidence_store import EvidenceStore
from procgrade.oracles.outcome_runs import OutcomeRun, append_outcome, outcome_event as _event, require_appendable
from procgrade.oracles.product_server import DEFAULT_POSTGRES, ProductDidNotStart, started_product
from procgrade.oracles.regrade_protocol import GradeVote, PlanVerdict, plan_verdict, run_protocol

__all__ = [
    "VERIFIER",
    "PlanOutcome",
    "BrowserGrading",
    "grade_plan",
    "grade_task",
    "grade_browser",
    "browser_events",
    "replay_plan_verdicts",
    "chromium",
]

VERIFIER = "procgrade-browser"
HARNESS = "procgrade-browser"
PLAN_GROUP = "browser-plan"
_LOG_LIMIT = 1_000_000


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class TimedGrade:
    record: GradeRecord
    started_at: str
    duration_ms: int

    def vote(self) -> GradeVote:
        return GradeVote(self.record.passed, self.record.discarded)


@dataclass(frozen=True)
class PlanOutcome:
    plan_id: str
    grades: list[TimedGrade]
    verdict: PlanVerdict


@dataclass(frozen=True)
class BrowserGrading:
    task: BrowserTask
    grader: str
    workspace_sha256: str
    started_at: str
    finished_at: str
    plans: list[PlanOutcome] = field(default_factory=list)

    @property
    def no_grade(self) -> list[str]:
        return [p.plan_id for p in self.plans if p.verdict.result == "no_grade"]


@contextmanager
def chromium() -> Iterator[Any]:
    """A running Debian Chromium through Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


def _run_seed(plan: Plan, plans_dir: Path, base_url: str, evidence: EvidenceStore) -> dict[str, Any]:
    """Run the plan's seed script against the started product; its log is kept as evidence."""
    assert plan.seed is not None
    with tempfile.TemporaryDirectory(prefix="procgrade-seed-") as tmp:
        folder = Path(tmp)
        for rel in (plan.seed.script, *plan.seed.files):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plans_dir / rel, folder / rel)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LANG": "C.UTF-8", "TZ": "UTC",
               "APP_URL": base_url, "SEED_DIR": tmp}
        try:
            done = subprocess.run([sys.executable, str(folder / plan.seed.script), base_url], cwd=folder, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=plan.seed.timeout_sec)
            log, code = done.stdout[:_LOG_LIMIT], done.returncode
            reason = None if code == 0 else f"the seed script exited {code}"
        except subprocess.TimeoutExpired as exc:
            log, code = (exc.stdout or b"")[:_LOG_LIMIT], None
            reason = f"the seed script did not finish within {plan.seed.timeout_sec}s"
    return {"script": plan.seed.script, "exit_code": code, "status": "passed" if reason is None else "failed",
            "log_sha256": evidence.put(log), **({"reason": reason} if reason else {})}


def grade_plan(task: BrowserTask, plan: Plan, workspace: Path, grader: Grader, browser: Any,
               evidence: EvidenceStore, *, postgres: str = DEFAULT_POSTGRES) -> TimedGrade:
    """One grade of ``plan``: a fresh product, the seed, the grader; never raises for the product's or the
    grader's faults (they fail or discard the grade)."""
    started_at, t0 = _now(), time.monotonic()
    record = _grade_plan(task, plan, workspace, grader, browser, evidence, postgres)
    if record.passed is not None and record.discarded is None and record.steps:
        problem = evidence_problem(record, evidence)
        if problem is not None:
            record.discarded, record.passed = f"no on-screen evidence: {problem}", None
    return TimedGrade(record, started_at, int((time.monotonic() - t0) * 1000))


def _grade_plan(task: BrowserTask, plan: Plan, workspace: Path, grader: Grader, browser: Any,
                evidence: EvidenceStore, postgres: str) -> GradeRecord:
    try:
        with started_product(task.product, workspace, postgres=postgres) as product:
            start = {"status": "started", "start_log_sha256": evidence.put(product.start_log())}
            seed = None
            if plan.seed is not None:
                seed = _run_seed(plan, task.plans_dir, product.base_url, evidence)
                if seed["status"] != "passed":
                    return GradeRecord(grader.name, False, failure=f"seeding failed: {seed['reason']}", seed=seed,
                                       product=start)
            session = BrowserSession(browser, product.base_url, plan.users)
            with session.opened():
                try:
                    record = grader.grade(plan, session, evidence)
                except GraderRuleBroken as exc:
                    kept = exc.record or GradeRecord(grader.name, None)
                    kept.passed, kept.failure, kept.discarded = None, None, f"grader rule broken: {exc}"
                    kept.seed, kept.product = seed, start
                    return kept
                except Exception as exc:  # noqa: BLE001 - a crashed grader is an infrastructure fault
                    return GradeRecord(grader.name, None, discarded=f"grader error: {type(exc).__name__}: "
                                       f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
                                       seed=seed, product=start)
            record.seed, record.product = seed, start
            return record
    except ProductDidNotStart as exc:
        product = {"status": "did_not_start", "reason": exc.reason, "start_log_sha256": evidence.put(exc.log)}
        return GradeRecord(grader.name, False, failure=f"the product did not start: {exc.reason}", product=product)


def grade_task(task: BrowserTask, workspace: str | Path, grader: Grader, evidence: EvidenceStore, *,
               plans: list[str] | None = None, browser: Any = None, postgres: str = DEFAULT_POSTGRES,
               progress: Callable[[str, int, GradeRecord], None] | None = None) -> BrowserGrading:
    """Grade every plan (or the named ones) of ``task`` on ``workspace`` under the re-grade protocol."""
    from procgrade.oracles.sandbox import hash_workspace

    workspace = Path(workspace).resolve()
    known = [p.id for p in task.plans]
    unknown = [p for p in plans or [] if p not in known]
    if unknown:
        from procgrade.engine.errors import InputError

        raise InputError(str(task.plans_dir), None, "plan", f"no plan {', '.join(map(repr, unknown))} "
                         f"(plans: {', '.join(known)})")
    chosen = [task.plan(p) for p in dict.fromkeys(plans)] if plans else list(task.plans)
    started_at = _now()
    outcomes: list[PlanOutcome] = []

    def grade_all(open_browser: Any) -> None:
        for plan in chosen:
            def once(attempt: int, plan: Plan = plan) -> TimedGrade:
                made = grade_plan(task, plan, workspace, grader, open_browser, evidence, postgres=postgres)
                if progress is not None:
                    progress(plan.id, attempt, made.record)
                return made

            grades, verdict = run_protocol(once, TimedGrade.vote)
            outcomes.append(PlanOutcome(plan.id, grades, verdict))

    if browser is None:
        with chromium() as opened:
            grade_all(opened)
    else:
        grade_all(browser)
    return BrowserGrading(task, grader.name, hash_workspace(workspace), started_at, _now(), outcomes)


# --- events -------------------------------------------------------------------------------------------------


def browser_events(run_id: str, first_seq: int, check: int, grading: BrowserGrading) -> list[Event]:
    """The events of one browser grading, from seq ``first_seq`` (``check`` counts earlier gradings of the run)."""
    events: list[Event] = []
    key = hashlib.sha256(f"{grading.task.plans_sha256}:{grading.workspace_sha256}:{grading.grader}".encode()).hexdigest()[:16]

    def add(kind: str, ts: str, **fields: Any) -> None:
        seq = first_seq + len(events)
        events.append(_event(kind, run_id=run_id, seq=seq, event_id=f"{run_id}@browser:{key}:{check}:{len(events)}"
                             if len(run_id) < 150 else f"sha256:{hashlib.sha256(f'{run_id}:{key}:{check}:{len(events)}'.encode()).hexdigest()}",
                             ts=ts, actor="grader" if grading.grader == "scripted" else f"grader:{grading.grader}",
                             parent_seq=None if seq == first_seq else first_seq, **fields))

    add("browser_grading_started", grading.started_at, task_id=grading.task.task_id,
        plans_sha256=grading.task.plans_sha256, grader=grading.grader, workspace_sha256=grading.workspace_sha256,
        plans=[p.plan_id for p in grading.plans])
    counts = {"passed": 0, "failed": 0, "no_grade": 0}
    starts: set[str] = set()
    for outcome in grading.plans:
        for attempt, grade in enumerate(outcome.grades):
            record = grade.record
            if record.product:
                starts.add(record.product["status"])
            add("plan_grade", grade.started_at, plan_id=outcome.plan_id, attempt=attempt, grader=record.grader,
                passed=record.passed, discarded=record.discarded, failure=record.failure, model=record.model,
                evidence=record.evidence_digests(), duration_ms=grade.duration_ms, details=record.as_details())
        verdict = outcome.verdict
        counts[verdict.result] += 1
        add("test_result", grading.finished_at, test_id=outcome.plan_id,
            outcome={"passed": "passed", "failed": "failed", "no_grade": "skipped"}[verdict.result],
            group=PLAN_GROUP, verifier=VERIFIER, message=f"{verdict.result.replace('_', ' ')}: {verdict.reason}")
    graded = counts["passed"] + counts["failed"]
    status = "evaluated" if graded else "no_grade"
    reward = None if not graded else ("1" if counts["failed"] == 0 else "0")
    explanation = (f"{counts['passed']} of {graded} graded plans passed" if graded else "no plan got a valid grade")
    if grading.no_grade:
        explanation += f"; no grade (left out, listed for audit): {', '.join(grading.no_grade)}"
    if starts == {"did_not_start"}:
        explanation += "; the product did not start"
    add("acceptance_verdict", grading.finished_at, verifier=VERIFIER, status=status, reward=reward,
        passed=counts["passed"], failed=counts["failed"], skipped=counts["no_grade"],
        explanation=explanation, details={"grader": grading.grader, "plans_sha256": grading.task.plans_sha256,
                                          "no_grade": grading.no_grade, "check": check,
                                          "product": sorted(starts)})
    return events


@dataclass(frozen=True)
class BrowserVerdict:
    run_id: str
    check: int
    created_run: bool
    events: list[Event]
    grading: BrowserGrading


def grade_browser(store: Any, task_dir: str | Path, workspace: str | Path, run_id: str | None = None, *,
                  grader: str | Grader = "scripted", evidence_dir: str | Path, plans: list[str] | None = None,
                  grader_options: dict[str, Any] | None = None, postgres: str = DEFAULT_POSTGRES,
                  progress: Callable[[str, int, GradeRecord], None] | None = None, browser: Any = None) -> BrowserVerdict:
    """Grade ``workspace`` with every plan of the task and append everything to run ``run_id`` in one
    transaction (default: an outcome-only run ``browser/<task>/<workspace sha256[:16]>``)."""
    task = load_browser_task(task_dir)
    if run_id is not None:
        require_appendable(store, run_id, "a browser grading")  # before spending a grading
    chosen = grader if not isinstance(grader, str) else make_grader(grader, **(grader_options or {}))
    grading = grade_task(task, workspace, chosen, EvidenceStore(evidence_dir), plans=plans, postgres=postgres,
                         progress=progress, browser=browser)
    appended = append_outcome(
        store, run_id, f"browser/{task.task_id}/{grading.workspace_sha256[:16]}", started_kind="browser_grading_started",
        build=lambda target, first_seq, check: browser_events(target, first_seq, check, grading),
        opening=OutcomeRun(HARNESS, task.task_id, "browser-only", grading.started_at), what="the browser grading")
    return BrowserVerdict(appended.run_id, appended.check, appended.created, appended.events, grading)


def replay_plan_verdicts(events: list[Event]) -> dict[str, tuple[str, str]]:
    """Every plan's verdict recomputed from the ``plan_grade`` events of a run's last browser grading, with the
    recorded verdict: ``{plan_id: (recomputed result, recorded result)}``. Needs no browser."""
    start = max((e.seq for e in events if e.kind == "browser_grading_started"), default=None)
    if start is None:
        return {}
    grades: dict[str, list[GradeVote]] = {}
    recorded: dict[str, str] = {}
    for event in events:
        if event.parent_seq != start:
            continue
        if isinstance(event, PlanGrade):
            grades.setdefault(event.plan_id, []).append(GradeVote(event.passed, event.discarded))
        elif isinstance(event, TestResult) and event.verifier == VERIFIER:
            recorded[event.test_id] = {"passed": "passed", "failed": "failed", "skipped": "no_grade"}[event.outcome]
    return {plan: (plan_verdict(votes).result, recorded.get(plan, "missing")) for plan, votes in grades.items()}
