"""Which process behaviours predict outcome: per rule, violation against resolution (``procgrade associate``).

Over the **graded** runs (:mod:`procgrade.engine.analysis.graded_runs`) whose outcome is binary, *resolved* meaning
pass@1 of the run's build (every graded plan of its last check passes; :mod:`procgrade.engine.analysis.outcome_builds`):
runs with no verdict, or whose check graded nothing, are left out and counted.

* **Applicability** (per rule, pooled and per group of ``by``): of the graded runs, how many the rule applied
  to (fulfilled + violated > 0) and how many it flagged (violated > 0), and the violation rate among those
  it applied to. A rule that applied nowhere says nothing about any run.
* **Association** (per rule, pooled and per group): among the runs the rule applied to and with a binary
  outcome, the 2x2 table

  ================  ========  ==========
  \\                resolved  unresolved
  ================  ========  ==========
  violated          a         b
  not violated      c         d
  ================  ========  ==========

  the violation rate in resolved runs a/(a+c) and in unresolved runs b/(b+d), and the odds ratio of
  resolution for a violating run against a clean one, (a d)/(b c): the conditional maximum-likelihood
  estimate with its exact (Fisher) interval (``scipy.stats.contingency.odds_ratio``) and Fisher's exact
  two-sided p-value (``scipy.stats.fisher_exact``). **An odds ratio below 1 means violating runs resolve
  less often**: the behaviour the rule penalises predicts failure, as a process rule should. With a zero
  cell the estimate is 0 or infinite and the interval one-sided (still exact); where the rule was never
  violated, always violated, or all runs share one outcome there is no contrast, and the statistic is
  suppressed with that reason.
  Pooled over groups, the table above is *crude* (groups with different resolution rates can confound it),
  so the Mantel-Haenszel odds ratio stratified by group is given next to it with its interval
  (``statsmodels.stats.contingency_tables.StratifiedTable``'s, computed to the bit by
  :mod:`procgrade.engine.analysis.exact_replicas` without importing statsmodels), over the groups whose
  table has a contrast.
* **Discrimination** (pooled and per group): the mean process score of resolved and unresolved runs (exact),
  and the AUC of the process score as a predictor of resolution (``sklearn.metrics.roc_auc_score``, computed
  to the bit by :func:`roc_auc` without its per-call validation: the chance that a random resolved run outscores a random unresolved one, ties counting half) with a seeded
  percentile bootstrap interval over runs (resamples holding one outcome only are skipped and counted).
  An AUC below 0.5 means the process score ranks failing runs above resolving ones.

Everything is deterministic: sorted rules, groups and runs, a fixed seed; :meth:`Association.to_dict` is plain
data for canonical JSON (an infinite odds ratio or bound is the string ``"inf"``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the analysis extra is missing
    raise ImportError("procgrade.engine.analysis.association needs the analysis extra: pip install 'procgrade[analysis]'") from exc

from procgrade.engine.analysis.agreement import _Plain, to_plain
from procgrade.engine.analysis.dataset import RunView, check_field, group_key
from procgrade.engine.analysis.graded_runs import select_graded
from procgrade.engine.analysis.outcome_builds import run_outcome
from procgrade.engine.canonical import canonical_json

__all__ = [
    "FORMAT",
    "Association",
    "Discrimination",
    "RuleApplicability",
    "RuleAssociation",
    "associate",
    "resolved",
]

FORMAT = "procgrade.associate/1"
#: The pooled rows' group name.
ALL = "all"


@dataclass(frozen=True)
class RuleApplicability(_Plain):
    """How often one rule applied to, and flagged, the graded runs of a group."""

    rule: str
    group: str
    graded_runs: int
    applied: int
    violated: int

    @property
    def applied_share(self) -> float | None:
        return self.applied / self.graded_runs if self.graded_runs else None

    @property
    def violation_rate(self) -> float | None:
        return self.violated / self.applied if self.applied else None


@dataclass(frozen=True)
class RuleAssociation(_Plain):
    """One rule's violation against resolution in one group (or ``all``): the 2x2 counts, both violation
    rates, the odds ratio of resolution for violating runs with its exact interval and Fisher's p-value, or
    ``note`` saying why they are suppressed. ``mh_*`` (pooled rows only): the Mantel-Haenszel odds ratio
    stratified by group."""

    rule: str
    group: str
    violated_resolved: int
    violated_unresolved: int
    clean_resolved: int
    clean_unresolved: int
    odds_ratio: float | None
    low: float | None
    high: float | None
    pvalue: float | None
    note: str | None
    mh_odds_ratio: float | None = None
    mh_low: float | None = None
    mh_high: float | None = None
    mh_strata: int = 0
    mh_note: str | None = None

    @property
    def runs(self) -> int:
        return self.violated_resolved + self.violated_unresolved + self.clean_resolved + self.clean_unresolved

    @property
    def rate_resolved(self) -> float | None:
        n = self.violated_resolved + self.clean_resolved
        return self.violated_resolved / n if n else None

    @property
    def rate_unresolved(self) -> float | None:
        n = self.violated_unresolved + self.clean_unresolved
        return self.violated_unresolved / n if n else None


@dataclass(frozen=True)
class Discrimination(_Plain):
    """The process score as a predictor of resolution in one group (or ``all``)."""

    group: str
    resolved: int
    unresolved: int
    mean_resolved: Fraction | None
    mean_unresolved: Fraction | None
    auc: float | None
    low: float | None
    high: float | None
    note: str | None


@dataclass(frozen=True)
class Association(_Plain):
    by: str
    ruleset_hash: str | None
    rules: tuple[str, ...]
    groups: tuple[str, ...]
    graded: int
    #: (run, reason) of the runs left out as not graded.
    not_graded: tuple[tuple[str, str], ...]
    #: Graded runs with no binary outcome (no verdict, or nothing graded), left out of association and AUC.
    without_outcome: tuple[str, ...]
    #: Graded runs with no value for ``by``: in the pooled rows only.
    ungrouped: tuple[str, ...]
    applicability: tuple[RuleApplicability, ...]
    associations: tuple[RuleAssociation, ...]
    discrimination: tuple[Discrimination, ...]
    seed: int
    n_resamples: int
    confidence: float
    min_coverage: str | None

    def association(self, rule: str, group: str = ALL) -> RuleAssociation:
        for row in self.associations:
            if (row.rule, row.group) == (rule, group):
                return row
        raise KeyError((rule, group))

    def applicability_of(self, rule: str, group: str = ALL) -> RuleApplicability:
        for row in self.applicability:
            if (row.rule, row.group) == (rule, group):
                return row
        raise KeyError((rule, group))

    def discrimination_of(self, group: str = ALL) -> Discrimination:
        for row in self.discrimination:
            if row.group == group:
                return row
        raise KeyError(group)

    def to_dict(self, digits: int | None = None) -> dict[str, Any]:
        data = _json_safe(to_plain(self, digits))
        data["format"] = FORMAT
        for row, source in zip(data["applicability"], self.applicability):
            row["applied_share"] = source.applied_share
            row["violation_rate"] = source.violation_rate
        for row, source in zip(data["associations"], self.associations):
            row["runs"] = source.runs
            row["rate_resolved"] = source.rate_resolved
            row["rate_unresolved"] = source.rate_unresolved
        return data

    def to_json(self) -> bytes:
        return canonical_json(self.to_dict())


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def resolved(run: RunView) -> bool | None:
    """pass@1 of the run's build: True / False, or None when it has no verdict or nothing graded."""
    build = run_outcome(run).build
    return None if build is None else build.passes


def _finite_or_inf(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) else number


def _table_stats(a: int, b: int, c: int, d: int, confidence: float) -> tuple[float | None, float | None,
                                                                              float | None, float | None, str | None]:
    """Odds ratio, its exact interval, Fisher's p-value, or a reason for none."""
    if a + b + c + d == 0:
        return None, None, None, None, "not applied to a run with an outcome"
    if a + b == 0:
        return None, None, None, None, "no contrast: never violated"
    if c + d == 0:
        return None, None, None, None, "no contrast: always violated"
    if a + c == 0:
        return None, None, None, None, "no contrast: none resolved"
    if b + d == 0:
        return None, None, None, None, "no contrast: all resolved"
    from scipy.stats import fisher_exact
    from scipy.stats.contingency import odds_ratio

    table = [[a, b], [c, d]]
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        result = odds_ratio(table, kind="conditional")
        interval = result.confidence_interval(confidence_level=confidence)
        pvalue = fisher_exact(table).pvalue
    return (_finite_or_inf(result.statistic), _finite_or_inf(interval.low), _finite_or_inf(interval.high),
            float(pvalue), None)


def _mantel_haenszel(tables: Sequence[tuple[int, int, int, int]], confidence: float) -> tuple[
        float | None, float | None, float | None, int, str | None]:
    usable = [t for t in tables if (t[0] + t[1]) and (t[2] + t[3]) and (t[0] + t[2]) and (t[1] + t[3])]
    if not usable:
        return None, None, None, 0, "no group has a contrast"
    from procgrade.engine.analysis.exact_replicas import mantel_haenszel_odds_ratio

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        estimate, low, high = mantel_haenszel_odds_ratio(usable, alpha=1 - confidence)
    if not math.isfinite(estimate) or estimate == 0:
        return None, None, None, len(usable), "a zero cell in every group: no Mantel-Haenszel estimate"
    return estimate, _finite_or_inf(low), _finite_or_inf(high), len(usable), None


def _auc(scores: Sequence[Fraction], outcomes: Sequence[bool], *, seed: int, n_resamples: int,
         confidence: float) -> tuple[float | None, float | None, float | None, str | None]:
    positives = sum(outcomes)
    if positives == 0 or positives == len(outcomes):
        return None, None, None, "one outcome only: no AUC"
    x = np.array([float(s) for s in scores])
    y = np.array(outcomes, dtype=int)
    auc = roc_auc(y, x)
    if len(outcomes) < 3 or n_resamples < 1:
        return auc, None, None, f"no interval from {len(outcomes)} runs"
    rng = np.random.default_rng(seed)
    values = []
    skipped = 0
    groups = ScoreGroups(x)
    for _ in range(n_resamples):
        index = rng.integers(0, len(y), len(y))
        ys = y[index]
        if ys.min() == ys.max():
            skipped += 1
            continue
        values.append(groups.roc_auc(index, ys))
    if not values:
        return auc, None, None, "every resample held one outcome only: no interval"
    tail = (1 - confidence) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    note = (f"{skipped} of {n_resamples} resamples held one outcome only and were skipped" if skipped else None)
    return auc, float(low), float(high), note


def roc_auc(y: np.ndarray, x: np.ndarray) -> float:
    """``sklearn.metrics.roc_auc_score(y, x)`` for 0/1 labels ``y`` holding both classes, to the bit,
    without its input validation (which costs twenty times the computation; a bootstrap calls this
    thousands of times). The same steps as scikit-learn's ``roc_curve`` (thresholds at the distinct
    scores, collinear points dropped, (0, 0) prepended) and the same trapezoid sum over the same
    arrays; tests/test_analysis_replicas.py checks it against scikit-learn. The sum is
    ``scipy.integrate.trapezoid``'s expression for 1-D float arrays written out (its array-API dispatch
    costs more than the sum)."""
    order = np.argsort(x, kind="mergesort")[::-1]
    scores = x[order]
    labels = y[order].astype(np.float64)
    last = np.concatenate((np.nonzero(np.diff(scores))[0], [labels.size - 1]))
    tps = np.cumsum(labels, dtype=np.float64)[last]
    fps = 1 + last.astype(np.float64) - tps
    return _area(tps, fps)


def _area(tps: np.ndarray, fps: np.ndarray) -> float:
    """The area under the ROC curve through the points (``fps``, ``tps``) at the distinct thresholds, highest
    first: collinear points dropped, (0, 0) prepended, the trapezoid sum (:func:`roc_auc`'s last steps)."""
    if fps.shape[0] > 2:
        keep = np.nonzero(np.concatenate(([True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True])))[0]
        fps, tps = fps[keep], tps[keep]
    tps = np.concatenate(([0.0], tps))
    fps = np.concatenate(([0.0], fps))
    tpr, fpr = tps / tps[-1], fps / fps[-1]
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2.0, dtype=np.float64))


class ScoreGroups:
    """:func:`roc_auc` of bootstrap resamples of one score vector, without sorting each resample.

    The ROC points of a resample are, at each distinct score present (highest first), the running counts
    of positives (``tps``) and of the rest (``fps``): integers, the same whatever order the resample's
    items come in. So the scores are grouped once (distinct values, highest first) and each resample
    only counts its items per group; the counts are exact in float64, so the points, and the area
    computed from them by the same steps, are :func:`roc_auc`'s bits (tests/test_analysis_replicas.py)."""

    def __init__(self, x: np.ndarray) -> None:
        distinct, inverse = np.unique(x, return_inverse=True)
        self.size = distinct.size
        self.group = (self.size - 1 - inverse.reshape(-1)).astype(np.intp)  # 0 = the highest score

    def roc_auc(self, index: np.ndarray, labels: np.ndarray) -> float:
        """``roc_auc(labels, x[index])`` for 0/1 ``labels`` (= ``y[index]``) holding both classes."""
        groups = self.group[index]
        totals = np.bincount(groups, minlength=self.size)
        present = np.nonzero(totals)[0]
        tps = np.cumsum(np.bincount(groups, weights=labels, minlength=self.size)[present], dtype=np.float64)
        fps = np.cumsum(totals[present]).astype(np.float64) - tps
        return _area(tps, fps)


def _mean(values: Sequence[Fraction]) -> Fraction | None:
    return sum(values, Fraction(0)) / len(values) if values else None


def associate(runs: Iterable[RunView], by: str, *, seed: int = 0, n_resamples: int = 1999,
              confidence: float = 0.95, min_coverage: Fraction | None = None, identity: Any = None) -> Association:
    """Rule applicability, rule-outcome association and process-score discrimination over ``runs`` (loaded
    with a rule set), pooled and per group of ``by`` (see the module docstring)."""
    check_field(by)
    runs = sorted(runs, key=lambda r: r.run_id)
    selection = select_graded(runs, min_coverage)
    graded = list(selection.graded)
    rules = tuple(sorted({rule for r in graded for rule in r.process.rules}))  # type: ignore[union-attr]
    group_of = {r.run_id: group_key(r, by, identity) for r in graded}
    groups = tuple(sorted({g for g in group_of.values() if g is not None}))
    outcome = {r.run_id: resolved(r) for r in graded}
    members = {ALL: graded, **{g: [r for r in graded if group_of[r.run_id] == g] for g in groups}}

    applicability = []
    associations = []
    for rule in rules:
        tables: dict[str, tuple[int, int, int, int]] = {}
        for group, rows in members.items():
            applied = [r for r in rows if r.process.applied(rule)]  # type: ignore[union-attr]
            flagged = [r for r in applied if r.process.violations.get(rule, 0) > 0]  # type: ignore[union-attr]
            applicability.append(RuleApplicability(rule, group, len(rows), len(applied), len(flagged)))
            counts = [0, 0, 0, 0]
            for r in applied:
                result = outcome[r.run_id]
                if result is None:
                    continue
                violated = r.process.violations.get(rule, 0) > 0  # type: ignore[union-attr]
                counts[(0 if violated else 2) + (0 if result else 1)] += 1
            tables[group] = (counts[0], counts[1], counts[2], counts[3])
        for group in members:
            a, b, c, d = tables[group]
            estimate, low, high, pvalue, note = _table_stats(a, b, c, d, confidence)
            extra: dict[str, Any] = {}
            if group == ALL and groups:
                mh, mh_low, mh_high, strata, mh_note = _mantel_haenszel([tables[g] for g in groups], confidence)
                extra = {"mh_odds_ratio": mh, "mh_low": mh_low, "mh_high": mh_high, "mh_strata": strata,
                         "mh_note": mh_note}
            associations.append(RuleAssociation(rule, group, a, b, c, d, estimate, low, high, pvalue, note, **extra))

    discrimination = []
    for group, rows in members.items():
        judged = [r for r in rows if outcome[r.run_id] is not None]
        scores = [r.process.total for r in judged]  # type: ignore[union-attr]
        flags = [bool(outcome[r.run_id]) for r in judged]
        auc, low, high, note = _auc(scores, flags, seed=seed, n_resamples=n_resamples,  # type: ignore[arg-type]
                                    confidence=confidence)
        discrimination.append(Discrimination(
            group, sum(flags), len(flags) - sum(flags),
            _mean([s for s, f in zip(scores, flags) if f]), _mean([s for s, f in zip(scores, flags) if not f]),  # type: ignore[misc]
            auc, low, high, note))

    digests = sorted({r.process.ruleset_hash for r in runs if r.process is not None})
    from procgrade.engine.analysis.graded_runs import coverage_text

    return Association(
        by=by, ruleset_hash=digests[0] if len(digests) == 1 else None, rules=rules, groups=groups,
        graded=len(graded), not_graded=tuple((e.run_id, e.reason) for e in selection.left_out),
        without_outcome=tuple(r.run_id for r in graded if outcome[r.run_id] is None),
        ungrouped=tuple(r.run_id for r in graded if group_of[r.run_id] is None),
        applicability=tuple(applicability), associations=tuple(associations), discrimination=tuple(discrimination),
        seed=seed, n_resamples=n_resamples, confidence=confidence,
        min_coverage=None if min_coverage is None else coverage_text(min_coverage),
    )


# ---------------------------------------------------------------------------------------------------------------
# rendering (rich tables for the CLI)


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def odds_text(estimate: float | None, low: float | None, high: float | None) -> str:
    """``0.42 (0.10-1.70)``, or ``-``."""
    if estimate is None:
        return "-"
    return f"{_num(estimate)} ({_num(low)}\u2013{_num(high)})"


def render(result: Association, console: Any) -> None:
    """Print ``result`` as rich tables on ``console``."""
    from rich.text import Text

    from procgrade.engine.tables import Table

    pct = f"{result.confidence:.0%}"
    console.print(Text(f"rule-outcome association by {result.by}: {result.graded} graded runs "
                       f"({len(result.without_outcome)} without a binary outcome, left out of the association), "
                       f"{len(result.not_graded)} not graded; groups: {', '.join(result.groups) or 'none'}"))
    table = Table("rule", title="applicability: runs the rule flagged / applied to (of the graded runs per group)")
    for group in (ALL, *result.groups):
        table.add_column(Text(group))
    for rule in result.rules:
        cells = []
        for group in (ALL, *result.groups):
            row = result.applicability_of(rule, group)
            cells.append(f"{row.violated}/{row.applied} of {row.graded_runs}")
        table.add_row(Text(rule), *cells)
    console.print(table)
    table = Table("rule", "group", "runs", "violated | resolved", "violated | unresolved",
                  f"odds ratio of resolving when violated ({pct} exact)", "Fisher p",
                  f"pooled within {result.by} (Mantel-Haenszel)",
                  title="rule-outcome association (odds ratio < 1: violating runs resolve less often; "
                        "groups listed where the rule applied)")
    for row in result.associations:
        if row.group != ALL and row.runs == 0:
            continue  # the rule never applied in this group: nothing to show (the pooled row says so)
        mh = "" if row.group != ALL or not result.groups else (
            odds_text(row.mh_odds_ratio, row.mh_low, row.mh_high) + f" over {row.mh_strata}"
            if row.mh_odds_ratio is not None and row.mh_note is None else (row.mh_note or "-"))
        table.add_row(Text(row.rule), Text(row.group), str(row.runs),
                      f"{row.violated_resolved}/{row.violated_resolved + row.clean_resolved} "
                      f"({_pct(row.rate_resolved)})",
                      f"{row.violated_unresolved}/{row.violated_unresolved + row.clean_unresolved} "
                      f"({_pct(row.rate_unresolved)})",
                      odds_text(row.odds_ratio, row.low, row.high) if row.note is None else row.note,
                      _num(row.pvalue, 3), mh)
    console.print(table)
    table = Table("group", "resolved", "unresolved", "mean process, resolved", "mean process, unresolved",
                  f"AUC ({pct} bootstrap)", "note", title="process score as a predictor of resolution")
    for d in result.discrimination:
        table.add_row(Text(d.group), str(d.resolved), str(d.unresolved),
                      "-" if d.mean_resolved is None else f"{float(d.mean_resolved):.4f}",
                      "-" if d.mean_unresolved is None else f"{float(d.mean_unresolved):.4f}",
                      odds_text(d.auc, d.low, d.high), Text(d.note or ""))
    console.print(table)
    console.print(Text(f"seed {result.seed}, {result.n_resamples} bootstrap resamples"
                       + (f"; --min-coverage {result.min_coverage}" if result.min_coverage else "")))
    if result.ungrouped:
        console.print(Text(f"graded runs without a {result.by} (pooled rows only): {len(result.ungrouped)}"))
