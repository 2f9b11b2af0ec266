"""A two-annotator annotation study (grade schema v2), end to end.

Annotator A writes a CSV sheet, annotator B a JSON sheet (``procgrade.grades/2``); both grade a
binary ``success`` and ``side_effect`` (layer ``outcome``) and an ordinal ``optimality`` 1..4 (layer
``trajectory``) of 30 web-agent runs, abstaining (``Unsure``, ``N/A``) on a few. Who annotated an
item first differs per item and is stated in the sheets (``annotation``). The last four runs are
annotated by A only. The sheets also say each run's benchmark and split.

The study is imported with its trajectories in both orders (trajectories first; sheets first, which
used to fail with a seq-0 conflict), and ``calibrate --reference primary --candidate secondary
--item success`` must give what scikit-learn gives on the pairs worked out here from the sheets'
own rows, and count the items it left out and why.
"""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from databases import DATABASES, fresh_url
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, precision_score, recall_score
from typer.testing import CliRunner

from procgrade.engine.analysis.calibration import CalibrationError, calibrate
from procgrade.engine.analysis.dataset import load_runs
from procgrade.engine.cli import DEFAULT_DB, app
from procgrade.engine.grades import import_grades
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.store import DEFAULT_DB as STORE_DEFAULT_DB
from procgrade.engine.store import EventStore, open_store

RUNS = [f"web/run-{i:02d}" for i in range(30)]
TWICE = RUNS[:26]  # annotated by both
UNSURE_A = {"web/run-03": "Unsure", "web/run-10": "Unsure"}  # A abstains on success
NA_B = {"web/run-08": "N/A", "web/run-11": "N/A"}  # B abstains on success


def _labels() -> tuple[dict[str, bool], dict[str, bool], dict[str, int], dict[str, int], dict[str, bool]]:
    rng = random.Random(15)
    a = {run: rng.random() < 0.6 for run in RUNS}
    b = {run: (a[run] if rng.random() < 0.8 else not a[run]) for run in TWICE}
    opt_a = {run: rng.randint(1, 4) for run in RUNS}
    opt_b = {run: max(1, min(4, opt_a[run] + rng.choice((-1, 0, 0, 1)))) for run in TWICE}
    side = {run: rng.random() < 0.3 for run in RUNS}
    return a, b, opt_a, opt_b, side


A, B, OPT_A, OPT_B, SIDE = _labels()


def _a_first(run: str) -> bool:
    return int(run[-2:]) % 2 == 0 or run not in TWICE


def _write_study(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["run_id,grader,layer,item,scale,scale_min,scale_max,value,annotation,model,task_id,label.benchmark,"
            "label.split"]
    for i, run in enumerate(RUNS):
        order = 1 if _a_first(run) else 2
        meta = f"model-{'x' if i % 2 else 'y'},task-{i % 10},webarena,{'dev' if i < 15 else 'test'}"
        success = UNSURE_A.get(run) or ("yes" if A[run] else "no")
        rows.append(f"{run},A,outcome,success,binary,,,{success},{order},{meta}")
        rows.append(f"{run},A,outcome,side_effect,binary,,,{'yes' if SIDE[run] else 'no'},{order},{meta}")
        rows.append(f"{run},A,trajectory,optimality,ordinal,1,4,{OPT_A[run]},{order},{meta}")
    csv_sheet = folder / "annotator-a.csv"
    csv_sheet.write_text("\n".join(rows) + "\n")
    runs = []
    for i, run in enumerate(TWICE):
        runs.append({"run_id": run, "annotation": 2 if _a_first(run) else 1, "model": f"model-{'x' if i % 2 else 'y'}",
                     "task_id": f"task-{i % 10}", "labels": {"benchmark": "webarena", "split": "dev" if i < 15 else "test"},
                     "grades": {"success": NA_B.get(run, B[run]),
                                "side_effect": {"value": SIDE[run], "rationale": "same as A"},
                                "optimality": OPT_B[run]}})
    json_sheet = folder / "annotator-b.json"
    json_sheet.write_text(json.dumps({
        "format": "procgrade.grades/2", "sheet": "annotator-b", "grader": "human:B",
        "items": {"success": {"layer": "outcome", "scale": "binary", "criteria": "The task was done."},
                  "side_effect": {"layer": "outcome", "scale": "binary"},
                  "optimality": {"layer": "trajectory", "scale": "ordinal", "min": 1, "max": 4}},
        "runs": runs}, indent=1))
    return csv_sheet, json_sheet


def _write_trajectories(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, run in enumerate(RUNS):
        lines.append({"run_id": run, "seq": 0, "event_id": f"{run}/0", "kind": "run_started", "actor": "harness",
                      "harness": {"name": "webarena-agent"}, "model": f"model-{'x' if i % 2 else 'y'}",
                      "task_id": f"task-{i % 10}"})
        lines.append({"run_id": run, "seq": 1, "event_id": f"{run}/1", "kind": "message", "actor": "agent",
                      "text": "Opening the shop page."})
    path = folder / "trajectories.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture(params=DATABASES)
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[EventStore, EventStore, str]]:
    with fresh_url(request.param, tmp_path / "one") as one, fresh_url(request.param, tmp_path / "two") as two:
        first, second = open_store(one, create=True), open_store(two, create=True)
        try:
            yield first, second, one
        finally:
            first.close()
            second.close()


def _expected_pairs() -> tuple[list[bool], list[bool], dict[str, int]]:
    """Primary and secondary success labels, from the sheets' own rows, and the items left out."""
    ref, cand = [], []
    left: dict[str, int] = {}
    for run in sorted(RUNS):
        a = UNSURE_A.get(run) or A[run]
        b = (NA_B.get(run) or B[run]) if run in TWICE else None
        primary, secondary = (a, b) if _a_first(run) else (b, a)
        if isinstance(primary, str):
            left["reference abstained"] = left.get("reference abstained", 0) + 1
        elif secondary is None:
            left["candidate single-annotated"] = left.get("candidate single-annotated", 0) + 1
        elif isinstance(secondary, str):
            left["candidate abstained"] = left.get("candidate abstained", 0) + 1
        else:
            ref.append(primary)
            cand.append(secondary)
    return ref, cand, left


def test_two_annotators_either_order(two_stores: tuple[EventStore, EventStore, str], tmp_path: Path) -> None:
    first, second, url = two_stores
    csv_sheet, json_sheet = _write_study(tmp_path / "sheets")
    trajectories = _write_trajectories(tmp_path / "runs")

    ingest_paths(first, [trajectories])  # trajectories first: grades land on the runs
    done = import_grades(first, [csv_sheet, json_sheet])
    assert done.created == [] and done.appended == 30 * 3 + 26 * 3

    done = import_grades(second, [json_sheet, csv_sheet])  # sheets first: the runs' grades streams
    assert len(done.created) == 30
    ingest_paths(second, [trajectories])  # the trajectory still takes its own id (no seq-0 conflict)
    assert {r.run_id for r in second.runs()} == set(RUNS) | {f"{r}@grades" for r in RUNS}
    assert import_grades(second, [csv_sheet, json_sheet]).appended == 0  # held, wherever they are

    views = {}
    for name, store in (("first", first), ("second", second)):
        loaded = load_runs(store)
        views[name] = [(v.run_id, v.harness, v.model, v.task_id, v.labels) for v in loaded]
        run = next(v for v in loaded if v.run_id == "web/run-03")
        abstention = next(g for g in run.grades if g.actor == "human:A" and g.item == "success")
        assert (abstention.abstained, abstention.passed, abstention.scale) == ("Unsure", None, "binary")
    assert views["first"] == views["second"]
    assert views["first"][0] == ("web/run-00", "webarena-agent", "model-y", "task-0",
                                 {"benchmark": "webarena", "split": "dev"})

    results = []
    for store in (first, second):
        result = calibrate(load_runs(store), "primary", ["secondary"], items=["success"], bootstrap=20)
        results.append(result.to_dict())
    # the same analysis in either order (but for the grades' seqs, nothing differs)
    assert results[0] == results[1]

    layer = calibrate(load_runs(first), "primary", ["secondary"], items=["success"], bootstrap=20).layer("outcome")
    assert (layer.scale, layer.items) == ("binary", ("success",))
    comparison = layer.comparison("secondary")
    ref, cand, left = _expected_pairs()
    b = comparison.binary
    assert b is not None and comparison.n == b.n == len(ref) == 30 - sum(left.values())
    assert round(b.kappa.value, 3) == round(cohen_kappa_score(ref, cand), 3)
    assert round(b.agreement.estimate, 3) == round(accuracy_score(ref, cand), 3)
    assert round(b.precision, 3) == round(precision_score(ref, cand), 3)
    assert round(b.recall, 3) == round(recall_score(ref, cand), 3)
    assert round(b.f1, 3) == round(f1_score(ref, cand), 3)
    assert b.precision_interval.low <= b.precision <= b.precision_interval.high
    assert dict(comparison.excluded) == left and left["reference abstained"] and left["candidate abstained"]
    assert left["candidate single-annotated"] == 4

    # per group of a sheet's label, and the ordinal item: weighted kappa over 1..4
    by_split = calibrate(load_runs(first), "primary", ["secondary"], items=["success"], by="split", bootstrap=20)
    assert [c.group for c in by_split.layer("outcome").comparisons] == [None, "dev", "test"]
    assert sum(c.n for c in by_split.layer("outcome").comparisons[1:]) == comparison.n
    # the pairwise matrix over every grader (A, B), whole and per group
    outcome = by_split.layer("outcome")
    assert outcome.matrix is not None and outcome.matrix.graders == ("human:A", "human:B")
    assert [m.group for m in outcome.group_matrices] == ["dev", "test"]
    assert sum(m.matrix.counts[0][1] for m in outcome.group_matrices) == outcome.matrix.counts[0][1] == 26 - 4
    optimality = calibrate(load_runs(first), "human:A", ["human:B"], items=["optimality"], bootstrap=20)
    assert optimality.layer("trajectory").labels == (1, 2, 3, 4)
    assert optimality.layer("trajectory").weights == "quadratic"


def test_pooling_and_nothing_shared_are_refused(two_stores: tuple[EventStore, EventStore, str],
                                                  tmp_path: Path) -> None:
    store, _, url = two_stores
    import_grades(store, list(_write_study(tmp_path / "sheets")))
    runs = load_runs(store)
    with pytest.raises(CalibrationError, match=r"layer outcome would pool 2 items: side_effect \(binary\), "
                                               r"success \(binary\): name one with --item"):
        calibrate(runs, "primary", ["secondary"], layer="outcome")
    with pytest.raises(CalibrationError, match="side_effect.*success"):
        calibrate(runs, "primary", ["secondary"], items=["success", "side_effect"])
    pooled = calibrate(runs, "primary", ["secondary"], items=["success", "side_effect"], pool_items=True,
                       bootstrap=20)
    assert pooled.layer("outcome").items == ("side_effect", "success")
    # items of two layers are calibrated layer by layer; two scales on one layer never pool
    both = calibrate(runs, "human:A", ["human:B"], items=["success", "optimality"], bootstrap=20)
    assert [(x.layer, x.scale) for x in both.layers] == [("outcome", "binary"), ("trajectory", "ordinal")]
    (tmp_path / "effort.csv").write_text("run_id,grader,layer,item,scale,scale_min,scale_max,value\n"
                                         f"{RUNS[0]},A,outcome,effort,ordinal,1,3,2\n{RUNS[0]},B,outcome,effort,ordinal,1,3,2\n")
    import_grades(store, [tmp_path / "effort.csv"])
    with pytest.raises(CalibrationError, match=r"mixes scales: effort \(ordinal 1..3\), success \(binary\)"):
        calibrate(load_runs(store), "human:A", ["human:B"], items=["success", "effort"], pool_items=True)
    with pytest.raises(CalibrationError, match="no grade of item 'looping'"):
        calibrate(runs, "primary", ["secondary"], items=["looping"])

    # the last four runs only A annotated: B shares none of them
    runner = CliRunner()
    only_a = tmp_path / "only-a.csv"
    only_a.write_text("run_id,grader,layer,item,scale,value\n"
                      + "".join(f"{run},C,outcome,success,binary,yes\n" for run in RUNS[26:]))
    import_grades(store, [only_a])
    result = runner.invoke(app, ["calibrate", "--reference", "human:B", "--candidate", "human:C", "--item", "success",
                                 "--db", url])
    assert result.exit_code == 1 and isinstance(result.exception, CalibrationError)  # main() prints it, exit 1
    message = str(result.exception)
    assert "\n" not in message and message.startswith("human:C and human:B share no graded item on layer outcome "
                                                      "(success): human:B labelled 24, human:C 4")

    result = runner.invoke(app, ["calibrate", "--reference", "primary", "--candidate", "secondary", "--item",
                                 "success", "--bootstrap", "20", "--json", str(tmp_path / "out.json"), "--db", url])
    assert result.exit_code == 0, result.output
    assert "left out: candidate abstained" in result.output and "F1" in result.output
    loaded = load_runs(store)
    with warnings.catch_warnings(record=True) as caught:  # a library's warning becomes a note, never escapes
        warnings.simplefilter("always")
        calibrate(loaded, "primary", ["secondary"], items=["success"], bootstrap=20)
    assert [str(w.message) for w in caught] == []
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["layers"][0]["comparisons"][0]["excluded"]


def test_sheet_errors_name_the_place(tmp_path: Path, two_stores: tuple[EventStore, EventStore, str]) -> None:
    store, _, _ = two_stores
    from procgrade.engine.errors import InputError

    cases = [
        ("run_id,grader,layer,item,value\nr1,A,outcome,success,yes\n", "bad.csv:2: layer: unknown layer 'outcome'"),
        ("run_id,grader,layer,item,scale,value\nr1,A,outcome,success,binary,maybe\n",
         "bad.csv:2: value: expected true or false (or yes/no), got 'maybe' (or an abstention: Unsure, N/A)"),
        ("run_id,grader,layer,item,scale,value\nr1,A,trajectory,optimality,ordinal,3\n",
         "bad.csv:2: scale_min: missing: an ordinal item declares its bounds"),
        ("run_id,grader,layer,item,scale,categories,value\nr1,A,kind,mode,nominal,a|b,c\n",
         "bad.csv:2: value: 'c' is not a category of mode"),
        ("run_id,grader,layer,item,scale,value,model\nr1,A,outcome,s,binary,yes,m1\nr1,A,outcome,t,binary,no,m2\n",
         "bad.csv:3: model: 'm2' differs from 'm1' given for run r1 at bad.csv:2"),
        ("run_id,grader,layer,item,scale,value\nr1,A,outcome,s,binary,yes\nr2,A,outcome,s,ordinal,1\n",
         "bad.csv:3: scale_min: missing"),
    ]
    for text, message in cases:
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(InputError) as caught:
            import_grades(store, [tmp_path / "bad.csv"])
        assert str(caught.value).replace(str(tmp_path) + "/", "").startswith(message), str(caught.value)
    assert store.runs() == []
    # abstentions a sheet declares, and nominal items
    (tmp_path / "ok.csv").write_text("run_id,grader,layer,item,scale,categories,abstentions,value\n"
                                     "r1,A,kind,mode,nominal,read|write,Skipped,write\n"
                                     "r2,A,kind,mode,nominal,read|write,Skipped,Skipped\n")
    import_grades(store, [tmp_path / "ok.csv"])
    grades = [g for v in load_runs(store) for g in v.grades]
    assert [(g.run_id, g.label, g.abstained, g.categories) for g in grades] == [
        ("r1", "write", None, ["read", "write"]), ("r2", None, "Skipped", ["read", "write"])]


def test_cli_default_store_is_the_stores() -> None:
    assert DEFAULT_DB == STORE_DEFAULT_DB


def test_readme_example_study(store: EventStore) -> None:
    """The README's worked example (examples/study) gives the figures the README states."""
    example = Path(__file__).parent.parent / "examples" / "study"
    import_grades(store, [example])
    result = calibrate(load_runs(store), "primary", ["secondary"], items=["success"], bootstrap=20)
    c = result.layer("outcome").comparison("secondary")
    b = c.binary
    assert b is not None and c.n == 6
    shown = [round(x, 3) for x in (b.agreement.estimate, b.agreement.low, b.agreement.high, b.kappa.value,
                                   b.precision, b.precision_interval.low, b.precision_interval.high, b.recall, b.f1)]
    assert shown == [0.667, 0.223, 0.957, 0.333, 0.667, 0.094, 0.992, 0.667, 0.667]
    assert dict(c.excluded) == {"candidate abstained": 1, "candidate single-annotated": 2, "reference abstained": 1}
    # the same pairs under majority and adjudicated: no third annotator, so disagreements stay out
    adjudicated = calibrate(load_runs(store), "adjudicated", ["human:B"], items=["success"], bootstrap=20)
    left = dict(adjudicated.layer("outcome").comparison("human:B").excluded)
    assert (left["reference unresolved disagreement"], left["reference abstained"]) == (2, 2)  # r03, r08; r04, r05


def test_sheet_and_trajectory_disagree(two_stores: tuple[EventStore, EventStore, str], tmp_path: Path) -> None:
    """The trajectory's description wins in either order, and the disagreement is reported, not hidden."""
    first, second, _ = two_stores
    trajectories = _write_trajectories(tmp_path / "runs")
    sheet = tmp_path / "late.csv"
    sheet.write_text("run_id,grader,layer,item,scale,value,model,label.split\n"
                     "web/run-00,A,outcome,success,binary,yes,model-z,dev\n")
    ingest_paths(first, [trajectories])
    import_grades(first, [sheet])
    import_grades(second, [sheet])
    ingest_paths(second, [trajectories])
    seen = []
    for store in (first, second):
        view = next(v for v in load_runs(store) if v.run_id == "web/run-00")
        seen.append((view.model, view.labels, view.disagreements))
    assert seen[0] == seen[1] == ("model-y", {"split": "dev"}, ("model: sheet 'model-z', run 'model-y'",))
    result = calibrate(load_runs(first), "human:A", ["human"], items=["success"], bootstrap=5)
    assert any("described differently" in note for note in result.notes)
