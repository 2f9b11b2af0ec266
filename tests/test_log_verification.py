"""verify-log: an intact run verifies; a row changed behind the triggers' back is named by seq."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from builders import RUN, ev, every_kind_run, models, reference_canonical, reference_hashes, small_run
from procgrade.engine.errors import UnknownRunError
from procgrade.engine.log_verification import verify_log
from procgrade.engine.store import EventStore


def execute(store: EventStore, sql: str, **params: Any) -> int:
    with store.engine.begin() as conn:
        return conn.execute(text(sql), params).rowcount


def drop_event_triggers(store: EventStore, db_kind: str) -> None:
    if db_kind == "sqlite":
        execute(store, "DROP TRIGGER events_refuse_update")
        execute(store, "DROP TRIGGER events_refuse_delete")
    else:
        execute(store, "ALTER TABLE events DISABLE TRIGGER events_refuse_change")


def drop_run_triggers(store: EventStore, db_kind: str) -> None:
    if db_kind == "sqlite":
        execute(store, "DROP TRIGGER runs_refuse_sealed_update")
    else:
        execute(store, "ALTER TABLE runs DISABLE TRIGGER runs_refuse_sealed_update")


def names_seq(problems: list[str], seq: int) -> bool:
    return any(re.search(rf"\bseq {seq}\b", p) for p in problems)


def cli_verify(store_url: str, *run_ids: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    env.pop("PROCGRADE_DB", None)
    return subprocess.run([sys.executable, "-m", "procgrade.engine.cli", "verify-log", *run_ids, "--db", store_url],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def two_runs(store: EventStore) -> EventStore:
    store.append(RUN, models(small_run()))
    store.append("bystander", models(small_run("bystander")))
    return store


def test_intact_runs_verify(store: EventStore) -> None:
    lines = every_kind_run("rich", 150)
    store.append("rich", models(lines))
    store.append(RUN, models(small_run()), seal=True)
    for run_id, expected in (("rich", lines), (RUN, small_run())):
        report = verify_log(store, run_id)
        assert report.ok, report.problems
        assert report.events_checked == len(expected)
        assert report.head_hash == reference_hashes(expected)[-1] == store.run(run_id).head_hash


def test_unknown_run(store: EventStore) -> None:
    with pytest.raises(UnknownRunError):
        verify_log(store, "nope")


def _sha(text_value: str) -> str:
    return hashlib.sha256(text_value.encode()).hexdigest()


# name, seq the problem must name, SQL (run on the events table with triggers off)
TAMPERING: list[tuple[str, int, str, dict[str, Any]]] = [
    ("payload", 1, "UPDATE events SET payload = :p WHERE run_id = :run AND seq = 1",
     {"p": '{"role":"assistant","tokens":18}'}),
    ("payload-and-its-sha", 3, "UPDATE events SET payload = :p, payload_sha256 = :s WHERE run_id = :run AND seq = 3",
     {"p": '{"diff":"rewritten"}', "s": _sha('{"diff":"rewritten"}')}),
    ("payload-sha-only", 0, "UPDATE events SET payload_sha256 = :s WHERE run_id = :run AND seq = 0",
     {"s": "0" * 64}),
    ("exit_code-column", 4, "UPDATE events SET exit_code = 1 WHERE run_id = :run AND seq = 4", {}),
    ("outcome-column", 5, "UPDATE events SET outcome = 'fail' WHERE run_id = :run AND seq = 5", {}),
    ("path-column", 2, "UPDATE events SET path = 'elsewhere.md' WHERE run_id = :run AND seq = 2", {}),
    ("tests_passed-column-null", 5, "UPDATE events SET tests_passed = NULL WHERE run_id = :run AND seq = 5", {}),
    ("facts-json-typed-field", 4,
     "UPDATE events SET facts = replace(facts, 'pip install', 'pip uninstall') WHERE run_id = :run AND seq = 4", {}),
    ("facts-json-free-text", 6,
     "UPDATE events SET facts = replace(facts, 'All tests pass', 'Some tests pass') WHERE run_id = :run AND seq = 6",
     {}),
    ("facts-json-invalid", 1, "UPDATE events SET facts = :f WHERE run_id = :run AND seq = 1", {"f": '{"text":5}'}),
    ("envelope-actor", 2, "UPDATE events SET actor = 'user' WHERE run_id = :run AND seq = 2", {}),
    ("envelope-ts", 7, "UPDATE events SET ts = '2030-01-01T00:00:00Z' WHERE run_id = :run AND seq = 7", {}),
    ("hash", 3, "UPDATE events SET hash = :h WHERE run_id = :run AND seq = 3", {"h": "f" * 64}),
    ("hash-of-last", 7, "UPDATE events SET hash = :h WHERE run_id = :run AND seq = 7", {"h": "e" * 64}),
    ("delete-last-row", 7, "DELETE FROM events WHERE run_id = :run AND seq = 7", {}),
    ("delete-middle-row", 3, "DELETE FROM events WHERE run_id = :run AND seq = 3", {}),
]


@pytest.mark.parametrize("seq,sql,params", [t[1:] for t in TAMPERING], ids=[t[0] for t in TAMPERING])
def test_tampered_row_is_reported_by_seq(two_runs: EventStore, store_url: str, db_kind: str,
                                         seq: int, sql: str, params: dict) -> None:
    store = two_runs
    assert verify_log(store, RUN).ok
    drop_event_triggers(store, db_kind)
    assert execute(store, sql, run=RUN, **params) == 1
    report = verify_log(store, RUN)
    assert not report.ok
    assert names_seq(report.problems, seq), report.problems
    assert verify_log(store, "bystander").ok

    proc = cli_verify(store_url, RUN, "bystander")
    assert proc.returncode != 0
    assert re.search(rf"^{RUN}: .*\bseq {seq}\b", proc.stderr, re.M), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "bystander: ok (8 events" in proc.stdout


def test_rewritten_chain_is_caught_by_the_sealed_head(store: EventStore, db_kind: str) -> None:
    """Someone rewrites a payload, recomputes every later hash and the run's head: only the
    sealed head still tells, and verify-log must say so."""
    lines = small_run()
    store.append(RUN, models(lines), seal=True)
    forged = [dict(e) for e in lines]
    forged[5]["payload"] = {"forged": True}
    hashes = reference_hashes(forged)
    drop_event_triggers(store, db_kind)
    drop_run_triggers(store, db_kind)
    payload = reference_canonical({"forged": True}).decode()
    execute(store, "UPDATE events SET payload = :p, payload_sha256 = :s WHERE run_id = :run AND seq = 5",
            p=payload, s=_sha(payload), run=RUN)
    for seq in range(5, 8):
        execute(store, "UPDATE events SET hash = :h WHERE run_id = :run AND seq = :seq", h=hashes[seq], run=RUN, seq=seq)
    execute(store, "UPDATE runs SET head_hash = :h WHERE run_id = :run", h=hashes[-1], run=RUN)
    report = verify_log(store, RUN)
    assert not report.ok
    assert report.problems == [f"seq 7: recomputed hash differs from the sealed head hash"], report.problems


def test_run_head_changed_is_reported(store: EventStore, db_kind: str) -> None:
    store.append(RUN, models(small_run()))
    execute(store, "UPDATE runs SET head_hash = :h WHERE run_id = :run", h="d" * 64, run=RUN)
    report = verify_log(store, RUN)
    assert not report.ok and any("head" in p for p in report.problems), report.problems


def test_derived_stage_column_is_recomputed(store: EventStore, db_kind: str) -> None:
    """verify-log derives stage membership from the markers again and names a row whose
    stored ``in_stage`` disagrees."""
    lines = [ev("run_started", 0, "staged", actor="harness", harness={"name": "h"}),
             ev("stage_started", 1, "staged", actor="harness", stage=0),
             ev("file_edit", 2, "staged", path="a.py", edit_kind="modify"),
             ev("stage_ended", 3, "staged", actor="harness", stage=0),
             ev("correction", 4, "staged", actor="human", text="the pane is blank"),
             ev("file_edit", 5, "staged", path="a.py", edit_kind="modify")]
    store.append("staged", models(lines))
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT seq, in_stage FROM events WHERE run_id = 'staged' ORDER BY seq")).all()
    assert [tuple(r) for r in rows] == [(0, None), (1, 0), (2, 0), (3, 0), (4, 1), (5, 1)]
    assert verify_log(store, "staged").ok
    drop_event_triggers(store, db_kind)
    execute(store, "UPDATE events SET in_stage = 7 WHERE run_id = 'staged' AND seq = 5")
    report = verify_log(store, "staged")
    assert not report.ok and names_seq(report.problems, 5) and "derived stage" in " ".join(report.problems)


def test_an_event_disagreeing_with_its_markers_is_refused(store: EventStore, tmp_path: Path) -> None:
    from procgrade.engine.errors import StoreError
    from procgrade.engine.ingest import ingest_native

    lines = [ev("run_started", 0, "bad", actor="harness", harness={"name": "h"}),
             ev("stage_started", 1, "bad", actor="harness", stage=0),
             ev("file_edit", 2, "bad", path="a.py", edit_kind="modify", stage=1)]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(StoreError) as raised:
        ingest_native(store, [path])
    assert str(raised.value).startswith(f"{path}:3: seq: ")
    assert "says stage 1 but it lies in stage 0" in str(raised.value)
    assert store.runs() == []


def test_a_round_past_the_largest_stage_index_is_refused(store: EventStore, tmp_path: Path) -> None:
    """A human's correction after stage 2**31 - 1 would open a round the ``stage`` field and the
    stored column (32-bit on PostgreSQL) cannot hold: refused with its line, nothing written."""
    from procgrade.engine.errors import StoreError
    from procgrade.engine.ingest import ingest_native

    top = 2**31 - 1
    lines = [ev("run_started", 0, "late", actor="harness", harness={"name": "h"}),
             ev("stage_started", 1, "late", actor="harness", stage=top),
             ev("stage_ended", 2, "late", actor="harness", stage=top, status="completed"),
             ev("correction", 3, "late", actor="human", text="the pane is blank")]
    path = tmp_path / "late.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(StoreError) as raised:
        ingest_native(store, [path])
    assert str(raised.value).startswith(f"{path}:4: seq: ")
    assert f"would open round {top + 1}, past the largest stage index {top}" in str(raised.value)
    assert store.runs() == []
