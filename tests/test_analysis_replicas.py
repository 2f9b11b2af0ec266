"""The report's fast statistics give the library's own floats, to the bit (issue 16: same figures).

:func:`roc_auc` stands for ``sklearn.metrics.roc_auc_score``, :func:`_tau_b_and_rho` for scipy's
``kendalltau``/``spearmanr`` pair, :mod:`exact_replicas` for statsmodels' Clopper-Pearson range and
Mantel-Haenszel odds ratio, and the memoised bootstrap statistic for its uncached self; each is
checked against the library on many inputs, ties and degenerate cases included.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("statsmodels")

from procgrade.engine.analysis.association import roc_auc  # noqa: E402
from procgrade.engine.analysis.exact_replicas import clopper_pearson_bounds, mantel_haenszel_odds_ratio  # noqa: E402
from procgrade.engine.analysis.rankings import _both, _MemoisedCorrelations, _tau_b_and_rho  # noqa: E402


def _inputs(seed: int, count: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    for trial in range(count):
        size = int(rng.integers(2, 60))
        levels = int(rng.integers(1, 10))
        x = rng.integers(0, levels, size) / levels if trial % 2 else rng.random(size)
        y = rng.integers(0, levels, size) * 1.0 if trial % 3 else rng.random(size)
        yield x, y


def test_roc_auc_is_scikit_learns_to_the_bit() -> None:
    from sklearn.metrics import roc_auc_score

    checked = 0
    for x, y in _inputs(1, 800):
        labels = (y > np.median(y)).astype(int) if y.min() != y.max() else np.r_[0, np.ones(y.size - 1, int)]
        if labels.min() == labels.max():
            continue
        assert roc_auc(labels, x) == roc_auc_score(labels, x)
        checked += 1
    assert checked > 500


def test_rank_correlations_are_scipys_to_the_bit() -> None:
    for x, y in _inputs(2, 1500):
        assert np.array_equal(_tau_b_and_rho(x, y), _both(x, y), equal_nan=True), (x, y)
    constant = np.ones(5)
    assert np.isnan(_tau_b_and_rho(constant, np.arange(5.0))).all()


def test_memoised_correlations_give_what_each_call_gives() -> None:
    memo = _MemoisedCorrelations()
    rng = np.random.default_rng(3)
    base_x, base_y = rng.integers(0, 4, 6) * 1.0, rng.random(6)
    for _ in range(500):
        index = rng.integers(0, 6, 6)
        x, y = base_x[index], base_y[index]
        first = memo(x, y)
        assert np.array_equal(first, _both(x, y), equal_nan=True)
        first[0] = 99.0  # a caller changing its result never changes the cache
        assert np.array_equal(memo(x, y), _both(x, y), equal_nan=True)


def test_clopper_pearson_is_statsmodels_to_the_bit() -> None:
    from statsmodels.stats.proportion import proportion_confint

    for nobs in range(1, 45):
        for count in range(nobs + 1):
            for confidence in (0.9, 0.95, 0.99):
                low, high = proportion_confint(count, nobs, alpha=1 - confidence, method="beta")
                assert clopper_pearson_bounds(count, nobs, 1 - confidence) == (float(low), float(high))


def test_mantel_haenszel_is_statsmodels_to_the_bit() -> None:
    from statsmodels.stats.contingency_tables import StratifiedTable

    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(2000):
        tables = [tuple(int(v) for v in rng.integers(0, 9, 4)) for _ in range(int(rng.integers(1, 6)))]
        tables = [t for t in tables if (t[0] + t[1]) and (t[2] + t[3]) and (t[0] + t[2]) and (t[1] + t[3])]
        if not tables:
            continue
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore")
            st = StratifiedTable([np.array([[a, b], [c, d]], dtype=float) for a, b, c, d in tables])
            expected = (float(st.oddsratio_pooled), *(float(v) for v in st.oddsratio_pooled_confint(alpha=0.05)))
            found = mantel_haenszel_odds_ratio(tables, 0.05)
        assert np.array_equal(np.array(found), np.array(expected), equal_nan=True), tables
        checked += 1
    assert checked > 1000


# --- calibrate's agreement statistics (engine/analysis/agreement.py) ----------------------------------------------


def _label_pairs(seed: int, count: int):  # type: ignore[no-untyped-def]
    """(reference, candidate, scale) triples: int, bool and string scales, skewed and one-label data."""
    rng = np.random.default_rng(seed)
    for trial in range(count):
        size = int(rng.integers(1, 40))
        levels = int(rng.integers(1, 6))
        skew = rng.random()
        ref = [int(v) for v in rng.integers(0, levels, size)]
        cand = [v if rng.random() < skew else int(rng.integers(0, levels)) for v in ref]
        scale: list = list(range(max(levels, 2) + int(trial % 4 == 0)))  # sometimes a level nobody used
        if trial % 5 == 1:
            ref, cand, scale = [f"l{v}" for v in ref], [f"l{v}" for v in cand], [f"l{v}" for v in scale]
        elif trial % 5 == 2:
            ref, cand, scale = [v % 2 == 1 for v in ref], [v % 2 == 1 for v in cand], [False, True]
        yield ref, cand, scale


def test_confusion_counts_and_kappa_are_sklearns_and_statsmodels_to_the_bit() -> None:
    from sklearn.metrics import cohen_kappa_score, confusion_matrix
    from statsmodels.stats.inter_rater import cohens_kappa

    from procgrade.engine.analysis.exact_replicas import cohen_kappa, confusion_counts, kappa_interval, plain_labels

    checked = undefined = 0
    for ref, cand, scale in _label_pairs(3, 600):
        assert plain_labels(scale)
        table = confusion_counts(ref, cand, scale)
        expected = confusion_matrix(ref, cand, labels=scale)
        assert table.dtype == expected.dtype and (table == expected).all()
        for weights in (None, "linear", "quadratic"):
            with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
                warnings.simplefilter("ignore")
                value = cohen_kappa(table, weights)
                library = cohen_kappa_score(ref, cand, labels=scale, weights=weights)
                np.testing.assert_array_equal(value, library)  # NaN where undefined, equal bits otherwise
                if np.isnan(value):
                    undefined += 1
                    continue
                result = cohens_kappa(table, wt=weights)
                std, low, high = kappa_interval(table, weights, 0.95)
                np.testing.assert_array_equal([std, low, high],
                                              [result.std_kappa, *result.distribution_kappa.interval(0.95)])
                checked += 1
    assert checked > 1000 and undefined > 10


def test_plain_labels_leave_other_scales_to_sklearn() -> None:
    from procgrade.engine.analysis.exact_replicas import plain_labels

    assert plain_labels([False, True]) and plain_labels([-2, -1, 0, 1]) and plain_labels(["fail", "pass"])
    assert not plain_labels([]) and not plain_labels([0.5, 1.0]) and not plain_labels(["pass", 1])


def test_binary_scores_are_sklearns_to_the_bit() -> None:
    from sklearn.metrics import f1_score, precision_score, recall_score

    from procgrade.engine.analysis.exact_replicas import binary_scores

    for tp in range(5):
        for fp in range(5):
            for fn in range(5):
                for tn in range(3):
                    ref = [True] * tp + [False] * fp + [True] * fn + [False] * tn
                    cand = [True] * tp + [True] * fp + [False] * fn + [False] * tn
                    if not ref:
                        continue
                    scores = {"y_true": ref, "y_pred": cand, "labels": [False, True], "pos_label": True,
                              "average": "binary", "zero_division": np.nan}
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        expected = [precision_score(**scores), recall_score(**scores), f1_score(**scores)]
                    np.testing.assert_array_equal(binary_scores(tp, fp, fn), expected)


def test_mcnemar_is_statsmodels_to_the_bit() -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    from procgrade.engine.analysis.exact_replicas import mcnemar_test

    for a in range(0, 30, 7):
        for b in range(25):
            for c in range(25):
                table = np.array([[a, b], [c, 3]], dtype=np.int64)
                for exact in (True, False):
                    with np.errstate(divide="ignore", invalid="ignore"):
                        result = mcnemar(table, exact=exact, correction=True)
                        np.testing.assert_array_equal(mcnemar_test(table, exact),
                                                      [float(result.statistic), float(result.pvalue)])


def test_grouped_roc_auc_of_resamples_is_roc_auc_to_the_bit() -> None:
    """The association bootstrap's per-resample AUC (scores grouped once, counts per resample) against
    :func:`roc_auc` of the resample itself, ties and few distinct scores included."""
    from procgrade.engine.analysis.association import ScoreGroups

    rng = np.random.default_rng(11)
    checked = 0
    for x, y in _inputs(2, 300):
        labels = (y > np.median(y)).astype(int)
        groups = ScoreGroups(x)
        for _ in range(20):
            index = rng.integers(0, x.size, x.size)
            ys = labels[index]
            if ys.min() == ys.max():
                continue
            assert groups.roc_auc(index, ys) == roc_auc(ys, x[index])
            checked += 1
    assert checked > 3000
