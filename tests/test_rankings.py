"""Rank agreement (engine.analysis.rankings) and Bradley-Terry ratings (engine.analysis.agreement).

The DevAI ranking check of the calibration research is reproduced from the judgments copied under
``tests/fixtures/devai-judgments`` (MIT, see its README).
"""

from __future__ import annotations

import json
import math
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest

from procgrade.engine.analysis.agreement import bradley_terry
from procgrade.engine.analysis.rankings import (
    EXACT_P_MAX_GROUPS,
    rank_agreement,
    rank_agreement_over_tasks,
    rank_flips,
    ranks,
)

DEVAI = Path(__file__).parent / "fixtures" / "devai-judgments"
SYSTEMS = ("OpenHands", "MetaGPT", "GPT-Pilot")


def satisfaction_rates(grader: str) -> dict[tuple[str, str], float]:
    """``{(system, task): share of requirements satisfied}`` from ``requirements[].satisfied``."""
    sub = "human_as_a_judge" if grader == "human" else "agent_as_a_judge/gray_box"
    rates = {}
    for system in SYSTEMS:
        for path in sorted((DEVAI / system / sub).glob("*.json")):
            reqs = json.loads(path.read_text(encoding="utf-8"))["requirements"]
            rates[system, path.stem] = sum(r["satisfied"] for r in reqs) / len(reqs)
    return rates


@pytest.fixture(scope="module")
def devai_rates() -> tuple[dict, dict]:
    return satisfaction_rates("human"), satisfaction_rates("judge")


def test_devai_ranking_check(devai_rates: tuple[dict, dict]) -> None:
    # calibration.md 2.1: per-(system, task) satisfaction rate, human vs AaaJ: Kendall tau-b 0.728
    # (bootstrap 95% [0.651, 0.795]), Spearman 0.847, n = 165
    human, judge = devai_rates
    result = rank_agreement(human, judge, seed=0, n_resamples=2000)
    assert result.n == 165
    assert round(result.kendall_tau_b.statistic, 3) == 0.728
    assert round(result.spearman.statistic, 3) == 0.847
    assert result.kendall_tau_b.pvalue < 1e-30
    # percentile bootstrap over the 165 runs; the printed interval's seed and resample count are unknown
    assert abs(result.kendall_tau_b.low - 0.651) < 0.01 and abs(result.kendall_tau_b.high - 0.795) < 0.01
    assert result.spearman.low < 0.847 < result.spearman.high
    assert "paired resampling of the 165 groups" in result.interval_method
    assert result.notes == ()


def test_devai_system_ranking_is_the_same_under_both_graders(devai_rates: tuple[dict, dict]) -> None:
    # GPT-Pilot > OpenHands > MetaGPT under both; the interval resamples the 55 tasks
    human, judge = devai_rates
    result = rank_agreement_over_tasks(human, judge, seed=0, n_resamples=500)
    assert result.groups == ("GPT-Pilot", "MetaGPT", "OpenHands")
    assert result.ranks_a == result.ranks_b == (1.0, 3.0, 2.0)
    assert result.flips == ()
    assert result.kendall_tau_b.statistic == 1.0 and result.spearman.statistic == 1.0
    assert all(p.same_order for p in result.pair_orders) and len(result.pair_orders) == 3
    assert all(0.5 < p.support <= 1.0 for p in result.pair_orders)
    assert "resampling the 55 tasks" in result.interval_method
    assert result.kendall_tau_b.high == 1.0


def _enumerated_p(a: list[float], b: list[float], statistic: str) -> float:
    """Two-sided p by hand over all pairings of ``b`` with ``a``: twice the smaller share of pairings at or
    beyond the data's statistic on either side (scipy's two-sided; with ties the null is not symmetric)."""
    from scipy.stats import kendalltau, spearmanr

    def value(y: list[float]) -> float:
        return float(kendalltau(a, y).statistic if statistic == "tau" else spearmanr(a, y).statistic)

    observed = value(b)
    values = [value(list(y)) for y in permutations(b)]
    greater = sum(v >= observed - 1e-12 for v in values) / len(values)
    less = sum(v <= observed + 1e-12 for v in values) / len(values)
    return min(1.0, 2 * min(greater, less))


@pytest.mark.parametrize(("a", "b"), [
    ([4, 3, 2, 1], [0.9, 0.8, 0.5, 0.1]),  # four systems in the same order: p = 2/4! = 1/12, not 0
    ([5, 4, 3, 2, 1], [0.5, 0.9, 0.4, 0.3, 0.1]),  # one swap
    ([3, 3, 2, 1, 1, 0], [0.7, 0.6, 0.6, 0.2, 0.4, 0.1]),  # ties in both
    ([7, 6, 5, 4, 3, 2, 1], [1, 2, 3, 4, 5, 6, 7]),  # reversed, at the exact limit
])
def test_few_groups_get_exact_pvalues(a: list[float], b: list[float]) -> None:
    # scipy's Spearman p is the t approximation, 0 whenever rho is +-1; its Kendall p is exact only
    # without ties. Few groups get the permutation p of both, as counting every pairing gives it.
    groups = [f"system {i}" for i in range(len(a))]
    result = rank_agreement(dict(zip(groups, a)), dict(zip(groups, b)), seed=0, n_resamples=200)
    assert result.n <= EXACT_P_MAX_GROUPS
    assert result.kendall_tau_b.pvalue == pytest.approx(_enumerated_p(a, b, "tau"), abs=1e-12)
    assert result.spearman.pvalue == pytest.approx(_enumerated_p(a, b, "rho"), abs=1e-12)
    if len(a) == 4:
        assert result.spearman.pvalue == pytest.approx(1 / 12) and result.kendall_tau_b.pvalue == pytest.approx(1 / 12)


def test_many_groups_keep_scipys_pvalues() -> None:
    from scipy.stats import kendalltau, spearmanr

    a = [float(i) for i in range(EXACT_P_MAX_GROUPS + 3)]
    b = [v if i % 3 else -v for i, v in enumerate(a)]
    groups = [f"g{i}" for i in range(len(a))]
    result = rank_agreement(dict(zip(groups, a)), dict(zip(groups, b)), seed=0, n_resamples=200)
    assert result.kendall_tau_b.pvalue == pytest.approx(kendalltau(a, b).pvalue)
    assert result.spearman.pvalue == pytest.approx(spearmanr(a, b).pvalue)


def test_rank_flips() -> None:
    a = {"x": 0.9, "y": 0.7, "z": 0.5, "w": 0.1}
    b = {"x": 0.6, "y": 0.8, "z": 0.5, "w": 0.2}
    flips = rank_flips(a, b)
    assert [(f.first, f.second) for f in flips] == [("x", "y")]  # A puts x above y, B the other way
    assert (flips[0].a_first, flips[0].b_first) == (0.9, 0.6)
    assert rank_flips(a, a) == ()
    # lower-is-better scores (e.g. error rates): the same pairs flip
    lower = rank_flips({k: -v for k, v in a.items()}, {k: -v for k, v in b.items()}, higher_is_better=False)
    assert [(f.first, f.second) for f in lower] == [("x", "y")]
    assert len(rank_flips(a, {k: -v for k, v in a.items()})) == 6
    with pytest.raises(ValueError, match="same groups"):
        rank_flips(a, {"x": 1.0})


def test_ties_are_not_flips_and_share_ranks() -> None:
    a = {"p": 2.0, "q": 2.0, "r": 1.0}
    b = {"p": 1.0, "q": 3.0, "r": 0.5}
    assert rank_flips(a, b) == ()  # p and q tie under A
    assert ranks(a) == {"p": 1.5, "q": 1.5, "r": 3.0}
    assert ranks(a, method="min") == {"p": 1, "q": 1, "r": 3}
    assert ranks(a, higher_is_better=False) == {"p": 2.5, "q": 2.5, "r": 1.0}
    result = rank_agreement(a, b, n_resamples=50)
    assert result.ranks_a == (1.5, 1.5, 3.0) and result.ranks_b == (2.0, 1.0, 3.0)
    assert math.isclose(result.kendall_tau_b.statistic, 2 / math.sqrt(6))  # tau-b with one tie in A


def test_bootstrap_is_deterministic_with_a_seed(devai_rates: tuple[dict, dict]) -> None:
    human, judge = devai_rates
    first = rank_agreement_over_tasks(human, judge, seed=11, n_resamples=200).to_dict()
    again = rank_agreement_over_tasks(dict(reversed(list(human.items()))), judge, seed=11, n_resamples=200).to_dict()
    assert json.dumps(first) == json.dumps(again)
    gen = rank_agreement_over_tasks(human, judge, seed=np.random.default_rng(11), n_resamples=200).to_dict()
    assert gen["seed"] is None and {**gen, "seed": 11} == first
    other = rank_agreement_over_tasks(human, judge, seed=12, n_resamples=200).to_dict()
    assert other["pair_orders"] != first["pair_orders"]
    subset = {k: v for k, v in list(human.items())[:40]}
    a = rank_agreement(subset, {k: judge[k] for k in subset}, seed=5, n_resamples=300, interval="BCa")
    b = rank_agreement(subset, {k: judge[k] for k in subset}, seed=5, n_resamples=300, interval="BCa")
    assert a == b and a.seed == 5


def test_rank_agreement_input_errors() -> None:
    with pytest.raises(ValueError, match="two groups"):
        rank_agreement({"a": 1.0}, {"a": 2.0})
    with pytest.raises(ValueError, match="every task"):
        rank_agreement_over_tasks({("s", 1): 1.0, ("t", 2): 0.0}, {("s", 1): 1.0, ("t", 2): 0.0})
    with pytest.raises(ValueError, match="interval"):
        rank_agreement({"a": 1.0, "b": 2.0}, {"a": 2.0, "b": 1.0}, interval="normal")


def test_constant_score_gives_undefined_correlation() -> None:
    result = rank_agreement({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 1.0, "b": 2.0, "c": 3.0}, n_resamples=20)
    assert result.kendall_tau_b.statistic is None and result.spearman.statistic is None
    assert any("undefined" in note for note in result.notes)
    json.dumps(result.to_dict())


# ---------------------------------------------------------------------------------------------------------------
# Bradley-Terry


def test_bradley_terry_matches_the_closed_form() -> None:
    # two players, a wins 3 of 4: P(a beats b) = 3/4, so rating_a - rating_b = 400 * log10(3)
    result = bradley_terry([("a", "b", 1.0)] * 3 + [("b", "a", 1.0)], n_bootstrap=50)
    a, b = result.rating("a"), result.rating("b")
    assert math.isclose(a.rating - b.rating, 400 * math.log10(3), abs_tol=1e-3)
    assert math.isclose((a.rating + b.rating) / 2, 1000.0, abs_tol=1e-9)  # centred on base
    assert (a.games, a.score, b.score) == (4, 3.0, 1.0)
    # two wins and two ties is the same likelihood: ties are half wins
    ties = bradley_terry([("a", "b", 1.0)] * 2 + [("a", "b", 0.5)] * 2, n_bootstrap=0)
    assert math.isclose(ties.rating("a").rating, a.rating, abs_tol=1e-3)


def test_bradley_terry_dominance_orders_the_ratings() -> None:
    games = [("a", "b", 1.0)] * 6 + [("b", "c", 1.0)] * 6 + [("a", "c", 1.0)] * 6 + [("a", "b", 0.0)] * 2 \
        + [("b", "c", 0.0)] * 2 + [("c", "a", 1.0)]
    result = bradley_terry(games, seed=1, n_bootstrap=100)
    assert [r.player for r in result.ratings] == ["a", "b", "c"]
    assert result.ratings[0].rating > result.ratings[1].rating > result.ratings[2].rating
    for r in result.ratings:
        assert r.low <= r.rating <= r.high
    assert result.notes == ()
    # a clean sweep has no finite MLE: still ordered, and the note says so; a ridge keeps it finite
    sweep = [("a", "b", 1.0), ("b", "c", 1.0), ("a", "c", 1.0)] * 3
    free = bradley_terry(sweep, n_bootstrap=0)
    assert [r.player for r in free.ratings] == ["a", "b", "c"] and "no finite" in free.notes[0]
    ridge = bradley_terry(sweep, n_bootstrap=0, l2=0.1)
    assert [r.player for r in ridge.ratings] == ["a", "b", "c"] and ridge.notes == ()
    assert ridge.ratings[0].rating - ridge.ratings[2].rating < free.ratings[0].rating - free.ratings[2].rating


def test_bradley_terry_ties_are_symmetric() -> None:
    result = bradley_terry([("a", "b", 0.5)] * 4 + [("b", "a", 0.5)] * 2, n_bootstrap=100)
    a, b = result.rating("a"), result.rating("b")
    assert math.isclose(a.rating, 1000.0, abs_tol=1e-6) and math.isclose(b.rating, 1000.0, abs_tol=1e-6)
    assert a.score == b.score == 3.0
    assert a.rank == b.rank == 1
    # swapping the sides of every game (and the outcome with it) changes nothing
    games = [("a", "b", 1.0), ("b", "c", 0.5), ("c", "a", 0.0), ("a", "c", 0.5), ("b", "a", 1.0)] * 2
    mirrored = [(y, x, 1.0 - o) for x, y, o in games]
    assert bradley_terry(games, seed=3, n_bootstrap=100) == bradley_terry(mirrored, seed=3, n_bootstrap=100)


def test_bradley_terry_bootstrap_is_deterministic() -> None:
    games = [("a", "b", 1.0), ("b", "c", 1.0), ("c", "a", 0.0), ("a", "b", 0.5), ("c", "b", 1.0)] * 3
    first = bradley_terry(games, seed=42, n_bootstrap=100).to_dict()
    assert json.dumps(first) == json.dumps(bradley_terry(games, seed=42, n_bootstrap=100).to_dict())
    assert bradley_terry(games, seed=43, n_bootstrap=100).to_dict() != first
    assert first["comparisons"] == 15 and isinstance(first["ratings"][0]["games"], int)


def test_bradley_terry_input_errors_and_disconnected_players() -> None:
    with pytest.raises(ValueError, match="itself"):
        bradley_terry([("a", "a", 1.0)])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bradley_terry([("a", "b", 2.0)])
    apart = bradley_terry([("a", "b", 1.0), ("a", "b", 0.0), ("c", "d", 1.0), ("c", "d", 0.5)], n_bootstrap=0)
    assert any("disconnected" in note for note in apart.notes)


def test_exact_ties_survive_the_task_bootstrap() -> None:
    """1/10 + 2/10 + 3/10 and 3/10 + 2/10 + 1/10 differ as floats; the groups must still tie."""
    from fractions import Fraction as F

    process = {("G1", "t1"): F(1, 10), ("G1", "t2"): F(2, 10), ("G1", "t3"): F(3, 10),
               ("G2", "t1"): F(3, 10), ("G2", "t2"): F(2, 10), ("G2", "t3"): F(1, 10),
               ("G3", "t1"): F(0), ("G3", "t2"): F(0), ("G3", "t3"): F(0)}
    outcome = {("G1", "t1"): 0, ("G1", "t2"): 0, ("G1", "t3"): 1, ("G2", "t1"): 1, ("G2", "t2"): 1,
               ("G2", "t3"): 0, ("G3", "t1"): 0, ("G3", "t2"): 0, ("G3", "t3"): 0}
    result = rank_agreement_over_tasks(process, outcome, n_resamples=199)
    assert result.ranks_a == (1.5, 1.5, 3.0)
    assert result.flips == ()
    assert round(result.kendall_tau_b.statistic, 6) == round(0.816496580927726, 6)
