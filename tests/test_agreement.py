"""Grader agreement statistics (engine.analysis.agreement).

The DevAI baseline of the calibration research is reproduced from the judgments copied under
``tests/fixtures/devai-judgments`` (MIT, see its README): requirement-level labels of the gray-box
Agent-as-a-Judge against the human labels, per system and over all three systems.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from procgrade.engine.analysis.agreement import (
    KRIPPENDORFF_NOTE,
    agreement,
    agreement_matrix,
    binary_agreement,
    krippendorff_alpha,
    mcnemar,
    mcnemar_table,
    paired_labels,
    proportion,
    variance_decomposition,
)

DEVAI = Path(__file__).parent / "fixtures" / "devai-judgments"
SYSTEMS = ("OpenHands", "MetaGPT", "GPT-Pilot")


def devai_labels(system: str, grader: str) -> dict[tuple[str, str, int], bool]:
    """``{(system, task, requirement_id): satisfied}`` from ``requirements[].satisfied`` (not from the
    task-level ``satisfied_all_requirements``, which contradicts the requirements for OpenHands task 31)."""
    folder = DEVAI / system / ("human_as_a_judge" if grader == "human" else "agent_as_a_judge/gray_box")
    labels = {}
    for path in sorted(folder.glob("*.json")):
        for req in json.loads(path.read_text(encoding="utf-8"))["requirements"]:
            assert isinstance(req["satisfied"], bool), (path, req["requirement_id"])
            labels[system, path.stem, req["requirement_id"]] = req["satisfied"]
    return labels


def devai_pairs(systems: tuple[str, ...]) -> tuple[list[bool], list[bool]]:
    human: dict = {}
    judge: dict = {}
    for system in systems:
        human.update(devai_labels(system, "human"))
        judge.update(devai_labels(system, "judge"))
    assert sorted(human) == sorted(judge)  # the same requirements graded by both
    _, h, j = paired_labels(human, judge)
    return h, j


# calibration.md 2.1, gray-box AaaJ vs human, requirement level:
# n, agreement, Clopper-Pearson 95%, Cohen kappa [95% CI], precision, recall, wrong-pass (FPR), wrong-fail (FNR)
BASELINE = {
    "OpenHands": (366, 0.902, (0.866, 0.930), 0.800, (0.737, 0.862), 0.881, 0.892, 0.091, 0.108),
    "MetaGPT": (366, 0.921, (0.888, 0.946), 0.775, (0.697, 0.853), 0.802, 0.852, 0.060, 0.148),
    "GPT-Pilot": (366, 0.866, (0.827, 0.899), 0.730, (0.660, 0.800), 0.835, 0.871, 0.138, 0.129),
    "all": (1098, 0.896, (0.877, 0.914), 0.778, (0.739, 0.816), 0.846, 0.875, 0.092, 0.125),
}


def r3(x: float | None) -> float:
    assert x is not None
    return round(x, 3)


@pytest.mark.parametrize("system", list(BASELINE))
def test_devai_baseline(system: str) -> None:
    n, agree, agree_ci, kappa, kappa_ci, precision, recall, wrong_pass, wrong_fail = BASELINE[system]
    human, judge = devai_pairs(SYSTEMS if system == "all" else (system,))
    result = binary_agreement(human, judge)  # reference = human, candidate = judge
    assert result.n == n == result.tp + result.fp + result.fn + result.tn
    assert r3(result.agreement.estimate) == agree
    assert (r3(result.agreement.low), r3(result.agreement.high)) == agree_ci
    assert r3(result.kappa.value) == kappa
    assert (r3(result.kappa.low), r3(result.kappa.high)) == kappa_ci
    assert r3(result.precision) == precision
    assert r3(result.recall) == recall
    assert r3(result.wrong_pass.estimate) == wrong_pass
    assert r3(result.wrong_fail.estimate) == wrong_fail
    # the rates are the confusion counts read the documented way round (rows = human)
    assert result.wrong_pass.count == result.fp and result.wrong_pass.total == result.fp + result.tn
    assert result.wrong_fail.count == result.fn and result.wrong_fail.total == result.fn + result.tp
    # the nominal form gives the same agreement and kappa
    plain = agreement(human, judge)
    assert plain.labels == (False, True)
    assert plain.table == ((result.tn, result.fp), (result.fn, result.tp))
    assert plain.agreement == result.agreement and plain.kappa == result.kappa


def test_devai_requirement_counts() -> None:
    # 366 requirements per system (the paper says 365)
    for system in SYSTEMS:
        assert len(devai_labels(system, "human")) == len(devai_labels(system, "judge")) == 366


def test_to_dict_is_plain_and_deterministic() -> None:
    human, judge = devai_pairs(("OpenHands",))
    first = binary_agreement(human, judge).to_dict()
    again = binary_agreement(np.array(human), np.array(judge)).to_dict()
    assert json.dumps(first, sort_keys=False) == json.dumps(again, sort_keys=False)
    assert isinstance(first["tp"], int) and isinstance(first["agreement"]["count"], int)
    assert first["agreement"]["estimate"] == 330 / 366  # full precision unless asked
    shown = binary_agreement(human, judge).to_dict(digits=3)
    assert shown["agreement"]["estimate"] == 0.902 and shown["tp"] == first["tp"]


def test_clopper_pearson_edges() -> None:
    assert proportion(0, 0).estimate is None
    zero = proportion(0, 10)
    assert zero.low == 0.0 and 0.0 < zero.high < 0.31  # exact interval: 1 - 0.025 ** (1/10) = 0.3085
    assert math.isclose(zero.high, 1 - 0.025 ** (1 / 10))
    with pytest.raises(ValueError):
        proportion(3, 2)


def test_weighted_kappa_on_an_ordinal_scale() -> None:
    # arena round scores on the -2..+1 scale: the candidate is mostly one step off
    scale = [-2, -1, 0, 1]
    reference = [-2, -2, -1, -1, 0, 0, 0, 1, 1, 1]
    candidate = [-2, -1, -1, 0, 0, 0, 1, 1, 1, 0]
    unweighted = agreement(reference, candidate, labels=scale)
    linear = agreement(reference, candidate, labels=scale, weights="linear")
    quadratic = agreement(reference, candidate, labels=scale, weights="quadratic")
    # weighted kappa by its definition: 1 - sum(w * observed) / sum(w * expected), w = |i - j| (or squared)
    table = np.array(linear.table, dtype=float)
    expected = np.outer(table.sum(1), table.sum(0)) / table.sum()
    distance = np.abs(np.subtract.outer(np.arange(4), np.arange(4)))
    for result, w in ((linear, distance), (quadratic, distance ** 2)):
        assert math.isclose(result.kappa.value, 1 - (w * table).sum() / (w * expected).sum())
        assert result.kappa.low < result.kappa.value < result.kappa.high
    # near misses count for more than under the unweighted kappa
    assert unweighted.kappa.value < linear.kappa.value < quadratic.kappa.value
    assert linear.agreement == unweighted.agreement  # exact agreement does not depend on weights
    assert linear.kappa.weights == "linear"
    # the scale must be given: weights follow positions, and an unused level changes the distances
    with pytest.raises(ValueError, match="labels"):
        agreement(reference, candidate, weights="linear")
    gapped = agreement([-2, 0, 1, 1], [-2, 1, 1, 0], labels=[-2, 0, 1], weights="linear")
    full = agreement([-2, 0, 1, 1], [-2, 1, 1, 0], labels=scale, weights="linear")
    assert gapped.kappa.value != full.kappa.value
    with pytest.raises(ValueError, match="not in the scale"):
        agreement([2, 1], [1, 1], labels=scale)


def test_agreement_input_errors() -> None:
    with pytest.raises(ValueError, match="same items"):
        agreement([True, False], [True])
    with pytest.raises(ValueError, match="missing"):
        agreement([True, None], [True, False])
    with pytest.raises(ValueError, match="not in the scale"):
        binary_agreement([1, 0, 2], [1, 0, 1], positive=1, negative=0)


def test_undefined_kappa_and_rates() -> None:
    same = binary_agreement([True, True, True], [True, True, True])
    assert same.agreement.estimate == 1.0 and same.kappa.value is None
    assert same.wrong_pass.total == 0 and same.wrong_pass.estimate is None
    assert same.precision == 1.0 and same.recall == 1.0
    none_passed = binary_agreement([False, True], [False, False])
    assert none_passed.precision is None and none_passed.recall == 0.0
    json.dumps(same.to_dict())  # no NaN reaches the plain data


def test_mcnemar_on_a_hand_made_table() -> None:
    # discordant cells 2 and 8: exact two-sided binomial p = 2 * P(X <= 2 | 10, 1/2) = 2 * 56 / 1024
    result = mcnemar_table([[10, 2], [8, 5]])
    assert (result.first_only, result.second_only) == (2, 8)
    assert result.statistic == 2.0 and result.exact
    assert math.isclose(result.pvalue, 112 / 1024)
    assert mcnemar_table([[7, 0], [0, 3]]).pvalue == 1.0
    with pytest.raises(ValueError):
        mcnemar_table([[1, 2, 3], [4, 5, 6]])


def test_mcnemar_two_candidates_on_the_same_items() -> None:
    reference = [True] * 6 + [False] * 4
    first = [True] * 6 + [False] * 4  # always right
    second = [False, False, False, True, True, True, True, False, False, False]  # wrong on items 0, 1, 2 and 6
    result = mcnemar(first, second, reference=reference)
    assert result.compares == "correct"
    assert result.table == ((6, 4), (0, 0)) and (result.first_only, result.second_only) == (4, 0)
    assert math.isclose(result.pvalue, 2 / 16)
    rates = mcnemar(first, second)  # pass rates: 6/10 against 4/10
    assert rates.compares == "passed" and rates.table == ((3, 3), (1, 3))
    assert result.to_dict()["table"] == [[6, 4], [0, 0]]


def test_agreement_matrix_is_symmetric_and_uses_items_both_graded() -> None:
    human = devai_labels("OpenHands", "human")
    judge = devai_labels("OpenHands", "judge")
    items = sorted(human)
    lenient = {k: True for k in items[:300]}  # passes everything, grades only 300 items
    sparse = {k: (None if i % 3 == 0 else human[k]) for i, k in enumerate(items)}  # None = not graded
    grades = {"judge": judge, "lenient": lenient, "human": human, "sparse": sparse}
    matrix = agreement_matrix(grades)
    assert matrix.graders == ("human", "judge", "lenient", "sparse")
    assert len(matrix.pairs) == 6
    for table in (matrix.counts, matrix.agreement, matrix.kappa):
        assert all(table[i][j] == table[j][i] for i in range(4) for j in range(4))
    assert [matrix.agreement[i][i] for i in range(4)] == [1.0] * 4
    assert matrix.counts[0][2] == 300 and matrix.counts[0][3] == 244 and matrix.counts[0][0] == 366
    hj = matrix.pair("judge", "human")
    direct = binary_agreement(*devai_pairs(("OpenHands",)))
    assert hj.n == 366 and hj.agreement == direct.agreement and hj.kappa.value == direct.kappa.value
    assert matrix.pair("human", "sparse").agreement.estimate == 1.0
    assert matrix.pair("human", "lenient").kappa.value == 0.0  # a constant grader carries no information
    # insertion order of graders and items does not matter
    shuffled = {g: dict(reversed(list(grades[g].items()))) for g in reversed(list(grades))}
    assert agreement_matrix(shuffled).to_dict() == matrix.to_dict()
    with pytest.raises(KeyError):
        matrix.pair("human", "nobody")


def test_agreement_matrix_with_a_pair_that_shares_no_item() -> None:
    matrix = agreement_matrix({"a": {1: 0, 2: 1}, "b": {3: 1, 4: 0}, "c": {1: 0, 2: 1, 3: 1, 4: 1}},
                              labels=[0, 1], weights="linear")
    ab = matrix.pair("a", "b")
    assert ab.n == 0 and ab.agreement.estimate is None and ab.kappa.value is None
    assert matrix.agreement[0][1] is None and matrix.counts[0][1] == 0
    assert matrix.pair("a", "c").kappa.value == 1.0


def test_krippendorff_alpha_absent_returns_none_with_the_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "krippendorff", None)  # import fails as if not installed
    result = krippendorff_alpha({"human": devai_labels("OpenHands", "human"),
                                 "judge": devai_labels("OpenHands", "judge")})
    assert result.value is None and result.note == KRIPPENDORFF_NOTE
    assert "GPL-3.0" in result.note and "krippendorff" in result.note
    assert (result.graders, result.items, result.level) == (2, 366, "nominal")
    assert result.to_dict()["value"] is None


def test_krippendorff_alpha_when_installed() -> None:
    # The GPL-3.0 extra is in the dev environment, so this runs; the absent path is tested above.
    result = krippendorff_alpha({"human": devai_labels("OpenHands", "human"),
                                 "judge": devai_labels("OpenHands", "judge")})
    assert result.note is None and round(result.value, 3) == 0.800  # calibration.md 2.1


def _simulated_scores(seed: int) -> tuple[list[float], list[str], list[str]]:
    """8 apps x 6 generations x 5 re-gradings; SDs 1.0 (app), 0.7 (generation), 0.3 (re-grading)."""
    rng = np.random.default_rng(seed)
    scores, gens, apps = [], [], []
    for app in range(8):
        u = rng.normal(0, 1.0)
        for gen in range(6):
            v = rng.normal(0, 0.7)
            for _ in range(5):
                scores.append(5.0 + u + v + rng.normal(0, 0.3))
                gens.append(f"g{gen}")
                apps.append(f"app{app}")
    return scores, gens, apps


def test_variance_decomposition_recovers_simulated_components() -> None:
    scores, gens, apps = _simulated_scores(7)
    result = variance_decomposition(scores, gens, apps)
    assert (result.n_scores, result.n_groups, result.n_generations, result.n_regraded) == (240, 8, 48, 48)
    assert result.converged
    assert 0.3 < result.group < 3.0  # true 1.0 (only 8 apps)
    assert 0.3 < result.generation < 0.75  # true 0.49
    assert 0.06 < result.regrading < 0.13  # true 0.09
    assert abs(result.generation_share - 0.49 / 0.58) < 0.08
    assert math.isclose(result.generation_share + result.regrading_share, 1.0)
    assert variance_decomposition(scores, gens, apps).to_dict() == result.to_dict()
    # one app: generation vs re-grading only
    one = variance_decomposition(scores[:30], gens[:30])
    assert one.group is None and one.n_groups == 1 and 0.1 < one.generation < 1.5 and one.regrading < 0.2


def test_variance_decomposition_needs_repeated_grades() -> None:
    result = variance_decomposition([1.0, 2.0, 3.0, 2.5], ["a", "b", "c", "d"])
    assert result.generation is None and result.n_regraded == 0
    assert "more than once" in result.notes[0]
    with pytest.raises(ValueError, match="lengths"):
        variance_decomposition([1.0, 2.0], ["a"])


def test_kappa_interval_stays_within_kappas_range() -> None:
    """On a small sample the asymptotic interval passes 1; the reported one is clipped."""
    from statsmodels.stats.inter_rater import cohens_kappa

    reference = [True] * 5 + [False] * 5
    candidate = [True] * 4 + [False] * 6
    result = binary_agreement(reference, candidate)
    raw_high = cohens_kappa(np.array([[5, 0], [1, 4]])).distribution_kappa.interval(0.95)[1]
    assert raw_high > 1.0
    assert result.kappa.high == 1.0 and result.kappa.low is not None and -1.0 <= result.kappa.low < result.kappa.value
