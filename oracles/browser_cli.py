"""The browser-grading commands' output: ``procgrade grade-browser`` and the plan part of ``procgrade task validate``.

``engine/cli.py`` parses the options and calls these; each returns the exit code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from procgrade.engine.tables import Table

__all__ = ["run_grade_browser", "run_validate_plans", "grader_options"]


def grader_options(grader: str, base_url: str | None, model: str | None, screenshots: bool) -> dict[str, Any]:
    if grader != "agent":
        return {}
    return {"base_url": base_url, "model": model, "send_screenshots": screenshots}


def run_grade_browser(out: Console, err: Console, store: Any, db: str, task: Path, workspace: Path, run: str | None,
                      grader: str, evidence: Path | None, plans: list[str] | None,
                      options: dict[str, Any]) -> int:
    from procgrade.oracles.browser_grading import grade_browser
    from procgrade.oracles.evidence_store import evidence_dir_for

    evidence_dir = evidence or evidence_dir_for(db)

    def progress(plan_id: str, attempt: int, record: Any) -> None:
        state = "discarded" if record.discarded else ("passed" if record.passed else "failed")
        err.print(Text(f"{plan_id}: grade {attempt + 1} {state}"))

    verdict = grade_browser(store, task, workspace, run, grader=grader, evidence_dir=evidence_dir, plans=plans,
                            grader_options=options, progress=progress)
    grading = verdict.grading
    table = Table("plan", "verdict", "grades", "valid", "passes", "fails", "discarded", "why",
                  title=f"{verdict.run_id}: browser grading {verdict.check + 1} of task {grading.task.task_id} "
                        f"({grading.grader} grader)")
    for plan in grading.plans:
        v = plan.verdict
        style = {"passed": "green", "failed": "bold red", "no_grade": "yellow"}[v.result]
        table.add_row(plan.plan_id, Text(v.result.replace("_", " "), style=style), str(v.grades), str(v.valid),
                      str(v.passes), str(v.fails), str(v.discarded), v.reason)
    out.print(table)
    final = verdict.events[-1]
    out.print(Text(f"plans {grading.task.plans_sha256[:16]}  workspace {grading.workspace_sha256[:16]}  "
                   f"{len(verdict.events)} events appended  evidence in {evidence_dir}"))
    out.print(Text(f"{final.status}, reward {final.reward or 'none'}: {final.explanation}"))
    if grading.no_grade:
        out.print(Text(f"no grade (left out of both scores, listed for audit): {', '.join(grading.no_grade)}"))
    return 0 if final.reward == "1" else 1


def run_validate_plans(out: Console, err: Console, directory: Path, grader: str, grades: int, bug_grades: int,
                       options: dict[str, Any]) -> int:
    from procgrade.oracles.browser_graders import make_grader
    from procgrade.oracles.plan_validation import table4, validate_plans

    result = validate_plans(directory, make_grader(grader, **options), reference_grades=grades,
                            bug_grades=bug_grades)
    table = Table("Bug kind", "Passed", "Example",
                  title=f"task {result.task.task_id}: {len(result.task.plans)} plans, {len(result.bugs)} planted bugs, "
                        f"{result.grader} grader (plans {result.task.plans_sha256[:16]})")
    for row in table4(result):
        table.add_row(*row)
    out.print(table)
    out.print("Passed counts the grades that passed the plan aimed at a planted bug "
              f"({bug_grades} grades each); the last row, the reference build's grades ({grades} per plan).")
    for tally in result.reference:
        if not tally.ok:
            out.print(Text(f"reference build, plan {tally.plan_id}: {tally.failed} failed, {tally.discarded} "
                           f"discarded of {grades}: {tally.failures[0] if tally.failures else ''}"))
    for bug in result.bugs:
        if not bug.ok:
            out.print(Text(f"planted {bug.name} ({bug.kind}), plan {bug.plan_id}: {bug.passed} passed, "
                           f"{bug.discarded} discarded of {bug_grades}"
                           + (f": {bug.failures[0]}" if bug.discarded and bug.failures else "")))
    if not result.ok:
        err.print(f"procgrade: the plans of task {result.task.task_id} do not validate: {result.wrong_passes} wrong "
                  f"pass(es) on planted bugs, {result.wrong_fails} wrong fail(s) on the reference build", markup=False)
        return 1
    out.print(f"every planted bug's plan failed all {bug_grades} grades; the reference build passed every plan in "
              f"{grades} of {grades} grades")
    return 0
