"""Process versus outcome: per group of runs (by model, harness, or any provenance field), the process score
from the rules and the outcome metrics side by side, their rankings, how well the rankings agree, and the
rank flips with the rules that drive them.

* **Groups** are the values of one provenance field (:func:`procgrade.engine.analysis.dataset.group_key`; ``model``
  through :mod:`procgrade.engine.analysis.model_identity`, so ``openai/gpt-4o`` and ``gpt-4o-2024-05-13`` are one
  group), sorted; runs within a group sorted by run id. A run without the field is never a group: it is
  listed apart (``ungrouped``).
* **Graded runs only** (:mod:`procgrade.engine.analysis.graded_runs`): a run with no process score ("not graded: no
  model decisions"), or below ``min_coverage``, is left out of the comparison, process and outcome side
  alike (both rankings are over the same runs), and listed with its reason. ``procgrade outcomes`` gives
  the outcome metrics of every run.
* **Settings.** Runs whose settings (:func:`procgrade.engine.analysis.outcome_builds.run_settings`: harness, harness
  version, model settings) differ within a group are not pooled: :class:`MixedGroupSettingsError` names
  every differing key with its values and runs, unless ``allow_mixed``, and then each group says which keys
  differ.
* **Process score** of a group: the exact mean of its graded runs' process totals. Per rule, the mean over
  the runs the rule applied to.
* **Outcome** of a group: :func:`procgrade.engine.analysis.outcome_metrics.summarize` over its judged runs' builds
  (:mod:`procgrade.engine.analysis.outcome_builds`): pass@1, plan pass rate, ViBench 2.0 intervals, no-grade plans,
  ungraded builds; unjudged runs are listed. The outcome ranking uses pass@1.
* **Rankings** (rank 1 = best, ties share the mean rank) over the groups that have both scores; groups
  missing either are listed with the reason.
* **Rank agreement** (Spearman rho and Kendall tau-b with seeded bootstrap intervals,
  :mod:`procgrade.engine.analysis.rankings`): when the ranked groups share two or more tasks on which each has both
  scores (a task grid; tasks not shared by every group are left out of it and named),
  :func:`rank_agreement_over_tasks` resamples the tasks (the right bootstrap for a handful of groups);
  otherwise :func:`rank_agreement` resamples the groups. The result says which, and why. With fewer than
  three groups there is no interval (two items are always perfectly concordant or discordant).
* **Rank flips**: pairs ordered one way by the process score and the other by pass@1 (ties are no flips).
  For a flip where A is ahead by process and B by outcome, the rules driving it are the (at most three)
  rules applied in both groups whose mean score is higher in A than in B, largest gap first, with both
  means, exactly. A rule that did not apply on one side explains nothing and is never named.

Everything is deterministic: sorted groups, runs, rules and flips; a fixed bootstrap seed.
:meth:`Comparison.to_dict` is plain data for canonical JSON (exact rationals as ``"num/den"`` strings with
a rounded display next to them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from procgrade.engine.analysis.dataset import GROUPING_FIELDS, RunView, check_field, group_key
from procgrade.engine.analysis.graded_runs import LeftOut, coverage_text, select_graded
from procgrade.engine.analysis.outcome_builds import RunOutcome, outcome_builds, run_settings
from procgrade.engine.analysis.outcome_metrics import (
    Build,
    Interval,
    MixedSettingsError,
    OutcomeSummary,
    check_settings,
    pass_hat_k_from_counts,
    settings_differences,
    summarize,
)
from procgrade.engine.analysis.rankings import (
    RankAgreement,
    rank_agreement,
    rank_agreement_over_tasks,
    rank_flips,
    ranks,
)
from procgrade.engine.scoring import display

__all__ = [
    "runs_text",
    "DEFAULT_RESAMPLES",
    "FORMAT",
    "OUTCOME_FORMAT",
    "OUTCOME_METRIC",
    "TOP_RULES",
    "Comparison",
    "Flip",
    "GroupComparison",
    "GroupOutcome",
    "MixedGroupSettingsError",
    "RuleGap",
    "check_field",
    "compare",
    "exact_text",
    "group_outcomes",
]

FORMAT = "procgrade.compare/1"
OUTCOME_FORMAT = "procgrade.outcomes/1"
DEFAULT_RESAMPLES = 9999
#: How many rules are named per rank flip.
TOP_RULES = 3
#: The outcome metric the outcome ranking uses.
OUTCOME_METRIC = "pass@1"


class MixedGroupSettingsError(MixedSettingsError):
    """Runs with different settings would be pooled in a group. ``groups`` maps each such group to its
    differences (``{flattened key: {value as canonical JSON (or <absent>): run ids}}``); ``keys`` are every
    differing key, sorted; ``differences`` merges the groups' differences."""

    def __init__(self, by: str, groups: Mapping[str, Mapping[str, Mapping[str, tuple[str, ...]]]]) -> None:
        self.by = by
        self.groups = {g: {k: dict(v) for k, v in d.items()} for g, d in groups.items()}
        merged: dict[str, dict[str, tuple[str, ...]]] = {}
        for differences in self.groups.values():
            for key, by_value in differences.items():
                slot = merged.setdefault(key, {})
                for value, ids in by_value.items():
                    slot[value] = slot.get(value, ()) + tuple(ids)
        self.differences = {key: merged[key] for key in sorted(merged)}
        self.keys = tuple(sorted(merged))
        lines = [f"  {by} {group}: {key}: " + "; ".join(f"{value} in {runs_text(ids)}" for value, ids in by_value.items())
                 for group, differences in self.groups.items() for key, by_value in differences.items()]
        Exception.__init__(
            self,
            "refusing to pool runs whose settings differ within a group (allowing mixed settings pools them "
            "anyway and reports which differ):\n" + "\n".join(lines),
        )


# --------------------------------------------------------------------------------------------
# Outcomes per group


@dataclass(frozen=True)
class GroupOutcome:
    """The outcome metrics of one group of runs."""

    group: str
    runs: tuple[str, ...]
    outcomes: tuple[RunOutcome, ...]
    #: None when no run of the group has a graded plan (``note`` says so).
    summary: OutcomeSummary | None
    note: str | None
    #: Flattened settings every run of the group shares.
    settings: Mapping[str, Any] = field(hash=False)
    #: Flattened settings keys whose values differ within the group (only with ``allow_mixed``).
    mixed_settings: Mapping[str, Mapping[str, tuple[str, ...]]] = field(hash=False)

    @property
    def builds(self) -> tuple[Build, ...]:
        return tuple(o.build for o in self.outcomes if o.build is not None)

    @property
    def unjudged(self) -> tuple[str, ...]:
        return tuple(o.run_id for o in self.outcomes if o.build is None)

    @property
    def without_task(self) -> tuple[str, ...]:
        """Judged runs with no task id: each is its own product."""
        return tuple(o.run_id for o in self.outcomes if o.build is not None and o.product_from == "run_id")

    @property
    def pass_at_1(self) -> Fraction | None:
        return None if self.summary is None else self.summary.pass_at_1

    def pass_hat_k(self, k: int) -> Fraction | None:
        """pass^k over the scored builds, or None when a product has fewer than k of them (or none is scored)."""
        if self.summary is None or any(p.builds < k for p in self.summary.products):
            return None
        return pass_hat_k_from_counts({p.product: (p.passing, p.builds) for p in self.summary.products}, k)

    def to_dict(self, k: int | None = None) -> dict[str, Any]:
        summary = self.summary
        data: dict[str, Any] = {
            "group": self.group,
            "runs": list(self.runs),
            "judged": [o.run_id for o in self.outcomes if o.build is not None],
            "unjudged": list(self.unjudged),
            "without_task": list(self.without_task),
            "settings": dict(self.settings),
            "mixed_settings": {key: {v: list(ids) for v, ids in by_value.items()}
                               for key, by_value in self.mixed_settings.items()},
            "note": self.note,
            "run_notes": {o.run_id: list(o.notes) for o in self.outcomes if o.notes},
            "builds": [{"run": o.run_id, "product": o.product, "product_from": o.product_from,
                        "verdict": o.verdict_status, "reward": o.verdict_reward, "plans_from": o.plan_source,
                        "plans": {p.plan_id: p.result.value for p in o.build.plans}}
                       for o in self.outcomes if o.build is not None],
        }
        if summary is None:
            data["summary"] = None
            return data
        data["summary"] = {
            "builds_scored": summary.builds,
            "products": [{"product": p.product, "builds": list(p.build_ids), "pass_at_1": exact_text(p.pass_at_1),
                          "plan_pass_rate": exact_text(p.plan_pass_rate), "plans_passed": p.plans_passed,
                          "plans_graded": p.plans_graded} for p in summary.products],
            "pass_at_1": exact_text(summary.pass_at_1),
            "pass_at_1_interval": _interval(summary.pass_at_1_interval),
            "plan_pass_rate": exact_text(summary.plan_pass_rate),
            "plan_pass_interval": _interval(summary.plan_pass_interval),
            "interval_note": summary.interval_note,
            "no_grade": [{"product": n.product, "run": n.build_id, "plan": n.plan_id} for n in summary.no_grade],
            "ungraded_builds": [{"product": p, "run": b} for p, b in summary.ungraded_builds],
            "cost_mean": exact_text(summary.cost_mean),
            "duration_mean_s": exact_text(summary.duration_mean_s),
            "missing_cost": list(summary.missing_cost),
            "missing_duration": list(summary.missing_duration),
        }
        if k is not None:
            data["summary"][f"pass^{k}"] = exact_text(self.pass_hat_k(k))
        return data


def group_outcomes(runs: Iterable[RunView], by: str, *, allow_mixed: bool = False,
                   confidence: float = 0.95, identity: Any = None) -> tuple[GroupOutcome, ...]:
    """The outcome metrics of each group of runs, groups sorted (runs without a value for ``by`` are in no
    group). Raises :class:`MixedGroupSettingsError` when runs of a group differ in settings, unless
    ``allow_mixed``."""
    grouped = _grouped(runs, by, identity)
    differences = {g: settings_differences(_settings_builds(members)) for g, members in grouped.items()}
    mixed = {g: d for g, d in differences.items() if d}
    if mixed and not allow_mixed:
        raise MixedGroupSettingsError(by, mixed)
    result = []
    for group, members in grouped.items():
        outcomes = outcome_builds(members).runs
        builds = [o.build for o in outcomes if o.build is not None]
        summary, note = None, None
        if not builds:
            note = "no run of the group has a verdict"
        else:
            try:
                summary = summarize(builds, allow_mixed=True, confidence=confidence)
            except ValueError as error:
                note = str(error)
        result.append(GroupOutcome(
            group=group, runs=tuple(r.run_id for r in members), outcomes=outcomes, summary=summary, note=note,
            settings=check_settings(_settings_builds(members), allow_mixed=True), mixed_settings=differences[group],
        ))
    return tuple(result)


# --------------------------------------------------------------------------------------------
# Process versus outcome


@dataclass(frozen=True)
class RuleGap:
    """One rule's mean score in the group ahead by process (``ahead``) and in the group ahead by outcome
    (``behind``); the rule applied in both."""

    rule_id: str
    ahead: Fraction
    behind: Fraction

    @property
    def gap(self) -> Fraction:
        return self.ahead - self.behind


@dataclass(frozen=True)
class Flip:
    """``process_ahead`` beats ``outcome_ahead`` on the process score and loses to it on pass@1;
    ``rules`` are the rules that put it ahead on process (largest gap first)."""

    process_ahead: str
    outcome_ahead: str
    process: tuple[Fraction, Fraction]  # (process_ahead, outcome_ahead)
    outcome: tuple[Fraction, Fraction]  # (process_ahead, outcome_ahead)
    rules: tuple[RuleGap, ...]


@dataclass(frozen=True)
class GroupComparison:
    group: str
    outcome: GroupOutcome
    #: Exact mean of the process totals of ``process_runs``; None when no run has one.
    process_score: Fraction | None
    process_runs: tuple[str, ...]
    #: Runs of the group left out as not graded (no process score, or below the coverage threshold).
    without_process: tuple[str, ...]
    #: Per rule applied to at least one run: its mean score over those runs.
    rule_means: Mapping[str, Fraction] = field(hash=False)
    process_rank: float | None = None
    outcome_rank: float | None = None

    @property
    def runs(self) -> tuple[str, ...]:
        return self.outcome.runs

    @property
    def outcome_score(self) -> Fraction | None:
        return self.outcome.pass_at_1


@dataclass(frozen=True)
class Comparison:
    by: str
    ruleset_name: str | None
    ruleset_version: int | str | None
    ruleset_hash: str | None
    groups: tuple[GroupComparison, ...]
    #: Groups with both scores, sorted: the ones ranked and correlated.
    ranked: tuple[str, ...]
    #: (group, why it is not ranked).
    excluded: tuple[tuple[str, str], ...]
    agreement: RankAgreement | None
    #: ``tasks`` (task bootstrap over a complete task grid), ``groups`` (bootstrap over groups), or None.
    agreement_over: Literal["tasks", "groups"] | None
    agreement_note: str
    #: The task grid when ``agreement_over == "tasks"``.
    tasks: tuple[str, ...]
    flips: tuple[Flip, ...]
    allow_mixed: bool
    seed: int
    n_resamples: int
    confidence: float
    outcome_metric: str = OUTCOME_METRIC
    #: Runs left out of the comparison (not graded, below the coverage threshold), with the reason.
    not_graded: tuple[LeftOut, ...] = ()
    #: Graded runs with no value for ``by``: no group, listed apart.
    ungrouped: tuple[str, ...] = ()
    min_coverage: Fraction | None = None

    def group(self, name: str) -> GroupComparison:
        for row in self.groups:
            if row.group == name:
                return row
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for canonical JSON: exact rationals as ``{"exact": "num/den", "display": "0.1234"}``,
        floats (correlations, interval bounds) at full precision, everything sorted."""
        agreement = None
        if self.agreement is not None:
            agreement = self.agreement.to_dict()
        return {
            "format": FORMAT,
            "by": self.by,
            "ruleset": {"name": self.ruleset_name, "version": self.ruleset_version, "hash": self.ruleset_hash},
            "outcome_metric": self.outcome_metric,
            "allow_mixed": self.allow_mixed,
            "groups": [{
                "group": row.group,
                "runs": len(row.runs),
                "process": {
                    "score": exact_text(row.process_score),
                    "rank": row.process_rank,
                    "runs_scored": list(row.process_runs),
                    "without_process_score": list(row.without_process),
                    "rule_means": {rule: exact_text(mean) for rule, mean in sorted(row.rule_means.items())},
                },
                "outcome_rank": row.outcome_rank,
                "outcome": row.outcome.to_dict(),
            } for row in self.groups],
            "ranked": list(self.ranked),
            "excluded": [{"group": g, "reason": why} for g, why in self.excluded],
            "min_coverage": None if self.min_coverage is None else coverage_text(self.min_coverage),
            "not_graded": [{"run": e.run_id, "reason": e.reason, "coverage": e.coverage_text}
                           for e in self.not_graded],
            "ungrouped": list(self.ungrouped),
            "rank_agreement": {
                "over": self.agreement_over,
                "note": self.agreement_note,
                "tasks": list(self.tasks),
                "seed": self.seed,
                "n_resamples": self.n_resamples,
                "confidence": self.confidence,
                "result": agreement,
            },
            "flips": [{
                "process_ahead": flip.process_ahead,
                "outcome_ahead": flip.outcome_ahead,
                "process": [exact_text(v) for v in flip.process],
                "outcome": [exact_text(v) for v in flip.outcome],
                "rules": [{"rule": r.rule_id, "ahead": exact_text(r.ahead), "behind": exact_text(r.behind),
                           "gap": exact_text(r.gap)} for r in flip.rules],
            } for flip in self.flips],
        }


def compare(runs: Iterable[RunView], by: str, *, allow_mixed: bool = False, seed: int = 0,
            n_resamples: int = DEFAULT_RESAMPLES, confidence: float = 0.95, ruleset: Any = None,
            min_coverage: Fraction | None = None, identity: Any = None) -> Comparison:
    """Process score against outcome, per group of ``runs`` by provenance field ``by``.

    ``runs`` come from :func:`procgrade.engine.analysis.dataset.load_runs` with a rule set (without one there is no
    process score and nothing is ranked). ``ruleset`` (optional) names the rule set in the result.
    ``min_coverage`` leaves out runs with a smaller share of applicable rules; ``identity``
    (:class:`~procgrade.engine.analysis.model_identity.ModelIdentity`) groups model names (default: normalised).
    Raises :class:`MixedGroupSettingsError` when a group's runs differ in settings, unless ``allow_mixed``;
    ValueError for an unknown field.
    """
    check_field(by)
    all_runs = sorted(runs, key=lambda r: r.run_id)
    selection = select_graded(all_runs, min_coverage)
    graded_ids = selection.graded_ids
    ungrouped = tuple(r.run_id for r in selection.graded if group_key(r, by, identity) is None)
    runs = [r for r in selection.graded if group_key(r, by, identity) is not None]
    outcomes = group_outcomes(runs, by, allow_mixed=allow_mixed, confidence=confidence, identity=identity)
    by_id = {r.run_id: r for r in runs}
    left_out_of: dict[str, list[str]] = {}
    for run in all_runs:
        group = group_key(run, by, identity)
        if run.run_id not in graded_ids and group is not None:
            left_out_of.setdefault(group, []).append(run.run_id)

    rows: list[GroupComparison] = []
    for outcome in outcomes:
        members = [by_id[run_id] for run_id in outcome.runs]
        scored = [r for r in members if r.process is not None and r.process.total is not None]
        rule_scores: dict[str, list[Fraction]] = {}
        for run in scored:
            for rule, score in run.process.rules.items():  # type: ignore[union-attr]
                if score is not None:
                    rule_scores.setdefault(rule, []).append(score)
        rows.append(GroupComparison(
            group=outcome.group, outcome=outcome,
            process_score=_mean([r.process.total for r in scored]) if scored else None,  # type: ignore[union-attr,misc]
            process_runs=tuple(r.run_id for r in scored),
            without_process=tuple(left_out_of.get(outcome.group, ())),
            rule_means={rule: _mean(scores) for rule, scores in sorted(rule_scores.items())},
        ))

    excluded = [(group, f"not graded: all {len(ids)} run(s) left out ({selection.reason(ids[0])}"
                        + (", ..." if len(ids) > 1 else "") + ")")
                for group, ids in sorted(left_out_of.items()) if group not in {row.group for row in rows}]
    for row in rows:
        reasons = []
        if row.process_score is None:
            reasons.append("no run has an applicable process score")
        if row.outcome_score is None:
            reasons.append(row.outcome.note or "no outcome score")
        if reasons:
            excluded.append((row.group, "; ".join(reasons)))
    ranked_rows = [row for row in rows if row.process_score is not None and row.outcome_score is not None]
    ranked = tuple(row.group for row in ranked_rows)
    process_scores = {row.group: row.process_score for row in ranked_rows}
    outcome_scores = {row.group: row.outcome_score for row in ranked_rows}
    if ranked_rows:
        process_ranks = ranks(process_scores)  # type: ignore[arg-type]
        outcome_ranks = ranks(outcome_scores)  # type: ignore[arg-type]
        rows = [GroupComparison(row.group, row.outcome, row.process_score, row.process_runs, row.without_process,
                                row.rule_means, process_ranks.get(row.group), outcome_ranks.get(row.group))
                for row in rows]

    agreement, over, note, tasks = None, None, "", ()
    if len(ranked_rows) < 2:
        note = f"rank agreement needs at least two groups with both scores; {len(ranked_rows)} have them"
    else:
        members_of = {row.group: [by_id[i] for i in row.runs] for row in ranked_rows}
        grid, why_not = _task_grid(ranked_rows, members_of)
        if grid is not None:
            tasks, process_cells, outcome_cells, dropped = grid
            over = "tasks"
            agreement = rank_agreement_over_tasks(process_cells, outcome_cells, seed=seed, n_resamples=n_resamples,
                                                  confidence=confidence)
            note = (f"the {len(ranked_rows)} groups share a grid of {len(tasks)} tasks: the bootstrap "
                    "resamples tasks, and correlates each group's mean over tasks of its per-task means")
            if dropped:
                note += (f"; {len(dropped)} task(s) not shared by every group are left out of the grid: "
                         + ", ".join(dropped[:5]) + (", ..." if len(dropped) > 5 else ""))
            grid_process = {g: Fraction(sum((process_cells[g, t] for t in tasks), Fraction(0)), len(tasks))
                            for g in ranked}
            if ranks(grid_process) != ranks(process_scores):  # type: ignore[arg-type]
                note += ("; the mean over tasks orders the process scores differently from the table's mean over "
                         "runs (unequal numbers of runs per task, or tasks left out of the grid)")
        else:
            over = "groups"
            agreement = rank_agreement(process_scores, outcome_scores, seed=seed,  # type: ignore[arg-type]
                                       n_resamples=n_resamples, confidence=confidence)
            note = f"no complete task grid ({why_not}): the bootstrap resamples the {len(ranked_rows)} groups"

    flips = []
    if ranked_rows:
        means = {row.group: row.rule_means for row in ranked_rows}
        for flip in rank_flips(process_scores, outcome_scores):  # type: ignore[arg-type]
            a, b = flip.first, flip.second
            # Only rules that applied on both sides can explain a flip: a rule that judged nothing in one
            # group says nothing about that group's process.
            gaps = sorted((RuleGap(rule, means[a][rule], means[b][rule]) for rule in means[a]
                           if rule in means[b] and means[a][rule] > means[b][rule]),
                          key=lambda gap: (-gap.gap, gap.rule_id))
            flips.append(Flip(a, b, (process_scores[a], process_scores[b]),  # type: ignore[arg-type]
                              (outcome_scores[a], outcome_scores[b]), tuple(gaps[:TOP_RULES])))  # type: ignore[arg-type]
        flips.sort(key=lambda f: (f.process_ahead, f.outcome_ahead))

    digest = ruleset_name = ruleset_version = None
    if ruleset is not None:
        from procgrade.rules.identity import ruleset_hash

        digest, ruleset_name, ruleset_version = ruleset_hash(ruleset), ruleset.name, ruleset.version
    else:
        digests = sorted({r.process.ruleset_hash for r in runs if r.process is not None})
        digest = digests[0] if len(digests) == 1 else None

    return Comparison(
        by=by, ruleset_name=ruleset_name, ruleset_version=ruleset_version, ruleset_hash=digest,
        groups=tuple(rows), ranked=ranked, excluded=tuple(excluded), agreement=agreement, agreement_over=over,
        agreement_note=note, tasks=tuple(tasks), flips=tuple(flips), allow_mixed=allow_mixed, seed=seed,
        n_resamples=n_resamples, confidence=confidence, not_graded=selection.left_out, ungrouped=ungrouped,
        min_coverage=min_coverage,
    )


# --------------------------------------------------------------------------------------------
# Plain data


def exact_text(value: Fraction | None, places: int = 4) -> dict[str, str] | None:
    """An exact rational as ``{"exact": "num/den", "display": rounded}`` (None stays None)."""
    if value is None:
        return None
    value = Fraction(value)
    return {"exact": f"{value.numerator}/{value.denominator}", "display": display(value, places)}


def _interval(interval: Interval | None) -> dict[str, Any] | None:
    if interval is None:
        return None
    return {"method": interval.method, "estimate": exact_text(interval.estimate), "low": interval.low,
            "high": interval.high, "confidence": interval.confidence, "half_width": interval.half_width,
            "df": interval.df, "t_quantile": interval.t_quantile, "count": interval.count, "nobs": interval.nobs,
            "display": interval.format()}


# --------------------------------------------------------------------------------------------
# Helpers


def _grouped(runs: Iterable[RunView], by: str, identity: Any = None) -> dict[str, list[RunView]]:
    check_field(by)
    grouped: dict[str, list[RunView]] = {}
    for run in runs:
        key = group_key(run, by, identity)
        if key is not None:
            grouped.setdefault(key, []).append(run)
    return {g: sorted(grouped[g], key=lambda r: r.run_id) for g in sorted(grouped)}


def _settings_builds(runs: Sequence[RunView]) -> list[Build]:
    """Plan-less builds carrying each run's settings, for the settings guard over every run of a group."""
    return [Build("-", run.run_id, (), settings=run_settings(run)) for run in runs]


def _mean(values: Sequence[Fraction]) -> Fraction:
    return sum(values, Fraction(0)) / len(values)


def _task_grid(rows: Sequence[GroupComparison], members_of: Mapping[str, Sequence[RunView]]) -> tuple[
        tuple[tuple[str, ...], dict[tuple[str, str], Fraction], dict[tuple[str, str], Fraction], tuple[str, ...]]
        | None, str]:
    """(tasks, process cells, outcome cells, tasks left out) over the tasks (>= 2) on which every group has
    both scores; else (None, why not). A cell's process score is the mean over the runs that pass@1 counts
    for that task, so both cells of a (group, task) describe the same runs."""
    process_cells: dict[tuple[str, str], Fraction] = {}
    outcome_cells: dict[tuple[str, str], Fraction] = {}
    task_sets = []
    for row in rows:
        members = {r.run_id: r for r in members_of[row.group]}
        if any(not r.task_id for r in members.values()) or row.outcome.without_task:
            return None, f"group {row.group} has runs without a task"
        summary = row.outcome.summary
        assert summary is not None
        tasks = set()
        for product in summary.products:
            totals = [members[i].process.total for i in product.build_ids  # type: ignore[union-attr]
                      if i in members and members[i].process is not None and members[i].process.total is not None]
            if not totals:
                continue
            process_cells[row.group, product.product] = _mean(totals)  # type: ignore[arg-type]
            outcome_cells[row.group, product.product] = product.pass_at_1
            tasks.add(product.product)
        task_sets.append(frozenset(tasks))
    shared = frozenset.intersection(*task_sets)
    every = frozenset.union(*task_sets)
    tasks = tuple(sorted(shared))
    if len(tasks) < 2:
        return None, f"{len(tasks)} task(s) shared by every group, the task bootstrap needs at least two"
    keep = set(tasks)
    process_cells = {k: v for k, v in process_cells.items() if k[1] in keep}
    outcome_cells = {k: v for k, v in outcome_cells.items() if k[1] in keep}
    return (tasks, process_cells, outcome_cells, tuple(sorted(every - shared))), ""


def runs_text(ids: Sequence[str], shown: int = 3) -> str:
    head = ", ".join(ids[:shown])
    more = len(ids) - shown
    return f"{len(ids)} run(s) ({head}{f', +{more} more' if more > 0 else ''})"
