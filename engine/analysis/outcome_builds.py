"""Stored outcomes as outcome-metric builds: one :class:`~procgrade.engine.analysis.outcome_metrics.Build` per judged run.

:mod:`procgrade.engine.analysis.outcome_metrics` computes pass@1, plan pass rates and their intervals over plain
:class:`Build` values; this module makes them from :class:`~procgrade.engine.analysis.dataset.RunView` records.

* **Product.** A run's ``task_id``; a run without one is its own product (product = its run id), and is
  listed as such (``without_task``): it cannot share a product with another build.
* **Plans.** The ``test_result`` events of the run's *last* acceptance check (the latest check decides, as
  for :attr:`RunView.verdict`), one plan per ``test_id``: ``passed`` -> passed, ``failed`` and ``error`` ->
  failed, ``skipped`` -> no grade. A test id reported twice in one check counts once (failed if any report
  failed, else passed if any passed, else no grade). When the verdict has no per-test results, the verdict
  itself is the one plan ``verdict``: evaluated with reward 1 -> passed, evaluated with any other reward ->
  failed, ``timeout`` / ``rejected`` / ``not_submitted`` -> failed, ``infra_error`` / ``no_grade`` -> no
  grade (left out of both scores and listed, ViBench 2.0 Appendix C).
* A check whose verdict is ``infra_error`` or ``no_grade`` grades nothing, so any tests it reported are no
  grade too. A ``timeout``, ``rejected`` or ``not_submitted`` product fails whatever its tests say: the
  verdict is added as one more failed plan ``verdict``; so is an ``evaluated`` verdict below 1 whose tests
  show no failure (skipped tests, a tampered report, a runner the submission broke: the verifier decides).
* **Which tests belong to the last check.** procgrade's acceptance oracle links a check's tests and its
  verdict to the check's ``acceptance_started`` through ``parent_seq``: those tests, when any. Importers write
  the verdict first and its tests right after it, with no parent: the parentless tests after the last verdict,
  else the parentless ones between the previous verdict and the last. Tests naming a different verifier than
  the verdict are not its tests.
* **Unjudged.** A run with no verdict has no build: it is listed (``unjudged``), never scored as a failure.
* **Cost and duration** come from the run's labels when the importer recorded them (``cost``, ``cost_usd``,
  ``total_cost``, ``accumulated_cost``; ``duration_s``, ``duration``, ``accumulated_time``, ``elapsed_s``;
  the first present wins); exact decimals (:func:`procgrade.engine.exact.decimal_text`), else ``None``.
* **Settings** (for the mixed-settings guard): the harness name and version and the run's ``model_settings``
  (importers keep run statistics such as cost and tokens in labels, not there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from procgrade.engine.analysis.dataset import RunView
from procgrade.engine.analysis.outcome_metrics import Build, PlanResult
from procgrade.engine.events import AcceptanceVerdict, TestResult
from procgrade.engine.exact import decimal_text

__all__ = [
    "COST_LABELS",
    "DURATION_LABELS",
    "VERDICT_PLAN",
    "OutcomeBuilds",
    "RunOutcome",
    "last_check_tests",
    "outcome_builds",
    "run_cost",
    "run_duration",
    "run_outcome",
    "run_settings",
]

#: The plan id of a verdict that stands for the whole check.
VERDICT_PLAN = "verdict"

#: Label keys holding a run's cost (USD) and duration (seconds), in order of preference.
COST_LABELS = ("cost", "cost_usd", "total_cost", "accumulated_cost")
DURATION_LABELS = ("duration_s", "duration", "accumulated_time", "elapsed_s")

_TEST_RESULT = {"passed": PlanResult.PASSED, "failed": PlanResult.FAILED, "error": PlanResult.FAILED,
                "skipped": PlanResult.NO_GRADE}
_UNGRADED_STATUSES = frozenset({"infra_error", "no_grade"})
_FAILED_STATUSES = frozenset({"timeout", "rejected", "not_submitted"})
_MERGE_ORDER = {PlanResult.FAILED: 0, PlanResult.PASSED: 1, PlanResult.NO_GRADE: 2}


@dataclass(frozen=True)
class RunOutcome:
    """How one run enters the outcome metrics."""

    run_id: str
    product: str
    #: ``task_id``, or ``run_id`` when the run has no task (it is then its own product).
    product_from: Literal["task_id", "run_id"]
    #: The run's build, or None when it is unjudged (no verdict).
    build: Build | None
    verdict_status: str | None
    verdict_reward: str | None
    #: Where the plans came from: the last check's ``tests``, or the ``verdict`` alone; None when unjudged.
    plan_source: Literal["tests", "verdict"] | None
    notes: tuple[str, ...] = ()

    @property
    def judged(self) -> bool:
        return self.build is not None


@dataclass(frozen=True)
class OutcomeBuilds:
    """The builds of a set of runs, and what was left out, all in run-id order."""

    runs: tuple[RunOutcome, ...]

    @property
    def builds(self) -> tuple[Build, ...]:
        return tuple(r.build for r in self.runs if r.build is not None)

    @property
    def unjudged(self) -> tuple[str, ...]:
        """Runs with no verdict: not scored, listed."""
        return tuple(r.run_id for r in self.runs if r.build is None)

    @property
    def without_task(self) -> tuple[str, ...]:
        """Judged runs with no task id: each is its own product."""
        return tuple(r.run_id for r in self.runs if r.build is not None and r.product_from == "run_id")


def outcome_builds(runs: Iterable[RunView]) -> OutcomeBuilds:
    """Every run's :class:`RunOutcome` (judged runs carry their :class:`Build`), sorted by run id."""
    return OutcomeBuilds(tuple(run_outcome(run) for run in sorted(runs, key=lambda r: r.run_id)))


def run_outcome(run: RunView) -> RunOutcome:
    """One run as a build of its product (see the module docstring for every rule)."""
    product, product_from = (run.task_id, "task_id") if run.task_id else (run.run_id, "run_id")
    verdict = run.verdict
    if verdict is None:
        return RunOutcome(run.run_id, product, product_from, None, None, None, None)  # type: ignore[arg-type]
    notes: list[str] = []
    tests = last_check_tests(run)
    plans: dict[str, PlanResult] = {}
    for test in tests:
        result = _TEST_RESULT[test.outcome]
        if test.test_id in plans:
            result = min(plans[test.test_id], result, key=_MERGE_ORDER.__getitem__)
        plans[test.test_id] = result
    if len(plans) < len(tests):
        notes.append(f"{len(tests) - len(plans)} test id(s) reported twice in the last check, counted once")
    source: Literal["tests", "verdict"] = "tests" if plans else "verdict"
    status = verdict.status
    if status in _UNGRADED_STATUSES:
        if plans:
            notes.append(f"verdict {status}: the check's {len(plans)} test result(s) grade nothing")
            plans = {plan: PlanResult.NO_GRADE for plan in plans}
        else:
            plans = {VERDICT_PLAN: PlanResult.NO_GRADE}
    elif not plans:
        plans = {VERDICT_PLAN: _verdict_result(verdict)}
    else:
        if status in _FAILED_STATUSES:
            notes.append(f"verdict {status}: the product fails whatever its tests say (plan {VERDICT_PLAN!r} failed)")
            plans[VERDICT_PLAN if VERDICT_PLAN not in plans else f"{VERDICT_PLAN}:{status}"] = PlanResult.FAILED
        elif status == "evaluated":
            every_test_passes = all(r is not PlanResult.FAILED for r in plans.values())
            if every_test_passes and not _accepted(verdict):
                # The verifier refused what no single test shows: skipped tests, a tampered report,
                # a runner the submission broke. Its verdict stands.
                notes.append(f"verdict reward {verdict.reward} although no graded test failed: "
                             f"the verdict decides (plan {VERDICT_PLAN!r} failed)")
                plans[VERDICT_PLAN if VERDICT_PLAN not in plans else f"{VERDICT_PLAN}:{status}"] = PlanResult.FAILED
            elif _accepted(verdict) and not every_test_passes:
                notes.append(f"verdict reward {verdict.reward} but a test failed: the failing test decides")
    cost, cost_note = run_cost(run)
    duration, duration_note = run_duration(run)
    notes.extend(n for n in (cost_note, duration_note) if n)
    build = Build(product, run.run_id, tuple(sorted(plans.items())), cost=cost, duration_s=duration,
                  settings=run_settings(run))
    return RunOutcome(run.run_id, product, product_from, build, status, verdict.reward,  # type: ignore[arg-type]
                      source, tuple(notes))


def last_check_tests(run: RunView) -> tuple[TestResult, ...]:
    """The ``test_result`` events of the run's last acceptance check, in seq order (see the module docstring)."""
    verdict = run.verdict
    if verdict is None:
        return ()
    tests = run.test_results
    if verdict.parent_seq is not None:
        linked = tuple(t for t in tests if t.parent_seq == verdict.parent_seq)
        if linked:
            return linked

    def ours(test: TestResult) -> bool:
        return test.parent_seq is None and (test.verifier is None or test.verifier == verdict.verifier)

    after = tuple(t for t in tests if t.seq > verdict.seq and ours(t))
    if after:
        return after
    previous = run.verdicts[-2].seq if len(run.verdicts) > 1 else -1
    return tuple(t for t in tests if previous < t.seq < verdict.seq and ours(t))


def run_settings(run: RunView) -> dict[str, Any]:
    """The run's settings for the mixed-settings guard: harness, harness version and model settings."""
    settings: dict[str, Any] = {"harness": run.harness, "harness_version": run.harness_version}
    model_settings = dict(sorted(run.settings.items()))
    if model_settings:
        settings["model_settings"] = model_settings
    return settings


def run_cost(run: RunView) -> tuple[Fraction | None, str | None]:
    """The run's recorded cost (exact) and a note when a recorded value could not be used."""
    for key in COST_LABELS:
        if key in run.labels:
            return _exact(run.labels[key], f"label {key}")
    return None, None


def run_duration(run: RunView) -> tuple[Fraction | None, str | None]:
    """The run's recorded duration in seconds (exact) and a note when a recorded value could not be used."""
    for key in DURATION_LABELS:
        if key in run.labels:
            return _exact(run.labels[key], f"label {key}")
    return None, None


def _exact(value: Any, where: str) -> tuple[Fraction | None, str | None]:
    try:
        exact = Fraction(decimal_text(value))
    except (ValueError, TypeError):
        return None, f"{where} is not a number ({value!r}): not counted"
    if exact < 0:
        return None, f"{where} is negative ({value!r}): not counted"
    return exact, None


def _verdict_result(verdict: AcceptanceVerdict) -> PlanResult:
    if verdict.status == "evaluated":
        return PlanResult.PASSED if _accepted(verdict) else PlanResult.FAILED
    if verdict.status in _FAILED_STATUSES:
        return PlanResult.FAILED
    return PlanResult.NO_GRADE


def _accepted(verdict: AcceptanceVerdict) -> bool:
    """An evaluated verdict with reward exactly 1."""
    return verdict.status == "evaluated" and verdict.reward is not None and Fraction(verdict.reward) == 1
