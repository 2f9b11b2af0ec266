"""The Python API (engine/api.py): each function on SQLite and PostgreSQL, agreeing with the store.

Every function that touches the store runs on both databases (``store_url``); the DataFrames are
checked against what the store holds (row counts, order, exact scores), not against themselves.
"""

from __future__ import annotations

import inspect
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from procgrade.engine import api

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"
ARENA_RUNS = ROOT / "tests" / "fixtures" / "grades" / "arena-runs.jsonl"
ARENA_SHEET = ROOT / "tests" / "fixtures" / "grades" / "arena-gguf.csv"
TASK = ROOT / "tasks" / "verrange"
REFERENCE = TASK / "controls" / "reference" / "app"
PLANTED = ROOT / "tests" / "fixtures" / "planted"
RUN = "todo-app-demo"


def test_the_public_surface_is_documented_and_typed() -> None:
    namespace: dict[str, object] = {}
    exec("from procgrade.engine.api import *", namespace)  # noqa: S102 - what a user's star import gets
    exported = {name for name in namespace if not name.startswith("__")} | {"__version__"}
    assert exported == set(api.__all__)
    commands = ["open_store", "init", "ingest", "formats", "runs", "show", "verify_log", "export", "seal", "schema",
                "score", "rescore", "verify", "explain", "validate_rules", "import_grades", "accept", "validate_task",
                "outcomes", "compare", "calibrate", "report",
                "runs_df", "events_df", "findings_df", "scores_df", "outcomes_df", "grades_df"]
    for name in commands:
        function = getattr(api, name)
        assert name in api.__all__ and function.__doc__, name
        signature = inspect.signature(function)
        assert signature.return_annotation is not inspect.Signature.empty, name
        for parameter in signature.parameters.values():
            assert parameter.annotation is not inspect.Parameter.empty, (name, parameter.name)


def test_read_only_use_never_creates_a_database(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    with pytest.raises(api.SchemaNotReadyError, match="no database at"):
        api.runs(str(missing))
    with pytest.raises(api.SchemaNotReadyError):
        api.open_store(f"sqlite:///{missing}")
    assert not missing.exists()
    with pytest.raises(api.DatabaseUnavailableError, match="is a folder"):
        api.open_store(str(tmp_path))
    assert api.init(str(missing)) and missing.exists()


def test_log_functions(store_url: str, tmp_path: Path) -> None:
    done = api.ingest(store_url, [EXAMPLE, ARENA_RUNS])
    assert [r.run_id for r in done.reports][0] == RUN and all(not r.result.no_op for r in done.reports)
    assert all(r.result.no_op for r in api.ingest(store_url, [EXAMPLE]).reports)
    with pytest.raises(api.ProcgradeError, match="unknown format 'nope'"):
        api.ingest(store_url, [EXAMPLE], format="nope")
    infos = api.runs(store_url)
    assert [i.run_id for i in infos] == sorted(i.run_id for i in infos) and RUN in [i.run_id for i in infos]
    events = api.show(store_url, RUN)
    assert [e.seq for e in events] == list(range(34)) and events[0].kind == "run_started"
    assert all(check.ok for check in api.verify_log(store_url))
    assert [check.run_id for check in api.verify_log(store_url, [RUN])] == [RUN]
    data = api.export(store_url, RUN)
    assert isinstance(data, bytes) and data.count(b"\n") == 34
    written = api.export(store_url, RUN, tmp_path / "run.jsonl")
    assert written == tmp_path / "run.jsonl" and written.read_bytes() == data
    with pytest.raises(api.OutputPathError, match="does not exist"):
        api.export(store_url, RUN, tmp_path / "missing" / "run.jsonl")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    again = api.ingest(other, [written]).reports[0]
    assert again.result.head_hash == next(i.head_hash for i in infos if i.run_id == RUN)
    with pytest.raises(api.UnknownRunError):
        api.show(store_url, "nope")
    sealed = api.seal(store_url, RUN)
    assert sealed.sealed and sealed.sealed_head_hash == again.result.head_hash
    assert set(api.formats()) >= {"auto", "native", "codex", "swe-agent"}
    assert api.schema("events")["$defs"] and api.schema("rules") and api.schema("grades")
    with pytest.raises(api.ProcgradeError, match="no schema"):
        api.schema("nope")


def test_score_functions_and_frames(store_url: str) -> None:
    api.ingest(store_url, [EXAMPLE, ARENA_RUNS])
    api.import_grades(store_url, [ARENA_SHEET])
    store = api.open_store(store_url)  # an open store is used as it is, and left open
    try:
        scored = api.score(store, [RUN])
        assert len(scored) == 1 and scored[0].written
        seen: list[str] = []
        rescored = api.rescore(store, workers=2, progress=seen.append)
        assert seen == sorted(seen) == [i.run_id for i in api.runs(store)]
        assert [o.document.canonical for o in rescored] == [o.document.canonical for o in api.rescore(store)]
        assert api.verify(store).ok and api.verify(store).checked == len(seen)
        explanation = api.explain(store, RUN)
        assert explanation.document == scored[0].document.body
        assert explanation.process_score == scored[0].document.process_score

        runs = api.runs_df(store)
        assert list(runs.run_id) == seen and list(runs.columns[:6]) == ["run_id", "format", "harness",
                                                                         "harness_version", "model", "task_id"]
        assert runs.set_index("run_id").loc[RUN, "event_count"] == 34 and "labels.suite" in runs.columns

        events = api.events_df(store)
        assert len(events) == sum(i.event_count for i in api.runs(store))
        mine = events[events.run_id == RUN]
        assert list(mine.seq) == list(range(34)) and mine.iloc[0].kind == "run_started" and mine.what.all()

        scores = api.scores_df(store)
        assert list(scores.run_id) == seen
        row = scores.set_index("run_id").loc[RUN]
        assert row.process_score_exact == scored[0].document.process_score
        assert row.process_score == float(scored[0].document.process_score)

        findings = api.findings_df(store, [RUN])
        by_rule = findings.groupby(["rule_id", "verdict"]).size().to_dict()
        for rule in explanation.document["rules"]:
            for verdict in ("fulfilled", "violated", "vacuous"):
                assert by_rule.get((rule["id"], verdict), 0) == rule[verdict], (rule["id"], verdict)
        violated = api.findings_df(store, verdicts=["violated"])
        assert set(violated.verdict) <= {"violated"}

        grades = api.grades_df(store)
        assert len(grades) == int((events.kind == "grade").sum()) > 0
        assert set(grades.actor) == {"human:arena-expert-1"} or grades.actor.str.startswith("human").all()
        with pytest.raises(api.UnknownRunError):
            api.events_df(store, ["nope"])
    finally:
        store.close()


def test_outcome_functions(store_url: str, tmp_path: Path) -> None:
    api.ingest(store_url, [EXAMPLE, ARENA_RUNS])
    api.import_grades(store_url, [ARENA_SHEET])
    verdict = api.accept(store_url, TASK, REFERENCE)
    assert verdict.result.accepted and verdict.run_id.startswith("acceptance/verrange/")
    with pytest.raises(api.InputError, match="workspace: does not exist"):
        api.accept(store_url, TASK, tmp_path / "nowhere")
    outcomes = api.outcomes_df(store_url)
    row = outcomes.set_index("run_id").loc[verdict.run_id]
    assert row.outcome == "pass" and row.reward_exact == "1" and row.passed == 43 and row.checks == 1
    assert outcomes.set_index("run_id").outcome.isna()[RUN]  # unjudged, never a failure

    groups = api.outcomes(store_url, by="harness", allow_mixed=True)
    accepted = next(g for g in groups if g.group == "procgrade-acceptance")
    assert accepted.pass_at_1 == Fraction(1)
    with pytest.raises(api.ProcgradeError, match="unknown grouping field"):
        api.outcomes(store_url, by="nonsense")
    comparison = api.compare(store_url, by="harness", allow_mixed=True, resamples=99)
    assert {g.group for g in comparison.groups} == {g.group for g in groups}
    calibration = api.calibrate(store_url, candidates=["rules"], layer="check")
    assert calibration.to_dict()
    page = tmp_path / "report.html"
    done = api.report(store_url, page, allow_mixed=True, resamples=99, timelines=False)
    assert page.read_text(encoding="utf-8") == done.html and "runs" in done.summary
    with pytest.raises(api.OutputPathError, match="is a folder"):
        api.report(store_url, tmp_path)


def test_validation_functions() -> None:
    results = api.validate_rules(PLANTED)
    assert results and all(r.detected and not r.false_flags for r in results)
    task, checks = api.validate_task(TASK)
    assert task.task_id == "verrange" and checks and all(check.ok for check in checks)


def test_frames_name_the_extra_when_pandas_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 't.db'}"
    api.ingest(db, [EXAMPLE])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(api.MissingExtraError, match=r"pip install 'procgrade\[analysis\]'"):
        api.runs_df(db)
