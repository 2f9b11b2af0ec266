"""Rule-outcome association (engine/analysis/association.py, ``procgrade associate``).

A planted study over two systems, with every number worked out by hand. Rule ``r`` applies to every graded
run; a violating run scores 1/2, a clean one 1:

  system S1: violated & resolved 1, violated & unresolved 3, clean & resolved 3, clean & unresolved 1
  system S2: violated & resolved 0, violated & unresolved 2, clean & resolved 2, clean & unresolved 0
  pooled:    a = 1, b = 5, c = 5, d = 1: violation rate 1/6 in resolved runs, 5/6 in unresolved ones;
             sample odds ratio (1 * 1) / (5 * 5) = 1/25 (scipy's conditional MLE is what the test checks)
  Mantel-Haenszel over S1, S2: sum(a d / n) / sum(b c / n) = (1/8 + 0) / (9/8 + 4/4) = 1/17
  AUC: resolved scores [1/2, 1 x 5], unresolved [1/2 x 5, 1]: of 36 pairs 25 won and 10 tied: 30/36 = 5/6

Rule ``q`` applies to S1's runs and is never violated (no contrast); rule ``z`` never applies. Besides: a run
with no process score (not graded), a graded run with no verdict (no outcome), a graded run with no system.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from builders import ev, models

from procgrade.engine.analysis.association import associate, resolved
from procgrade.engine.analysis.dataset import NOT_GRADED, ProcessScore, RunView
from procgrade.engine.events import AcceptanceVerdict


def run(run_id: str, system: str | None, violated: bool | None, outcome: bool | None, *,
        q: bool = False) -> RunView:
    events = [] if outcome is None else [ev("acceptance_verdict", 5, run_id, actor="grader", verifier="v",
                                            status="evaluated", reward="1" if outcome else "0")]
    parsed = models(events)
    if violated is None:
        process = ProcessScore("h" * 64, None, {"r": None, "q": None, "z": None}, {}, {}, {"r": 0, "q": 0, "z": 0},
                               stored=False, judged={"r": 0, "q": 0, "z": 0})
    else:
        process = ProcessScore("h" * 64, F(1, 2) if violated else F(1),
                               {"r": F(0) if violated else F(1), "q": F(1) if q else None, "z": None}, {}, {},
                               {"r": int(violated), "q": 0, "z": 0}, stored=False,
                               judged={"r": 1, "q": int(q), "z": 0})
    return RunView(run_id=run_id, event_count=len(events) + 1, head_hash=None, harness="h", harness_version="1",
                   model="m", task_id=run_id, format="native", labels={} if system is None else {"system": system},
                   process=process, verdicts=tuple(e for e in parsed if isinstance(e, AcceptanceVerdict)))


def study() -> list[RunView]:
    runs = []
    plan = {"S1": [(True, True)] * 1 + [(True, False)] * 3 + [(False, True)] * 3 + [(False, False)] * 1,
            "S2": [(True, False)] * 2 + [(False, True)] * 2}
    for system, rows in plan.items():
        for i, (violated, outcome) in enumerate(rows):
            runs.append(run(f"{system}-{i}", system, violated, outcome, q=system == "S1"))
    runs += [run("bare", "S1", None, True),  # no process score
             run("unjudged", "S2", False, None),  # graded, no verdict
             run("nosystem", None, True, False)]  # graded, no system: pooled only
    return runs


def test_association_matches_the_hand_computation() -> None:
    from scipy.stats import fisher_exact
    from scipy.stats.contingency import odds_ratio

    runs = study()
    result = associate(runs, "system", n_resamples=200)
    assert result.groups == ("S1", "S2") and result.rules == ("q", "r", "z")
    assert result.not_graded == (("bare", NOT_GRADED),)
    assert result.without_outcome == ("unjudged",) and result.ungrouped == ("nosystem",)
    assert result.graded == 14

    # applicability: graded runs, applied, flagged
    r_all = result.applicability_of("r")
    assert (r_all.graded_runs, r_all.applied, r_all.violated) == (14, 14, 7)
    q_s1 = result.applicability_of("q", "S1")
    assert (q_s1.graded_runs, q_s1.applied, q_s1.violated) == (8, 8, 0)
    assert result.applicability_of("z").applied == 0

    pooled = result.association("r")  # the no-system run is in the pooled table: b = 6
    assert (pooled.violated_resolved, pooled.violated_unresolved, pooled.clean_resolved, pooled.clean_unresolved) == (
        1, 6, 5, 1)
    assert pooled.rate_resolved == pytest.approx(1 / 6) and pooled.rate_unresolved == pytest.approx(6 / 7)
    expected = odds_ratio([[1, 6], [5, 1]])
    assert pooled.odds_ratio == pytest.approx(expected.statistic) and pooled.odds_ratio < 1
    assert (pooled.low, pooled.high) == pytest.approx(tuple(expected.confidence_interval(0.95)))
    assert pooled.pvalue == pytest.approx(fisher_exact([[1, 6], [5, 1]]).pvalue)
    assert pooled.mh_odds_ratio == pytest.approx(1 / 17) and pooled.mh_strata == 2
    s1 = result.association("r", "S1")
    assert (s1.violated_resolved, s1.violated_unresolved, s1.clean_resolved, s1.clean_unresolved) == (1, 3, 3, 1)
    s2 = result.association("r", "S2")
    assert s2.odds_ratio == 0 and s2.low == 0 and s2.note is None  # a zero cell: 0, with a one-sided exact interval
    assert result.association("q").note == "no contrast: never violated"
    assert result.association("z").note == "not applied to a run with an outcome"

    everything = result.discrimination_of()
    assert (everything.resolved, everything.unresolved) == (6, 7)
    s1_s2 = associate([r for r in runs if r.run_id != "nosystem"], "system", n_resamples=200).discrimination_of()
    assert s1_s2.auc == pytest.approx(5 / 6) and s1_s2.low is not None and s1_s2.low <= 5 / 6 <= s1_s2.high
    assert s1_s2.mean_resolved == F(11, 12) and s1_s2.mean_unresolved == F(7, 12)
    assert result.discrimination_of("S2").auc == 1.0  # resolved runs were all clean there

    data = json.loads(result.to_json())
    assert data["format"] == "procgrade.associate/1"
    assert data["associations"][0]["rule"] == "q" and data["discrimination"][0]["mean_resolved"] == "11/12"
    assert result.to_json() == associate(runs, "system", n_resamples=200).to_json()  # deterministic


def test_a_perfect_split_is_an_infinite_odds_ratio_with_a_one_sided_interval() -> None:
    from procgrade.engine.analysis.association import _json_safe, _table_stats

    estimate, low, high, pvalue, note = _table_stats(4, 0, 0, 3, 0.95)
    assert estimate == float("inf") and high == float("inf") and 0 < low < 1 and note is None
    assert pvalue == pytest.approx(1 / 35)  # Fisher: P = 1 / C(7, 3); no other table is as unlikely
    assert _json_safe({"x": estimate, "y": [F(1, 3)]}) == {"x": "inf", "y": ["1/3"]}


def test_resolved_is_pass_at_1_of_the_build() -> None:
    assert resolved(run("a", "S", False, True)) is True
    assert resolved(run("b", "S", False, False)) is False
    assert resolved(run("c", "S", False, None)) is None


def test_min_coverage_and_model_grouping() -> None:
    runs = study()
    strict = associate(runs, "system", n_resamples=50, min_coverage=F(2, 3))  # only S1 runs judged 2 of 3 rules
    assert {r for r, _ in strict.not_graded} >= {"S2-0", "bare"} and strict.groups == ("S1",)
    by_model = associate(runs, "model", n_resamples=50)
    assert by_model.groups == ("m",)
    with pytest.raises(ValueError, match="unknown grouping field"):
        associate(runs, "colour")


def test_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from procgrade.engine.cli import app
    from procgrade.engine.ingest import ingest_paths
    from procgrade.engine.store import open_store

    imports = Path(__file__).parent / "fixtures" / "imports" / "terminal-bench-claude-code"
    db = f"sqlite:///{tmp_path / 'tb.db'}"
    store = open_store(db, create=True)
    try:
        ingest_paths(store, [imports])
    finally:
        store.close()
    target = tmp_path / "a.json"
    done = CliRunner().invoke(app, ["associate", "--by", "system", "--resamples", "50", "--json", str(target),
                                    "--db", db])
    assert done.exit_code == 0, done.output
    data: dict[str, Any] = json.loads(target.read_text())
    assert data["groups"] == ["claude_code_c4", "claude_code_coder", "claude_code_gpt5", "claude_code_v3"]
    assert data["graded"] == 60  # the 15 trials per system with a cast; the 65 outcome-only runs are not graded
    assert len(data["not_graded"]) == 260 and "rule-outcome association by system" in done.output
