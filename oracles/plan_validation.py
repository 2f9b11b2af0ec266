"""Validating a task's plans and grader the way ViBench 2.0 validated its grader (Appendix D, Tables 3 and 4).

* **Consistency and wrong fails.** The reference build (``builds/correct/``) is graded ``reference_grades``
  times per plan (single grades, no majority); every grade must pass. A failed grade is a wrong fail.
* **Planted bugs.** Each bug of ``planted/<name>/plant.yaml`` is planted, one at a time, in a copy of the
  reference build, and the plan aimed at it is graded ``bug_grades`` times; every grade must fail. A passed
  grade is a wrong pass.

A discarded grade (no on-screen evidence, a broken grader rule, a grader crash) is counted apart and also
fails the validation: the plan or the grader needs fixing. :func:`table4` prints the result like Table 4.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from procgrade.oracles.browser_graders import GradeRecord, Grader
from procgrade.oracles.browser_grading import chromium, grade_plan
from procgrade.oracles.browser_plans import BUG_KINDS, BrowserTask, apply_plant, load_browser_task
from procgrade.oracles.evidence_store import EvidenceStore
from procgrade.oracles.product_server import DEFAULT_POSTGRES

__all__ = ["GradeTally", "PlanTally", "BugTally", "PlanValidation", "validate_plans", "table4"]

KIND_NAMES = {"cent_off": "Cent off", "reverts": "Reverts", "dropped": "Dropped", "no_refusal": "No refusal",
              "timing": "Timing", "obvious": "Obvious", "two_users": "Two users"}


@dataclass(kw_only=True)
class GradeTally:
    """Counts of one plan's single grades, with why each grade that did not pass failed or was discarded."""

    passed: int = 0
    failed: int = 0
    discarded: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, record: GradeRecord) -> None:
        if record.discarded is not None:
            self.discarded += 1
            self.failures.append(f"discarded: {record.discarded}")
        elif record.passed:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(record.failure or "failed")


@dataclass
class PlanTally(GradeTally):
    """A plan graded on the reference build: every grade must pass."""

    plan_id: str

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.discarded == 0 and self.passed > 0


@dataclass
class BugTally(GradeTally):
    """The plan aimed at one planted bug, graded on the planted build: every grade must fail."""

    name: str
    kind: str
    plan_id: str
    description: str

    @property
    def ok(self) -> bool:
        return self.passed == 0 and self.discarded == 0 and self.failed > 0


@dataclass
class PlanValidation:
    task: BrowserTask
    grader: str
    reference_grades: int
    bug_grades: int
    reference: list[PlanTally]
    bugs: list[BugTally]

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.reference) and all(b.ok for b in self.bugs)

    @property
    def wrong_fails(self) -> int:
        return sum(t.failed for t in self.reference)

    @property
    def wrong_passes(self) -> int:
        return sum(b.passed for b in self.bugs)


def validate_plans(task_dir: str | Path, grader: Grader, *, reference_grades: int = 10, bug_grades: int = 3,
                   evidence_dir: str | Path | None = None, postgres: str = DEFAULT_POSTGRES,
                   progress: Callable[[str], None] | None = None) -> PlanValidation:
    """Grade the reference build ``reference_grades`` times per plan and each planted bug's plan ``bug_grades``
    times (see the module docstring)."""
    task = load_browser_task(task_dir)
    with tempfile.TemporaryDirectory(prefix="procgrade-validate-") as tmp:
        evidence = EvidenceStore(evidence_dir or Path(tmp) / "evidence")
        reference = [PlanTally(p.id) for p in task.plans]
        bugs = [BugTally(name, bug.kind, bug.plan, bug.description) for name, bug in task.planted]
        with chromium() as browser:
            for plan, tally in zip(task.plans, reference):
                for n in range(reference_grades):
                    tally.add(grade_plan(task, plan, task.reference_build, grader, browser, evidence,
                                   postgres=postgres).record)
                    if progress:
                        progress(f"reference {plan.id} grade {n + 1}/{reference_grades}")
            for (name, bug), tally in zip(task.planted, bugs):
                workspace = apply_plant(task.reference_build, bug, Path(tmp) / "planted" / name)
                plan = task.plan(bug.plan)
                for n in range(bug_grades):
                    tally.add(grade_plan(task, plan, workspace, grader, browser, evidence,
                                   postgres=postgres).record)
                    if progress:
                        progress(f"planted {name} ({plan.id}) grade {n + 1}/{bug_grades}")
    return PlanValidation(task, grader.name, reference_grades, bug_grades, reference, bugs)


def table4(result: PlanValidation) -> list[tuple[str, str, str]]:
    """Rows ``(bug kind, passed, example)`` like ViBench 2.0's Table 4, one per kind in Table 4's order, then a
    row for the reference build (its failed grades are wrong fails)."""
    rows: list[tuple[str, str, str]] = []
    for kind in BUG_KINDS:
        tallies = [b for b in result.bugs if b.kind == kind]
        if not tallies:
            continue
        passed = sum(b.passed for b in tallies)
        valid = sum(b.passed + b.failed for b in tallies)
        discarded = sum(b.discarded for b in tallies)
        example = "; ".join(b.description for b in tallies)
        rows.append((KIND_NAMES[kind], f"{passed}/{valid}" + (f" ({discarded} discarded)" if discarded else ""), example))
    graded = sum(t.passed + t.failed for t in result.reference)
    discarded = sum(t.discarded for t in result.reference)
    every = all(t.passed == result.reference_grades for t in result.reference)
    rows.append(("Correct build", f"{sum(t.passed for t in result.reference)}/{graded}"
                 + (f" ({discarded} discarded)" if discarded else ""),
                 f"{len(result.reference)} plans x {result.reference_grades} grades; wrong fails "
                 f"{result.wrong_fails}; " + ("every plan passed every grade" if every else
                                              "NOT every plan passed every grade")))
    return rows
