"""explain says why a rule judged nothing, and which events looked like the awaited one but
did not count (rules/reasons.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
CASE = ROOT / "tests" / "fixtures" / "planted" / "test-before-first-edit" / "test-run-by-the-harness" / "fault.jsonl"
BARE = ROOT / "tests" / "fixtures" / "v1-scores" / "runs.jsonl"


def _cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "procgrade.engine.cli", *args], capture_output=True, cwd=ROOT, check=True,
                          env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"})
    return " ".join(done.stdout.decode().split())


def test_explain_names_what_did_not_count_and_why_rules_were_vacuous(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'e.db'}"
    _cli("init", "--db", db)
    _cli("ingest", "--db", db, str(CASE), str(BARE))
    shown = _cli("explain", "--db", db, "planted/test-before-first-edit/test-run-by-the-harness/fault")
    assert "violated at seq 6" in shown
    assert "did not count: seq 5 test_run by harness: not the model's" in shown
    assert "no activation: the run has no delegation by the model" in shown
    assert "every activation vacuous: no test_run by the model (outcome fail/error) before it" in shown
    bare = _cli("explain", "--db", db, "v1/no-model-actions")
    assert "process score not graded: no model decisions; 0 of 15 rules applied" in bare
    # finish-with-a-claim applies only where the model worked (a claim is not a finish)
    assert "not applicable: no command/file_edit/file_read/test_run by the model in the run" in bare
    scored = _cli("score", "--db", db, "v1/no-model-actions")
    assert "not graded: no model decisions" in scored
