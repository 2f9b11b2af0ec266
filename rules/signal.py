"""Does a rule set carry signal on real runs? Applicability, dominance and outcome agreement.

For the stored runs of a store (imported real runs with an acceptance verdict), under a
rule set: per rule, the share of graded runs where it applies (fulfilled + violated > 0),
where it is violated, and where it is the *only* violated rule (it alone decides that the
score is below 1); the process score with the rule left out, and the AUC of the process
score for resolution with and without each rule. Then the mean process score of resolved
and unresolved runs, the AUC (scikit-learn's ``roc_auc_score``), and whether runs that
ended unfinished (gave up, budget exhausted, timed out, errored, or no claim by the model)
outscore finished runs of the same task; a run whose only act was the claim is neither (a
claim is not a finish) and is counted apart. Each rule's share of the score is reported
two ways: its mean share of the applicable weight (how much it can move a score) and its
share of all score lost (how much of the distance from 1 it decided). This is an analysis for people tuning rule sets:
scores are exact rationals; only the AUC and means are floats, for display.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from procgrade.engine.rescoring import compute_score
from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore
from procgrade.rules.identity import ruleset_hash
from procgrade.rules.model import RuleSet

__all__ = ["RunSignal", "RuleSignal", "SignalReport", "measure", "render"]

UNFINISHED = ("gave_up", "budget_exhausted", "timeout", "error", "aborted", "failed")


@dataclass(frozen=True)
class RunSignal:
    run_id: str
    task_id: str | None
    system: str | None
    resolved: bool | None
    ended: str | None
    claimed: bool
    score: Fraction | None
    rules: dict[str, tuple[int, int, int]]  # id -> (weight, fulfilled, violated)
    worked: bool = True  # the model read, edited, ran a command or a test (not only claimed)

    @property
    def unfinished(self) -> bool:
        return not self.claimed or self.ended in UNFINISHED

    @property
    def finished(self) -> bool:
        return not self.unfinished and self.worked

    @property
    def only_claimed(self) -> bool:
        return not self.unfinished and not self.worked


@dataclass
class RuleSignal:
    rule_id: str
    applies: int = 0
    violated: int = 0
    sole_violation: int = 0
    #: runs where at least one other rule also applied, and those where this rule was still the only violated one
    shared_runs: int = 0
    sole_violation_shared: int = 0
    weight_share: Fraction | None = None  # mean over the runs it applies to of weight / applicable weight
    lost_share: Fraction | None = None    # its part of all score lost (1 - score) over graded runs
    auc_without: float | None = None


@dataclass
class SignalReport:
    runs: list[RunSignal]
    rules: list[RuleSignal]
    graded: int = 0
    not_graded: int = 0
    mean_resolved: float | None = None
    mean_unresolved: float | None = None
    auc: float | None = None
    gave_up_mean: float | None = None
    finished_mean: float | None = None
    #: same-task (unfinished, finished) pairs, and those where the unfinished run scored higher
    pairs: int = 0
    pairs_unfinished_higher: int = 0
    only_claimed: int = 0
    only_claimed_mean: float | None = None
    notes: list[str] = field(default_factory=list)


def _score_without(run: RunSignal, left_out: str | None) -> Fraction | None:
    total, weights = Fraction(0), 0
    for rule_id, (weight, fulfilled, violated) in run.rules.items():
        if rule_id == left_out or fulfilled + violated == 0:
            continue
        total += weight * Fraction(fulfilled, fulfilled + violated)
        weights += weight
    return None if weights == 0 else total / weights


def _auc(runs: list[RunSignal], left_out: str | None = None) -> float | None:
    from sklearn.metrics import roc_auc_score

    pairs = [(run.resolved, _score_without(run, left_out)) for run in runs if run.resolved is not None]
    pairs = [(r, s) for r, s in pairs if s is not None]
    labels = [int(r) for r, _ in pairs]
    if len(set(labels)) < 2:
        return None
    return float(roc_auc_score(labels, [float(s) for _, s in pairs]))


def _mean(values: list[Fraction]) -> float | None:
    return float(sum(values, Fraction(0)) / len(values)) if values else None


WORK = ("file_read", "file_edit", "command", "test_run")


def _run_facts(store: EventStore, run_id: str) -> tuple[bool | None, str | None, bool, str | None, bool]:
    """(resolved, how it ended, claimed by the model, system label, the model worked) from the run's events."""
    resolved, ended, claimed, system, worked = None, None, False, None, False
    for event in store.events(run_id):
        kind = event.kind
        if kind == "run_started":
            system = (event.labels or {}).get("system")
        elif kind == "acceptance_verdict" and event.status == "evaluated":
            resolved = event.reward == "1"
        elif kind == "run_ended":
            ended = event.status
        elif kind == "completion_claim" and event.actor.split(":", 1)[0] in ("agent", "subagent"):
            claimed = True
        elif kind in WORK and event.actor.split(":", 1)[0] in ("agent", "subagent"):
            worked = True
    return resolved, ended, claimed, system, worked


def measure(store: EventStore, ruleset: RuleSet, run_ids: list[str] | None = None) -> SignalReport:
    digest = ruleset_hash(ruleset)
    runs: list[RunSignal] = []
    for info in store.runs():
        if run_ids is not None and info.run_id not in run_ids:
            continue
        document = compute_score(store, ruleset, info.run_id, digest=digest)
        resolved, ended, claimed, system, worked = _run_facts(store, info.run_id)
        rules = {r["id"]: (r["weight"], r["fulfilled"], r["violated"]) for r in document.body["rules"]}
        runs.append(RunSignal(info.run_id, info.task_id, system, resolved, ended, claimed, document.process_score,
                              rules, worked))
    graded = [run for run in runs if run.score is not None]
    report = SignalReport(runs, [RuleSignal(rule.id) for rule in ruleset.rules], len(graded),
                          len(runs) - len(graded))
    lost_total = sum((1 - run.score for run in graded), Fraction(0))
    for signal in report.rules:
        shares, lost = [], Fraction(0)
        for run in graded:
            weight, fulfilled, violated = run.rules[signal.rule_id]
            applicable = sum(w for w, f, v in run.rules.values() if f + v)
            if fulfilled + violated:
                signal.applies += 1
                shares.append(Fraction(weight, applicable))
                lost += Fraction(weight, applicable) * Fraction(violated, fulfilled + violated)
            shared = fulfilled + violated > 0 and any(f + v for rid, (_, f, v) in run.rules.items()
                                                       if rid != signal.rule_id)
            signal.shared_runs += shared
            if violated:
                signal.violated += 1
                if all(v == 0 for rid, (_, _, v) in run.rules.items() if rid != signal.rule_id):
                    signal.sole_violation += 1
                    signal.sole_violation_shared += shared
        signal.weight_share = sum(shares, Fraction(0)) / len(shares) if shares else None
        signal.lost_share = lost / lost_total if lost_total else None
        signal.auc_without = _auc(graded, signal.rule_id)
    with_outcome = [run for run in graded if run.resolved is not None]
    report.mean_resolved = _mean([run.score for run in with_outcome if run.resolved])
    report.mean_unresolved = _mean([run.score for run in with_outcome if not run.resolved])
    report.auc = _auc(graded)
    report.gave_up_mean = _mean([run.score for run in graded if run.unfinished])
    report.finished_mean = _mean([run.score for run in graded if run.finished])
    report.only_claimed = sum(1 for run in graded if run.only_claimed)
    report.only_claimed_mean = _mean([run.score for run in graded if run.only_claimed])
    by_task: dict[Any, list[RunSignal]] = {}
    for run in graded:
        by_task.setdefault(run.task_id, []).append(run)
    for task_runs in by_task.values():
        for unfinished in (r for r in task_runs if r.unfinished):
            for finished in (r for r in task_runs if r.finished):
                report.pairs += 1
                report.pairs_unfinished_higher += unfinished.score > finished.score
    return report


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _pct(value: Fraction | None) -> str:
    return "-" if value is None else f"{float(100 * value):.1f}%"


def render(store: EventStore, ruleset: RuleSet) -> list[Any]:
    """``procgrade rule-signal``: the report as rich renderables."""
    from procgrade.engine.tables import Table

    report = measure(store, ruleset)
    graded = max(report.graded, 1)
    table = Table("rule", "weight", "applies", "violated", "only violated rule",
                  "only violated, other rules applying", "weight share where it applies", "share of score lost",
                  "AUC without it",
                  title=f"rule set {ruleset.name} v{ruleset.version} on {report.graded} graded runs "
                        f"({report.not_graded} not graded: no model decisions)")
    for signal in report.rules:
        weight = next(rule.weight for rule in ruleset.rules if rule.id == signal.rule_id)
        table.add_row(signal.rule_id, str(weight), f"{signal.applies} ({100 * signal.applies // graded}%)",
                      str(signal.violated), f"{signal.sole_violation} ({100 * signal.sole_violation // graded}%)",
                      f"{signal.sole_violation_shared} of {signal.shared_runs}", _pct(signal.weight_share),
                      _pct(signal.lost_share), _fmt(signal.auc_without))
    applying = sum(1 for s in report.rules if s.applies)
    top = max(report.rules, key=lambda s: s.sole_violation)
    top_lost = max(report.rules, key=lambda s: s.lost_share or 0)
    lines: list[Any] = [table,
                        f"rules applying somewhere: {applying} of {len(report.rules)}; the rule most often the only "
                        f"one violated: {top.rule_id} in {top.sole_violation} of {report.graded} graded runs "
                        f"({top.sole_violation_shared} of the {top.shared_runs} where another rule also applied); "
                        f"the largest share of score lost: {top_lost.rule_id} {_pct(top_lost.lost_share)}",
                        f"mean process score: resolved {_fmt(report.mean_resolved)}, unresolved "
                        f"{_fmt(report.mean_unresolved)}; AUC for resolution {_fmt(report.auc)}",
                        f"unfinished runs (gave up, budget, timeout, error, or no claim by the model) mean "
                        f"{_fmt(report.gave_up_mean)} vs finished {_fmt(report.finished_mean)}; same-task pairs "
                        f"where the unfinished run scored higher: {report.pairs_unfinished_higher} of {report.pairs}; "
                        f"runs whose only act was a claim (neither): {report.only_claimed}, mean "
                        f"{_fmt(report.only_claimed_mean)}"]
    return lines
