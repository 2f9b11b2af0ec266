"""Agreement between graders on the same items: a candidate grader against a reference, and graders among themselves.

Pure functions over plain label arrays (booleans, integers or strings); nothing here reads the store.
Every statistic comes from a maintained library, none is written by hand:

* raw agreement and every rate: Clopper-Pearson exact intervals, ``statsmodels`` ``proportion_confint(method="beta")``;
* Cohen's kappa: ``sklearn`` ``cohen_kappa_score`` (``weights="linear"``/``"quadratic"`` for ordinal scales), with
  the asymptotic standard error and normal interval of ``statsmodels`` ``inter_rater.cohens_kappa`` on the
  contingency table;
* contingency tables, precision and recall: ``sklearn`` ``confusion_matrix`` (rows = reference, columns = candidate),
  ``precision_score``, ``recall_score``;
* two candidates on the same items: ``statsmodels`` ``contingency_tables.mcnemar``;
* Krippendorff's alpha: the optional GPL-3.0 ``krippendorff`` package, imported only when asked for;
* Bradley-Terry ratings: the logistic likelihood of Chatbot Arena (FastChat ``rating_systems.py``) minimised with
  ``scipy.optimize.minimize``, bootstrap by multinomial reweighting with a seeded ``numpy`` Generator;
* generation versus re-grading variance: ``statsmodels`` ``mixedlm`` with nested random effects.

The Clopper-Pearson range, the confusion table (string or integer scales), kappa and its interval, precision,
recall, F1 and McNemar's test are those libraries' figures made by :mod:`procgrade.engine.analysis.exact_replicas`
with numpy and scipy's own calls, to the bit (tests/test_analysis_replicas.py): importing scikit-learn's metrics
or any statsmodels module loads pandas, half a second of every ``calibrate``.

Results are frozen dataclasses; ``to_dict()`` gives the same plain data for the same inputs (floats at full precision
unless ``digits`` asks for display rounding; counts stay ints; nothing depends on set or dict iteration order).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the analysis extra is missing
    raise ImportError(
        "procgrade.engine.analysis.agreement needs the analysis extra: pip install 'procgrade[analysis]'") from exc

__all__ = [
    "KRIPPENDORFF_NOTE",
    "Agreement",
    "AgreementMatrix",
    "BinaryAgreement",
    "BradleyTerry",
    "Kappa",
    "KrippendorffAlpha",
    "McNemar",
    "PairAgreement",
    "Proportion",
    "Rating",
    "VarianceComponents",
    "agreement",
    "agreement_matrix",
    "binary_agreement",
    "bradley_terry",
    "krippendorff_alpha",
    "mcnemar",
    "mcnemar_table",
    "paired_labels",
    "proportion",
    "to_plain",
    "variance_decomposition",
]

#: What :func:`krippendorff_alpha` says when the optional package is missing.
KRIPPENDORFF_NOTE = "install the krippendorff extra (GPL-3.0)"

Weights = Literal["linear", "quadratic"] | None


# ---------------------------------------------------------------------------------------------------------------
# plain data


def to_plain(value: Any, digits: int | None = None) -> Any:
    """``value`` as JSON-ready plain data: dataclasses and mappings to dicts, tuples to lists, numpy scalars to
    Python numbers, NaN to ``None``; floats rounded to ``digits`` only when given (display), ints never."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name), digits) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_plain(value[k], digits) for k in _sorted(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, digits) for v in value]
    if isinstance(value, np.ndarray):
        return [to_plain(v, digits) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return round(value, digits) if digits is not None else value
    return value


class _Plain:
    """``to_dict()`` for the result dataclasses."""

    def to_dict(self, digits: int | None = None) -> dict[str, Any]:
        """Plain, deterministic data; ``digits`` rounds floats for display only."""
        return to_plain(self, digits)


def _sorted(values: Iterable[Any]) -> list[Any]:
    """``values`` in their natural order, or by (type name, repr) when they do not compare."""
    items = list(values)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=lambda v: (type(v).__name__, repr(v)))


def _plain_list(values: Sequence[Any] | np.ndarray, what: str) -> list[Any]:
    items = values.tolist() if isinstance(values, np.ndarray) else [
        v.item() if isinstance(v, np.generic) else v for v in values]
    for i, v in enumerate(items):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"{what}[{i}]: missing label; pass complete pairs (see paired_labels)")
    return items


def _float(value: Any) -> float | None:
    """A library result as a float, or ``None`` when it is undefined (NaN or infinite)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _resolve_labels(observed: Iterable[Any], labels: Sequence[Any] | None) -> tuple[Any, ...]:
    seen = set(observed)
    if labels is None:
        return tuple(_sorted(seen))
    resolved = tuple(labels)
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"labels repeat a value: {list(resolved)!r}")
    unknown = [v for v in _sorted(seen) if v not in set(resolved)]
    if unknown:
        raise ValueError(f"labels {unknown!r} are not in the scale {list(resolved)!r}")
    return resolved


def _check_weights(weights: Weights, labels: Sequence[Any] | None) -> None:
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    if weights is not None and labels is None:
        raise ValueError("weighted kappa needs labels: the whole ordinal scale in order (weights follow positions)")


# ---------------------------------------------------------------------------------------------------------------
# proportions and kappa


@dataclass(frozen=True)
class Proportion(_Plain):
    """``count`` of ``total`` with a Clopper-Pearson exact interval; ``None`` where ``total`` is 0."""

    count: int
    total: int
    estimate: float | None
    low: float | None
    high: float | None


def proportion(count: int, total: int, *, confidence: float = 0.95) -> Proportion:
    """``count/total`` with its Clopper-Pearson interval (statsmodels ``proportion_confint``, ``method="beta"``,
    made by :mod:`procgrade.engine.analysis.exact_replicas` without importing statsmodels)."""
    from procgrade.engine.analysis.exact_replicas import clopper_pearson_bounds

    count, total = int(count), int(total)
    if total < 0 or not 0 <= count <= total:
        raise ValueError(f"need 0 <= count <= total, got {count} of {total}")
    if total == 0:
        return Proportion(0, 0, None, None, None)
    low, high = clopper_pearson_bounds(count, total, alpha=1 - confidence)
    return Proportion(count, total, count / total, float(low), float(high))


@dataclass(frozen=True)
class Kappa(_Plain):
    """Cohen's kappa (sklearn) with its asymptotic standard error and normal interval (statsmodels).

    ``value`` is ``None`` when kappa is undefined (both graders used one and the same label throughout)."""

    value: float | None
    std_error: float | None
    low: float | None
    high: float | None
    weights: str | None


def _kappa(reference: list[Any], candidate: list[Any], labels: tuple[Any, ...], table: np.ndarray,
           weights: Weights, confidence: float) -> Kappa:
    """sklearn's ``cohen_kappa_score`` and statsmodels' ``cohens_kappa`` interval, both computed from ``table``
    (:func:`_table`, sklearn's confusion matrix) by :mod:`procgrade.engine.analysis.exact_replicas`."""
    from procgrade.engine.analysis.exact_replicas import cohen_kappa, kappa_interval

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        value = _float(cohen_kappa(table, weights))  # undefined kappa: reported as None
        if value is None:
            return Kappa(None, None, None, None, weights)
        std_kappa, low, high = kappa_interval(table, weights, confidence)
        std = _float(std_kappa)
        if std is None:
            return Kappa(value, None, None, None, weights)
        if std == 0.0:  # a degenerate normal: the interval is the point
            return Kappa(value, 0.0, value, value, weights)
    # The asymptotic normal interval can leave kappa's range on small samples: clip it to [-1, 1].
    low_f, high_f = _float(low), _float(high)
    return Kappa(value, std, None if low_f is None else max(-1.0, low_f), None if high_f is None else min(1.0, high_f),
                 weights)


def _table(reference: list[Any], candidate: list[Any], labels: tuple[Any, ...]) -> np.ndarray:
    """sklearn's ``confusion_matrix`` (rows = reference): counted here for string or integer scales, by sklearn
    itself (which validates them) for any other."""
    from procgrade.engine.analysis.exact_replicas import confusion_counts, plain_labels

    if plain_labels(labels):
        return confusion_counts(reference, candidate, labels)
    from sklearn.metrics import confusion_matrix

    return confusion_matrix(reference, candidate, labels=list(labels))


def _ints(table: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(v) for v in row) for row in table)


# ---------------------------------------------------------------------------------------------------------------
# one candidate against a reference


_AGREEMENT_METHOD = ("agreement: exact match, Clopper-Pearson interval (statsmodels proportion_confint beta); "
                     "kappa: sklearn cohen_kappa_score, asymptotic normal interval (statsmodels cohens_kappa)")


@dataclass(frozen=True)
class Agreement(_Plain):
    """A candidate grader against a reference on ``n`` items, any nominal or ordinal scale.

    ``table[i][j]`` counts items the reference labelled ``labels[i]`` and the candidate ``labels[j]``."""

    n: int
    labels: tuple[Any, ...]
    table: tuple[tuple[int, ...], ...]
    agreement: Proportion
    kappa: Kappa
    confidence: float
    method: str


def agreement(reference: Sequence[Any] | np.ndarray, candidate: Sequence[Any] | np.ndarray, *,
              labels: Sequence[Any] | None = None, weights: Weights = None,
              confidence: float = 0.95) -> Agreement:
    """Agreement of ``candidate`` with ``reference``, aligned item by item.

    ``labels`` is the scale in order (default: the labels seen, sorted); it is required with ``weights``
    (``"linear"``/``"quadratic"`` weighted kappa for ordinal scales such as the arena's -2..+1 round score),
    because the weights follow positions on the scale, including levels nobody used."""
    _check_weights(weights, labels)
    ref, cand = _pair(reference, candidate)
    scale = _resolve_labels(ref + cand, labels)
    table = _table(ref, cand, scale)
    matches = int(np.trace(table))
    return Agreement(
        n=len(ref), labels=scale, table=_ints(table),
        agreement=proportion(matches, len(ref), confidence=confidence),
        kappa=_kappa(ref, cand, scale, table, weights, confidence),
        confidence=confidence, method=_AGREEMENT_METHOD,
    )


def _pair(reference: Sequence[Any] | np.ndarray, candidate: Sequence[Any] | np.ndarray) -> tuple[list[Any], list[Any]]:
    ref = _plain_list(reference, "reference")
    cand = _plain_list(candidate, "candidate")
    if len(ref) != len(cand):
        raise ValueError(f"reference has {len(ref)} labels, candidate {len(cand)}: they must grade the same items")
    if not ref:
        raise ValueError("no items to compare")
    return ref, cand


@dataclass(frozen=True)
class BinaryAgreement(_Plain):
    """A pass/fail candidate grader against a reference (e.g. an automated grader against human labels).

    Counts are from the reference's point of view: ``fp`` = the candidate passed what the reference failed.
    ``wrong_pass`` = FP/(FP+TN) (false-positive rate), ``wrong_fail`` = FN/(FN+TP) (false-negative rate), each with a
    Clopper-Pearson interval; ``precision`` = TP/(TP+FP) and ``recall`` = TP/(TP+FN) are ``None`` when undefined."""

    n: int
    positive: Any
    negative: Any
    tp: int
    fp: int
    fn: int
    tn: int
    agreement: Proportion
    kappa: Kappa
    precision: float | None
    recall: float | None
    wrong_pass: Proportion
    wrong_fail: Proportion
    confidence: float
    method: str
    #: F1 = 2TP/(2TP+FP+FN) (sklearn), None when undefined.
    f1: float | None = None
    #: Precision TP/(TP+FP) and recall TP/(TP+FN) as proportions with Clopper-Pearson intervals.
    precision_interval: Proportion | None = None
    recall_interval: Proportion | None = None


def binary_agreement(reference: Sequence[Any] | np.ndarray, candidate: Sequence[Any] | np.ndarray, *,
                     positive: Any = True, negative: Any = False, confidence: float = 0.95) -> BinaryAgreement:
    """Agreement, kappa, precision, recall, wrong-pass and wrong-fail rates of a binary ``candidate`` against
    ``reference`` (sklearn ``confusion_matrix`` with rows = reference, ``labels=[negative, positive]``)."""
    from procgrade.engine.analysis.exact_replicas import binary_scores

    ref, cand = _pair(reference, candidate)
    scale = _resolve_labels(ref + cand, [negative, positive])
    table = _table(ref, cand, scale)
    tn, fp, fn, tp = (int(v) for v in table.ravel())
    # sklearn's precision_score, recall_score and f1_score (average="binary", zero_division=nan) from the counts
    precision, recall, f1 = binary_scores(tp, fp, fn)
    return BinaryAgreement(
        n=len(ref), positive=positive, negative=negative, tp=tp, fp=fp, fn=fn, tn=tn,
        agreement=proportion(tp + tn, len(ref), confidence=confidence),
        kappa=_kappa(ref, cand, scale, table, None, confidence),
        precision=_float(precision),
        recall=_float(recall),
        wrong_pass=proportion(fp, fp + tn, confidence=confidence),
        wrong_fail=proportion(fn, fn + tp, confidence=confidence),
        confidence=confidence,
        method=_AGREEMENT_METHOD + "; precision/recall/F1: sklearn; their intervals and wrong-pass/wrong-fail: "
                                   "Clopper-Pearson",
        f1=_float(f1),
        precision_interval=proportion(tp, tp + fp, confidence=confidence),
        recall_interval=proportion(tp, tp + fn, confidence=confidence),
    )


# ---------------------------------------------------------------------------------------------------------------
# two candidates on the same items


@dataclass(frozen=True)
class McNemar(_Plain):
    """McNemar's test on a 2x2 table of paired outcomes (statsmodels ``mcnemar``).

    ``table = ((both, first_only), (second_only, neither))`` where the outcome is "correct against the reference"
    (``compares="correct"``) or "passed" (``compares="passed"``, a difference of pass rates); only the discordant
    cells ``first_only`` and ``second_only`` carry the test. With ``exact`` the statistic is min(first_only,
    second_only) and the p-value the two-sided binomial one."""

    table: tuple[tuple[int, int], tuple[int, int]]
    first_only: int
    second_only: int
    statistic: float
    pvalue: float
    exact: bool
    compares: str


def mcnemar_table(table: Sequence[Sequence[int]] | np.ndarray, *, exact: bool = True,
                  compares: str = "table") -> McNemar:
    """McNemar's test on a hand-made 2x2 table (``exact=True``: binomial test of the discordant cells)."""
    from procgrade.engine.analysis.exact_replicas import mcnemar_test

    counts = np.asarray(table)
    if counts.shape != (2, 2) or not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
        raise ValueError(f"need a 2x2 table of non-negative integer counts, got {counts.tolist()!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic, pvalue = mcnemar_test(counts, exact)  # statsmodels' mcnemar(correction=True), same bits
    cells = _ints(counts)
    return McNemar(
        table=(cells[0][:2], cells[1][:2]), first_only=cells[0][1], second_only=cells[1][0],
        statistic=statistic, pvalue=pvalue, exact=exact, compares=compares,
    )


def mcnemar(first: Sequence[Any] | np.ndarray, second: Sequence[Any] | np.ndarray, *,
            reference: Sequence[Any] | np.ndarray | None = None, positive: Any = True,
            exact: bool = True) -> McNemar:
    """Do two candidate graders differ on the same items?

    With ``reference``: whether each candidate's label equals the reference's (accuracy difference).
    Without: whether each candidate passed the item (label == ``positive``; pass-rate difference)."""
    a, b = _pair(first, second)
    if reference is not None:
        ref, _ = _pair(reference, a)
        hit_a = [x == r for x, r in zip(a, ref)]
        hit_b = [x == r for x, r in zip(b, ref)]
        compares = "correct"
    else:
        hit_a = [x == positive for x in a]
        hit_b = [x == positive for x in b]
        compares = "passed"
    table = np.zeros((2, 2), dtype=np.int64)
    for x, y in zip(hit_a, hit_b):
        table[0 if x else 1, 0 if y else 1] += 1
    return mcnemar_table(table, exact=exact, compares=compares)


# ---------------------------------------------------------------------------------------------------------------
# many graders


def paired_labels(first: Mapping[Hashable, Any],
                  second: Mapping[Hashable, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """``(items, first_labels, second_labels)`` over the items both graded (a ``None`` label = not graded),
    items in sorted order."""
    items = _sorted(k for k in first if k in second and first[k] is not None and second[k] is not None)
    return items, [first[k] for k in items], [second[k] for k in items]


@dataclass(frozen=True)
class PairAgreement(_Plain):
    """Two graders over the ``n`` items both graded."""

    first: str
    second: str
    n: int
    agreement: Proportion
    kappa: Kappa


@dataclass(frozen=True)
class AgreementMatrix(_Plain):
    """Pairwise agreement among ``graders`` (sorted): every unordered pair once in ``pairs``, and symmetric square
    tables in grader order (the diagonal is each grader against itself). ``None`` marks a pair with no common item
    (or an undefined kappa)."""

    graders: tuple[str, ...]
    labels: tuple[Any, ...]
    weights: str | None
    pairs: tuple[PairAgreement, ...]
    counts: tuple[tuple[int, ...], ...]
    agreement: tuple[tuple[float | None, ...], ...]
    kappa: tuple[tuple[float | None, ...], ...]

    def pair(self, first: str, second: str) -> PairAgreement:
        """The pair's statistics, in either order."""
        a, b = _sorted([first, second])
        for p in self.pairs:
            if (p.first, p.second) == (a, b):
                return p
        raise KeyError((first, second))


def agreement_matrix(grades: Mapping[str, Mapping[Hashable, Any]], *, labels: Sequence[Any] | None = None,
                     weights: Weights = None, confidence: float = 0.95) -> AgreementMatrix:
    """Agreement and Cohen's kappa for every pair of graders over the items both graded.

    ``grades`` maps each grader to ``{item: label}`` (``None`` = not graded). One label scale serves every pair:
    ``labels``, or every label seen, sorted."""
    _check_weights(weights, labels)
    graders = tuple(str(g) for g in _sorted(grades))
    if len(graders) != len(grades):
        raise ValueError("grader names must be distinct as strings")
    by_name = {str(g): grades[g] for g in grades}
    seen = [v for g in graders for v in by_name[g].values() if v is not None]
    scale = _resolve_labels(seen, labels)
    pairs: list[PairAgreement] = []
    cells: dict[tuple[str, str], PairAgreement] = {}
    for i, a in enumerate(graders):
        for b in graders[i:]:
            _, la, lb = paired_labels(by_name[a], by_name[b])
            if la:
                result = agreement(la, lb, labels=scale, weights=weights, confidence=confidence)
                pa = PairAgreement(a, b, result.n, result.agreement, result.kappa)
            else:
                pa = PairAgreement(a, b, 0, Proportion(0, 0, None, None, None),
                                   Kappa(None, None, None, None, weights))
            cells[a, b] = cells[b, a] = pa
            if a != b:
                pairs.append(pa)
    return AgreementMatrix(
        graders=graders, labels=scale, weights=weights, pairs=tuple(pairs),
        counts=tuple(tuple(cells[a, b].n for b in graders) for a in graders),
        agreement=tuple(tuple(cells[a, b].agreement.estimate for b in graders) for a in graders),
        kappa=tuple(tuple(cells[a, b].kappa.value for b in graders) for a in graders),
    )


@dataclass(frozen=True)
class KrippendorffAlpha(_Plain):
    """Krippendorff's alpha over ``graders`` x ``items`` (missing grades allowed); ``value`` is ``None`` with a
    ``note`` when the optional package is not installed or alpha is undefined."""

    value: float | None
    level: str
    graders: int
    items: int
    note: str | None


def krippendorff_alpha(grades: Mapping[str, Mapping[Hashable, Any]], *,
                       level: Literal["nominal", "ordinal", "interval", "ratio"] = "nominal",
                       labels: Sequence[Any] | None = None) -> KrippendorffAlpha:
    """Krippendorff's alpha via the GPL-3.0 ``krippendorff`` package, only if it is installed.

    ``grades`` maps each grader to ``{item: label}`` (``None`` = not graded). For ``nominal``/``ordinal`` the labels
    are coded by their position in ``labels`` (default: sorted; give the ordinal scale in order); ``interval``/
    ``ratio`` use the labels as numbers. Note the package's own default level is ``interval``; here it is nominal."""
    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f"unknown level of measurement {level!r}")
    graders = _sorted(grades)
    items = _sorted({k for g in graders for k, v in grades[g].items() if v is not None})
    try:
        import krippendorff  # GPL-3.0-or-later: optional, never a hard dependency
    except ImportError:
        return KrippendorffAlpha(None, level, len(graders), len(items), KRIPPENDORFF_NOTE)
    seen = [v for g in graders for v in grades[g].values() if v is not None]
    domain: list[float] | None = None
    if level in ("nominal", "ordinal"):
        scale = _resolve_labels(seen, labels)
        code = {v: float(i) for i, v in enumerate(scale)}
        domain = [float(i) for i in range(len(scale))]
    else:
        code = {v: float(v) for v in set(seen)}
    data = np.full((len(graders), len(items)), np.nan)
    for r, g in enumerate(graders):
        for c, item in enumerate(items):
            v = grades[g].get(item)
            if v is not None:
                data[r, c] = code[v]
    try:
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            value = _float(krippendorff.alpha(reliability_data=data, level_of_measurement=level,
                                              value_domain=domain))
    except (ValueError, ZeroDivisionError) as exc:
        return KrippendorffAlpha(None, level, len(graders), len(items), f"alpha undefined: {exc}")
    return KrippendorffAlpha(value, level, len(graders), len(items), None if value is not None else "alpha undefined")


# ---------------------------------------------------------------------------------------------------------------
# Bradley-Terry


@dataclass(frozen=True)
class Rating(_Plain):
    """One player's Elo-scale rating with its bootstrap interval.

    ``rank`` is Chatbot Arena's "rank (UB)": 1 + the number of players whose lower bound exceeds this upper bound.
    ``score`` sums the outcomes (a win 1, a tie 1/2) over ``games``."""

    player: str
    rating: float
    low: float
    high: float
    rank: int
    games: int
    score: float


@dataclass(frozen=True)
class BradleyTerry(_Plain):
    """Bradley-Terry ratings on the Elo scale, best first (ties in rating by player name).

    ``rating = scale * r + base`` where P(a beats b) = 1 / (1 + 10 ** ((rating_b - rating_a) / scale)); ratings
    are centred so that their mean is ``base``. Intervals: percentiles of ``n_bootstrap`` refits on multinomially
    reweighted comparisons (as Arena does), drawn from the Generator seeded with ``seed`` (``None`` when a Generator
    was passed in)."""

    ratings: tuple[Rating, ...]
    comparisons: int
    n_bootstrap: int
    confidence: float
    seed: int | None
    scale: float
    base: float
    l2: float
    method: str
    notes: tuple[str, ...]

    def rating(self, player: str) -> Rating:
        for r in self.ratings:
            if r.player == player:
                return r
        raise KeyError(player)


def _bt_loss_and_grad(ratings: np.ndarray, pairs: np.ndarray, outcomes: np.ndarray, weights: np.ndarray,
                      alpha: float, l2: float) -> tuple[float, np.ndarray]:
    # FastChat fastchat/serve/monitor/rating_systems.py bt_loss_and_grad, plus an optional ridge term.
    # log_expit instead of log(expit) keeps the loss finite when a rating runs away (a clean sweep).
    from scipy.special import expit, log_expit

    logits = alpha * (ratings[pairs[:, 0]] - ratings[pairs[:, 1]])
    probs = expit(logits)
    loss = -((log_expit(logits) * outcomes + log_expit(-logits) * (1.0 - outcomes)) * weights).sum()
    pair_grads = -alpha * (outcomes - probs) * weights
    grad = np.zeros_like(ratings)
    np.add.at(grad, pairs, pair_grads[:, None] * np.array([1.0, -1.0]))
    if l2:
        loss += 0.5 * l2 * float(ratings @ ratings)
        grad += l2 * ratings
    return float(loss), grad


def _fit_bt(pairs: np.ndarray, outcomes: np.ndarray, weights: np.ndarray, n_players: int, l2: float) -> np.ndarray:
    from scipy.optimize import minimize

    result = minimize(_bt_loss_and_grad, x0=np.zeros(n_players), args=(pairs, outcomes, weights, math.log(10.0), l2),
                      jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6})
    ratings = result.x
    return ratings - ratings.mean()


def bradley_terry(comparisons: Sequence[tuple[str, str, float]], *, seed: int | np.random.Generator = 0,
                  n_bootstrap: int = 1000, confidence: float = 0.95, scale: float = 400.0, base: float = 1000.0,
                  l2: float = 0.0) -> BradleyTerry:
    """Bradley-Terry ratings from pairwise outcomes ``(a, b, score_of_a)``: 1 = a won, 0 = b won, 0.5 = a tie
    (a tie counts as half a win each way, as in Chatbot Arena); any score in [0, 1] is a fractional win.

    The fit is FastChat's: identical (a, b, outcome) rows are counted once with their count as weight, the logistic
    loss with base-10 odds is minimised with L-BFGS-B from zero. A player who won (or lost) everything has no finite
    maximum-likelihood rating; ``l2`` > 0 adds a ridge penalty toward equal ratings that keeps them finite.
    Bootstrap: ``numpy.random.Generator.multinomial`` redraws the row counts ``n_bootstrap`` times (seeded: the same
    inputs and seed give the same intervals)."""
    rng = np.random.default_rng(seed)
    if not comparisons:
        raise ValueError("no comparisons")
    players = _sorted({str(p) for a, b, _ in comparisons for p in (a, b)})
    index = {p: i for i, p in enumerate(players)}
    rows: dict[tuple[int, int, float], int] = {}
    games = np.zeros(len(players), dtype=np.int64)
    score = np.zeros(len(players))
    for n, (a, b, outcome) in enumerate(comparisons):
        o = float(outcome)
        if not 0.0 <= o <= 1.0:
            raise ValueError(f"comparison {n}: outcome {outcome!r} is not in [0, 1]")
        i, j = index[str(a)], index[str(b)]
        if i == j:
            raise ValueError(f"comparison {n}: {a!r} against itself")
        games[[i, j]] += 1
        score[i] += o
        score[j] += 1.0 - o
        key = (i, j, o) if i < j else (j, i, 1.0 - o)
        rows[key] = rows.get(key, 0) + 1
    keys = sorted(rows)
    pairs = np.array([[i, j] for i, j, _ in keys], dtype=np.int64)
    outcomes = np.array([o for _, _, o in keys])
    counts = np.array([rows[k] for k in keys], dtype=np.float64)
    total = int(counts.sum())

    point = _fit_bt(pairs, outcomes, counts, len(players), l2)
    draws = rng.multinomial(total, counts / total, size=n_bootstrap) if n_bootstrap > 0 else np.empty((0, len(keys)))
    boot = np.array([_fit_bt(pairs, outcomes, w.astype(np.float64), len(players), l2) for w in draws])
    tail = (1.0 - confidence) / 2.0
    if n_bootstrap > 0:
        low, high = np.quantile(boot, [tail, 1.0 - tail], axis=0)
    else:
        low = high = np.full(len(players), np.nan)
    elo = point * scale + base
    low_elo, high_elo = low * scale + base, high * scale + base
    ranks = [1 + int(np.sum(low_elo > high_elo[i])) for i in range(len(players))]
    ratings = [Rating(p, float(elo[i]), float(low_elo[i]), float(high_elo[i]), ranks[i], int(games[i]),
                      float(score[i])) for i, p in enumerate(players)]
    ratings.sort(key=lambda r: (-r.rating, r.player))

    notes: list[str] = []
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(keys)), (pairs[:, 0], pairs[:, 1])), shape=(len(players), len(players)))
    components, _ = connected_components(graph, directed=False)
    if components > 1:
        notes.append(f"the comparisons form {components} disconnected groups: ratings across groups are not comparable")
    unbeaten = [p for i, p in enumerate(players) if score[i] in (0.0, float(games[i]))]
    if unbeaten and l2 == 0.0:
        notes.append("no finite maximum-likelihood rating for players who won or lost every game: "
                     + ", ".join(unbeaten) + " (pass l2 > 0 to regularise)")
    return BradleyTerry(
        ratings=tuple(ratings), comparisons=total, n_bootstrap=n_bootstrap, confidence=confidence,
        seed=seed if isinstance(seed, int) else None, scale=scale, base=base, l2=l2,
        method=("Bradley-Terry logistic likelihood, base-10 odds, ties as half wins, scipy.optimize L-BFGS-B "
                "(FastChat); percentile intervals from multinomial bootstrap of the comparison counts"),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------------------------
# variance decomposition


@dataclass(frozen=True)
class VarianceComponents(_Plain):
    """Score variance split into between groups (apps/products), between generations of a group (agent runs) and
    between re-gradings of one generation (grader noise), from a nested random-effects model.

    ``n_regraded`` counts the generations graded at least twice.
    ``generation_share`` = generation / (generation + regrading), ``regrading_share`` = the rest: the split the Vibe
    Code Bench variance analysis reports; ``generation_share`` is also the grader's test-retest reliability (ICC)
    at the artifact level. Components are ``None`` when the data cannot separate them (see ``notes``)."""

    n_scores: int
    n_groups: int
    n_generations: int
    n_regraded: int
    group: float | None
    generation: float | None
    regrading: float | None
    generation_share: float | None
    regrading_share: float | None
    converged: bool | None
    method: str
    notes: tuple[str, ...]


def variance_decomposition(scores: Sequence[float] | np.ndarray, generations: Sequence[Hashable],
                           groups: Sequence[Hashable] | None = None, *, reml: bool = True) -> VarianceComponents:
    """Split ``scores`` into generation and re-grading variance (and group variance when ``groups`` has more than
    one group).

    Each score is one grading of one generated artifact: ``generations[i]`` names the artifact (within its group
    ``groups[i]``); an artifact graded several times gives re-grading variance. The model is statsmodels
    ``mixedlm("score ~ 1", groups=group, re_formula="1", vc_formula={"gen": "0 + C(gen)"})`` (nested random
    effects: group, generation within group, residual = re-grading); with one group or none,
    ``mixedlm("score ~ 1", groups=gen)``. Binary scores make this a linear approximation."""
    values = np.asarray(scores, dtype=float)
    gens = _plain_list(generations, "generations")
    apps = [None] * len(gens) if groups is None else _plain_list(groups, "groups")
    if not (len(values) == len(gens) == len(apps)):
        raise ValueError(f"{len(values)} scores, {len(gens)} generations, {len(apps)} groups: lengths differ")
    if not np.isfinite(values).all():
        raise ValueError("scores must be finite numbers")
    app_codes = {a: i for i, a in enumerate(_sorted(set(apps)))}
    gen_keys = [(app_codes[a], g) for a, g in zip(apps, gens)]
    gen_codes = {k: i for i, k in enumerate(_sorted(set(gen_keys)))}
    per_gen = np.bincount([gen_codes[k] for k in gen_keys], minlength=len(gen_codes))
    regraded = int(np.sum(per_gen >= 2))
    n_apps, n_gens = len(app_codes), len(gen_codes)
    nested = n_apps > 1
    method = ("statsmodels mixedlm score ~ 1, groups=group, re_formula=1, vc_formula gen: 0 + C(gen)" if nested
              else "statsmodels mixedlm score ~ 1, groups=gen")
    method += f", {'REML' if reml else 'ML'}"

    def empty(note: str) -> VarianceComponents:
        return VarianceComponents(len(values), n_apps, n_gens, regraded, None, None, None, None, None, None,
                                  method, (note,))

    if regraded == 0:
        return empty("no generation was graded more than once: re-grading variance is not identified")
    if n_gens < 2:
        return empty("one generation only: generation variance is not identified")
    # imported only for a model to fit: statsmodels' formulas load pandas, seconds at a report's start
    import pandas as pd
    import statsmodels.formula.api as smf

    frame = pd.DataFrame({
        "score": values,
        "group": [app_codes[a] for a in apps],
        "gen": [gen_codes[k] for k in gen_keys],
    })
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if nested:
            model = smf.mixedlm("score ~ 1", frame, groups="group", re_formula="1",
                                vc_formula={"gen": "0 + C(gen)"})
        else:
            model = smf.mixedlm("score ~ 1", frame, groups="gen")
        fit = model.fit(reml=reml)
    notes = tuple(_sorted({f"{type(w.message).__name__}: {w.message}" for w in caught
                           if not issubclass(w.category, (DeprecationWarning, FutureWarning))}))
    group_var = _float(fit.cov_re.iloc[0, 0])
    if nested:
        gen_var = _float(fit.vcomp[0])
    else:
        gen_var, group_var = group_var, None
    regrade_var = _float(fit.scale)
    gen_share = regrade_share = None
    if gen_var is not None and regrade_var is not None and gen_var + regrade_var > 0:
        gen_share = gen_var / (gen_var + regrade_var)
        regrade_share = regrade_var / (gen_var + regrade_var)
    return VarianceComponents(
        n_scores=len(values), n_groups=n_apps, n_generations=n_gens, n_regraded=regraded,
        group=group_var, generation=gen_var, regrading=regrade_var,
        generation_share=gen_share, regrading_share=regrade_share,
        converged=bool(fit.converged), method=method, notes=notes,
    )
