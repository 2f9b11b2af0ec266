"""Do two scores rank the same groups the same way? (process vs outcome ranking, engine vs human ranking)

Pure functions over plain ``{group: score}`` mappings; nothing here reads the store. Statistics come from scipy:
Kendall tau-b (``scipy.stats.kendalltau(variant="b")``, ties handled) and Spearman rho (``scipy.stats.spearmanr``),
rank vectors with ties (``scipy.stats.rankdata``) and bootstrap intervals (``scipy.stats.bootstrap``, seeded).
Their p-values are exact for up to :data:`EXACT_P_MAX_GROUPS` groups (``scipy.stats.permutation_test`` over every
pairing): scipy's own Spearman p is the t approximation, which says p = 0 whenever rho is +-1, however few the
groups (four systems in the same order is p = 1/12, not 0), and its Kendall p is only exact without ties:

* :func:`rank_agreement` resamples the groups themselves (paired), which suits many groups (e.g. the 165
  (system, task) runs of DevAI);
* :func:`rank_agreement_over_tasks` resamples the *tasks* each group was scored on and recomputes every group's mean
  before correlating, as calibration.md 4.4 recommends when only a few systems are ranked (3-20): resampling three
  systems says nothing. It also reports, for every pair of groups, the share of resamples in which both scores order
  the pair the same way.

Neither gives an interval for fewer than :data:`MIN_INTERVAL_GROUPS` groups: two items are always perfectly
concordant or discordant (tau = rho = +-1), so every resample says the same and the "interval" would only
restate the point; the result says so in ``notes`` instead.

A rank flip is a pair of groups that score A orders one way and score B the other (a tie under either is no flip).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from typing import Any, Literal

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the analysis extra is missing
    raise ImportError("procgrade.engine.analysis.rankings needs the analysis extra: pip install 'procgrade[analysis]'") from exc

from procgrade.engine.analysis.agreement import _float, _Plain, _sorted

__all__ = [
    "MIN_INTERVAL_GROUPS",
    "Correlation",
    "EXACT_P_MAX_GROUPS",
    "PairOrder",
    "RankAgreement",
    "RankFlip",
    "rank_agreement",
    "rank_agreement_over_tasks",
    "rank_flips",
    "ranks",
]

IntervalMethod = Literal["percentile", "basic", "BCa"]

#: The fewest groups a rank-correlation interval is computed for.
MIN_INTERVAL_GROUPS = 3
#: Up to this many groups both p-values come from every pairing of the two scores (7! = 5,040 of them, a
#: few milliseconds; 8! takes a third of a second); beyond, scipy's (Kendall exact without ties, else
#: normal; Spearman's t approximation), which is close by then: where it says 0 the exact p is at
#: most 2/8! (5e-5).
EXACT_P_MAX_GROUPS = 7


def ranks(scores: Mapping[Hashable, float], *, higher_is_better: bool = True,
          method: Literal["average", "min", "max", "dense", "ordinal"] = "average") -> dict[Hashable, float]:
    """``{group: rank}`` in sorted group order, rank 1 = best (``scipy.stats.rankdata``; ``method="average"`` gives
    tied groups the mean of their ranks, e.g. 1.5 and 1.5)."""
    from scipy.stats import rankdata

    groups = _sorted(scores)
    values = np.array([float(scores[g]) for g in groups])
    if not np.isfinite(values).all():
        raise ValueError("scores must be finite numbers")
    ranked = rankdata(-values if higher_is_better else values, method=method)
    cast: Callable[[Any], float] = float if method == "average" else int
    return {g: cast(r) for g, r in zip(groups, ranked)}


@dataclass(frozen=True)
class RankFlip(_Plain):
    """A pair of groups ordered one way by score A (``first`` above ``second``) and the other way by score B."""

    first: Any
    second: Any
    a_first: float
    a_second: float
    b_first: float
    b_second: float


def rank_flips(scores_a: Mapping[Hashable, float], scores_b: Mapping[Hashable, float], *,
               higher_is_better: bool = True) -> tuple[RankFlip, ...]:
    """Every pair of groups that the two scores order in opposite directions, ``first`` = the group score A puts
    above; pairs in sorted group order. Groups tied under either score are not flips."""
    groups = _same_groups(scores_a, scores_b)
    sign = 1.0 if higher_is_better else -1.0
    flips = []
    for g, h in combinations(groups, 2):
        da = sign * (float(scores_a[g]) - float(scores_a[h]))
        db = sign * (float(scores_b[g]) - float(scores_b[h]))
        if da * db < 0:
            first, second = (g, h) if da > 0 else (h, g)
            flips.append(RankFlip(first, second, float(scores_a[first]), float(scores_a[second]),
                                  float(scores_b[first]), float(scores_b[second])))
    return tuple(flips)


@dataclass(frozen=True)
class Correlation(_Plain):
    """A rank correlation with its two-sided p-value (exact up to :data:`EXACT_P_MAX_GROUPS` groups, else
    scipy's) and bootstrap interval; ``None`` where undefined (e.g. a score constant over the groups)."""

    statistic: float | None
    pvalue: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class PairOrder(_Plain):
    """How often both scores order a pair of groups the same way over the bootstrap resamples (``support``),
    and whether they do on the data (``same_order``; a tie under both counts as the same order)."""

    first: Any
    second: Any
    same_order: bool
    support: float | None


@dataclass(frozen=True)
class RankAgreement(_Plain):
    """Score A against score B over ``groups`` (sorted): the scores, rank vectors (1 = best, ties averaged),
    Kendall tau-b, Spearman rho, rank flips and, for the task bootstrap, per-pair order support."""

    n: int
    groups: tuple[Any, ...]
    scores_a: tuple[float, ...]
    scores_b: tuple[float, ...]
    ranks_a: tuple[float, ...]
    ranks_b: tuple[float, ...]
    kendall_tau_b: Correlation
    spearman: Correlation
    flips: tuple[RankFlip, ...]
    pair_orders: tuple[PairOrder, ...]
    confidence: float
    n_resamples: int
    seed: int | None
    interval_method: str
    notes: tuple[str, ...]


def _same_groups(scores_a: Mapping[Hashable, Any], scores_b: Mapping[Hashable, Any]) -> list[Any]:
    only_a = _sorted(k for k in scores_a if k not in scores_b)
    only_b = _sorted(k for k in scores_b if k not in scores_a)
    if only_a or only_b:
        raise ValueError(f"the scores must cover the same groups: only in A {only_a!r}, only in B {only_b!r}")
    return _sorted(scores_a)


_Estimate = tuple[float | None, float | None]  # statistic, p-value


def _scipy_correlations(x: np.ndarray, y: np.ndarray) -> tuple[_Estimate, _Estimate]:
    """(Kendall tau-b, p), (Spearman rho, p) as scipy computes them."""
    from scipy.stats import kendalltau, spearmanr

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        tau = kendalltau(x, y, variant="b")
        rho = spearmanr(x, y)
    return (_float(tau.statistic), _float(tau.pvalue)), (_float(rho.statistic), _float(rho.pvalue))


def _correlations(x: np.ndarray, y: np.ndarray) -> tuple[_Estimate, _Estimate]:
    """:func:`_scipy_correlations`, the p-values exact for up to :data:`EXACT_P_MAX_GROUPS` groups."""
    (tau, tau_p), (rho, rho_p) = _scipy_correlations(x, y)
    if x.size <= EXACT_P_MAX_GROUPS and tau is not None and rho is not None:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            tau_p, rho_p = _exact_pvalues(x, y)
    return (tau, tau_p), (rho, rho_p)


def _exact_pvalues(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Two-sided p-values of tau-b and rho under every pairing of ``x`` with ``y`` (the exact null
    of no association, ties included): ``scipy.stats.permutation_test`` enumerates the n! pairings
    when asked for an infinite number of resamples, compares with its own float tolerance, and
    doubles the smaller one-sided share (with ties the null need not be symmetric)."""
    from scipy.stats import permutation_test, rankdata

    n = y.size
    pairs = n * (n - 1) / 2
    ranks_y = rankdata(y)
    sy = np.sign(y[:, None] - y[None, :])
    y_ties = ((sy == 0).sum() - n) / 2  # y is never permuted: its ties are the same in every pairing

    def tau_b(xs: np.ndarray, axis: int = -1) -> np.ndarray:
        xs = np.atleast_2d(xs)
        sx = np.sign(xs[:, :, None] - xs[:, None, :])
        x_ties = ((sx == 0).sum(axis=(1, 2)) - n) / 2
        return (sx * sy).sum(axis=(1, 2)) / 2 / np.sqrt(pairs - x_ties) / np.sqrt(pairs - y_ties)

    def rho(xs: np.ndarray, axis: int = -1) -> np.ndarray:
        ranks_x = rankdata(np.atleast_2d(xs), axis=-1)
        dx, dy = ranks_x - ranks_x.mean(axis=-1, keepdims=True), ranks_y - ranks_y.mean()
        return (dx * dy).sum(axis=-1) / np.sqrt((dx * dx).sum(axis=-1) * (dy * dy).sum())

    return tuple(float(permutation_test((x,), statistic, permutation_type="pairings", n_resamples=np.inf,
                                        vectorized=True, alternative="two-sided").pvalue)
                 for statistic in (tau_b, rho))  # type: ignore[return-value]


def _both(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    (tau, _), (rho, _) = _scipy_correlations(x, y)
    return np.array([np.nan if tau is None else tau, np.nan if rho is None else rho])


class _MemoisedCorrelations:
    """:func:`_both` for a bootstrap, computed once per pair of rank patterns.

    Kendall's tau-b (scipy counts concordant, discordant and tied pairs) and Spearman's rho (scipy
    correlates the average ranks) depend on the data only through each vector's dense ranks in index
    order, so resamples with the same pair of rank patterns give the same bits; with a handful of
    groups, thousands of resamples hold a few dozen patterns. ``scipy.stats`` costs a millisecond
    a call; the key costs microseconds."""

    def __init__(self) -> None:
        self._seen: dict[tuple[bytes, bytes], np.ndarray] = {}

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        (key_x, ranks_x), (key_y, ranks_y) = _ranked(x), _ranked(y)
        found = self._seen.get((key_x, key_y))
        if found is None:
            found = self._seen[(key_x, key_y)] = _tau_b_and_rho(x, y, ranks=(ranks_x, ranks_y))
        return found.copy()


def _tau_b_and_rho(x: np.ndarray, y: np.ndarray, *,
                   ranks: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """:func:`_both` (``[tau_b, rho]``, nan where undefined) to the bit, without scipy's per-call wrappers
    (argument checks, nan policy, p-values: a millisecond a call, in a loop of thousands of resamples).

    Kendall's tau-b: scipy computes ``(concordant - discordant) / sqrt(pairs - x ties) / sqrt(pairs - y
    ties)`` from integer pair counts, here counted from the pairwise signs. Spearman's rho: scipy takes
    ``numpy.corrcoef`` of the average ranks laid out as its ``apply_along_axis`` lays them out, and so
    does this. tests/test_analysis_replicas.py checks both against scipy."""
    size = x.size
    if size < 2:
        return np.array([np.nan, np.nan])
    sx = np.sign(x[:, None] - x[None, :]).astype(np.int64)
    sy = np.sign(y[:, None] - y[None, :]).astype(np.int64)
    pairs = (size * (size - 1)) // 2
    x_ties = (int((sx == 0).sum()) - size) // 2
    y_ties = (int((sy == 0).sum()) - size) // 2
    if x_ties == pairs or y_ties == pairs:
        return np.array([np.nan, np.nan])  # a constant score: both undefined, as scipy says
    con_minus_dis = int((sx * sy).sum()) // 2
    tau = con_minus_dis / np.sqrt(pairs - x_ties) / np.sqrt(pairs - y_ties)
    tau = float(np.minimum(1., max(-1., tau)))
    ranks_x, ranks_y = ranks if ranks is not None else (_ranked(x)[1], _ranked(y)[1])
    ranked = np.vstack((ranks_x, ranks_y)).T
    rho = float(np.corrcoef(ranked, rowvar=False)[1, 0])
    return np.array([tau, rho])


def _ranked(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """(the dense ranks of ``values`` in index order, as a key; ``scipy.stats.rankdata(values)``, the average
    ranks: ties get the mean of their ranks, exact halves)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    return inverse.astype(np.int64).tobytes(), (upper - (counts - 1) / 2.0)[inverse].astype(np.float64)


def _check(confidence: float, n_resamples: int, interval: str) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence!r}")
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    if interval not in ("percentile", "basic", "BCa"):
        raise ValueError(f"interval must be 'percentile', 'basic' or 'BCa', not {interval!r}")


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., np.ndarray], *, paired: bool,
               n_resamples: int, confidence: float, interval: str,
               seed: int | np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    from scipy.stats import bootstrap

    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught, np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("always")
        result = bootstrap(data, statistic, paired=paired, vectorized=False, n_resamples=n_resamples,
                           confidence_level=confidence, method=interval, rng=np.random.default_rng(seed))
    for message in _sorted({str(w.message).splitlines()[0] for w in caught
                            if not issubclass(w.category, (DeprecationWarning, FutureWarning))}):
        notes.append(f"bootstrap: {message}")
    low = np.atleast_1d(result.confidence_interval.low)
    high = np.atleast_1d(result.confidence_interval.high)
    distribution = np.atleast_2d(result.bootstrap_distribution)
    undefined = int(np.isnan(distribution[:2]).any(axis=0).sum())
    if undefined:
        notes.append(f"{undefined} of {n_resamples} resamples left a score constant: their correlations are "
                     "undefined, and so is the interval")
    return low, high, distribution, notes


def _result(groups: list[Any], a: np.ndarray, b: np.ndarray, low: np.ndarray, high: np.ndarray,
            pair_orders: tuple[PairOrder, ...], *, confidence: float, n_resamples: int,
            seed: int | np.random.Generator, interval_method: str, notes: list[str]) -> RankAgreement:
    scores_a = {g: float(v) for g, v in zip(groups, a)}
    scores_b = {g: float(v) for g, v in zip(groups, b)}
    rank_a, rank_b = ranks(scores_a), ranks(scores_b)
    (tau, tau_p), (rho, rho_p) = _correlations(a, b)
    if tau is None or rho is None:
        notes.append("a rank correlation is undefined: one score is constant over the groups")
    return RankAgreement(
        n=len(groups), groups=tuple(groups),
        scores_a=tuple(float(v) for v in a), scores_b=tuple(float(v) for v in b),
        ranks_a=tuple(rank_a[g] for g in groups), ranks_b=tuple(rank_b[g] for g in groups),
        kendall_tau_b=Correlation(tau, tau_p, _float(low[0]), _float(high[0])),
        spearman=Correlation(rho, rho_p, _float(low[1]), _float(high[1])),
        flips=rank_flips(scores_a, scores_b), pair_orders=pair_orders,
        confidence=confidence, n_resamples=n_resamples, seed=seed if isinstance(seed, int) else None,
        interval_method=interval_method, notes=tuple(notes),
    )


def _too_few(n: int) -> str:
    return (f"no interval from {n} groups: with fewer than {MIN_INTERVAL_GROUPS} items a rank correlation is +-1 "
            "or undefined in every resample")


def rank_agreement(scores_a: Mapping[Hashable, float], scores_b: Mapping[Hashable, float], *,
                   seed: int | np.random.Generator = 0, n_resamples: int = 9999, confidence: float = 0.95,
                   interval: IntervalMethod = "percentile") -> RankAgreement:
    """Kendall tau-b and Spearman rho between two scores over the same groups, with intervals from a paired
    bootstrap over the groups (``scipy.stats.bootstrap(paired=True)``, ``interval`` = its ``method``; seeded, so
    the same inputs and seed give the same intervals). With few groups prefer :func:`rank_agreement_over_tasks`."""
    _check(confidence, n_resamples, interval)
    groups = _same_groups(scores_a, scores_b)
    if len(groups) < 2:
        raise ValueError("need at least two groups to rank")
    a = np.array([float(scores_a[g]) for g in groups])
    b = np.array([float(scores_b[g]) for g in groups])
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("scores must be finite numbers")
    if len(groups) < MIN_INTERVAL_GROUPS:
        return _result(groups, a, b, np.array([np.nan] * 2), np.array([np.nan] * 2), (), confidence=confidence,
                       n_resamples=0, seed=seed, interval_method="none", notes=[_too_few(len(groups))])
    low, high, _, notes = _bootstrap((a, b), _MemoisedCorrelations(), paired=True, n_resamples=n_resamples,
                                     confidence=confidence, interval=interval, seed=seed)
    method = (f"scipy.stats.bootstrap {interval}, paired resampling of the {len(groups)} groups, "
              f"{n_resamples} resamples")
    return _result(groups, a, b, low, high, (), confidence=confidence, n_resamples=n_resamples, seed=seed,
                   interval_method=method, notes=notes)


def _summable_grid(scores: Mapping[tuple[Hashable, Hashable], Any], groups: Sequence[Hashable],
                   tasks: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """(group x task grid whose row sums order the groups exactly, exact group means as floats).

    Scores are taken exactly (``Fraction``; a float at its binary value) and scaled by their common
    denominator to integers, so sums of resampled cells are exact in float64 and two groups with
    equal exact means tie in every resample. Grids too fine for that fall back to plain floats."""
    try:
        exact = [[Fraction(scores[g, t]) for t in tasks] for g in groups]
    except (ValueError, OverflowError, TypeError):
        raise ValueError("scores must be finite numbers") from None
    means = np.array([float(sum(row, Fraction(0)) / len(tasks)) for row in exact])
    common = math.lcm(*(v.denominator for row in exact for v in row))
    scaled = [[v.numerator * (common // v.denominator) for v in row] for row in exact]
    if max(abs(x) for row in scaled for x in row) * len(tasks) < 2**53:
        return np.array(scaled, dtype=float), means
    return np.array([[float(v) for v in row] for row in exact]), means


def rank_agreement_over_tasks(scores_a: Mapping[tuple[Hashable, Hashable], float],
                              scores_b: Mapping[tuple[Hashable, Hashable], float], *,
                              seed: int | np.random.Generator = 0, n_resamples: int = 9999,
                              confidence: float = 0.95, interval: IntervalMethod = "percentile") -> RankAgreement:
    """Rank agreement of groups (e.g. systems) scored on a shared set of tasks: ``{(group, task): score}``.

    A group's score is its mean over the tasks. The interval resamples the tasks with replacement (one draw
    serves every group, keeping the design paired) and recomputes the group means before correlating
    (``scipy.stats.bootstrap`` over task indices). Every group must have a score on every task under both A and B.
    ``pair_orders`` gives, per pair of groups, the share of resamples in which A and B order it the same way."""
    _check(confidence, n_resamples, interval)
    keys = _same_groups(scores_a, scores_b)
    for key in keys:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"keys must be (group, task) pairs, not {key!r}")
    groups = _sorted({g for g, _ in keys})
    tasks = _sorted({t for _, t in keys})
    missing = [(g, t) for g in groups for t in tasks if (g, t) not in scores_a]
    if missing:
        raise ValueError(f"every group needs a score on every task; missing {missing[:5]!r}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    if len(groups) < 2:
        raise ValueError("need at least two groups to rank")
    grid_a, means_a = _summable_grid(scores_a, groups, tasks)
    grid_b, means_b = _summable_grid(scores_b, groups, tasks)
    if len(groups) < MIN_INTERVAL_GROUPS:
        return _result(groups, means_a, means_b, np.array([np.nan] * 2), np.array([np.nan] * 2), (),
                       confidence=confidence, n_resamples=0, seed=seed, interval_method="none",
                       notes=[_too_few(len(groups))])
    pairs = list(combinations(range(len(groups)), 2))
    correlations = _MemoisedCorrelations()

    def statistic(index: np.ndarray) -> np.ndarray:
        # Sums, not means: every group sums the same resampled tasks, and ranks ignore the common
        # divisor; exact grids keep equal sums equal, so ties stay ties.
        chosen = np.asarray(index, dtype=np.int64)
        a, b = grid_a[:, chosen].sum(axis=1), grid_b[:, chosen].sum(axis=1)
        same = [float(np.sign(a[i] - a[j]) == np.sign(b[i] - b[j])) for i, j in pairs]
        return np.concatenate([correlations(a, b), same])

    a, b = means_a, means_b
    low, high, distribution, notes = _bootstrap((np.arange(len(tasks)),), statistic, paired=False,
                                                n_resamples=n_resamples, confidence=confidence,
                                                interval=interval, seed=seed)
    orders = tuple(
        PairOrder(groups[i], groups[j], bool(np.sign(a[i] - a[j]) == np.sign(b[i] - b[j])),
                  _float(distribution[2 + k].mean()))
        for k, (i, j) in enumerate(pairs))
    method = (f"scipy.stats.bootstrap {interval}, resampling the {len(tasks)} tasks (shared by all "
              f"{len(groups)} groups) and recomputing group means, {n_resamples} resamples")
    return _result(groups, a, b, low[:2], high[:2], orders, confidence=confidence, n_resamples=n_resamples,
                   seed=seed, interval_method=method, notes=notes)
