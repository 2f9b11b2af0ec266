"""Outcome metrics: ViBench 2.0's published tables reproduced, and the metric rules one by one.

The fixtures in tests/fixtures/vibench/ hold Tables 5, 6 and 1 of ViBench 2.0 exactly as printed
(see their README.md). Table 5's per-product pass counts determine every build's pass@1 (the order
of builds within a product does not matter), so its pass@1 totals and intervals must come out
exactly as printed. Its plan pass rates are printed per product only (rounded means over 4 builds),
so only the point totals can be checked, and only to within that rounding.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from procgrade.engine.analysis.outcome_metrics import (
    WORKFLOW_PASS_THRESHOLD,
    Build,
    MixedSettingsError,
    NoGrade,
    PlanResult,
    check_settings,
    clopper_pearson,
    format_percent,
    mean_of_product_means,
    pass_at_1,
    pass_hat_k,
    pass_hat_k_from_counts,
    plan_pass_rate,
    score_interval,
    settings_differences,
    summarize,
    t_interval,
    workflow_passes,
    workflow_result,
)

FIXTURES = Path(__file__).parent / "fixtures" / "vibench"
TABLE5 = json.loads((FIXTURES / "table5.json").read_text(encoding="utf-8"))
TABLE6 = json.loads((FIXTURES / "table6.json").read_text(encoding="utf-8"))
TABLE1 = json.loads((FIXTURES / "table1.json").read_text(encoding="utf-8"))
TABLE5_MODELS = {m["model"]: m for m in TABLE5["models"]}
TABLE6_MODELS = {m["model"]: m for m in TABLE6["models"]}
TABLE1_MODELS = {m["model"]: m for m in TABLE1["models"]}
HELD_OUT = [f"held-out {i}" for i in range(1, 10)]


def builds_from_counts(model: str, passing: dict[str, int], per_product: int = 4, plans: int = 3) -> list[Build]:
    """``per_product`` builds of each product, ``passing[product]`` of them passing every plan,
    the others failing one plan of ``plans``."""
    builds = []
    for product, c in passing.items():
        assert 0 <= c <= per_product
        for i in range(per_product):
            results = {f"plan-{j}": "passed" for j in range(plans)}
            if i >= c:
                results["plan-0"] = "failed"
            builds.append(Build(product, f"{model}/{product}/{i + 1}", results, settings={"model": model}))
    return builds


def table5_counts(model: str) -> dict[str, int]:
    counts = {}
    for product, cell in TABLE5_MODELS[model]["pass_at_1"]["per_product"].items():
        c, n = cell.split("/")
        assert int(n) == TABLE5["builds_per_product"]
        counts[product] = int(c)
    return counts


def held_out_passing(model: str) -> int:
    """Builds passing on the 9 held-out products (36 builds), from Table 6's printed percent:
    the one count c with c/36 printing as the table does."""
    printed = TABLE6_MODELS[model]["pass_at_1"]["held_out"]
    candidates = [c for c in range(37) if format_percent(Fraction(c, 36)) == printed]
    assert len(candidates) == 1, (model, printed, candidates)
    return candidates[0]


def expected_text(total: dict) -> str:
    return total["printed"]


# --------------------------------------------------------------------------------------------
# Table 5: every pass@1 total and interval, to the printed precision


@pytest.mark.parametrize("model", list(TABLE5_MODELS))
def test_table5_pass_at_1_total_and_interval(model: str) -> None:
    total = TABLE5_MODELS[model]["pass_at_1"]["total"]
    summary = summarize(builds_from_counts(model, table5_counts(model)))
    interval = summary.pass_at_1_interval
    assert interval is not None
    assert summary.builds == 32 and len(summary.products) == 8
    assert format_percent(summary.pass_at_1) == total["estimate"]
    assert interval.method == total["method"]
    assert interval.format() == expected_text(total)
    if interval.method == "t":
        assert interval.df == 32 - 8
        assert format_percent(interval.half_width) == total["half_width"]
    else:
        # The printed range is the exact binomial range of the pooled passing builds of 32.
        assert (interval.count, interval.nobs) == (sum(table5_counts(model).values()), 32)


@pytest.mark.parametrize("model", list(TABLE5_MODELS))
def test_table5_per_product_pass_at_1(model: str) -> None:
    summary = summarize(builds_from_counts(model, table5_counts(model)))
    cells = TABLE5_MODELS[model]["pass_at_1"]["per_product"]
    assert {p.product: f"{p.passing}/{p.builds}" for p in summary.products} == cells


def test_table5_switch_rule_sonnet_crosses_zero_by_a_hair() -> None:
    """Sonnet 5.5 (4 of 32, 12.5%) is printed with the binomial range although it is not at 0%:
    its t interval, 12.5 +- 12.9, would cross 0. The rule is the crossing, not the point."""
    counts = table5_counts("Sonnet 5.5")
    groups = {p: [1] * c + [0] * (4 - c) for p, c in counts.items()}
    t = t_interval(groups)
    assert t.low < 0 < t.estimate
    assert format_percent(t.half_width) == "12.9"
    chosen = score_interval(groups, count=4, nobs=32)
    assert chosen.method == "clopper-pearson"
    assert chosen.format() == "12.5 (3.5–29.0)"


def test_table5_zero_rows_reach_the_limit() -> None:
    """0 of 32: the t interval has zero width and sits on 0; the paper prints the binomial range."""
    groups = {p: [0, 0, 0, 0] for p in TABLE5["products"]}
    t = t_interval(groups)
    assert (t.low, t.high, t.half_width) == (0.0, 0.0, 0.0)
    assert score_interval(groups, 0, 32).format() == "0.0 (0–10.9)"


@pytest.mark.parametrize("model", [m for m in TABLE5_MODELS if m != "Sonnet 5.5"])
def test_table5_plan_pass_point_totals(model: str) -> None:
    """The plan pass total is the mean of the 8 product means. From means printed to 0.1, the
    recomputed total, rounded, must match the print (Sonnet 5.5 does not; see the next test)."""
    row = TABLE5_MODELS[model]["plan_pass_rate"]
    groups = {p: [Fraction(v) / 100] for p, v in row["per_product"].items()}
    recomputed = mean_of_product_means(groups)
    assert format_percent(recomputed) == row["total"]["estimate"]
    assert row["total"]["method"] == "t"


def test_table5_sonnet_plan_pass_total_is_inconsistent() -> None:
    """Sonnet 5.5's printed product means (each true to +-0.05) average to 78.55, so its true total
    lies in [78.50, 78.60]; the paper prints 78.7 (and Table 6 too). Not reproducible as printed."""
    row = TABLE5_MODELS["Sonnet 5.5"]["plan_pass_rate"]
    recomputed = mean_of_product_means({p: [Fraction(v)] for p, v in row["per_product"].items()})
    assert recomputed == Fraction("78.55")
    assert abs(recomputed - Fraction(row["total"]["estimate"])) > Fraction(1, 10)
    assert TABLE6_MODELS["Sonnet 5.5"]["plan_pass_rate"]["public"] == "78.7"


# --------------------------------------------------------------------------------------------
# Tables 6 and 1: the same totals, and the 17-product scores where the tables determine them


@pytest.mark.parametrize("model", list(TABLE5_MODELS))
def test_table6_public_matches_table5(model: str) -> None:
    t5, t6 = TABLE5_MODELS[model], TABLE6_MODELS[model]
    assert t6["pass_at_1"]["public"] == t5["pass_at_1"]["total"]["estimate"]
    assert t6["plan_pass_rate"]["public"] == t5["plan_pass_rate"]["total"]["estimate"]


@pytest.mark.parametrize("model", list(TABLE1_MODELS))
def test_table1_pass_at_1_from_tables_5_and_6(model: str) -> None:
    """All 17 products: Table 5's public counts plus Table 6's held-out count (of 36). How the
    held-out passes spread over the 9 products is not printed; the point does not depend on it,
    and where no held-out build passes (Grok and the open-weight rows) the interval does not
    either, so those intervals are reproduced too."""
    printed = TABLE1_MODELS[model]["pass_at_1"]
    held = held_out_passing(model)
    spread = {p: 0 for p in HELD_OUT}
    for i in range(held):  # any placement: fill products in turn
        spread[HELD_OUT[i % 9]] += 1
    summary = summarize(builds_from_counts(model, table5_counts(model) | spread))
    assert summary.builds == 68
    assert format_percent(summary.pass_at_1) == printed["estimate"]
    if held == 0:
        assert summary.pass_at_1_interval is not None
        assert summary.pass_at_1_interval.format() == printed["printed"]
        assert summary.pass_at_1_interval.method == printed["method"] == "clopper-pearson"


@pytest.mark.parametrize("model", list(TABLE1_MODELS))
def test_table1_plan_pass_is_equal_weight_over_17_products(model: str) -> None:
    """Table 1's plan pass rate is (8 * public + 9 * held-out) / 17 within the print's rounding
    (each input is +-0.05, so the mean is too, and the print adds another 0.05)."""
    t6 = TABLE6_MODELS[model]["plan_pass_rate"]
    groups = {f"public {i}": [Fraction(t6["public"])] for i in range(8)} | {p: [Fraction(t6["held_out"])] for p in HELD_OUT}
    recomputed = mean_of_product_means(groups)
    assert abs(recomputed - Fraction(TABLE1_MODELS[model]["plan_pass_rate"]["estimate"])) <= Fraction(1, 10)


def test_t_quantiles_match_the_paper() -> None:
    """Appendix C: "For 17 products with 4 builds each, t_{0.975,51} = 2.01"."""
    groups = {f"p{i}": [0, 1, 1, 1] for i in range(17)}
    interval = t_interval(groups)
    assert interval.df == 51
    assert f"{interval.t_quantile:.2f}" == "2.01"


# --------------------------------------------------------------------------------------------
# no grade


def test_no_grade_plans_are_left_out_of_both_scores_and_listed() -> None:
    a1 = Build("A", "a1", {"p1": "passed", "p2": "no_grade", "p3": "passed"})
    a2 = Build("A", "a2", {"p1": "failed", "p2": "passed", "p3": "no_grade"})
    b1 = Build("B", "b1", {"p1": "passed", "p2": "passed"})
    b2 = Build("B", "b2", {"p1": "no_grade", "p2": "no_grade"})  # nothing graded
    assert a1.passes is True and a1.plan_pass_rate == 1  # passes all of its other plans
    assert a2.passes is False and a2.plan_pass_rate == Fraction(1, 2)
    assert b2.passes is None and b2.plan_pass_rate is None

    summary = summarize([a1, a2, b1, b2])
    assert summary.no_grade == (NoGrade("A", "a1", "p2"), NoGrade("A", "a2", "p3"), NoGrade("B", "b2", "p1"), NoGrade("B", "b2", "p2"))
    assert summary.ungraded_builds == (("B", "b2"),)
    assert [(p.product, p.build_ids) for p in summary.products] == [("A", ("a1", "a2")), ("B", ("b1",))]
    assert summary.pass_at_1 == (Fraction(1, 2) + 1) / 2
    assert summary.plan_pass_rate == ((1 + Fraction(1, 2)) / 2 + 1) / 2
    assert summary.products[0].plans_graded == 4 and summary.products[0].plans_passed == 3
    # B has one scored build: no within-product variance, so no interval; the reason is given.
    assert summary.pass_at_1_interval is None and "'B' has 1 build" in summary.interval_note
    assert pass_at_1([a1, a2, b1, b2]) == summary.pass_at_1
    assert plan_pass_rate([a1, a2, b1, b2]) == summary.plan_pass_rate


def test_nothing_graded_is_an_error() -> None:
    with pytest.raises(ValueError, match="no build has a graded plan"):
        summarize([Build("A", "a1", {"p1": "no_grade"})])


# --------------------------------------------------------------------------------------------
# Mixed settings


def _with_settings(build_id: str, settings: dict | None, product: str = "A") -> Build:
    return Build(product, build_id, {"p1": "passed"}, settings=settings)


def test_mixed_settings_refused_naming_keys_and_values() -> None:
    builds = [
        _with_settings("r1", {"model": "m", "model_settings": {"temperature": 1.0, "effort": "medium"}}),
        _with_settings("r2", {"model": "m", "model_settings": {"temperature": 1, "effort": "medium"}}),
        _with_settings("r3", {"model": "m", "model_settings": {"temperature": 0.7, "effort": "medium"}, "harness": "h2"}),
    ]
    with pytest.raises(MixedSettingsError) as caught:
        summarize(builds)
    error = caught.value
    assert error.keys == ("harness", "model_settings.temperature")
    assert error.differences["model_settings.temperature"] == {"1": ("r1", "r2"), "0.7": ("r3",)}
    assert error.differences["harness"] == {"<absent>": ("r1", "r2"), '"h2"': ("r3",)}
    message = str(error)
    assert "model_settings.temperature: 1 in 2 build(s) (r1, r2); 0.7 in 1 build(s) (r3)" in message
    assert 'harness: <absent> in 2 build(s) (r1, r2); "h2" in 1 build(s) (r3)' in message
    assert "allow_mixed=True" in message
    with pytest.raises(MixedSettingsError):
        check_settings(builds)

    pooled = summarize(builds, allow_mixed=True)
    assert pooled.settings == {"model": "m", "model_settings.effort": "medium"}
    assert set(pooled.mixed_settings) == {"harness", "model_settings.temperature"}


def test_same_settings_pool_and_are_reported() -> None:
    builds = [_with_settings("r1", {"model": "m", "k": [1, 2]}), _with_settings("r2", {"k": [1, 2], "model": "m"})]
    assert settings_differences(builds) == {}
    assert check_settings(builds) == {"k": [1, 2], "model": "m"}
    assert summarize(builds).settings == {"k": [1, 2], "model": "m"}


def test_missing_settings_differ_from_recorded_ones() -> None:
    builds = [_with_settings("r1", None), _with_settings("r2", {"model": "m"})]
    with pytest.raises(MixedSettingsError, match=r'model: <absent> in 1 build\(s\) \(r1\); "m" in 1 build\(s\) \(r2\)'):
        check_settings(builds)


# --------------------------------------------------------------------------------------------
# pass^k


def test_pass_hat_k_hand_computed() -> None:
    counts = {"A": (3, 4), "B": (1, 4)}
    # A: C(3,k)/C(4,k) = 3/4, 3/6, 1/4, 0; B: 1/4, 0, 0, 0
    assert pass_hat_k_from_counts(counts, 1) == Fraction(1, 2)
    assert pass_hat_k_from_counts(counts, 2) == Fraction(1, 4)
    assert pass_hat_k_from_counts(counts, 3) == Fraction(1, 8)
    assert pass_hat_k_from_counts(counts, 4) == 0
    assert pass_hat_k_from_counts({"A": (4, 4)}, 4) == 1
    assert pass_hat_k_from_counts({"A": (2, 5), "B": (5, 5), "C": (0, 3)}, 2) == (Fraction(1, 10) + 1 + 0) / 3
    with pytest.raises(ValueError, match="at least 5 builds"):
        pass_hat_k_from_counts(counts, 5)
    with pytest.raises(ValueError, match="positive integer"):
        pass_hat_k_from_counts(counts, 0)


def test_pass_hat_k_from_builds() -> None:
    builds = builds_from_counts("m", {"A": 3, "B": 1})
    assert pass_hat_k(builds, 2) == Fraction(1, 4)
    # pass^1 is pass@1, on every Table 5 row
    for model in TABLE5_MODELS:
        table_builds = builds_from_counts(model, table5_counts(model))
        assert pass_hat_k(table_builds, 1) == pass_at_1(table_builds)
    sol = builds_from_counts("GPT-6.1 Sol", table5_counts("GPT-6.1 Sol"))  # 2,4,2,0,0,1,4,4 of 4
    assert pass_hat_k(sol, 4) == Fraction(3, 8)
    assert pass_hat_k(sol, 2) == (Fraction(1, 6) * 2 + 3) / 8


# --------------------------------------------------------------------------------------------
# Workflow pass


def test_workflow_pass_boundary_is_exactly_nine_tenths() -> None:
    assert WORKFLOW_PASS_THRESHOLD == Fraction(9, 10)
    assert workflow_passes(9, 10)
    assert workflow_passes(90, 100)
    assert workflow_passes(900_000_000, 1_000_000_000)
    assert not workflow_passes(899_999_999, 1_000_000_000)
    assert not workflow_passes(8, 10)
    assert not workflow_passes(26, 29)  # 89.7%
    assert workflow_passes(19, 21)  # 90.5%
    assert workflow_passes(10, 10) and not workflow_passes(0, 1)
    assert workflow_result([True] * 9 + [False]) is PlanResult.PASSED
    assert workflow_result(["passed"] * 18 + ["failed"] * 2) is PlanResult.PASSED
    assert workflow_result(["passed"] * 18 + ["failed"] * 2 + ["failed"]) is PlanResult.FAILED  # 18/21


def test_workflow_pass_rejects_inexact_input() -> None:
    with pytest.raises(ValueError):
        workflow_passes(9, 10, threshold=0.9)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        workflow_passes(1, 0)
    with pytest.raises(ValueError):
        workflow_passes(11, 10)
    with pytest.raises(ValueError, match="no grade"):
        workflow_result(["passed", "no_grade"])


def test_workflows_as_plans_give_workflow_accuracy() -> None:
    w = {"w1": workflow_result([True] * 9 + [False]), "w2": workflow_result([True, False])}
    build = Build("app", "b1", w)
    assert build.plan_pass_rate == Fraction(1, 2) and build.passes is False


# --------------------------------------------------------------------------------------------
# Intervals, cost, time, printing, validation


def test_all_passing_uses_the_binomial_range_at_100() -> None:
    summary = summarize(builds_from_counts("m", {p: 4 for p in TABLE5["products"]}))
    assert summary.pass_at_1 == 1
    assert summary.pass_at_1_interval.format() == "100.0 (89.1–100)"
    assert summary.plan_pass_interval.method == "clopper-pearson"
    assert (summary.plan_pass_interval.count, summary.plan_pass_interval.nobs) == (96, 96)


def test_clopper_pearson_matches_scipy() -> None:
    from scipy.stats import binomtest

    for count, nobs in [(0, 32), (1, 32), (4, 32), (1, 68), (32, 32)]:
        ci = binomtest(count, nobs).proportion_ci(confidence_level=0.95, method="exact")
        interval = clopper_pearson(count, nobs)
        assert interval.low == pytest.approx(ci.low, abs=1e-12)
        assert interval.high == pytest.approx(ci.high, abs=1e-12)


def test_cost_and_duration_means() -> None:
    builds = [
        Build("A", "a1", {"p": "passed"}, cost=1, duration_s="60"),
        Build("A", "a2", {"p": "failed"}, cost=0.1, duration_s=120),
        Build("B", "b1", {"p": "no_grade"}, cost=Fraction(10), duration_s=30),  # ungraded, still costs
        Build("B", "b2", {"p": "passed"}, cost="10.00", duration_s=30),
    ]
    summary = summarize(builds)
    assert summary.cost_mean == (Fraction(11, 20) + 10) / 2  # equal weight per product
    assert summary.duration_mean_s == (90 + 30) / Fraction(2)
    assert summary.missing_cost == ()
    partial = summarize([*builds[:3], Build("B", "b2", {"p": "passed"})])
    assert partial.cost_mean is None and partial.missing_cost == ("b2",)
    assert partial.duration_mean_s is None and partial.missing_duration == ("b2",)


def test_format_percent_rounds_half_up_on_exact_values() -> None:
    assert format_percent(Fraction(17, 32)) == "53.1"
    assert format_percent(Fraction(1, 32)) == "3.1"
    assert format_percent(Fraction("0.2815")) == "28.2"
    assert format_percent(Fraction("0.28149")) == "28.1"
    assert format_percent(Fraction(1, 8)) == "12.5"
    assert format_percent(0.0) == "0.0"
    assert format_percent(Fraction(2, 3), digits=2) == "66.67"


def test_build_validation() -> None:
    with pytest.raises(ValueError, match="result must be one of"):
        Build("A", "a1", {"p": "pass"})
    with pytest.raises(ValueError, match="occurs twice"):
        Build("A", "a1", [("p", "passed"), ("p", "failed")])
    with pytest.raises(ValueError, match="negative"):
        Build("A", "a1", {"p": "passed"}, cost=-1)
    with pytest.raises(ValueError, match="build_id 'a1' occurs twice"):
        summarize([Build("A", "a1", {"p": "passed"}), Build("B", "a1", {"p": "passed"})])
    build = Build("A", "a1", {"p": PlanResult.PASSED})
    assert build.plans[0].result is PlanResult.PASSED and hash(build)


def test_one_build_per_product_makes_the_products_the_sample() -> None:
    """A benchmark run once per task: pass@1 gets Clopper-Pearson over the products, the plan pass rate a t
    interval over the product rates (df = k - 1), not "no interval"."""
    from scipy.stats import beta, t

    builds = [Build(f"task{i}", f"b{i}", {"p1": "passed" if i < 3 else "failed", "p2": "passed"}) for i in range(5)]
    summary = summarize(builds)
    assert summary.pass_at_1 == Fraction(3, 5)
    interval = summary.pass_at_1_interval
    assert (interval.method, interval.count, interval.nobs) == ("clopper-pearson", 3, 5)
    assert interval.low == pytest.approx(beta.ppf(0.025, 3, 3)) and interval.high == pytest.approx(beta.ppf(0.975, 4, 2))
    # the plan pass rates 1, 1, 1, 1/2, 1/2 have a t interval crossing 1: the pooled binomial instead
    assert summary.plan_pass_interval.method == "clopper-pearson"
    passes = {0: 3, 1: 2, 2: 3, 3: 2, 4: 1}  # of four plans each: rates 3/4, 1/2, 3/4, 1/2, 1/4
    middling = summarize([Build(f"task{i}", f"b{i}", {f"p{j}": "passed" if j < n else "failed" for j in range(4)})
                          for i, n in passes.items()])
    rates = [n / 4 for n in passes.values()]
    mean = sum(rates) / 5
    sd = (sum((r - mean) ** 2 for r in rates) / 4) ** 0.5
    plan = middling.plan_pass_interval
    assert plan.method == "t" and plan.df == 4
    assert plan.half_width == pytest.approx(t.ppf(0.975, 4) * sd / 5 ** 0.5)
    assert "one build per product" in summary.interval_note
