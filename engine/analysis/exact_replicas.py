"""Two statsmodels statistics computed with scipy alone, to the bit.

The report needs the Clopper-Pearson range of a proportion and the Mantel-Haenszel pooled odds
ratio; importing statsmodels for them costs seconds (it loads pandas and its whole tools
package), more than everything else the report computes. These functions make the same scipy
and numpy calls on the same values in the same order as ``statsmodels.stats.proportion.
proportion_confint(method="beta")`` and ``statsmodels.stats.contingency_tables.StratifiedTable``
(``oddsratio_pooled``, ``oddsratio_pooled_confint``), so the figures are the same floats;
tests/test_analysis_replicas.py checks them against statsmodels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["clopper_pearson_bounds", "mantel_haenszel_odds_ratio"]


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
