"""Outcome metrics over builds: pass@1, plan pass rate, pass^k, workflow pass, cost and time,
with the 95% intervals of ViBench 2.0 (Furman et al., arXiv 2611.05620, Section 3.3 and Appendix C).

Pure functions over plain data; nothing here reads a store. Another module turns stored
outcome events into :class:`Build` values and calls these.

Definitions
-----------
* A build's plans each end ``passed``, ``failed`` or ``no_grade``. A ``no_grade`` plan (no valid
  grade after every retry) is an infrastructure fault, not a defect of the build: it is left out
  of both scores and listed for audit (ViBench 2.0, Appendix C, "Discarded grades"). A build
  whose plans are all ``no_grade`` (or that has none) has no score; it is left out and listed too.
* **pass@1** of a build is 1 if every graded plan passes, else 0. **Plan pass rate** of a build is
  passed / graded. Both are averaged first over a product's builds, then over products, each
  product weighing the same (Section 3.3).
* **pass^k** (tau-bench, Yao et al. 2024, which ViBench 2.0 cites without restating a formula):
  the chance that k independent builds of the same product all pass, estimated per product from
  n builds of which c pass as C(c, k) / C(n, k), then averaged over products. pass^1 = pass@1.
* **Workflow pass** (Vibe Code Bench, arXiv 2603.04601, Section 3.4): a workflow passes when at
  least 90% of its substeps pass, compared exactly (passed / total >= 9/10).
* **Intervals** (Appendix C): over k products with n builds in all, the half-width is
  ``t_{0.975, n-k} * sqrt(sum_a s_a^2 / n_a) / k``, with n_a and s_a^2 the number and sample
  variance of product a's builds. "Near 0% or 100%, where this interval would cross the limit,
  we report the exact binomial (Clopper-Pearson) range instead." A zero-width interval sitting on
  the limit (0 of 32 builds pass) counts as reaching it: ViBench prints ``0.0 (0-10.9)`` there.
  The binomial is taken over the pooled counts: passing builds of scored builds for pass@1,
  passed plans of graded plans for the plan pass rate.
* **One build per product** (a benchmark run once per task, e.g. a Terminal-Bench leaderboard run): the
  within-product variance of Appendix C is undefined, so the products themselves are the sample: pass@1
  gets the exact binomial (Clopper-Pearson) range of passing products of k, and the plan pass rate the
  t interval of the mean of the k product rates (df = k - 1), or the pooled Clopper-Pearson range where
  that would cross a limit; ``interval_note`` says so. With a mix of single and repeated builds there is
  no interval, and the note says why.

Counts, scores, costs and durations are exact (``int`` and :class:`~fractions.Fraction`);
interval bounds are floats, printed by :func:`format_percent` / :meth:`Interval.format` to the
paper's precision (one decimal of a percent, half rounded up).

scipy and statsmodels (the ``analysis`` extra) are imported only by the interval functions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Any, Literal

from procgrade.engine.canonical import canonical_json
from procgrade.engine.errors import ProcgradeError
from procgrade.engine.exact import decimal_text

__all__ = [
    "WORKFLOW_PASS_THRESHOLD",
    "Build",
    "Interval",
    "MixedSettingsError",
    "NoGrade",
    "OutcomeSummary",
    "PlanOutcome",
    "PlanResult",
    "ProductScores",
    "check_settings",
    "clopper_pearson",
    "flatten_settings",
    "format_percent",
    "group_by_product",
    "mean_of_product_means",
    "pass_at_1",
    "pass_hat_k",
    "pass_hat_k_from_counts",
    "plan_pass_rate",
    "product_scores",
    "score_interval",
    "settings_differences",
    "summarize",
    "t_interval",
    "workflow_passes",
    "workflow_result",
]

Number = int | Fraction | Decimal | str | float

#: A workflow passes when at least this share of its substeps pass (Vibe Code Bench, Section 3.4).
WORKFLOW_PASS_THRESHOLD = Fraction(9, 10)

#: How an absent settings key is shown when it differs from builds that have it.
ABSENT = "<absent>"


# --------------------------------------------------------------------------------------------
# Data model


class PlanResult(str, Enum):
    """The final result of one test plan (or one workflow) of a build."""

    PASSED = "passed"
    FAILED = "failed"
    NO_GRADE = "no_grade"


@dataclass(frozen=True)
class PlanOutcome:
    plan_id: str
    result: PlanResult

    def __post_init__(self) -> None:
        if not isinstance(self.plan_id, str) or not self.plan_id:
            raise ValueError(f"plan_id must be a non-empty string, got {self.plan_id!r}")
        object.__setattr__(self, "result", _plan_result(self.result, f"plan {self.plan_id!r}"))


@dataclass(frozen=True)
class NoGrade:
    """A plan left out of both scores because it has no valid grade, listed for audit."""

    product: str
    build_id: str
    plan_id: str


@dataclass(frozen=True)
class Build:
    """One build (one run) of a product: its plans' results, and optionally what it cost and took.

    ``plans`` may be given as a mapping ``plan_id -> result`` or as an iterable of
    :class:`PlanOutcome` / ``(plan_id, result)`` pairs; results are :class:`PlanResult` or their
    string values. ``cost`` (e.g. USD) and ``duration_s`` (seconds) are exact numbers (a float is
    taken at its shortest decimal form). ``settings`` is the build's provenance settings (model,
    harness, model settings, ...), a possibly nested mapping compared by :func:`check_settings`.
    """

    product: str
    build_id: str
    plans: tuple[PlanOutcome, ...]
    cost: Fraction | None = None
    duration_s: Fraction | None = None
    settings: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        for name in ("product", "build_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        object.__setattr__(self, "plans", _plan_outcomes(self.plans, self.build_id))
        for name in ("cost", "duration_s"):
            value = getattr(self, name)
            if value is not None:
                exact = _fraction(value, f"build {self.build_id!r}: {name}")
                if exact < 0:
                    raise ValueError(f"build {self.build_id!r}: {name} is negative: {value!r}")
                object.__setattr__(self, name, exact)
        if self.settings is not None and not isinstance(self.settings, Mapping):
            raise ValueError(f"build {self.build_id!r}: settings must be a mapping, got {type(self.settings).__name__}")

    @property
    def plans_passed(self) -> int:
        return sum(1 for p in self.plans if p.result is PlanResult.PASSED)

    @property
    def plans_failed(self) -> int:
        return sum(1 for p in self.plans if p.result is PlanResult.FAILED)

    @property
    def plans_graded(self) -> int:
        return self.plans_passed + self.plans_failed

    @property
    def no_grade_plans(self) -> tuple[str, ...]:
        return tuple(p.plan_id for p in self.plans if p.result is PlanResult.NO_GRADE)

    @property
    def passes(self) -> bool | None:
        """pass@1 of this build: every graded plan passes. None when no plan is graded."""
        if self.plans_graded == 0:
            return None
        return self.plans_failed == 0

    @property
    def plan_pass_rate(self) -> Fraction | None:
        """passed / graded plans. None when no plan is graded."""
        graded = self.plans_graded
        return None if graded == 0 else Fraction(self.plans_passed, graded)


@dataclass(frozen=True)
class ProductScores:
    """One product's scores over its scored builds (builds with at least one graded plan)."""

    product: str
    build_ids: tuple[str, ...]
    #: Per scored build, in ``build_ids`` order: 1 if it passes, else 0.
    build_passes: tuple[int, ...]
    #: Per scored build, in ``build_ids`` order: its plan pass rate.
    build_plan_rates: tuple[Fraction, ...]
    plans_passed: int
    plans_graded: int

    @property
    def builds(self) -> int:
        return len(self.build_ids)

    @property
    def passing(self) -> int:
        return sum(self.build_passes)

    @property
    def pass_at_1(self) -> Fraction:
        return Fraction(self.passing, self.builds)

    @property
    def plan_pass_rate(self) -> Fraction:
        return sum(self.build_plan_rates, Fraction(0)) / self.builds


@dataclass(frozen=True)
class Interval:
    """A 95% (or other) interval around an exact point estimate, as ViBench 2.0 reports it.

    ``method`` is ``"t"`` (``estimate +- half_width``, with ``df`` and ``t_quantile``) or
    ``"clopper-pearson"`` (the exact binomial range of ``count`` of ``nobs``). ``low``/``high`` are
    proportions (0..1); for ``"t"`` they are ``estimate -+ half_width``, unclipped.
    """

    method: Literal["t", "clopper-pearson"]
    estimate: Fraction
    low: float
    high: float
    confidence: float
    half_width: float | None = None
    df: int | None = None
    t_quantile: float | None = None
    count: int | None = None
    nobs: int | None = None

    def format(self, digits: int = 1) -> str:
        """As the paper prints it, in percent: ``53.1 ± 12.4`` or ``12.5 (3.5–29.0)``.

        A binomial bound that rounds to the limit prints bare (``0.0 (0–10.9)``, ``1.5 (0–7.9)``).
        """
        estimate = format_percent(self.estimate, digits)
        if self.method == "t":
            assert self.half_width is not None
            return f"{estimate} \u00b1 {format_percent(self.half_width, digits)}"
        return f"{estimate} ({_bound(self.low, digits)}\u2013{_bound(self.high, digits)})"


@dataclass(frozen=True)
class OutcomeSummary:
    """Every outcome metric of one pool of builds (one model and settings), by product and in total."""

    products: tuple[ProductScores, ...]
    pass_at_1: Fraction
    plan_pass_rate: Fraction
    pass_at_1_interval: Interval | None
    plan_pass_interval: Interval | None
    #: Why an interval is None (e.g. a product with a single scored build), else None.
    interval_note: str | None
    no_grade: tuple[NoGrade, ...]
    #: (product, build_id) of builds with no graded plan: left out of every score.
    ungraded_builds: tuple[tuple[str, str], ...]
    #: Mean over products of each product's mean cost per build; None unless every build has one.
    cost_mean: Fraction | None
    #: The same for build duration in seconds.
    duration_mean_s: Fraction | None
    missing_cost: tuple[str, ...]
    missing_duration: tuple[str, ...]
    #: Flattened settings every build shares.
    settings: Mapping[str, Any] = field(hash=False)
    #: Flattened settings keys whose values differ (only when pooled with ``allow_mixed=True``).
    mixed_settings: Mapping[str, Mapping[str, tuple[str, ...]]] = field(hash=False)

    @property
    def builds(self) -> int:
        """Scored builds."""
        return sum(p.builds for p in self.products)


# --------------------------------------------------------------------------------------------
# Scores


def group_by_product(builds: Iterable[Build]) -> dict[str, tuple[Build, ...]]:
    """Builds by product, products sorted by name, builds in input order.
    Raises ValueError when two builds share a build_id."""
    grouped: dict[str, list[Build]] = {}
    seen: set[str] = set()
    for build in builds:
        if not isinstance(build, Build):
            raise TypeError(f"not a Build: {build!r}")
        if build.build_id in seen:
            raise ValueError(f"build_id {build.build_id!r} occurs twice")
        seen.add(build.build_id)
        grouped.setdefault(build.product, []).append(build)
    return {product: tuple(grouped[product]) for product in sorted(grouped)}


def product_scores(builds: Iterable[Build]) -> tuple[ProductScores, ...]:
    """Per product (sorted by name), the scores of its scored builds. Products whose builds are
    all ungraded are absent (see :func:`summarize`, which lists them)."""
    scores = []
    for product, group in group_by_product(builds).items():
        scored = [b for b in group if b.plans_graded > 0]
        if not scored:
            continue
        scores.append(
            ProductScores(
                product=product,
                build_ids=tuple(b.build_id for b in scored),
                build_passes=tuple(int(bool(b.passes)) for b in scored),
                build_plan_rates=tuple(b.plan_pass_rate for b in scored),  # type: ignore[misc]
                plans_passed=sum(b.plans_passed for b in scored),
                plans_graded=sum(b.plans_graded for b in scored),
            )
        )
    return tuple(scores)


def mean_of_product_means(groups: Mapping[str, Sequence[Number]]) -> Fraction:
    """The mean over products of each product's mean over builds, exactly (every product weighs the same)."""
    values = _groups(groups)
    return sum((sum(v, Fraction(0)) / len(v) for v in values.values()), Fraction(0)) / len(values)


def pass_at_1(builds: Iterable[Build]) -> Fraction:
    """pass@1: the share of builds in which every graded plan passes, averaged over builds per
    product, then over products."""
    return mean_of_product_means({p.product: p.build_passes for p in _nonempty(product_scores(builds))})


def plan_pass_rate(builds: Iterable[Build]) -> Fraction:
    """The plan pass rate: passed / graded plans per build, averaged over builds per product,
    then over products."""
    return mean_of_product_means({p.product: p.build_plan_rates for p in _nonempty(product_scores(builds))})


def pass_hat_k_from_counts(counts: Mapping[str, tuple[int, int]], k: int) -> Fraction:
    """pass^k from per-product ``(passing, builds)`` counts: the mean over products of
    C(c, k) / C(n, k). Raises ValueError when k < 1 or a product has fewer than k builds."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not counts:
        raise ValueError("pass^k of no products")
    total = Fraction(0)
    for product, pair in counts.items():
        c, n = pair
        for name, value in (("passing", c), ("builds", n)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"product {product!r}: {name} must be a non-negative integer, got {value!r}")
        if c > n:
            raise ValueError(f"product {product!r}: {c} passing of {n} builds")
        if n < k:
            raise ValueError(f"product {product!r}: pass^{k} needs at least {k} builds, it has {n}")
        total += Fraction(math.comb(c, k), math.comb(n, k))
    return total / len(counts)


def pass_hat_k(builds: Iterable[Build], k: int) -> Fraction:
    """pass^k (tau-bench): the chance that k independent builds of a product all pass,
    estimated per product as C(c, k) / C(n, k) over its scored builds, averaged over products."""
    scores = _nonempty(product_scores(builds))
    return pass_hat_k_from_counts({p.product: (p.passing, p.builds) for p in scores}, k)


def workflow_passes(passed: int, total: int, threshold: Fraction = WORKFLOW_PASS_THRESHOLD) -> bool:
    """Whether a workflow with ``passed`` of ``total`` substeps passing passes:
    passed / total >= threshold, compared exactly (default 9/10)."""
    for name, value in (("passed", passed), ("total", total)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an integer count, got {value!r}")
    if total <= 0:
        raise ValueError(f"a workflow needs at least one substep, got total={total}")
    if not 0 <= passed <= total:
        raise ValueError(f"passed must be between 0 and total={total}, got {passed}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, Fraction)) or not 0 <= threshold <= 1:
        raise ValueError(f"threshold must be an exact Fraction in [0, 1], got {threshold!r}")
    return Fraction(passed, total) >= threshold


def workflow_result(substeps: Iterable[bool | PlanResult | str], threshold: Fraction = WORKFLOW_PASS_THRESHOLD) -> PlanResult:
    """A workflow's result from its substeps' results (``True``/``"passed"`` or ``False``/``"failed"``),
    for use as a plan of a :class:`Build`: with workflows as plans, the plan pass rate is the
    workflow accuracy of Vibe Code Bench."""
    passed = total = 0
    for index, step in enumerate(substeps):
        if isinstance(step, bool):
            ok = step
        else:
            result = _plan_result(step, f"substep {index}")
            if result is PlanResult.NO_GRADE:
                raise ValueError(f"substep {index} has no grade; a workflow pass needs every substep judged")
            ok = result is PlanResult.PASSED
        passed += ok
        total += 1
    return PlanResult.PASSED if workflow_passes(passed, total, threshold) else PlanResult.FAILED


# --------------------------------------------------------------------------------------------
# Intervals


def t_interval(groups: Mapping[str, Sequence[Number]], confidence: float = 0.95) -> Interval:
    """ViBench 2.0's t-based interval of the mean of product means (Appendix C):
    ``t_{(1+confidence)/2, n-k} * sqrt(sum_a s_a^2 / n_a) / k``.

    ``groups`` maps each product to its builds' scores. s_a^2 is the exact sample variance
    (``statistics.variance`` over Fractions); the quantile is ``scipy.stats.t.ppf``. Raises
    ValueError when a product has fewer than 2 builds (s_a^2 undefined) or n - k < 1.
    """
    from scipy import stats

    _check_confidence(confidence)
    values = _groups(groups)
    for product, scores in values.items():
        if len(scores) < 2:
            raise ValueError(f"product {product!r} has {len(scores)} build(s); the interval needs at least 2 per product")
    k = len(values)
    n = sum(len(v) for v in values.values())
    df = n - k
    estimate = sum((sum(v, Fraction(0)) / len(v) for v in values.values()), Fraction(0)) / k
    spread = sum((statistics.variance(v) / len(v) for v in values.values()), Fraction(0))
    quantile = float(stats.t.ppf((1 + confidence) / 2, df))
    half = quantile * math.sqrt(spread) / k
    return Interval(
        method="t",
        estimate=estimate,
        low=float(estimate) - half,
        high=float(estimate) + half,
        confidence=confidence,
        half_width=half,
        df=df,
        t_quantile=quantile,
    )


def clopper_pearson(count: int, nobs: int, confidence: float = 0.95, estimate: Fraction | None = None) -> Interval:
    """The exact binomial (Clopper-Pearson) range of ``count`` successes in ``nobs``, via
    ``statsmodels.stats.proportion.proportion_confint(method="beta")`` (the same scipy calls, made by
    :mod:`procgrade.engine.analysis.exact_replicas` without importing statsmodels). ``estimate`` defaults
    to count/nobs."""
    from procgrade.engine.analysis.exact_replicas import clopper_pearson_bounds

    _check_confidence(confidence)
    for name, value in (("count", count), ("nobs", nobs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if nobs == 0 or count > nobs:
        raise ValueError(f"no binomial range for {count} of {nobs}")
    low, high = clopper_pearson_bounds(count, nobs, alpha=1 - confidence)
    return Interval(
        method="clopper-pearson",
        estimate=Fraction(count, nobs) if estimate is None else estimate,
        low=float(low),
        high=float(high),
        confidence=confidence,
        count=count,
        nobs=nobs,
    )


def score_interval(groups: Mapping[str, Sequence[Number]], count: int, nobs: int, confidence: float = 0.95) -> Interval:
    """The interval ViBench 2.0 reports for a score in [0, 1]: the t-based interval of
    :func:`t_interval`, unless it would reach or cross 0 or 1, and then the Clopper-Pearson range
    of the pooled ``count`` of ``nobs`` (around the same point estimate)."""
    interval = t_interval(groups, confidence)
    if interval.low <= 0 or interval.high >= 1:
        return clopper_pearson(count, nobs, confidence, estimate=interval.estimate)
    return interval


# --------------------------------------------------------------------------------------------
# Settings


class MixedSettingsError(ProcgradeError, ValueError):
    """Builds with different settings would be pooled. ``differences`` maps each differing
    (flattened) settings key to ``{value as canonical JSON: build ids}``."""

    def __init__(self, differences: Mapping[str, Mapping[str, tuple[str, ...]]]) -> None:
        self.differences = differences
        self.keys = tuple(differences)
        parts = []
        for key, by_value in differences.items():
            shown = "; ".join(f"{value} in {_ids(ids)}" for value, ids in by_value.items())
            parts.append(f"{key}: {shown}")
        super().__init__(
            "refusing to pool builds whose settings differ (pass allow_mixed=True to pool them anyway): " + " | ".join(parts)
        )


def flatten_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Nested settings as one level, keys joined by dots: ``{"m": {"t": 1}}`` -> ``{"m.t": 1}``.
    Lists and scalars are leaves; an empty mapping is a leaf too."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for key, inner in value.items():
                if not isinstance(key, str):
                    raise TypeError(f"settings key must be a string, got {key!r}")
                walk(f"{prefix}.{key}" if prefix else key, inner)
        else:
            if prefix in flat:
                raise ValueError(f"settings key {prefix!r} occurs twice once flattened")
            flat[prefix] = value

    if settings:
        walk("", settings)
    return flat


def settings_differences(builds: Iterable[Build]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Every flattened settings key whose value is not the same in all builds, with each value
    (canonical JSON, or ``<absent>``) and the builds that have it. Keys sorted; values in order of
    first appearance."""
    builds = list(builds)
    flats = [(b.build_id, flatten_settings(b.settings)) for b in builds]
    keys = sorted({key for _, flat in flats for key in flat})
    differences: dict[str, dict[str, tuple[str, ...]]] = {}
    for key in keys:
        by_value: dict[str, list[str]] = {}
        for build_id, flat in flats:
            shown = canonical_json(flat[key]).decode() if key in flat else ABSENT
            by_value.setdefault(shown, []).append(build_id)
        if len(by_value) > 1:
            differences[key] = {value: tuple(ids) for value, ids in by_value.items()}
    return differences


def check_settings(builds: Iterable[Build], *, allow_mixed: bool = False) -> dict[str, Any]:
    """The flattened settings all builds share. Raises :class:`MixedSettingsError`, naming every
    differing key with its values and builds, when any differ, unless ``allow_mixed``."""
    builds = list(builds)
    differences = settings_differences(builds)
    if differences and not allow_mixed:
        raise MixedSettingsError(differences)
    if not builds:
        return {}
    first = flatten_settings(builds[0].settings)
    return {key: value for key, value in sorted(first.items()) if key not in differences}


# --------------------------------------------------------------------------------------------
# Everything at once


def summarize(builds: Iterable[Build], *, allow_mixed: bool = False, confidence: float = 0.95) -> OutcomeSummary:
    """Every outcome metric of one pool of builds, with intervals, audit lists and settings.

    Refuses (:class:`MixedSettingsError`) to pool builds whose settings differ unless
    ``allow_mixed``. Raises ValueError when no build has a graded plan.
    """
    builds = list(builds)
    differences = settings_differences(builds)
    if differences and not allow_mixed:
        raise MixedSettingsError(differences)
    settings = check_settings(builds, allow_mixed=True)
    grouped = group_by_product(builds)
    scores = _nonempty(product_scores(builds))

    pass_groups = {p.product: p.build_passes for p in scores}
    rate_groups = {p.product: p.build_plan_rates for p in scores}
    pass_interval = rate_interval = None
    note = None
    if len(scores) >= 2 and all(p.builds == 1 for p in scores):
        k = len(scores)
        pass_interval = clopper_pearson(sum(p.passing for p in scores), k, confidence,
                                        estimate=mean_of_product_means(pass_groups))
        rate_interval = score_interval({"products": [p.plan_pass_rate for p in scores]},
                                       sum(p.plans_passed for p in scores), sum(p.plans_graded for p in scores),
                                       confidence)
        note = (f"one build per product: the {k} products are the sample (pass@1: Clopper-Pearson over "
                f"products; plan pass rate: t over the product rates, df {k - 1})")
    else:
        try:
            pass_interval = score_interval(pass_groups, sum(p.passing for p in scores), sum(p.builds for p in scores),
                                           confidence)
            rate_interval = score_interval(
                rate_groups, sum(p.plans_passed for p in scores), sum(p.plans_graded for p in scores), confidence
            )
        except ValueError as error:
            note = str(error)

    return OutcomeSummary(
        products=scores,
        pass_at_1=mean_of_product_means(pass_groups),
        plan_pass_rate=mean_of_product_means(rate_groups),
        pass_at_1_interval=pass_interval,
        plan_pass_interval=rate_interval,
        interval_note=note,
        no_grade=tuple(NoGrade(b.product, b.build_id, plan) for g in grouped.values() for b in g for plan in b.no_grade_plans),
        ungraded_builds=tuple((b.product, b.build_id) for g in grouped.values() for b in g if b.plans_graded == 0),
        cost_mean=_resource_mean(grouped, "cost"),
        duration_mean_s=_resource_mean(grouped, "duration_s"),
        missing_cost=tuple(b.build_id for g in grouped.values() for b in g if b.cost is None),
        missing_duration=tuple(b.build_id for g in grouped.values() for b in g if b.duration_s is None),
        settings=settings,
        mixed_settings=differences,
    )


# --------------------------------------------------------------------------------------------
# Printing


def format_percent(value: Fraction | float, digits: int = 1) -> str:
    """``value`` (a proportion) in percent to ``digits`` decimals, half rounded away from zero,
    computed on the exact value (a float is taken at its exact binary value)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    scaled = Fraction(value) * 100 * 10**digits
    magnitude = math.floor(abs(scaled) + Fraction(1, 2))
    sign = "-" if scaled < 0 and magnitude else ""
    whole, fraction = divmod(magnitude, 10**digits)
    return f"{sign}{whole}.{fraction:0{digits}d}" if digits else f"{sign}{whole}"


# --------------------------------------------------------------------------------------------
# Helpers


def _bound(value: float, digits: int) -> str:
    text = format_percent(value, digits)
    if text == format_percent(0, digits):
        return "0"
    if text == format_percent(1, digits):
        return "100"
    return text


def _plan_result(value: Any, where: str) -> PlanResult:
    if isinstance(value, PlanResult):
        return value
    try:
        return PlanResult(value)
    except ValueError:
        allowed = ", ".join(r.value for r in PlanResult)
        raise ValueError(f"{where}: result must be one of {allowed}, got {value!r}") from None


def _plan_outcomes(plans: Any, build_id: str) -> tuple[PlanOutcome, ...]:
    if isinstance(plans, Mapping):
        items: Iterable[Any] = plans.items()
    elif isinstance(plans, (str, bytes)):
        raise TypeError(f"build {build_id!r}: plans must be a mapping or a sequence of outcomes")
    else:
        items = plans
    outcomes = []
    seen: set[str] = set()
    for item in items:
        outcome = item if isinstance(item, PlanOutcome) else PlanOutcome(*item)
        if outcome.plan_id in seen:
            raise ValueError(f"build {build_id!r}: plan {outcome.plan_id!r} occurs twice")
        seen.add(outcome.plan_id)
        outcomes.append(outcome)
    return tuple(outcomes)


def _fraction(value: Number, where: str) -> Fraction:
    if isinstance(value, Fraction):
        return value
    try:
        return Fraction(decimal_text(value))
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _groups(groups: Mapping[str, Sequence[Number]]) -> dict[str, list[Fraction]]:
    if not groups:
        raise ValueError("no products")
    values = {}
    for product, scores in groups.items():
        exact = [_fraction(v, f"product {product!r}") for v in scores]
        if not exact:
            raise ValueError(f"product {product!r} has no builds")
        values[product] = exact
    return values


def _nonempty(scores: tuple[ProductScores, ...]) -> tuple[ProductScores, ...]:
    if not scores:
        raise ValueError("no build has a graded plan")
    return scores


def _resource_mean(grouped: Mapping[str, tuple[Build, ...]], name: str) -> Fraction | None:
    """Mean over products of each product's mean ``name`` over its builds (scored or not),
    or None unless every build records it."""
    per_product = {}
    for product, group in grouped.items():
        values = [getattr(b, name) for b in group]
        if any(v is None for v in values):
            return None
        per_product[product] = values
    return mean_of_product_means(per_product)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")


def _ids(ids: Sequence[str], shown: int = 3) -> str:
    head = ", ".join(ids[:shown])
    more = len(ids) - shown
    return f"{len(ids)} build(s) ({head}{f', +{more} more' if more > 0 else ''})"
