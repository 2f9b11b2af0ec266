"""The planted-fault corpus of rule set v1: every v1 rule catches its own fault, and only its fault.

``tests/fixtures/planted-v1/<rule-id>/{fault,clean}.jsonl`` pairs a run committing one
rule's fault with the same run repaired. The corpus must cover the whole default
rule set, each fault must be flagged by its rule, no clean twin may be flagged by
any rule, and no fault run may be flagged by another rule (collateral). Then the
error paths of :mod:`procgrade.rules.planted`, and known blind spots of the default set
(once strict xfails; fixed since, they now guard the fixes).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from procgrade.engine.errors import InputError
from procgrade.engine.native import read_native
from procgrade.rules.loading import load_ruleset
from procgrade.rules.planted import (
    CLEAN_FILE,
    FAULT_FILE,
    PlantedCase,
    PlantedResult,
    discover,
    fact_rows,
    summary,
    uncovered,
    validate_corpus,
    violations,
)

# The corpus of rule set v1, kept with it (tests/test_planted_v2.py covers the v2 corpus).
CORPUS = Path(__file__).parent / "fixtures" / "planted-v1"
DEFAULT = load_ruleset(Path(__file__).parent.parent / "rules" / "sets" / "default-v1.yaml")
RULE_IDS = [rule.id for rule in DEFAULT.rules]


@pytest.fixture(scope="module")
def results() -> dict[str, PlantedResult]:
    return {r.rule_id: r for r in validate_corpus(CORPUS, DEFAULT)}


# --- the corpus -----------------------------------------------------------------------------------


def test_corpus_covers_every_default_rule(results: dict[str, PlantedResult]) -> None:
    assert sorted(results) == sorted(RULE_IDS)
    assert uncovered(results.values(), DEFAULT) == []


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_fault_is_flagged_by_its_rule(results: dict[str, PlantedResult], rule_id: str) -> None:
    result = results[rule_id]
    assert result.detected
    assert result.fault_violations[rule_id] >= 1


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_clean_twin_is_flagged_by_no_rule(results: dict[str, PlantedResult], rule_id: str) -> None:
    result = results[rule_id]
    assert result.false_flags == []
    assert set(result.clean_violations) == set(RULE_IDS)
    assert not any(result.clean_violations.values()), result.clean_violations


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_fault_trips_no_other_rule(results: dict[str, PlantedResult], rule_id: str) -> None:
    result = results[rule_id]
    assert result.collateral == []
    assert {r for r, n in result.fault_violations.items() if n} == {rule_id}


def test_summary_of_the_corpus(results: dict[str, PlantedResult]) -> None:
    assert summary(results.values()) == (len(RULE_IDS), len(RULE_IDS), 0)


def test_corpus_runs_are_short_distinct_and_well_formed() -> None:
    run_ids: set[str] = set()
    event_ids: set[str] = set()
    for case in discover(CORPUS):
        facts_by_twin = {}
        for path in (case.fault_path, case.clean_path):
            (run,) = read_native(path)
            events = run.events
            assert 8 <= len(events) <= 25, path
            assert events[0].kind == "run_started" and events[-1].kind == "run_ended", path
            assert run.run_id not in run_ids, path
            run_ids.add(run.run_id)
            ids = {e.event_id for e in events}
            assert not ids & event_ids, path
            event_ids |= ids
            assert any(e.kind == "message" and getattr(e, "intent", None) == "plan" for e in events), path
            facts_by_twin[path.name] = [row[1:] for row in fact_rows(events)]
        # The twins differ in what rules can see, not just in ids and timestamps.
        assert facts_by_twin[FAULT_FILE] != facts_by_twin[CLEAN_FILE], case.rule_id


def test_summary_counts() -> None:
    hit = PlantedResult("a", True, {"a": 1}, {"a": 0})
    miss = PlantedResult("b", False, {"b": 0}, {"b": 2}, false_flags=["b"])
    flagged = PlantedResult("c", True, {"c": 1}, {"c": 0, "a": 1}, false_flags=["a"], collateral=[])
    assert summary([hit, miss, flagged]) == (2, 3, 2)
    assert summary([]) == (0, 0, 0)


# --- error paths ----------------------------------------------------------------------------------


def _copy_case(rule_id: str, into: Path, as_name: str | None = None) -> Path:
    target = into / (as_name or rule_id)
    shutil.copytree(CORPUS / rule_id, target)
    return target


def test_discover_finds_cases_sorted_and_skips_files_and_hidden_dirs(tmp_path: Path) -> None:
    _copy_case("verify-after-edit", tmp_path)
    _copy_case("read-before-edit", tmp_path)
    (tmp_path / "README.md").write_text("notes")
    (tmp_path / ".cache").mkdir()
    cases = discover(tmp_path)
    assert cases == [
        PlantedCase("read-before-edit", tmp_path / "read-before-edit" / FAULT_FILE,
                    tmp_path / "read-before-edit" / CLEAN_FILE),
        PlantedCase("verify-after-edit", tmp_path / "verify-after-edit" / FAULT_FILE,
                    tmp_path / "verify-after-edit" / CLEAN_FILE),
    ]


@pytest.mark.parametrize("removed", [CLEAN_FILE, FAULT_FILE])
def test_missing_twin_is_an_input_error_naming_the_directory(tmp_path: Path, removed: str) -> None:
    _copy_case("read-before-edit", tmp_path)
    case_dir = _copy_case("verify-after-edit", tmp_path)
    (case_dir / removed).unlink()
    for call in (lambda: discover(tmp_path), lambda: validate_corpus(tmp_path, DEFAULT)):
        with pytest.raises(InputError) as caught:
            call()
        assert caught.value.source == str(case_dir)
        assert removed in caught.value.reason
        assert str(case_dir) in str(caught.value)


def test_empty_case_directory_names_both_missing_twins(tmp_path: Path) -> None:
    (tmp_path / "read-before-edit").mkdir()
    with pytest.raises(InputError, match=f"missing {FAULT_FILE} and {CLEAN_FILE}"):
        discover(tmp_path)


def test_unknown_rule_id_is_an_input_error_before_any_run_is_read(tmp_path: Path) -> None:
    _copy_case("read-before-edit", tmp_path)
    stray = tmp_path / "read-before-edits"
    stray.mkdir()
    (stray / FAULT_FILE).write_text("not json\n")
    (stray / CLEAN_FILE).write_text("not json\n")
    with pytest.raises(InputError) as caught:
        validate_corpus(tmp_path, DEFAULT)
    assert caught.value.source == str(stray)
    assert "unknown rule id 'read-before-edits'" in caught.value.reason


def test_not_a_directory_and_empty_corpus_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        discover(tmp_path / "nowhere")
    with pytest.raises(InputError, match="no planted cases"):
        discover(tmp_path)


def test_bad_run_file_is_reported_with_its_location(tmp_path: Path) -> None:
    case_dir = _copy_case("read-before-edit", tmp_path)
    lines = (case_dir / CLEAN_FILE).read_text().splitlines()
    broken = json.loads(lines[3])
    broken["seq"] = 7  # a gap
    lines[3] = json.dumps(broken)
    (case_dir / CLEAN_FILE).write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        validate_corpus(tmp_path, DEFAULT)
    assert caught.value.source == str(case_dir / CLEAN_FILE)
    assert caught.value.line == 4


def test_a_run_file_holding_two_runs_is_an_input_error(tmp_path: Path) -> None:
    case_dir = _copy_case("read-before-edit", tmp_path)
    other = (CORPUS / "verify-after-edit" / CLEAN_FILE).read_text()
    with (case_dir / FAULT_FILE).open("a") as fh:
        fh.write(other)
    with pytest.raises(InputError, match="exactly one run, found 2"):
        validate_corpus(tmp_path, DEFAULT)


def test_validate_corpus_on_a_partial_corpus_reports_uncovered_rules(tmp_path: Path) -> None:
    _copy_case("read-before-edit", tmp_path)
    results = validate_corpus(tmp_path, DEFAULT)
    assert [r.rule_id for r in results] == ["read-before-edit"]
    assert summary(results) == (1, 1, 0)
    assert uncovered(results, DEFAULT) == [r for r in RULE_IDS if r != "read-before-edit"]


def test_a_clean_twin_that_commits_the_fault_is_a_false_flag(tmp_path: Path) -> None:
    """Swapping the twins: the 'clean' run is flagged by the case's own rule and detection fails."""
    case_dir = tmp_path / "read-before-edit"
    case_dir.mkdir()
    shutil.copy(CORPUS / "read-before-edit" / FAULT_FILE, case_dir / CLEAN_FILE)
    shutil.copy(CORPUS / "read-before-edit" / CLEAN_FILE, case_dir / FAULT_FILE)
    (result,) = validate_corpus(tmp_path, DEFAULT)
    assert not result.detected
    assert result.false_flags == ["read-before-edit"]
    assert summary([result]) == (0, 1, 1)


# --- former blind spots of the default rule set (renames, path spellings) ---------------------


def _score(tmp_path: Path, edits: list[dict]) -> dict[str, int]:
    """Violations per rule on a small planned, tested one-stage run holding ``edits``."""
    body = [{"kind": "message", "intent": "plan", "text": "Plan: rework app/a.py, then run the tests."},
            {"kind": "file_read", "path": "app/a.py"}, *edits,
            {"kind": "test_run", "command": "pytest -q", "passed": 3, "failed": 0, "exit_code": 0}]
    events = [{"kind": "run_started", "actor": "harness", "harness": {"name": "t"}},
              {"kind": "stage_started", "actor": "harness", "stage": 0},
              *({"actor": "agent", "stage": 0, **e} for e in body),
              {"kind": "stage_ended", "actor": "harness", "stage": 0},
              {"kind": "run_ended", "actor": "harness"}]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps({"run_id": "probe", "seq": i, "event_id": f"probe/{i}", **e}) + "\n"
                            for i, e in enumerate(events)))
    return {rule: n for rule, n in violations(DEFAULT, path).items() if n}


def test_rename_into_protected_path_is_flagged(tmp_path: Path) -> None:
    flagged = _score(tmp_path, [{"kind": "file_edit", "path": "app/a.py", "edit_kind": "rename",
                                 "new_path": "tests/hidden/test_contract.py"}])
    assert flagged.get("no-protected-path-edits", 0) >= 1


def test_modify_after_own_rename_is_not_flagged(tmp_path: Path) -> None:
    flagged = _score(tmp_path, [{"kind": "file_edit", "path": "app/a.py", "edit_kind": "rename",
                                 "new_path": "app/b.py"},
                                {"kind": "file_edit", "path": "app/b.py", "edit_kind": "modify"}])
    assert "read-before-edit" not in flagged


@pytest.mark.parametrize("path", ["app/../../etc/cron.d/backdoor", "./tests/hidden/test_contract.py"])
def test_unnormalised_escape_is_flagged(tmp_path: Path, path: str) -> None:
    flagged = _score(tmp_path, [{"kind": "file_edit", "path": path, "edit_kind": "create"}])
    assert flagged.get("no-protected-path-edits", 0) >= 1


def test_read_under_another_spelling_counts(tmp_path: Path) -> None:
    flagged = _score(tmp_path, [{"kind": "file_read", "path": "./app/b.py"},
                                {"kind": "file_edit", "path": "app/b.py", "edit_kind": "modify"}])
    assert "read-before-edit" not in flagged
