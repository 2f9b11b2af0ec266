"""Human and judge grades (engine.grades): the arena grade sheet in its CSV and JSON spellings,
DevAI judgments, appending to the graded runs (or judgment-only runs), re-import, conflicts,
sealed runs, and the ``procgrade grades import`` / ``procgrade schema grades`` commands.

Every store test runs on SQLite and PostgreSQL. Expected counts come from the example sheet's
README (tests/fixtures/grades/) and, for DevAI, from reading the judgment files here with
``json`` (each system has 366 requirements: the calibration research's count).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from import_checks import snapshot
from sqlalchemy import select
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.errors import EventIdConflictError, InputError, RunSealedError
from procgrade.engine.events import Grade
from procgrade.engine.grades import grade_sheet_json_schema, import_grades
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.store import EventStore
from procgrade.engine.store.schema import events as events_table
from procgrade.engine.stored import STORED_COLUMNS, to_event

FIXTURES = Path(__file__).parent / "fixtures"
GRADES = FIXTURES / "grades"
CSV = GRADES / "arena-gguf.csv"
JSON = GRADES / "arena-gguf.json"
RUNS = GRADES / "arena-runs.jsonl"
DEVAI = FIXTURES / "devai-judgments"
TRAJECTORY = FIXTURES / "imports" / "devai"
SYSTEMS = ("OpenHands", "MetaGPT", "GPT-Pilot")
TASK_39 = "39_Drug_Response_Prediction_SVM_GDSC_ML"
MODEL_A, MODEL_C = "arena/gguf-swift/model-a", "arena/gguf-swift/model-c"
EXPERT = "human:arena-expert-1"
HUMAN, GRAY = "human:devai-experts", "judge:agent-as-a-judge-gray-box"


def grade_events(store: EventStore, run_id: str | None = None) -> list[Grade]:
    query = select(*(events_table.c[n] for n in STORED_COLUMNS)).where(events_table.c.kind == "grade")
    if run_id is not None:
        query = query.where(events_table.c.run_id.in_([run_id, run_id + "@grades"]))
    with store.engine.connect() as conn:
        rows = conn.execute(query.order_by(events_table.c.run_id, events_table.c.seq)).all()
    # a grades stream's grades grade the run it names
    return [e.model_copy(update={"run_id": e.run_id.removesuffix("@grades")})  # type: ignore[misc]
            for e in (to_event(tuple(r)) for r in rows)]


@pytest.fixture
def arena_store(store: EventStore) -> EventStore:
    """The store holding the two runs the example sheet grades (stages 0..1 and 0..3)."""
    ingest_paths(store, [RUNS])
    return store


@pytest.fixture
def here(tmp_path: Path) -> Iterator[Path]:
    """Run in ``tmp_path`` so files are named as errors show them (``bad.csv:3: ...``)."""
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)


# --- the example arena sheet ------------------------------------------------------------------------


@pytest.mark.parametrize("sheet, other", [(CSV, JSON), (JSON, CSV)], ids=["csv", "json"])
def test_example_sheet(arena_store: EventStore, sheet: Path, other: Path) -> None:
    done = import_grades(arena_store, [sheet])
    assert [(r.run_id, r.appended, r.held, r.created) for r in done.runs] == [(MODEL_A, 30, 0, False),
                                                                              (MODEL_C, 44, 0, False)]
    assert done.runs[0].layers == {"round": 2, "fix_effect": 1, "check": 10, "rubric": 8, "pattern": 8, "overall": 1}
    grades = grade_events(arena_store)
    assert Counter(g.layer for g in grades) == {"round": 6, "fix_effect": 4, "check": 30, "rubric": 16,
                                                "pattern": 16, "overall": 2}
    assert Counter(g.actor for g in grades) == {EXPERT: 74}
    assert {g.sheet for g in grades} == {"arena-gguf"}
    # Grades follow the run's own events (model-a holds 9, model-c 17).
    assert [g.seq for g in grade_events(arena_store, MODEL_A)] == list(range(9, 39))
    assert [g.seq for g in grade_events(arena_store, MODEL_C)] == list(range(17, 61))

    def values(run_id: str, layer: str) -> list[tuple[int | None, int | None]]:
        return [(g.stage, g.value) for g in grades if g.run_id == run_id and g.layer == layer]

    assert values(MODEL_A, "round") == [(0, 0), (1, 1)]
    assert values(MODEL_C, "round") == [(0, -2), (1, -1), (2, -1), (3, 0)]
    assert values(MODEL_C, "fix_effect") == [(1, 0), (2, -2), (3, 0)]
    assert values(MODEL_A, "overall") == [(None, 5)] and values(MODEL_C, "overall") == [(None, 2)]
    checks = [g for g in grades if g.layer == "check"]
    assert Counter((g.run_id, g.passed) for g in checks) == {(MODEL_A, True): 9, (MODEL_A, False): 1,
                                                             (MODEL_C, True): 14, (MODEL_C, False): 6}
    assert {g.value for g in checks} == {None} and {g.stage for g in checks if g.run_id == MODEL_C} == {0, 1, 2, 3}
    scales = {(g.layer, g.item): (g.scale_min, g.scale_max) for g in grades if g.value is not None}
    assert scales[("round", None)] == (-2, 1) and scales[("fix_effect", None)] == (-2, 0)
    assert scales[("overall", None)] == (1, 5) and scales[("pattern", "self_verification")] == (-2, 1)
    assert scales[("rubric", "forward_parity")] == (-1, 1)
    assert scales[("rubric", "gguf_container_parsing")] == (0, 1)  # the sheet's own scale
    first_round = next(g for g in grades if g.layer == "round" and g.run_id == MODEL_A)
    assert first_round.rationale.startswith("Parser, tokenizer and kernels in place")
    assert first_round.shortcomings.startswith("Greedy tokens differ")
    parity = next(g for g in grades if g.item == "forward_parity")
    assert parity.criteria.startswith("+1 = cosine >= 0.999")
    assert {g.stage for g in grades if g.layer in ("rubric", "pattern", "overall")} == {None}

    # The other spelling is the same sheet: every grade is already held, nothing is written.
    before = snapshot(arena_store)
    again = import_grades(arena_store, [other])
    assert [(r.appended, r.held) for r in again.runs] == [(0, 30), (0, 44)]
    assert snapshot(arena_store) == before


def test_both_spellings_in_one_import_count_once(arena_store: EventStore) -> None:
    done = import_grades(arena_store, [GRADES])  # the folder: the CSV and the JSON (other files are not looked at)
    assert [f.label.rsplit("/", 1)[1] for f in done.files] == ["arena-gguf.csv", "arena-gguf.json"]
    assert (done.appended, done.held, done.created) == (74, 74, [])


def test_run_not_in_store_gets_a_grades_only_run(store: EventStore, here: Path) -> None:
    Path("late.csv").write_text("run_id,grader,layer,round,value,task_id\n"
                                "arena/t/model-z,alice,round,0,-1,gguf-swift\n"
                                "arena/t/model-z,alice,overall,,3,\n")
    with pytest.raises(InputError, match=r"^late.csv:2: run_id: no run 'arena/t/model-z' in the store"):
        import_grades(store, ["late.csv"], create_runs=False)
    assert store.runs() == []
    done = import_grades(store, ["late.csv"])
    assert done.created == ["arena/t/model-z"] and done.appended == 2
    # The grades go to the run's grades stream: the run's own id stays free for its trajectory.
    assert [r.run_id for r in store.runs()] == ["arena/t/model-z@grades"]
    events = list(store.events("arena/t/model-z@grades"))
    start = events[0]
    assert (start.kind, start.harness.name, start.task_id, start.labels) == (
        "run_started", "grades", "gguf-swift", {"created_by": "grades import", "grades_for": "arena/t/model-z"})
    assert [(e.actor, e.layer, e.stage, e.value) for e in events[1:]] == [
        ("human:alice", "round", 0, -1), ("human:alice", "overall", None, 3)]
    assert store.run("arena/t/model-z@grades").task_id == "gguf-swift"
    from procgrade.engine.analysis.dataset import load_runs

    [view] = load_runs(store)
    assert (view.run_id, view.task_id, [g.run_id for g in view.grades]) == (
        "arena/t/model-z", "gguf-swift", ["arena/t/model-z"] * 2)


# --- strict validation: located errors, nothing written ---------------------------------------------

HEADER = "run_id,grader,layer,round,item,value,passed,rationale,shortcomings,criteria\n"
A = MODEL_A

CSV_CASES = [
    # (rows after the header, the error's start)
    (f"{A},bob,round,0,,2,,,,\n", "bad.csv:2: value: 2 is outside the round scale -2..1"),
    (f"{A},bob,round,0,,+1,,,,\n{A},bob,fix_effect,1,,1,,,,\n", "bad.csv:3: value: 1 is outside the fix_effect scale -2..0"),
    (f"{A},bob,overall,,,0,,,,\n", "bad.csv:2: value: 0 is outside the overall scale 1..5"),
    (f"{A},bob,rubric,,speed,2,,,,fast enough\n", "bad.csv:2: value: 2 is outside the rubric scale -1..1"),
    (f"{A},bob,pattern,,exploration,-3,,,,\n", "bad.csv:2: value: -3 is outside the pattern scale -2..1"),
    (f"{A},bob,rounds,0,,0,,,,\n", "bad.csv:2: layer: unknown layer 'rounds'"),
    (f"{A},bob,requirement,,1,,true,,,\n", "bad.csv:2: layer: unknown layer 'requirement'"),
    (f"{A},bob,check,0,context_preservatio,,true,,,\n", "bad.csv:2: item: unknown check 'context_preservatio'"),
    (f"{A},bob,pattern,,curiosity,1,,,,\n", "bad.csv:2: item: unknown behaviour pattern 'curiosity'"),
    (f"{A},bob,check,0,,,true,,,\n", "bad.csv:2: item: missing: which check"),
    (f"{A},bob,round,-1,,0,,,,\n", "bad.csv:2: round: expected a round number"),
    (f"{A},bob,round,1.5,,0,,,,\n", "bad.csv:2: round: expected a round number"),
    (f"{A},bob,check,,scope,,true,,,\n", "bad.csv:2: round: missing: a check grade is given per round"),
    (f"{A},bob,overall,2,,4,,,,\n", "bad.csv:2: round: must be blank: an overall grade is over the whole task"),
    (f"{A},bob,fix_effect,0,,0,,,,\n", "bad.csv:2: round: a fix-effect score grades a fix round"),
    (f"{A},bob,round,5,,0,,,,\n", f"bad.csv:2: round: run {A} has no round 5 (its stages: 0, 1)"),
    (",bob,round,0,,0,,,,\n", "bad.csv:2: run_id: missing"),
    ("not a run,bob,round,0,,0,,,,\n", "bad.csv:2: run_id: 'not a run' is not a run id"),
    (f"{A},,round,0,,0,,,,\n", "bad.csv:2: grader: missing"),
    (f"{A},agent,round,0,,0,,,,\n", "bad.csv:2: grader: 'agent' is not a grader"),
    (f"{A},bob,check,0,scope_adherence,0,,,,\n", "bad.csv:2: item: unknown check 'scope_adherence'"),
    (f"{A},bob,check,0,implementation_path,1,true,,,\n", "bad.csv:2: value: must be blank: a check is binary"),
    (f"{A},bob,check,0,implementation_path,,,,,\n", "bad.csv:2: passed: missing"),
    (f"{A},bob,check,0,implementation_path,,maybe,,,\n", "bad.csv:2: passed: expected true or false"),
    (f"{A},bob,round,0,,0,true,,,\n", "bad.csv:2: passed: must be blank"),
    (f"{A},bob,round,0,,high,,,,\n", "bad.csv:2: value: expected an integer, got 'high'"),
    (f"{A},bob,round,0,,,,,,\n", "bad.csv:2: value: missing"),
    (f"{A},bob,rubric,,speed,1,,,,\n", "bad.csv:2: criteria: missing"),
    (f"{A},bob,overall,,x,3,,,,\n", "bad.csv:2: item: must be blank"),
    (f"{A},bob,rubric,,speed,1,,,,fast\n{A},bob,rubric,,speed,0,,,,fast\n",
     ("bad.csv:3: item: rubric speed by human:bob in sheet bad on run arena/gguf-swift/model-a is also given at "
      "bad.csv:2, differently")),
    (f"{A},bob,round,0,,0,,,,\n{A},bob,round,0,,1,,,,\n",
     "bad.csv:3: round: round 0 score by human:bob in sheet bad on run arena/gguf-swift/model-a is also given"),
    (f"{A},bob,rubric,,speed,1,,,,fast\n{MODEL_C},bob,rubric,,speed,0,,,,slow\n",
     "bad.csv:3: criteria: rubric speed has 'slow' here but 'fast' at bad.csv:2"),
    (f"{A},bob,round,0\n", "bad.csv:2: -: the row has 4 cells, the header 10"),
    (f'{A},bob,round,0,,0,,"unterminated\n', "bad.csv:2: -: not valid CSV"),
    ("", "bad.csv: -: the sheet holds no grades"),
]
HEADER_CASES = [
    ("run_id,grader,layer,colour\n", "bad.csv:1: colour: unknown column"),
    ("run_id,grader,round,value\n", "bad.csv:1: layer: missing column"),
    ("run_id,grader,layer,value,value\n", "bad.csv:1: value: the column is given twice"),
]


def _sheet(**runs: object) -> dict[str, object]:
    return {"format": "procgrade.grades/1", "sheet": "s", "grader": "bob",
            "rubric": {"speed": {"criteria": "+1 = fast"}},
            "runs": [{"run_id": A, **runs}]}


JSON_CASES = [
    ({**_sheet(overall=3), "format": "procgrade.grades/3"},
     "bad.json: format: expected procgrade.grades/1 (arena) or procgrade.grades/2 (study), got 'procgrade.grades/3'"),
    ({**_sheet(overall=3), "format": "procgrade.grades/2"}, "bad.json: items: missing"),
    (_sheet(rounds=[{"round": 0, "score": 2}]), "bad.json:runs[0].rounds[0]: score: 2 is outside the round scale -2..1"),
    (_sheet(rounds=[{"round": 0, "score": 0, "fix_effect": -1}]),
     "bad.json:runs[0].rounds[0]: round: a fix-effect score grades a fix round"),
    (_sheet(rounds=[{"round": 1, "score": 0, "fix_effect": 1}]),
     "bad.json:runs[0].rounds[0]: fix_effect: 1 is outside the fix_effect scale -2..0"),
    (_sheet(rounds=[{"round": 0, "score": 0, "checks": {"context_preservatio": True}}]),
     "bad.json:runs[0].rounds[0].checks: context_preservatio: unknown name"),
    (_sheet(patterns={"curiosity": 1}), "bad.json:runs[0].patterns: curiosity: unknown name"),
    (_sheet(patterns={"exploration": 2}), "bad.json:runs[0].patterns.exploration: value: 2 is outside the pattern scale -2..1"),
    (_sheet(rubric={"sped": 1}), "bad.json:runs[0].rubric: sped: not a dimension of the sheet's rubric (declared: speed)"),
    (_sheet(overall=6), "bad.json:runs[0].overall: value: 6 is outside the overall scale 1..5"),
    (_sheet(rounds=[{"round": -1, "score": 0}]), "bad.json:runs[0].rounds[0]: round: Input should be greater than or equal to 0"),
    (_sheet(rounds=[{"round": 4, "score": 0}]), f"bad.json:runs[0].rounds[0]: round: run {A} has no round 4 (its stages: 0, 1)"),
    (_sheet(rounds=[{"round": 0, "score": 1.0}]), "bad.json:runs[0].rounds[0]: score: Input should be a valid integer"),
    (_sheet(rounds=[{"round": 0}]), "bad.json:runs[0].rounds[0]: score: missing"),
    (_sheet(round=[{"round": 0, "score": 0}]), "bad.json:runs[0]: round: unknown key"),
    (_sheet(rounds=[{"round": 0, "score": 0}, {"round": 0, "score": 1}]),
     "bad.json:runs[0].rounds[1]: round: round 0 score by human:bob in sheet s on run arena/gguf-swift/model-a is also given"),
    ({**_sheet(overall=3), "runs": [{"overall": 3}]}, "bad.json:runs[0]: run_id: missing"),
    ({**_sheet(overall=3), "grader": "agent"}, "bad.json: grader: 'agent' is not a grader"),
    ({**_sheet(overall=3), "sheet": "a|b"}, "bad.json: sheet: String should match pattern"),
    ({**_sheet(patterns={"exploration": 3}), "patterns": {"exploration": {"scale_min": 0}}},
     "bad.json:patterns.exploration: scale_max: missing: give scale_min and scale_max together"),
    (_sheet(), "bad.json:runs[0]: -: the run entry holds no grades"),
]


def test_bad_sheets_fail_located_and_write_nothing(arena_store: EventStore, here: Path) -> None:
    import_grades(arena_store, [CSV])  # the store already holds grades: a failed import leaves them as they are
    before = snapshot(arena_store)
    cases = ([(HEADER + rows, message) for rows, message in CSV_CASES]
             + [(header + f"{A},bob,round\n", message) for header, message in HEADER_CASES])
    for text, message in cases:
        Path("bad.csv").write_text(text)
        with pytest.raises(InputError) as caught:
            import_grades(arena_store, [JSON, "bad.csv"])  # a good sheet in the same import is not written either
        assert str(caught.value).startswith(message), (text, str(caught.value))
        assert snapshot(arena_store) == before
    for doc, message in JSON_CASES:
        Path("bad.json").write_text(json.dumps(doc))
        with pytest.raises(InputError) as caught:
            import_grades(arena_store, ["bad.json"])
        assert str(caught.value).startswith(message), (doc, str(caught.value))
    Path("bad.json").write_text('{"format": "procgrade.grades/1", "sheet": "s", "grader": "bob",\n'
                                ' "runs": [{"run_id": "r", "overall": 3, "overall": 4}]}')
    with pytest.raises(InputError, match=r"^bad.json:runs\[0\]: overall: the key is given twice"):
        import_grades(arena_store, ["bad.json"])
    Path("bad.json").write_text('{"format": "procgrade.grades/1",\n "sheet": }')
    with pytest.raises(InputError, match=r"^bad.json:2: -: not valid JSON"):
        import_grades(arena_store, ["bad.json"])
    Path("notes.json").write_text('{"hello": 1}')
    with pytest.raises(InputError, match=r"^notes.json: -: not an arena grade sheet .* or a DevAI judgment"):
        import_grades(arena_store, ["notes.json"])
    assert snapshot(arena_store) == before


def test_own_scales_for_rubric_and_patterns(arena_store: EventStore, here: Path) -> None:
    Path("scales.csv").write_text(
        "run_id,grader,layer,item,value,scale_min,scale_max,criteria\n"
        f"{A},bob,pattern,exploration,3,0,3,\n"
        f"{A},bob,rubric,speed,-5,-5,5,+5 = instant\n")
    done = import_grades(arena_store, ["scales.csv"])
    assert done.appended == 2
    assert [(g.item, g.value, g.scale_min, g.scale_max) for g in grade_events(arena_store)] == [
        ("exploration", 3, 0, 3), ("speed", -5, -5, 5)]
    Path("fixed.csv").write_text(f"run_id,grader,layer,round,value,scale_min,scale_max\n{A},bob,round,0,2,-2,2\n")
    with pytest.raises(InputError, match=r"^fixed.csv:2: scale_min: the round scale is fixed at -2..1"):
        import_grades(arena_store, ["fixed.csv"])


def test_changed_grade_under_the_same_sheet_is_a_conflict(arena_store: EventStore, here: Path) -> None:
    import_grades(arena_store, [CSV])
    before = snapshot(arena_store)
    lines = CSV.read_text().splitlines(keepends=True)
    assert lines[1].startswith(f"{A},{EXPERT},round,0,,0,")
    lines[1] = lines[1].replace(",round,0,,0,", ",round,0,,-1,", 1)
    Path("arena-gguf.csv").write_text("".join(lines))  # same file name: same sheet
    with pytest.raises(EventIdConflictError) as caught:
        import_grades(arena_store, ["arena-gguf.csv"])
    assert str(caught.value).startswith(
        f"arena-gguf.csv:2: value: run {A} already holds round 0 score by {EXPERT} in sheet arena-gguf (seq 9) "
        "with value 0, this sheet gives -1"), str(caught.value)
    assert snapshot(arena_store) == before
    Path("arena-gguf-regrade.csv").write_text("".join(lines))  # a new sheet may grade again
    assert import_grades(arena_store, ["arena-gguf-regrade.csv"]).appended == 74


def test_sealed_run_refuses_new_grades(arena_store: EventStore) -> None:
    arena_store.seal(MODEL_A)
    before = snapshot(arena_store)
    with pytest.raises(RunSealedError) as caught:
        import_grades(arena_store, [JSON])
    assert str(caught.value).startswith(f"{JSON}:runs[0].rounds[0]: run {MODEL_A} is sealed at 9 events: "
                                        "30 new grade(s) cannot be appended; nothing written"), str(caught.value)
    assert snapshot(arena_store) == before  # model-c, not sealed, got nothing either


# --- DevAI judgments ----------------------------------------------------------------------------------


def _expected_devai() -> dict[tuple[str, str, str, str], bool | None]:
    """``{(run_id, actor, layer, item): passed}`` read straight from the judgment files."""
    expected: dict[tuple[str, str, str, str], bool | None] = {}
    for system in SYSTEMS:
        for actor, folder in ((HUMAN, "human_as_a_judge"), (GRAY, "agent_as_a_judge/gray_box")):
            for path in sorted((DEVAI / system / folder).glob("*.json")):
                doc = json.loads(path.read_text(encoding="utf-8"))
                run_id = f"devai/{system}/{path.stem}"
                for req in doc["requirements"]:
                    expected[(run_id, actor, "requirement", str(req["requirement_id"]))] = req["satisfied"]
                for pref in doc["preferences"]:
                    expected[(run_id, actor, "preference", str(pref["preference_id"]))] = pref["satisfied"]
                for flag in ("executed_successfully", "satisfied_all_requirements", "satisfied_all_preferences"):
                    if flag in doc:
                        expected[(run_id, actor, "outcome", flag)] = doc[flag]
    return expected


def test_devai_judgments(store: EventStore) -> None:
    ingest_paths(store, [TRAJECTORY])  # the one trajectory: OpenHands on task 39 (75 events)
    run_39 = f"devai/OpenHands/{TASK_39}"
    trajectory_head = store.run(run_39).head_hash
    done = import_grades(store, [DEVAI])
    assert len(done.files) == 330 and done.skipped == ()
    assert len(done.runs) == 165 and len(done.created) == 164 and run_39 not in done.created

    expected = _expected_devai()
    grades = grade_events(store)
    assert {(g.run_id, g.actor, g.layer, g.item): g.passed for g in grades} == expected
    assert len(grades) == len(expected) == done.appended
    per = Counter((g.run_id.split("/")[1], g.actor, g.layer) for g in grades)
    for system in SYSTEMS:
        assert per[(system, HUMAN, "requirement")] == per[(system, GRAY, "requirement")] == 366
        assert per[(system, HUMAN, "outcome")] == 165 and per[(system, GRAY, "outcome")] == 0
        assert per[(system, HUMAN, "preference")] == per[(system, GRAY, "preference")] == 125
    assert {g.sheet for g in grades} == {"devai/human_as_a_judge", "devai/agent_as_a_judge/gray_box"}
    assert {g.passed for g in grades if g.layer == "preference"} == {None}

    # Task 39 lands on the imported trajectory, after its 75 events.
    events = list(store.events(run_39))
    assert events[0].harness.name == "OpenHands" and events[0].model == "gpt-4o-2024-05-13"
    assert store.hash_at(run_39, 74) == trajectory_head
    assert [e.kind for e in events[75:]] == ["grade"] * (len(events) - 75) and len(events) == 75 + 2 * 7 + 2 * 3 + 3
    first = next(e for e in events[75:] if e.actor == HUMAN and e.item == "3")
    assert (first.passed, first.category, first.prerequisites) == (True, "Performance Metrics", ["1", "2"])
    assert first.criteria == "Cross-validation is used to evaluate the model in `src/train.py`."
    assert first.payload["source"][0]["file"] == f"OpenHands/human_as_a_judge/{TASK_39}.json"

    # The rest are judgment-only runs named after the file (upstream's task 13 "name" is cut short).
    created = store.run("devai/GPT-Pilot/13_Style_Transfer_Perceptual_Loss_CustomImages_DL@grades")
    assert (created.harness, created.task_id, created.event_count) == (
        "GPT-Pilot", "13_Style_Transfer_Perceptual_Loss_CustomImages_DL", created.event_count)
    start = next(store.events(created.run_id))
    assert start.labels == {"created_by": "grades import", "benchmark": "DevAI", "system": "GPT-Pilot",
                            "grades_for": "devai/GPT-Pilot/13_Style_Transfer_Perceptual_Loss_CustomImages_DL"}
    # Quirk kept as written: OpenHands task 31 says all requirements are satisfied, requirement 5 is not.
    quirk = {(g.item): g.passed for g in grade_events(store, "devai/OpenHands/31_Cancer_Prediction_SVM_BreastCancer_ML")
             if g.actor == HUMAN and g.layer in ("outcome", "requirement")}
    assert quirk["satisfied_all_requirements"] is True and quirk["5"] is False

    # Re-importing is a no-op: nothing written.
    before = snapshot(store)
    again = import_grades(store, [DEVAI])
    assert (again.appended, again.held, again.created) == (0, len(expected), [])
    assert snapshot(store) == before


def test_devai_sealed_run_refuses(store: EventStore) -> None:
    ingest_paths(store, [TRAJECTORY], seal=True)
    before = snapshot(store)
    with pytest.raises(RunSealedError) as caught:
        import_grades(store, [DEVAI / "OpenHands" / "human_as_a_judge"])
    message = str(caught.value)
    assert f"{TASK_39}.json:requirements[0]: run devai/OpenHands/{TASK_39} is sealed at 75 events: " \
           "13 new grade(s) cannot be appended" in message, message
    assert snapshot(store) == before  # none of the other 54 runs was created


def test_devai_single_files_and_bad_judgments(store: EventStore, tmp_path: Path) -> None:
    human = tmp_path / "judgment" / "MetaGPT" / "human_as_a_judge"
    human.mkdir(parents=True)
    source = DEVAI / "MetaGPT" / "human_as_a_judge" / f"{TASK_39}.json"
    good = shutil.copy(source, human)
    done = import_grades(store, [good], format="devai")
    assert [(r.run_id, r.appended, r.created) for r in done.runs] == [(f"devai/MetaGPT/{TASK_39}", 7 + 3 + 3, True)]

    doc = json.loads(source.read_text(encoding="utf-8"))
    before = snapshot(store)
    bad_docs = [
        ("requirements", 0, "satisfied", "yes", "requirements[0]: satisfied: expected true, false or null, got a string"),
        ("requirements", 1, "prerequisites", [0, "x"], "requirements[1]: prerequisites[1]: expected a requirement id"),
        ("requirements", 1, "prerequisites", [9], "requirements[1]: prerequisites: requirement 9 is not in the file"),
        ("requirements", 2, "requirement_id", 0, "requirements[2]: requirement_id: 0 is also the id of requirements[0]"),
        ("requirements", 0, "criteria", "", "requirements[0]: criteria: expected non-empty text"),
        ("preferences", 0, "satisfied", 1, "preferences[0]: satisfied: expected true, false or null"),
    ]
    for key, index, name, value, message in bad_docs:
        broken = json.loads(json.dumps(doc))
        broken[key][index][name] = value
        path = human / "broken.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(InputError) as caught:
            import_grades(store, [human])
        assert str(caught.value) == f"{path}:{message}" or str(caught.value).startswith(f"{path}:{message}"), str(caught.value)
        assert snapshot(store) == before
        path.unlink()
    stray = tmp_path / f"{TASK_39}.json"
    shutil.copy(source, stray)
    with pytest.raises(InputError, match="a DevAI judgment sits at <system>/human_as_a_judge/<task>.json"):
        import_grades(store, [stray])
    box = tmp_path / "judgment" / "MetaGPT" / "agent_as_a_judge" / "black_box"
    box.mkdir(parents=True)
    shutil.copy(DEVAI / "MetaGPT" / "agent_as_a_judge" / "gray_box" / f"{TASK_39}.json", box)
    (tmp_path / "judgment" / "notes.json").write_text('{"hello": 1}')  # in a folder: skipped, not an error
    shutil.copy(source, tmp_path / "judgment" / "instance.json")  # a task outside the layout: skipped too
    done = import_grades(store, [tmp_path / "judgment"])
    assert [Path(p).name for p in done.skipped] == ["instance.json", "notes.json"]
    assert [(r.run_id, r.appended, r.held, r.created) for r in done.runs] == [(f"devai/MetaGPT/{TASK_39}", 10, 13, False)]
    assert {g.actor for g in grade_events(store)} == {HUMAN, "judge:agent-as-a-judge-black-box"}


# --- the command line ---------------------------------------------------------------------------------


def test_cli_grades_import(store_url: str, here: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", str(RUNS), "--db", store_url])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["grades", "import", str(GRADES), str(DEVAI / "OpenHands" / "human_as_a_judge"),
                                 "--db", store_url])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (f"{MODEL_A}: 30 grade(s) appended (round 2, fix_effect 1, check 10, rubric 8, pattern 8, "
                        "overall 1), 30 already held")
    assert f"devai/OpenHands/{TASK_39}: run created (grades only), 13 grade(s) appended (requirement 7, " \
           "preference 3, outcome 3)" in lines
    total = 74 + sum(len(json.loads(p.read_text())["requirements"]) + len(json.loads(p.read_text())["preferences"]) + 3
                     for p in (DEVAI / "OpenHands" / "human_as_a_judge").glob("*.json"))
    assert lines[-1] == f"{total} grade(s) appended to 57 run(s), 55 run(s) created; 74 already held; 57 file(s) read"
    result = runner.invoke(app, ["grades", "import", str(CSV), "--db", store_url])
    assert result.exit_code == 0 and result.output.splitlines()[-1] == (
        "0 grade(s) appended to 0 run(s); 74 already held; 1 file(s) read")
    Path("bad.csv").write_text(HEADER + f"{A},bob,round,0,,2,,,,\n")
    result = runner.invoke(app, ["grades", "import", "bad.csv", "--format", "arena", "--db", store_url])
    assert result.exit_code == 1 and isinstance(result.exception, InputError)
    result = runner.invoke(app, ["grades", "import", "bad.csv", "--format", "nope", "--db", store_url])
    assert result.exit_code == 2 and "unknown grades format 'nope'" in result.output


def test_schema_grades_describes_the_json_sheet() -> None:
    result = CliRunner().invoke(app, ["schema", "grades"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema == json.loads(json.dumps(grade_sheet_json_schema()))
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    assert list(validator.iter_errors(json.loads(JSON.read_text()))) == []
    assert list(validator.iter_errors({**_sheet(overall=3), "format": "procgrade.grades/2"}))
    assert list(validator.iter_errors({**_sheet(overall=3), "format": "procgrade.grades/3"}))
    assert list(validator.iter_errors(_sheet(rounds=[{"round": 0, "score": 0, "checks": {"nope": True}}])))
