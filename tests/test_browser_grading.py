"""Browser grading of the sample product ``tasks/tablelunch`` in real Chromium (Debian's, through Playwright).

* ``procgrade task validate``: the reference build passes every plan in 10 of 10 grades (0 wrong fails over 70
  grades) and every planted bug's plan fails each of its 3 grades (0 passes), printed like ViBench's Table 4.
* A build whose product does not start fails every plan, with its start log kept as evidence.
* Graded runs re-score without a browser and give the same bytes (outcomes, compare, score verification), and
  every evidence file named by an event is in the store with those bytes.
* The agentic grader, against a loopback stub of an OpenAI-compatible endpoint that scripts its tool calls:
  an honest grade passes the correct build and fails a planted bug; quoting text that is not on screen, a
  reload the plan does not allow and a reply without a tool call each discard the grade.

The browser tests fail (never skip) without ``/usr/bin/chromium`` or the playwright package.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from agent_stub import StubEndpoint, plan_player  # noqa: E402
from builders import ev, run_started  # noqa: E402

from procgrade.engine.cli import app  # noqa: E402
from procgrade.engine.store import open_store  # noqa: E402
from procgrade.oracles.browser_agent import AgentGrader  # noqa: E402
from procgrade.oracles.browser_graders import CHROMIUM  # noqa: E402
from procgrade.oracles.browser_grading import grade_browser, grade_plan, replay_plan_verdicts  # noqa: E402
from procgrade.oracles.browser_plans import apply_plant, load_browser_task  # noqa: E402
from procgrade.oracles.evidence_store import EvidenceStore  # noqa: E402
from procgrade.oracles.grader_llm import OpenAIChatClient  # noqa: E402

TASK = Path(__file__).resolve().parents[1] / "tasks" / "tablelunch"
INSTALL_HINT = ("browser grading needs Debian's Chromium and the playwright package: "
                "`apt-get install -y chromium` and `pip install -e '.[dev]'` (no `playwright install`)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: {INSTALL_HINT}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"the playwright package is missing: {INSTALL_HINT}")
    from procgrade.oracles.browser_graders import launch_chromium

    with sync_playwright() as playwright:
        opened = launch_chromium(playwright)
        yield opened
        opened.close()


@pytest.fixture(scope="module")
def task():
    return load_browser_task(TASK)


def _procgrade(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own (Playwright's sync API cannot nest in the test's browser)."""
    return subprocess.run([sys.executable, "-m", "procgrade.engine.cli", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=1500)


def test_task_validate_prints_table4_with_no_wrong_verdict() -> None:
    result = _procgrade("task", "validate", str(TASK), "--grades", "10", "--bug-grades", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = dict(re.findall(r"│ ([A-Z][a-z]+(?: [a-z]+)?)\s*│ (\S+)\s*│", result.stdout))
    assert rows == {"Cent off": "0/3", "Reverts": "0/3", "Dropped": "0/3", "No refusal": "0/3", "Timing": "0/3",
                    "Obvious": "0/3", "Two users": "0/3", "Correct build": "70/70"}
    assert "7 plans x 10 grades; wrong fails 0; every plan passed every grade" in result.stdout
    assert "the reference build passed every plan in 10 of 10 grades" in result.stdout


def test_a_build_that_does_not_start_fails_every_plan_with_its_start_log(tmp_path: Path, browser: Any,
                                                                          task: Any) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(task.reference_build, broken)
    app_py = broken / "app.py"
    app_py.write_text(app_py.read_text().replace('conn.executescript(SCHEMA)',
                                                 'conn.executescript("INSERT INTO items VALUES (1);" + SCHEMA)'))
    store = open_store(f"sqlite:///{tmp_path}/p.db", create=True)
    try:
        verdict = grade_browser(store, TASK, broken, evidence_dir=tmp_path / "ev", browser=browser)
    finally:
        store.close()
    grading = verdict.grading
    assert [p.verdict.result for p in grading.plans] == ["failed"] * 7
    assert all((p.verdict.grades, p.verdict.fails) == (3, 3) for p in grading.plans)
    final = verdict.events[-1]
    assert (final.status, final.reward, final.failed) == ("evaluated", "0", 7)
    assert final.explanation.endswith("the product did not start") and final.details["product"] == ["did_not_start"]
    evidence = EvidenceStore(tmp_path / "ev")
    for grade in (e for e in verdict.events if e.kind == "plan_grade"):
        product = grade.details["product"]
        assert grade.passed is False and product["status"] == "did_not_start"
        assert grade.failure.startswith("the product did not start: the product exited 1")
        log = evidence.read(product["start_log_sha256"])
        assert b"no such table: items" in log and b"[procgrade] start:" in log
        assert grade.evidence == [product["start_log_sha256"]]


def _native_run(folder: Path, run_id: str, model: str) -> Path:
    lines = [run_started(run_id, model=model, task_id="tablelunch"),
             ev("file_edit", 1, run_id, path="app.py", edit_kind="create"),
             ev("command", 2, run_id, command="python app.py", exit_code=0),
             ev("completion_claim", 3, run_id, claim="the team lunch app is done", scope="run")]
    path = folder / f"{model}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_graded_runs_rescore_without_a_browser_to_the_same_bytes(tmp_path: Path, browser: Any, task: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path}/p.db"
    runner = CliRunner()
    paths = [_native_run(tmp_path, "build-good", "model-a"), _native_run(tmp_path, "build-cent", "model-b")]
    assert runner.invoke(app, ["ingest", "--db", db, *map(str, paths)]).exit_code == 0
    name, bug = next((n, b) for n, b in task.planted if b.kind == "cent_off")
    planted = apply_plant(task.reference_build, bug, tmp_path / name)
    store = open_store(db)
    try:
        good = grade_browser(store, TASK, task.reference_build, "build-good", evidence_dir=tmp_path / "ev",
                             plans=["service-fee", "shared-order"], browser=browser)
        cent = grade_browser(store, TASK, planted, "build-cent", evidence_dir=tmp_path / "ev",
                             plans=["service-fee", "shared-order"], browser=browser)
        events = {run: list(store.events(run)) for run in ("build-good", "build-cent")}
    finally:
        store.close()
    assert [p.verdict.result for p in good.grading.plans] == ["passed", "passed"]
    assert [p.verdict.result for p in cent.grading.plans] == ["failed", "passed"]
    assert replay_plan_verdicts(events["build-cent"]) == {"service-fee": ("failed", "failed"),
                                                           "shared-order": ("passed", "passed")}
    # Each step recorded its actions, a screenshot, the page text, the accessibility snapshot and the quotes.
    evidence = EvidenceStore(tmp_path / "ev")
    grades = [e for run in events.values() for e in run if e.kind == "plan_grade"]
    assert len(grades) == 2 + 3 + 1
    for grade in grades:
        for step in grade.details["steps"]:
            assert step["actions"] and step["checks"]
            assert evidence.read(step["screenshot"]).startswith(b"\x89PNG")
            assert b"address bar: http://127.0.0.1:" in evidence.read(step["page_text"])
            assert evidence.read(step["snapshot"]).startswith(b"- ")
            quotes = json.loads(evidence.read(step["quotes"]))
            assert [q["evidence"] for q in quotes] == [c["evidence"] for c in step["checks"]]
        assert set(grade.evidence) >= {s["screenshot"] for s in grade.details["steps"]}
    failing = next(g for g in grades if g.passed is False)
    assert "Service fee (10%): $1.11" in json.dumps(failing.details)

    # From here on no browser may start.
    def no_browser(*_: Any, **__: Any) -> None:
        raise AssertionError("re-scoring started a browser")

    monkeypatch.setattr("playwright.sync_api.sync_playwright", no_browser)
    monkeypatch.setattr("procgrade.oracles.browser_grading.chromium", no_browser)
    outputs = []
    for n in range(2):
        out = tmp_path / f"outcomes{n}.json"
        cmp_out = tmp_path / f"compare{n}.json"
        assert runner.invoke(app, ["outcomes", "--db", db, "--by", "model", "--json", str(out)]).exit_code == 0
        compared = runner.invoke(app, ["compare", "--db", db, "--by", "model", "--resamples", "99", "--json",
                                       str(cmp_out)])
        assert compared.exit_code == 0, compared.output
        outputs.append((out.read_bytes(), cmp_out.read_bytes()))
    assert outputs[0] == outputs[1]
    metrics = json.loads(outputs[0][0])
    text = json.dumps(metrics)
    assert "build-good" in text and "build-cent" in text
    rescored = runner.invoke(app, ["rescore", "--all", "--db", db])
    assert rescored.exit_code == 0, rescored.output
    verified = runner.invoke(app, ["verify", "--db", db])
    assert verified.exit_code == 0, verified.output


def _clicking_blank_first(inner: Any) -> Any:
    """Start step 2 with a click at screen coordinates on blank page space, then play honestly."""

    def policy(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        step_prompts = [i for i, m in enumerate(messages) if m["role"] == "user" and isinstance(m["content"], str)
                        and m["content"].startswith("Step ")]
        since = messages[step_prompts[-1]:]
        if messages[step_prompts[-1]]["content"].startswith("Step 2") and not any(m["role"] == "assistant" for m in since):
            return [("click_at", {"x": 1000, "y": 700})]
        ids = {c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []
               if c["function"]["name"] == "click_at"}
        kept = [m for m in messages if not (m["role"] == "assistant" and any(c["id"] in ids for c in m.get("tool_calls") or []))
                and not (m["role"] == "tool" and m["tool_call_id"] in ids)]
        return inner(kept)

    return policy


@pytest.mark.parametrize(("workspace", "policy", "passed", "discarded"), [
    ("correct", {}, True, None),
    ("correct", {"click_at": True}, True, None),
    ("no-refusal", {}, False, None),
    ("correct", {"lie": True}, None, "no on-screen evidence: step 1: the check 'The order page greets alice by "
                                     "name' quotes 'Everything works perfectly', which is not on the screen"),
    ("correct", {"reload_in_step": 1}, None, "grader rule broken: step 2: a reload the plan does not allow"),
    ("correct", {"silent": True}, None, "grader rule broken: step 1: the grader replied without a tool call"),
])
def test_the_agent_grader_through_a_scripted_endpoint(tmp_path: Path, browser: Any, task: Any, workspace: str,
                                                      policy: dict[str, Any], passed: bool | None,
                                                      discarded: str | None) -> None:
    plan = task.plan("empty-order")
    build = task.reference_build
    if workspace != "correct":
        bug = dict(task.planted)[workspace]
        build = apply_plant(task.reference_build, bug, tmp_path / workspace)
    click_at = policy.pop("click_at", False)
    player = plan_player(plan, **policy)
    stub = StubEndpoint(_clicking_blank_first(player) if click_at else player)
    evidence = EvidenceStore(tmp_path / "ev")
    with stub.serving() as url:
        record = grade_plan(task, plan, build, AgentGrader(OpenAIChatClient(url, "stub-grader")), browser,
                            evidence).record
    assert record.passed is passed
    assert (record.discarded or "").startswith(discarded or "")
    assert (record.discarded is None) == (discarded is None)
    assert record.model == "stub-grader" and stub.requests
    first = stub.requests[0]
    assert first["model"] == "stub-grader" and {t["function"]["name"] for t in first["tools"]} >= {"click", "report_step"}
    assert "Never work around a defect" in first["messages"][0]["content"]
    if click_at:
        assert record.steps[1].actions == ["click at (1000, 700): done", "click the button 'Place order'"]
    elif passed is not None:
        assert [s.actions for s in record.steps][1] == ["click the button 'Place order'"]
        assert all(s.screenshot and s.snapshot and s.quotes for s in record.steps)
    if passed is False:
        assert record.failure.startswith("step 2 (Alice tries to place the empty order): A message asks for an item")


def test_grade_browser_command_records_the_grading_beside_the_database(tmp_path: Path, task: Any) -> None:
    name, bug = next((n, b) for n, b in task.planted if b.kind == "no_refusal")
    planted = apply_plant(task.reference_build, bug, tmp_path / name)
    db = tmp_path / "p.db"
    result = _procgrade("grade-browser", "--db", str(db), "--task", str(TASK), "--workspace", str(planted),
                        "--plan", "empty-order", "--plan", "item-note")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "evaluated, reward 0: 1 of 2 graded plans passed" in result.stdout
    assert "empty-order: grade 3 failed" in result.stderr
    store = open_store(str(db))
    try:
        (run,) = [info.run_id for info in store.runs()]
        events = list(store.events(run))
    finally:
        store.close()
    assert {e.test_id: e.outcome for e in events if e.kind == "test_result"} == {"empty-order": "failed",
                                                                                "item-note": "passed"}
    assert [(e.plan_id, e.attempt, e.passed) for e in events if e.kind == "plan_grade"] == [
        ("empty-order", 0, False), ("empty-order", 1, False), ("empty-order", 2, False), ("item-note", 0, True)]
    assert (tmp_path / "p.db.evidence" / "sha256").is_dir()
    shown = CliRunner().invoke(app, ["outcomes", "--db", str(db), "--by", "run_id"])
    assert shown.exit_code == 0, shown.output
    written = CliRunner().invoke(app, ["outcomes", "--db", str(db), "--by", "run_id", "--json", str(tmp_path / "o.json")])
    assert written.exit_code == 0
    (group,) = json.loads((tmp_path / "o.json").read_text())["groups"]
    summary = group["summary"]
    assert group["builds"][0]["plans"] == {"empty-order": "failed", "item-note": "passed"}
    assert (summary["pass_at_1"]["exact"], summary["plan_pass_rate"]["exact"]) == ("0/1", "1/2")
