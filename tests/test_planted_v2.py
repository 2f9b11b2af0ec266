"""The planted-fault corpus of rule set v2 (``tests/fixtures/planted``): several cases per
rule, each fault flagged by its own rule only, each clean twin by none, every Arena pattern
and binary check covered; the committed runs are exactly what the generator writes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from procgrade.engine.native import read_native
from procgrade.rules.loading import load_ruleset
from procgrade.rules.model import BEHAVIOUR_PATTERNS, BINARY_CHECKS
from procgrade.rules.planted import coverage, discover, fact_rows, summary, validate_corpus

ROOT = Path(__file__).parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "planted"
DEFAULT = load_ruleset()


@pytest.fixture(scope="module")
def results() -> list:
    return validate_corpus(CORPUS, DEFAULT)


def test_every_fault_is_detected_by_its_own_rule_only(results: list) -> None:
    assert summary(results) == (len(results), len(results), 0)
    assert [(r.rule_id, r.case) for r in results if r.collateral] == []
    assert [(r.rule_id, r.case) for r in results if r.false_flags] == []


def test_several_cases_per_rule_and_full_pattern_and_check_coverage(results: list) -> None:
    covered = coverage(results, DEFAULT)
    assert min(covered["cases_per_rule"].values()) >= 2
    assert set(covered["cases_per_rule"]) == {rule.id for rule in DEFAULT.rules}
    assert covered["patterns"] == sorted(BEHAVIOUR_PATTERNS)
    assert covered["checks"] == sorted(BINARY_CHECKS)


def test_complete_twins_are_complete_runs_differing_in_what_rules_see() -> None:
    for case in discover(CORPUS):
        facts = []
        for path in (case.fault_path, case.clean_path):
            (run,) = read_native(path)
            kinds = [e.kind for e in run.events]
            assert kinds[0] == "run_started" and "completion_claim" in kinds or "fault" in path.name, path
            if not case.case.startswith("fragment-"):
                assert {"file_read", "test_run"} <= set(kinds), path
                assert any(e.kind == "message" and e.intent == "plan" for e in run.events) \
                    or case.rule_id == "early-edit-scatter", path
            facts.append([row[1:] for row in fact_rows(run.events)])
        assert facts[0] != facts[1], case


def test_committed_corpus_is_what_the_generator_writes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("planted_generate", CORPUS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl"))
    committed = sorted(p.relative_to(CORPUS) for p in CORPUS.rglob("*.jsonl"))
    assert written == committed
    for rel in written:
        assert (tmp_path / rel).read_bytes() == (CORPUS / rel).read_bytes(), rel


def test_validate_rules_command_on_the_corpus() -> None:
    done = subprocess.run([sys.executable, "-m", "procgrade.engine.cli", "validate-rules", str(CORPUS)], capture_output=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert b"patterns 8/8, checks 5/5 validated" in done.stdout


def test_a_planted_run_whose_stages_disagree_is_a_located_input_error(tmp_path: Path) -> None:
    import shutil

    from procgrade.engine.errors import InputError

    case = tmp_path / "finish-with-a-claim" / "x"
    shutil.copytree(CORPUS / "finish-with-a-claim" / "harness-autosubmission-is-not-a-claim", case)
    lines = (case / "fault.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"actor": "agent"', '"actor": "agent", "stage": 4', 1)
    (case / "fault.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        validate_corpus(tmp_path, DEFAULT)
    assert caught.value.line == 4 and "says stage 4 but it lies in stage 0" in str(caught.value)
