"""ViBench 2.0's re-grade protocol for one test plan (Section 2.3, Appendix C, Figure 3).

* A plan that passes its first (valid) grade is final: it is not graded again.
* A plan that fails is re-graded until three grades agree, at most five valid grades in all (five valid
  grades always hold three that agree).
* A grade without on-screen evidence, or that broke a grader rule, is discarded: it does not count toward the
  five and does not vote. Discarded grades are retried, at most :data:`MAX_DISCARDED` times per plan.
* A plan with no valid grade is ``no_grade``: an infrastructure fault, not a defect of the build, left out of
  both scores and listed for audit.
* When the retries for discarded grades run out before three valid grades agree, the valid grades that exist
  decide by strict majority; a tie is ``no_grade`` (this case is not spelled out in the paper).

:func:`plan_verdict` is a pure function of the recorded grades, so re-scoring a graded run replays it from the
log without a browser; :func:`run_protocol` drives the grading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = ["AGREE", "MAX_VALID", "MAX_DISCARDED", "GradeVote", "PlanVerdict", "plan_verdict", "run_protocol", "needs_more"]

AGREE = 3
MAX_VALID = 5
MAX_DISCARDED = 5

G = TypeVar("G")


@dataclass(frozen=True)
class GradeVote:
    """What the protocol needs of one grade: its verdict (None when discarded) and why it was discarded."""

    passed: bool | None
    discarded: str | None = None

    @property
    def valid(self) -> bool:
        return self.discarded is None and self.passed is not None


@dataclass(frozen=True)
class PlanVerdict:
    result: Literal["passed", "failed", "no_grade"]
    grades: int
    valid: int
    passes: int
    fails: int
    discarded: int
    reason: str


def needs_more(votes: Sequence[GradeVote]) -> bool:
    """Whether the protocol grades the plan again after ``votes``."""
    valid = [v for v in votes if v.valid]
    discarded = len(votes) - len(valid)
    if valid and valid[0].passed:
        return False
    passes = sum(1 for v in valid if v.passed)
    fails = len(valid) - passes
    if passes >= AGREE or fails >= AGREE or len(valid) >= MAX_VALID:
        return False
    return discarded < MAX_DISCARDED


def plan_verdict(votes: Sequence[GradeVote]) -> PlanVerdict:
    """The plan's verdict from its grades in the order they were made."""
    valid = [v for v in votes if v.valid]
    passes = sum(1 for v in valid if v.passed)
    fails = len(valid) - passes
    counts = dict(grades=len(votes), valid=len(valid), passes=passes, fails=fails, discarded=len(votes) - len(valid))
    if not valid:
        return PlanVerdict("no_grade", **counts, reason=f"no valid grade among {len(votes)} (all discarded)")
    if valid[0].passed:
        return PlanVerdict("passed", **counts, reason="passed its first grade (final)")
    if fails >= AGREE:
        return PlanVerdict("failed", **counts, reason=f"{fails} of {len(valid)} valid grades fail")
    if passes >= AGREE:
        return PlanVerdict("passed", **counts, reason=f"failed its first grade, then {passes} of {len(valid)} "
                                                        "valid grades pass")
    if passes > fails:
        return PlanVerdict("passed", **counts, reason=f"retries ran out: {passes} of {len(valid)} valid grades pass")
    if fails > passes:
        return PlanVerdict("failed", **counts, reason=f"retries ran out: {fails} of {len(valid)} valid grades fail")
    return PlanVerdict("no_grade", **counts, reason=f"retries ran out with {passes} passing and {fails} failing "
                                                    "valid grades")


def run_protocol(grade: Callable[[int], G], vote: Callable[[G], GradeVote]) -> tuple[list[G], PlanVerdict]:
    """Grade (``grade(attempt)``, attempts from 0) until the protocol stops; the grades and the verdict."""
    grades: list[G] = []
    votes: list[GradeVote] = []
    while not votes or needs_more(votes):
        made = grade(len(grades))
        grades.append(made)
        votes.append(vote(made))
    return grades, plan_verdict(votes)
