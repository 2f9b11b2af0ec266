"""Calibration of automated grades against human grades (engine.analysis.calibration, ``procgrade calibrate``).

* DevAI: the 330 judgment files under ``tests/fixtures/devai-judgments`` (MIT, see its README) are imported as
  ``grade`` events with the grades importer (``procgrade grades import``); ``procgrade calibrate --reference human
  --candidate judge --layer requirement --by harness`` reproduces calibration.md 2.1 per system and over all
  1,098 requirements (agreement, Clopper-Pearson interval, kappa and its interval, alpha, precision, recall,
  wrong-pass, wrong-fail) on SQLite; a slice runs on PostgreSQL.
* Arena-style: six synthetic runs (models A, B, C on tasks t1, t2) with human and judge round, check and overall
  grades and the default rule set's checks; every expected number below is worked out by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import kendalltau
from typer.testing import CliRunner

from procgrade.engine.analysis.agreement import binary_agreement, variance_decomposition
from procgrade.engine.analysis.calibration import CalibrationError, calibrate, calibrate_store
from procgrade.engine.analysis.dataset import load_runs
from procgrade.engine.cli import app
from procgrade.engine.events import event_adapter
from procgrade.engine.store import EventStore
from procgrade.rules.loading import load_ruleset

DEVAI = Path(__file__).parent / "fixtures" / "devai-judgments"
#: The arena runs' expected rules labels are worked out under rule set v1 (plan-before-first-edit and
#: read-before-edit carry the checks there); the calibration arithmetic is under test, not the rules.
V1 = Path(__file__).parent.parent / "rules" / "sets" / "default-v1.yaml"
SYSTEMS = ("OpenHands", "MetaGPT", "GPT-Pilot")
runner = CliRunner()

# calibration.md 2.1, gray-box Agent-as-a-Judge vs human, requirement level:
# n, agreement, Clopper-Pearson 95%, kappa, kappa 95% CI, alpha, precision, recall, wrong-pass, wrong-fail
BASELINE = {
    "OpenHands": (366, 0.902, [0.866, 0.930], 0.800, [0.737, 0.862], 0.800, 0.881, 0.892, 0.091, 0.108),
    "MetaGPT": (366, 0.921, [0.888, 0.946], 0.775, [0.697, 0.853], 0.775, 0.802, 0.852, 0.060, 0.148),
    "GPT-Pilot": (366, 0.866, [0.827, 0.899], 0.730, [0.660, 0.800], 0.730, 0.835, 0.871, 0.138, 0.129),
    None: (1098, 0.896, [0.877, 0.914], 0.778, [0.739, 0.816], 0.778, 0.846, 0.875, 0.092, 0.125),
}


def r3(x: float | None) -> float:
    assert x is not None
    return round(x, 3)


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


# ---------------------------------------------------------------------------------------------------------------
# DevAI


def _devai_slice(root: Path, tasks_per_system: int | None) -> Path:
    """The fixture itself, or a copy of the first ``tasks_per_system`` tasks of each system (both graders)."""
    if tasks_per_system is None:
        return DEVAI
    for system in SYSTEMS:
        for sub in ("human_as_a_judge", "agent_as_a_judge/gray_box"):
            target = root / system / sub
            target.mkdir(parents=True)
            for path in sorted((DEVAI / system / sub).glob("*.json"))[:tasks_per_system]:
                (target / path.name).write_bytes(path.read_bytes())
    return root


def _expected(folder: Path, system: str | None) -> Any:
    """Independent path: the labels straight from the files, through binary_agreement."""
    human, judge = [], []
    for s in SYSTEMS if system is None else (system,):
        for path in sorted((folder / s / "human_as_a_judge").glob("*.json")):
            h = json.loads(path.read_text(encoding="utf-8"))["requirements"]
            j = json.loads((folder / s / "agent_as_a_judge/gray_box" / path.name).read_text(encoding="utf-8"))
            human += [r["satisfied"] for r in h]
            judge += [r["satisfied"] for r in j["requirements"]]
    return binary_agreement(human, judge)


def test_devai_reproduces_human_vs_agent_as_a_judge(store_url: str, db_kind: str, tmp_path: Path) -> None:
    folder = _devai_slice(tmp_path / "slice", None if db_kind == "sqlite" else 4)
    out = cli("grades", "import", str(folder), "--db", store_url)
    assert "run(s) created" in out
    report = tmp_path / "calibration.json"
    shown = cli("calibrate", "--reference", "human", "--candidate", "judge", "--layer", "requirement",
                "--by", "harness", "--bootstrap", "100", "--json", str(report), "--db", store_url)
    result = json.loads(report.read_bytes())
    (layer,) = result["layers"]
    assert layer["layer"] == "requirement" and layer["scale"] == "binary"
    rows = {row["group"]: row for row in layer["comparisons"]}
    assert list(rows) == [None, "GPT-Pilot", "MetaGPT", "OpenHands"]  # all first, then the groups sorted
    for group, row in rows.items():
        b = row["binary"]
        assert (row["candidate"], row["level"], row["method"]) == ("judge", "item", "agreement")
        expected = _expected(folder, group)
        assert (b["tp"], b["fp"], b["fn"], b["tn"]) == (expected.tp, expected.fp, expected.fn, expected.tn)
        assert b["kappa"]["value"] == pytest.approx(expected.kappa.value, abs=1e-12)
        if db_kind == "sqlite":
            n, agree, agree_ci, kappa, kappa_ci, alpha, precision, recall, wrong_pass, wrong_fail = BASELINE[group]
            assert row["n"] == n
            assert r3(b["agreement"]["estimate"]) == agree
            assert [r3(b["agreement"]["low"]), r3(b["agreement"]["high"])] == agree_ci
            assert r3(b["kappa"]["value"]) == kappa
            assert [r3(b["kappa"]["low"]), r3(b["kappa"]["high"])] == kappa_ci
            assert r3(row["alpha"]["value"]) == alpha
            assert (r3(b["precision"]), r3(b["recall"])) == (precision, recall)
            assert (r3(b["wrong_pass"]["estimate"]), r3(b["wrong_fail"]["estimate"])) == (wrong_pass, wrong_fail)
    if db_kind == "sqlite":
        for text in ("0.902", "[0.866, 0.930]", "0.800", "[0.737, 0.862]", "0.921", "0.775", "0.866", "0.730",
                     "0.896", "0.778", "[0.877, 0.914]"):
            assert text in shown
        # the matrix of every grader, the system ranking (GPT-Pilot > OpenHands > MetaGPT under both) and ratings
        matrix = layer["matrix"]
        assert matrix["graders"] == ["human:devai-experts", "judge:agent-as-a-judge-gray-box"]
        assert matrix["counts"][0][1] == 1098 and r3(matrix["agreement"][0][1]) == 0.896
        (ranking,) = layer["rankings"]
        assert ranking["resampled"] == "tasks"
        assert ranking["result"]["ranks_a"] == ranking["result"]["ranks_b"] == [1.0, 3.0, 2.0]
        for ratings in layer["ratings"]:
            assert [r["player"] for r in ratings["result"]["ratings"]] == ["GPT-Pilot", "OpenHands", "MetaGPT"]
        assert [v["result"]["notes"] for v in layer["variance"]] == [
            ["no generation was graded more than once: re-grading variance is not identified"]] * 2


# ---------------------------------------------------------------------------------------------------------------
# arena-style synthetic runs

# run: model, task, a plan before the edit, a read before the edit
RUNS = {
    "arena/r1": ("A", "t1", True, True),
    "arena/r2": ("B", "t1", True, False),
    "arena/r3": ("C", "t1", False, False),
    "arena/r4": ("A", "t2", True, True),
    "arena/r5": ("B", "t2", False, True),
    "arena/r6": ("C", "t2", False, False),
}
RU, CP = "requirement_understanding", "context_preservation"
# per run: check -> (round 0, round 1)
HUMAN_CHECKS = {
    "arena/r1": {RU: (True, True), CP: (True, True)},
    "arena/r2": {RU: (True, True), CP: (True, False)},
    "arena/r3": {RU: (False, True), CP: (False, False)},
    "arena/r4": {RU: (True, True), CP: (True, True)},
    "arena/r5": {RU: (True, False), CP: (True, True)},
    "arena/r6": {RU: (False, False), CP: (True, True)},
}
JUDGE_CHECKS = {
    "arena/r1": {RU: (True, True), CP: (True, True)},
    "arena/r2": {RU: (True, True), CP: (True, True)},  # CP round 1: human False (wrong pass)
    "arena/r3": {RU: (False, False), CP: (False, False)},  # RU round 1: human True (wrong fail)
    "arena/r4": {RU: (True, True), CP: (True, False)},  # CP round 1: human True (wrong fail)
    "arena/r5": {RU: (True, True), CP: (True, True)},  # RU round 1: human False (wrong pass)
    "arena/r6": {RU: (False, False), CP: (True, True)},
}
HUMAN_ROUNDS = {"arena/r1": (0, 1), "arena/r2": (-1, 0), "arena/r3": (-2, -1), "arena/r4": (1, 1),
                "arena/r5": (0, -1), "arena/r6": (-2, -2)}
JUDGE_ROUNDS = {"arena/r1": (0, 1), "arena/r2": (-1, 1), "arena/r3": (-2, -2), "arena/r4": (1, 1),
                "arena/r5": (0, -1), "arena/r6": (-1, -2)}
HUMAN_OVERALL = {"arena/r1": 5, "arena/r2": 3, "arena/r3": 1, "arena/r4": 4, "arena/r5": 3, "arena/r6": 2}
JUDGE_OVERALL = {"arena/r1": 5, "arena/r2": 4, "arena/r3": 1, "arena/r4": 4, "arena/r5": 2, "arena/r6": 2}
# pattern values on -1..1: exploration follows the read, planning the plan (scale differs from the subtotals)
HUMAN_PATTERNS = {run: {"exploration": 1 if read else -1, "planning_and_decomposition": 1 if plan else 0}
                  for run, (_m, _t, plan, read) in RUNS.items()}


def _events(run_id: str, rows: list[dict[str, Any]], start: int) -> list[Any]:
    adapter = event_adapter()
    return [adapter.validate_python({"run_id": run_id, "seq": start + i, "event_id": f"{run_id}/{start + i}", **row})
            for i, row in enumerate(rows)]


def _process_rows(model: str, task: str, plan: bool, read: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"kind": "run_started", "actor": "harness", "harness": {"name": "arena"}, "model": model, "task_id": task},
        {"kind": "stage_started", "actor": "harness", "stage": 0},
    ]
    if plan:
        rows.append({"kind": "message", "actor": "agent", "stage": 0, "text": "Plan: read, then edit.",
                     "intent": "plan"})
    if read:
        rows.append({"kind": "file_read", "actor": "agent", "stage": 0, "path": "src/app.py"})
    rows += [
        {"kind": "file_edit", "actor": "agent", "stage": 0, "path": "src/app.py", "edit_kind": "modify"},
        {"kind": "stage_ended", "actor": "harness", "stage": 0},
        {"kind": "stage_started", "actor": "harness", "stage": 1},
        {"kind": "message", "actor": "agent", "stage": 1, "text": "Fixed the pane.", "intent": "progress"},
        {"kind": "stage_ended", "actor": "harness", "stage": 1},
    ]
    return rows


def _grade_rows(run: str, actor: str, sheet: str, checks: dict, rounds: dict, overall: dict,
                patterns: dict | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for rnd in (0, 1):
        rows.append({"kind": "grade", "actor": actor, "stage": rnd, "layer": "round", "value": rounds[run][rnd],
                     "scale_min": -2, "scale_max": 1, "sheet": sheet})
        for check in (RU, CP):
            rows.append({"kind": "grade", "actor": actor, "stage": rnd, "layer": "check", "item": check,
                         "passed": checks[run][check][rnd], "sheet": sheet})
    rows.append({"kind": "grade", "actor": actor, "layer": "overall", "value": overall[run], "scale_min": 1,
                 "scale_max": 5, "sheet": sheet})
    for pattern, value in sorted((patterns or {}).get(run, {}).items()):
        rows.append({"kind": "grade", "actor": actor, "layer": "pattern", "item": pattern, "value": value,
                     "scale_min": -1, "scale_max": 1, "sheet": sheet})
    return rows


def _arena(store: EventStore) -> None:
    batches = []
    for run, (model, task, plan, read) in RUNS.items():
        rows = (_process_rows(model, task, plan, read)
                + _grade_rows(run, "human:alice", "arena-sheet", HUMAN_CHECKS, HUMAN_ROUNDS, HUMAN_OVERALL,
                              HUMAN_PATTERNS)
                + _grade_rows(run, "judge:gpt", "judge-run-1", JUDGE_CHECKS, JUDGE_ROUNDS, JUDGE_OVERALL, None))
        batches.append((run, _events(run, rows, 0)))
    store.append_runs(batches)


@pytest.fixture
def arena(store: EventStore) -> EventStore:
    _arena(store)
    return store


def test_rules_checks_are_what_the_runs_did(arena: EventStore) -> None:
    runs = load_runs(arena, load_ruleset(V1))
    for run in runs:
        _model, _task, plan, read = RUNS[run.run_id]
        assert run.process is not None
        assert run.process.checks[RU] == (1 if plan else 0)  # plan-before-first-edit only
        assert run.process.checks[CP] == (1 if read else 0)  # read-before-edit only (no delegation, no report)


def test_arena_calibration(arena: EventStore) -> None:
    result = calibrate(load_runs(arena, load_ruleset(V1)), "human", ["judge", "rules"], seed=0, bootstrap=50)
    assert [layer.layer for layer in result.layers] == ["round", "check", "pattern", "overall"]

    # --- check, judge vs human per round: 24 items. Human passes 17 (4+3+1+4+3+2), fails 7. The judge differs
    # on 4: r2 CP and r5 RU round 1 (judge passes what the human failed: FP 2), r3 RU and r4 CP round 1 (FN 2).
    check = result.layer("check")
    judge = check.comparison("judge").binary
    assert check.comparison("judge").level == "item"
    assert judge is not None
    assert (judge.n, judge.tp, judge.fp, judge.fn, judge.tn) == (24, 15, 2, 2, 5)
    assert judge.agreement.estimate == pytest.approx(20 / 24)
    # po = 20/24, pe = (17/24)^2 + (7/24)^2 = 338/576: kappa = (480 - 338) / (576 - 338) = 142/238
    assert judge.kappa.value == pytest.approx(142 / 238)
    assert judge.kappa.weights is None
    assert judge.wrong_pass.estimate == pytest.approx(2 / 7) and judge.wrong_fail.estimate == pytest.approx(2 / 17)
    assert judge.precision == pytest.approx(15 / 17) and judge.recall == pytest.approx(15 / 17)

    # --- check, rules vs human per run: the human's rounds collapse to "passed every round":
    # r1 (T, T), r2 (T, F), r3 (F, F), r4 (T, T), r5 (F, T), r6 (F, T); the rules (plan, read):
    # r1 (T, T), r2 (T, F), r3 (F, F), r4 (T, T), r5 (F, T), r6 (F, F): one wrong fail (r6 CP) in 12.
    rules = check.comparison("rules")
    assert (rules.level, rules.method) == ("run", "agreement")
    b = rules.binary
    assert b is not None
    assert (b.n, b.tp, b.fp, b.fn, b.tn) == (12, 6, 0, 1, 5)
    # po = 11/12, pe = 7/12 * 6/12 + 5/12 * 6/12 = 1/2: kappa = (11/12 - 1/2) / (1/2) = 5/6
    assert b.kappa.value == pytest.approx(5 / 6)

    # --- McNemar judge vs rules on the 12 (run, check) items; the judge collapsed: r1 (T, T), r2 (T, T),
    # r3 (F, F), r4 (T, F), r5 (T, T), r6 (F, T): wrong on r2 CP, r4 CP, r5 RU; the rules wrong on r6 CP only.
    (test,) = check.mcnemar
    assert (test.first, test.second, test.level, test.n) == ("judge", "rules", "run", 12)
    assert test.test is not None
    assert test.test.table == ((8, 1), (3, 0))
    assert test.test.pvalue == pytest.approx(10 / 16)  # exact two-sided binomial: 2 * P(X <= 1 | 4, 1/2)

    # --- the matrix over the actors in the data, per round
    matrix = check.matrix
    assert matrix is not None and matrix.graders == ("human:alice", "judge:gpt")
    assert matrix.counts == ((24, 24), (24, 24))
    assert matrix.agreement[0][1] == pytest.approx(20 / 24)
    assert matrix.kappa[0][1] == pytest.approx(142 / 238)

    # --- round: ordinal -2..1, quadratic weights over the whole scale. 12 items, 3 off by one step.
    # Human marginals (-2, -1, 0, 1) = (3, 3, 3, 3), judge (3, 3, 2, 4); w_ij = (i - j)^2 / 9.
    # sum w*O = 3/9; sum w*E = (3 / (9*12)) * (3*14 + 3*6 + 2*6 + 4*14) = 128/36: kappa = 1 - 12/128
    rnd = result.layer("round")
    assert (rnd.scale, rnd.labels, rnd.weights) == ("ordinal", (-2, -1, 0, 1), "quadratic")
    ordinal = rnd.comparison("judge").ordinal
    assert ordinal is not None and ordinal.n == 12
    assert ordinal.agreement.estimate == pytest.approx(9 / 12)
    assert ordinal.kappa.value == pytest.approx(1 - 12 / 128) and ordinal.kappa.weights == "quadratic"
    assert rnd.comparison("judge").alpha is not None and rnd.comparison("judge").alpha.level == "ordinal"
    assert "rules give no labels on layer round (only check, pattern and overall)" in rnd.notes

    # --- pattern: rules subtotals (0 or 1) against the human's -1..1 values, by rank over the 12 (run, pattern)
    pattern = result.layer("pattern")
    rank = pattern.comparison("rules")
    assert (rank.method, rank.level, rank.n) == ("rank", "run", 12)
    x, y = [], []
    for run in sorted(RUNS):  # items sorted by (run, layer, item)
        _m, _t, plan, read = RUNS[run]
        x += [float(read), float(plan)]  # exploration, planning_and_decomposition
        y += [HUMAN_PATTERNS[run]["exploration"], HUMAN_PATTERNS[run]["planning_and_decomposition"]]
    assert rank.rank is not None
    assert rank.rank.kendall_tau_b.statistic == pytest.approx(kendalltau(y, x).statistic)
    assert "judge graded nothing on layer pattern" in pattern.notes

    # --- overall: judge by weighted kappa on 1..5; rules by rank of the process score over the 6 runs
    overall = result.layer("overall")
    assert overall.labels == (1, 2, 3, 4, 5)
    assert overall.comparison("judge").ordinal.agreement.estimate == pytest.approx(4 / 6)
    totals = {run.run_id: float(run.process.total) for run in load_runs(arena, load_ruleset(V1))}
    by_rules = overall.comparison("rules").rank
    assert by_rules is not None and by_rules.n == 6
    ordered = sorted(RUNS)
    assert by_rules.kendall_tau_b.statistic == pytest.approx(
        kendalltau([HUMAN_OVERALL[r] for r in ordered], [totals[r] for r in ordered]).statistic)
    assert "no McNemar test of judge and rules: rules on layer overall are compared by rank" in overall.notes

    # --- Bradley-Terry by model from same-task pairs: on both tasks human overall A > B > C
    human_bt = overall.ratings[0]
    assert human_bt.grader == "human" and human_bt.by == "model" and human_bt.result is not None
    assert [r.player for r in human_bt.result.ratings] == ["A", "B", "C"]
    assert human_bt.result.comparisons == 6
    assert any("won or lost every game" in note for note in human_bt.result.notes)
    # check layer, human mean per run: r1 1, r2 3/4, r3 1/4; r4 1, r5 3/4, r6 1/2: A > B > C again
    assert [r.player for r in check.ratings[0].result.ratings] == ["A", "B", "C"]

    # --- rank correlation of per-model means (every model graded on both tasks: the tasks are resampled)
    ranking = overall.rankings[0]
    assert (ranking.candidate, ranking.by, ranking.resampled) == ("judge", "model", "tasks")
    # human means A 4.5, B 3, C 1.5; judge A 4.5, B 3, C 1.5
    assert ranking.result.scores_a == (4.5, 3.0, 1.5) and ranking.result.scores_b == (4.5, 3.0, 1.5)
    assert ranking.result.kendall_tau_b.statistic == pytest.approx(1.0)

    # --- no re-grades: a note, no components
    for v in overall.variance[:2]:
        assert v.result is not None and v.result.generation is None
        assert v.result.notes == ("no generation was graded more than once: re-grading variance is not identified",)
    assert overall.variance[2].notes == ("rules are deterministic: a run is never re-graded",)


def test_regrades_give_variance_components_and_first_grade_counts(arena: EventStore) -> None:
    # the judge grades every run's overall again (sheet judge-run-2); agreement keeps the first grade
    rerun = {"arena/r1": 4, "arena/r2": 4, "arena/r3": 2, "arena/r4": 5, "arena/r5": 2, "arena/r6": 1}
    batches = []
    for run in RUNS:
        start = arena.run(run).event_count
        batches.append((run, _events(run, [{"kind": "grade", "actor": "judge:gpt", "layer": "overall",
                                            "value": rerun[run], "scale_min": 1, "scale_max": 5,
                                            "sheet": "judge-run-2"}], start)))
    arena.append_runs(batches)
    result = calibrate(load_runs(arena), "human", ["judge"], layer="overall", bootstrap=100)
    overall = result.layer("overall")
    assert overall.comparison("judge").ordinal.agreement.estimate == pytest.approx(4 / 6)  # unchanged
    assert "judge graded 6 item(s) more than once: agreement uses the first grade in seq order" in overall.notes
    human, judge = overall.variance
    assert human.result.n_regraded == 0 and human.result.generation is None
    ordered = sorted(RUNS)
    expected = variance_decomposition(
        [float(JUDGE_OVERALL[r]) for r in ordered] + [float(rerun[r]) for r in ordered],
        ordered + ordered, [RUNS[r][1] for r in ordered] * 2)
    v = judge.result
    assert (v.n_scores, v.n_generations, v.n_regraded, v.n_groups) == (12, 6, 6, 2)
    assert v.generation is not None and v.regrading is not None
    assert v.generation == pytest.approx(expected.generation) and v.regrading == pytest.approx(expected.regrading)
    assert v.generation_share + v.regrading_share == pytest.approx(1.0)


def test_named_graders_by_actor_and_by_sheet(arena: EventStore) -> None:
    runs = load_runs(arena)
    by_class = calibrate(runs, "human", ["judge"], layer="check", bootstrap=50).layer("check").comparison("judge")
    by_actor = calibrate(runs, "human:alice", ["judge:gpt"], layer="check", bootstrap=50).layer("check")
    by_sheet = calibrate(runs, "arena-sheet", ["judge-run-1"], layer="check", bootstrap=50).layer("check")
    assert by_actor.comparison("judge:gpt").binary == by_class.binary
    assert by_sheet.comparison("judge-run-1").binary == by_class.binary


def test_json_is_byte_identical_and_cli_prints_tables(arena: EventStore, store_url: str, tmp_path: Path) -> None:
    outputs = []
    for name in ("a.json", "b.json"):
        shown = cli("calibrate", "--candidate", "judge", "--candidate", "rules", "--bootstrap", "30",
                    "--seed", "7", "--json", str(tmp_path / name), "--db", store_url)
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    data = json.loads(outputs[0])
    assert data["seed"] == 7 and data["candidates"] == ["judge", "rules"]
    for title in ("check: agreement with human", "check: McNemar", "round: agreement with human",
                  "pattern: rank correlation with human", "Bradley-Terry", "pairwise agreement"):
        assert title in shown


def test_by_group_rows(arena: EventStore) -> None:
    result = calibrate(load_runs(arena), "human", ["judge"], layer="overall", by="model", bootstrap=50)
    overall = result.layer("overall")
    assert [(c.candidate, c.group) for c in overall.comparisons] == [
        ("judge", None), ("judge", "A"), ("judge", "B"), ("judge", "C")]
    # model B: human (3, 3), judge (4, 2): no exact match
    assert overall.comparison("judge", "B").ordinal.agreement.estimate == 0.0
    assert overall.comparison("judge", "A").n == 2


def test_errors(arena: EventStore) -> None:
    runs = load_runs(arena)
    with pytest.raises(CalibrationError, match="no grade by 'nobody'.*human:alice.*arena-sheet"):
        calibrate(runs, "human", ["nobody"])
    with pytest.raises(CalibrationError, match="rules cannot be the reference"):
        calibrate(runs, "rules", ["judge"])
    with pytest.raises(CalibrationError, match="unknown layer"):
        calibrate(runs, "human", ["judge"], layer="vibes")
    with pytest.raises(CalibrationError, match="human graded nothing on layer requirement"):
        calibrate(runs, "human", ["judge"], layer="requirement")
    with pytest.raises(CalibrationError, match="unknown grouping field"):
        calibrate(runs, "human", ["judge"], by="colour")
    with pytest.raises(CalibrationError, match="no process score"):
        calibrate(runs, "human", ["rules"])  # loaded without a rule set
    with pytest.raises(CalibrationError, match="named twice"):
        calibrate(runs, "human", ["judge", "judge"])
    # calibrate_store loads the rule set itself when rules are a candidate
    assert calibrate_store(arena, "human", ["rules"], layer="check", bootstrap=20).ruleset_hash is not None


def test_ungraded_runs_give_no_rules_label_and_single_games_no_rating(store: EventStore) -> None:
    """Two models on one task, each run graded by a human: one run has a model decision the rules judge,
    the other none (a grades-only run: not graded). And one game between two models is no rating."""
    from procgrade.engine.analysis.dataset import NOT_GRADED

    judged = _process_rows("P", "t1", plan=True, read=True)
    bare = [{"kind": "run_started", "actor": "harness", "harness": {"name": "arena"}, "model": "openai/Q",
             "task_id": "t1"}]
    grade = [{"kind": "grade", "actor": "human:alice", "layer": "overall", "value": 4, "scale_min": 1,
              "scale_max": 5, "sheet": "s"}]
    store.append_runs([("g-judged", _events("g-judged", judged + grade, 0)),
                       ("g-bare", _events("g-bare", bare + grade, 0))])
    import dataclasses

    runs = load_runs(store, load_ruleset())
    # as rule set v2 scores it: nothing judged, no process score (v1's absence rule still "judged" the bare run)
    runs = [dataclasses.replace(r, process=dataclasses.replace(
        r.process, total=None, judged={k: 0 for k in r.process.judged}, coverage=None)) if r.run_id == "g-bare" else r
        for r in runs]
    result = calibrate(runs, "human", ["rules"], layer="overall", by="model", bootstrap=20)
    assert [(n.run, n.reason) for n in result.not_graded] == [("g-bare", NOT_GRADED)]
    overall = result.layer("overall")
    assert overall.comparison("rules").n == 1  # the bare run has no rules label
    assert [c.group for c in overall.comparisons] == [None, "P", "Q"]  # openai/Q is model Q
    (human,) = [r for r in overall.ratings if r.grader == "human"]
    assert human.result is None
    assert any("no Bradley-Terry rating from fewer than 2 games: P (1 game), Q (1 game)" in n for n in human.notes)
    strict = calibrate(runs, "human", ["rules"], layer="overall", bootstrap=20, min_coverage=__import__(
        "fractions").Fraction(1))
    assert [n.run for n in strict.not_graded] == ["g-bare", "g-judged"] and strict.min_coverage == "1/1"


def test_cli_min_coverage_and_aliases(arena: EventStore, store_url: str, tmp_path: Path) -> None:
    aliases = tmp_path / "aliases.json"
    aliases.write_text(json.dumps({"A": "B"}), encoding="utf-8")
    target = tmp_path / "c.json"
    shown = cli("calibrate", "--candidate", "rules", "--layer", "overall", "--by", "model", "--bootstrap", "20",
                "--rules", str(V1), "--aliases", str(aliases), "--min-coverage", "100%", "--json", str(target),
                "--db", store_url)
    data = json.loads(target.read_bytes())
    assert data["min_coverage"] == "1/1"
    # every arena run judges 2 or 3 of v1's 11 rules: all below 100%, so rules label nothing
    assert len(data["not_graded"]) == len(RUNS) and "below --min-coverage 1/1" in shown
    assert [c["group"] for c in data["layers"][0]["comparisons"]] == [None, "B", "C"]  # A is grouped with B
    refused = runner.invoke(app, ["calibrate", "--candidate", "rules", "--min-coverage", "x", "--db", store_url])
    assert refused.exit_code == 2 and "--min-coverage must be" in refused.output
