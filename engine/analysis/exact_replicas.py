"""statsmodels and scikit-learn statistics computed with numpy and scipy alone, to the bit.

The report needs the Clopper-Pearson range of a proportion and the Mantel-Haenszel pooled odds
ratio; importing statsmodels for them costs seconds (it loads pandas and its whole tools
package), more than everything else the report computes. These functions make the same scipy
and numpy calls on the same values in the same order as ``statsmodels.stats.proportion.
proportion_confint(method="beta")`` and ``statsmodels.stats.contingency_tables.StratifiedTable``
(``oddsratio_pooled``, ``oddsratio_pooled_confint``), so the figures are the same floats;
tests/test_analysis_replicas.py checks them against statsmodels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["binary_scores", "clopper_pearson_bounds", "cohen_kappa", "confusion_counts", "kappa_interval",
           "kappa_variance", "mantel_haenszel_odds_ratio", "mcnemar_test", "plain_labels"]


def clopper_pearson_bounds(count: int, nobs: int, alpha: float) -> tuple[float, float]:
    """``proportion_confint(count, nobs, alpha=alpha, method="beta")`` as floats (two-sided)."""
    from scipy import stats

    count_a, nobs_a = np.asarray(count, dtype=np.float64), np.asarray(nobs, dtype=np.float64)
    q = count_a / nobs_a
    half = alpha / 2.0
    low = stats.beta.ppf(half, count_a, nobs_a - count_a + 1)
    high = stats.beta.isf(half, count_a + 1, nobs_a - count_a)
    low = 0 if q == 0 else low
    high = 1 if q == 1 else high
    return float(low), float(high)


def mantel_haenszel_odds_ratio(tables: Sequence[tuple[int, int, int, int]],
                               alpha: float) -> tuple[float, float, float]:
    """The Mantel-Haenszel pooled odds ratio of 2x2 tables ``(a, b, c, d)`` = ``[[a, b], [c, d]]`` and its
    Robins-Breslow-Greenland interval: ``StratifiedTable(tables).oddsratio_pooled`` and
    ``.oddsratio_pooled_confint(alpha)``."""
    from scipy import stats

    table = np.dstack([np.array([[a, b], [c, d]], dtype=float) for a, b, c, d in tables]).astype(np.float64)
    ad = table[0, 0, :] * table[1, 1, :]
    bc = table[0, 1, :] * table[1, 0, :]
    apd = table[0, 0, :] + table[1, 1, :]
    n = table.sum(0).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = np.sum(ad / n) / np.sum(bc / n)
        adns = np.sum(ad / n)
        bcns = np.sum(bc / n)
        variance = np.sum(apd * ad / n**2) / adns**2
        mid = apd * bc / n**2
        mid += (1 - apd / n) * ad / n
        mid = np.sum(mid)
        mid /= adns * bcns
        variance += mid
        variance += np.sum((1 - apd / n) * bc / n) / bcns**2
        variance /= 2
        se = np.sqrt(variance)
        log_estimate = np.log(estimate)
        f = -stats.norm.ppf(alpha / 2)
        low = np.exp(log_estimate - f * se)
        high = np.exp(log_estimate + f * se)
    return float(estimate), float(low), float(high)


# --- agreement statistics (engine/analysis/agreement.py): scikit-learn and statsmodels, to the bit ---------
# ``calibrate`` used them for a confusion table, Cohen's kappa and its interval, precision, recall, F1 and
# McNemar's test; importing scikit-learn's metrics and any statsmodels module loads pandas (half a second
# of a calibration's start). Each function below makes the same numpy and scipy operations on the same
# values in the same order as the library does; tests/test_analysis_replicas.py checks them against it.


def plain_labels(labels: Sequence[object]) -> bool:
    """Whether scikit-learn would take ``labels`` as class labels as they are: all strings, or all integers
    (bools included). Other scales (floats, mixed types) go to scikit-learn itself, which validates them."""
    return bool(labels) and (all(isinstance(v, str) for v in labels) or all(isinstance(v, int) for v in labels))


def confusion_counts(reference: Sequence[object], candidate: Sequence[object],
                     labels: Sequence[object]) -> np.ndarray:
    """``sklearn.metrics.confusion_matrix(reference, candidate, labels=labels)`` (int64, rows = reference)
    for :func:`plain_labels` scales; items with a label outside ``labels`` are not counted, as there."""
    index = {label: i for i, label in enumerate(labels)}
    table = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for ref, cand in zip(reference, candidate):
        row, col = index.get(ref), index.get(cand)
        if row is not None and col is not None:
            table[row, col] += 1
    return table


def cohen_kappa(table: np.ndarray, weights: str | None) -> float:
    """``sklearn.metrics.cohen_kappa_score`` from its confusion matrix ``table``; NaN where it is undefined
    (scikit-learn warns and returns its ``replace_undefined_by``, NaN)."""
    confusion = np.asarray(table).astype(np.float64, copy=False)
    n_classes = confusion.shape[0]
    sum0 = np.sum(confusion, axis=0)
    sum1 = np.sum(confusion, axis=1)
    numerator = np.outer(sum0, sum1)
    denominator = np.sum(sum0)
    if denominator == 0:
        return math.nan
    expected = numerator / denominator
    if weights is None:
        w_mat = np.ones([n_classes, n_classes], dtype=np.float64)
        np.fill_diagonal(w_mat, 0)
    else:
        w_mat = np.zeros([n_classes, n_classes], dtype=np.float64)
        w_mat += np.arange(n_classes)
        w_mat = np.abs(w_mat - w_mat.T) if weights == "linear" else (w_mat - w_mat.T) ** 2
    numerator = np.sum(w_mat * confusion)
    denominator = np.sum(w_mat * expected)
    if denominator == 0:
        return math.nan
    return float(1 - numerator / denominator)


def kappa_variance(table: np.ndarray, wt: str | None) -> tuple[float, float]:
    """(kappa, its asymptotic variance) as ``statsmodels.stats.inter_rater.cohens_kappa(table, wt=wt)``
    computes them (``.kappa``, ``.var_kappa``): simple kappa for ``wt`` None, else linear or quadratic
    weights over the positions."""
    table = np.asarray(table, float)
    agree = np.diag(table).sum()
    nobs = table.sum()
    probs = table / nobs
    freqs = probs
    probs_diag = np.diag(probs)
    freq_row = table.sum(1) / nobs
    freq_col = table.sum(0) / nobs
    prob_exp = freq_col * freq_row[:, None]
    agree_exp = np.diag(prob_exp).sum()
    if wt is None:
        kappa = (agree / nobs - agree_exp) / (1 - agree_exp)
        term_a = probs_diag * (1 - (freq_row + freq_col) * (1 - kappa))**2
        term_a = term_a.sum()
        term_b = probs * (freq_col[:, None] + freq_row)**2
        d_idx = np.arange(table.shape[0])
        term_b[d_idx, d_idx] = 0
        term_b = (1 - kappa)**2 * term_b.sum()
        term_c = (kappa - agree_exp * (1 - kappa))**2
        var_kappa = (term_a + term_b - term_c) / (1 - agree_exp)**2 / nobs
        return kappa, var_kappa
    positions = np.asarray(np.arange(table.shape[0]), float)
    if wt == "linear":
        weights = np.abs(positions[:, None] - positions) / (positions[-1] - positions[0])
    elif wt == "quadratic":
        weights = (positions[:, None] - positions)**2 / (positions[-1] - positions[0])**2
    else:
        raise ValueError(f"wt must be None, 'linear' or 'quadratic', not {wt!r}")
    kappa = 1 - (weights * table).sum() / nobs / (weights * prob_exp).sum()
    w = 1. - weights
    w_row = (freq_col * w).sum(1)
    w_col = (freq_row[:, None] * w).sum(0)
    agree_wexp = (w * freq_col * freq_row[:, None]).sum()
    term_a = freqs * (w - (w_col + w_row[:, None]) * (1 - kappa))**2
    fac = 1. / ((1 - agree_wexp)**2 * nobs)
    var_kappa = term_a.sum() - (kappa - agree_wexp * (1 - kappa))**2
    var_kappa *= fac
    return kappa, var_kappa


def kappa_interval(table: np.ndarray, wt: str | None, confidence: float) -> tuple[float, float, float]:
    """(std, low, high): ``cohens_kappa(table, wt=wt)``'s ``std_kappa`` and
    ``distribution_kappa.interval(confidence)`` (the asymptotic normal around statsmodels' kappa)."""
    from scipy import stats

    kappa, var_kappa = kappa_variance(table, wt)
    std = np.sqrt(var_kappa)
    low, high = stats.norm(loc=kappa, scale=std).interval(confidence)
    return float(std), float(low), float(high)


def binary_scores(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """(precision, recall, F1) as ``sklearn.metrics.precision_score``/``recall_score``/``f1_score`` give them
    for ``average="binary"``, ``zero_division=nan``: one division of the counts each, NaN where it is 0/0."""
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / (tp + fn) if tp + fn else math.nan
    denominator = (tp + fn) + (tp + fp)  # scikit-learn: (1 + beta^2) tp / (beta^2 (tp + fn) + (tp + fp)), beta 1
    f1 = 2.0 * tp / denominator if denominator else math.nan
    return precision, recall, f1


def mcnemar_test(table: np.ndarray, exact: bool) -> tuple[float, float]:
    """(statistic, p-value) of ``statsmodels.stats.contingency_tables.mcnemar(table, exact=exact,
    correction=True)`` on a 2x2 table of counts."""
    from scipy import stats

    table = np.asarray(table, dtype=np.float64)
    n1, n2 = table[0, 1], table[1, 0]
    if exact:
        statistic = np.minimum(n1, n2)
        pvalue = stats.binom.cdf(statistic, int(n1 + n2), 0.5) * 2
        pvalue = np.minimum(pvalue, 1)
    else:
        statistic = (np.abs(n1 - n2) - 1) ** 2 / (1.0 * (n1 + n2))
        pvalue = stats.chi2.sf(statistic, 1)
    return float(statistic), float(pvalue)
