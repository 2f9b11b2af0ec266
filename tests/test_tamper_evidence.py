"""Tamper evidence on both databases: every overwrite refused by the database; what its owner
can still do with triggers off is named by run and seq (verify-log, verify) or by the signed
receipts (verify-log --receipts)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from builders import RUN, models, small_run
from procgrade.engine.integrity import integrity_problems, seal_problems
from procgrade.engine.log_verification import verify_log
from procgrade.engine.receipts import generate_keys, verify_receipts, write_receipt
from procgrade.engine.rescoring import score_runs
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.store.scores import ScoreStore
from procgrade.rules.loading import load_ruleset

ROOT = Path(__file__).resolve().parent.parent


def execute(store: EventStore, sql: str, **params: Any) -> int:
    with store.engine.begin() as conn:
        return conn.execute(text(sql), params).rowcount


def as_owner(store: EventStore, db_kind: str, statements: list[tuple[str, dict[str, Any]]]) -> None:
    """Run ``statements`` as the database's owner would: every trigger out of the way."""
    with store.engine.begin() as conn:
        if db_kind == "sqlite":
            names = [r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))]
            for name in names:
                conn.execute(text(f"DROP TRIGGER {name}"))
        else:
            conn.execute(text("SET LOCAL session_replication_role = replica"))
        for sql, params in statements:
            conn.execute(text(sql), params)


@pytest.fixture
def sealed_scored(store: EventStore) -> EventStore:
    store.append(RUN, models(small_run()))
    store.append("bystander", models(small_run("bystander")))
    score_runs(store, [RUN, "bystander"], load_ruleset())
    store.seal(RUN)
    return store


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private, public = tmp_path / "seal.pem", tmp_path / "seal.pub"
    generate_keys(private, public)
    return private, public


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    env.pop("PROCGRADE_DB", None)
    return subprocess.run([sys.executable, "-m", "procgrade.engine.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)


# --- the database refuses every overwrite -------------------------------------------------------

SQLITE_OVERWRITES = [
    "INSERT OR REPLACE INTO runs (run_id, event_count) VALUES ('run-1', 0)",
    "REPLACE INTO runs (run_id, event_count) VALUES ('bystander', 0)",
    "REPLACE INTO events SELECT * FROM events WHERE run_id = 'run-1' AND seq = 4",
    "INSERT OR REPLACE INTO events SELECT * FROM events WHERE run_id = 'bystander' AND seq = 7",
    "INSERT INTO events SELECT * FROM events WHERE seq = 2 ON CONFLICT DO NOTHING",
    "INSERT OR IGNORE INTO events SELECT * FROM events WHERE seq = 2",
    "INSERT INTO events SELECT * FROM events WHERE seq = 2 ON CONFLICT DO UPDATE SET exit_code = 1",
    "REPLACE INTO scores SELECT * FROM scores",
    "INSERT OR REPLACE INTO rulesets SELECT * FROM rulesets",
    "REPLACE INTO seals SELECT * FROM seals",
    "UPDATE runs SET event_count = 3 WHERE run_id = 'bystander'",
    "UPDATE seals SET head_hash = 'x'",
    "DELETE FROM seals",
]

POSTGRES_OVERWRITES = [
    "INSERT INTO runs (run_id, event_count) VALUES ('run-1', 0) ON CONFLICT (run_id) DO UPDATE SET event_count = 0",
    "INSERT INTO events SELECT * FROM events WHERE seq = 4 ON CONFLICT (run_id, seq) DO UPDATE SET exit_code = 1",
    "INSERT INTO scores SELECT * FROM scores ON CONFLICT ON CONSTRAINT pk_scores DO UPDATE SET document = 'x'",
    "INSERT INTO rulesets SELECT * FROM rulesets ON CONFLICT (ruleset_hash) DO UPDATE SET body = 'x'",
    "INSERT INTO seals SELECT * FROM seals ON CONFLICT (run_id) DO UPDATE SET head_hash = 'x'",
    "UPDATE runs SET event_count = 3 WHERE run_id = 'bystander'",
    "UPDATE seals SET head_hash = 'x'",
    "DELETE FROM seals",
    "TRUNCATE seals",
]


def snapshot(store: EventStore) -> tuple:
    with store.engine.connect() as conn:
        return tuple(tuple(map(tuple, conn.execute(text(f"SELECT * FROM {t} ORDER BY 1, 2")))) for t in
                     ("runs", "events", "scores", "rulesets", "seals"))


@pytest.mark.parametrize("index", range(max(len(SQLITE_OVERWRITES), len(POSTGRES_OVERWRITES))))
def test_every_overwrite_is_refused(sealed_scored: EventStore, db_kind: str, index: int) -> None:
    statements = SQLITE_OVERWRITES if db_kind == "sqlite" else POSTGRES_OVERWRITES
    sql = statements[index % len(statements)]
    before = snapshot(sealed_scored)
    with pytest.raises(Exception, match="procgrade: .*refused"):
        execute(sealed_scored, sql)
    assert snapshot(sealed_scored) == before
    assert not integrity_problems(sealed_scored)


def test_sealing_records_a_seal_row_and_appends_keep_working(sealed_scored: EventStore) -> None:
    with sealed_scored.engine.connect() as conn:
        seals = conn.execute(text("SELECT run_id, event_count FROM seals")).all()
    assert [tuple(r) for r in seals] == [(RUN, 8)]
    from builders import extra_events

    assert sealed_scored.append("bystander", models(extra_events("bystander", 8, 3))).appended == 3
    assert sealed_scored.append("bystander", models(small_run("bystander"))).no_op


# --- what the owner can do with triggers off, and who reports it ----------------------------------

def test_cleared_seal_is_reported_by_run_and_seq(sealed_scored: EventStore, store_url: str, db_kind: str) -> None:
    as_owner(sealed_scored, db_kind, [("UPDATE runs SET sealed_head_hash = NULL, sealed_event_count = NULL "
                                       "WHERE run_id = :run", {"run": RUN})])
    problems = seal_problems(sealed_scored)
    assert [(p.run_id, p.seq) for p in problems] == [(RUN, 7)]
    proc = cli("verify-log", "--db", store_url)
    assert proc.returncode == 1 and re.search(rf"^{RUN}: seq 7: sealed at 8 events", proc.stderr, re.M), proc.stderr
    assert "Traceback" not in proc.stderr


def test_changed_score_head_is_reported_by_verify(sealed_scored: EventStore, store_url: str, db_kind: str) -> None:
    as_owner(sealed_scored, db_kind, [("UPDATE scores SET run_head_hash = :h WHERE run_id = 'bystander'",
                                       {"h": "0" * 64})])
    problems = integrity_problems(sealed_scored)
    assert [(p.run_id, p.seq) for p in problems] == [("bystander", 7)]
    proc = cli("verify", "--db", store_url)
    assert proc.returncode == 1 and re.search(r"^bystander: seq 7: the score .* records head 000000000000",
                                              proc.stderr, re.M), proc.stderr


def test_score_beyond_the_log_is_reported(sealed_scored: EventStore, db_kind: str) -> None:
    as_owner(sealed_scored, db_kind, [("UPDATE scores SET run_event_count = 99 WHERE run_id = 'bystander'", {})])
    assert [(p.run_id, p.seq) for p in integrity_problems(sealed_scored)] == [("bystander", 8)]


def _rewritten_rows(tmp_path: Path, drop_last: bool) -> tuple[list[tuple], str, int]:
    """The rows of run-1 with its command failing instead of passing, chain recomputed honestly."""
    events = small_run()
    events[4]["exit_code"] = 1
    if drop_last:
        events = events[:-1]
    scratch = open_store(f"sqlite:///{tmp_path}/scratch.db", create=True)
    try:
        scratch.append(RUN, models(events))
        with scratch.engine.connect() as conn:
            rows = [tuple(r) for r in conn.execute(text("SELECT * FROM events ORDER BY seq"))]
        info = scratch.run(RUN)
    finally:
        scratch.close()
    return rows, info.head_hash or "", info.event_count


@pytest.mark.parametrize("drop_last", [False, True], ids=["rewritten-chain", "deleted-last-event"])
def test_owner_rewrite_passes_inside_checks_but_not_the_receipts(sealed_scored: EventStore, store_url: str,
                                                                 db_kind: str, tmp_path: Path, keys: tuple[Path, Path],
                                                                 drop_last: bool) -> None:
    private, public = keys
    receipts = tmp_path / "receipts"
    write_receipt(sealed_scored, RUN, private, receipts)
    assert verify_receipts(sealed_scored, receipts, public) == (1, [])

    rows, head, count = _rewritten_rows(tmp_path, drop_last)
    columns = ", ".join(f":c{i}" for i in range(len(rows[0])))
    as_owner(sealed_scored, db_kind, [
        ("DELETE FROM scores WHERE run_id = :run", {"run": RUN}),
        ("DELETE FROM events WHERE run_id = :run", {"run": RUN}),
        *((f"INSERT INTO events VALUES ({columns})", {f"c{i}": v for i, v in enumerate(row)}) for row in rows),
        ("UPDATE runs SET event_count = :n, head_hash = :h, sealed_event_count = :n, sealed_head_hash = :h "
         "WHERE run_id = :run", {"n": count, "h": head, "run": RUN}),
        ("UPDATE seals SET event_count = :n, head_hash = :h WHERE run_id = :run", {"n": count, "h": head, "run": RUN}),
    ])
    # Everything inside the database agrees again ...
    assert verify_log(sealed_scored, RUN).ok
    assert not integrity_problems(sealed_scored)
    # ... but the signed receipt does not.
    checked, problems = verify_receipts(sealed_scored, receipts, public)
    assert checked == 1 and problems
    assert all(p.run_id == RUN and p.seq is not None for p in problems), problems
    assert any("rewritten" in p.reason or "signs 8 events" in p.reason for p in problems)
    assert any("no longer stored" in p.reason for p in problems)
    proc = cli("verify-log", "--db", store_url, "--receipts", str(receipts), "--public-key", str(public))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(rf"^{RUN}: seq 7: ", proc.stderr, re.M), proc.stderr
    assert "Traceback" not in proc.stderr


def test_deleted_score_row_is_reported_by_the_receipt(sealed_scored: EventStore, db_kind: str, tmp_path: Path,
                                                      keys: tuple[Path, Path]) -> None:
    private, public = keys
    write_receipt(sealed_scored, RUN, private, tmp_path / "r")
    as_owner(sealed_scored, db_kind, [("DELETE FROM scores WHERE run_id = :run", {"run": RUN})])
    _, problems = verify_receipts(sealed_scored, tmp_path / "r", public)
    assert [(p.run_id, p.seq) for p in problems] == [(RUN, 7)]
    assert "no longer stored" in problems[0].reason


# --- the receipts log itself --------------------------------------------------------------------

def test_receipts_log_chain_and_signatures(sealed_scored: EventStore, tmp_path: Path, keys: tuple[Path, Path]) -> None:
    private, public = keys
    log = tmp_path / "log"
    paths = [write_receipt(sealed_scored, RUN, private, log) for _ in range(3)]
    assert [p.name for p in paths] == ["00000001.json", "00000002.json", "00000003.json"]
    assert verify_receipts(sealed_scored, log, public) == (3, [])

    other_private, other_public = tmp_path / "o.pem", tmp_path / "o.pub"
    generate_keys(other_private, other_public)
    _, problems = verify_receipts(sealed_scored, log, other_public)
    assert len(problems) == 3 and all("signature does not verify" in p.reason for p in problems)

    middle = paths[1].read_bytes()
    paths[1].write_bytes(middle.replace(b'"event_count":8', b'"event_count":7'))
    _, problems = verify_receipts(sealed_scored, log, public)
    assert any("00000002.json: the signature" in p.reason for p in problems)
    assert any("00000003.json: the log's chain is broken" in p.reason for p in problems)

    paths[1].unlink()
    _, problems = verify_receipts(sealed_scored, log, public)
    assert any("receipt 2 is missing" in p.reason for p in problems)


def test_receipts_refuse_unsealed_runs_and_bad_keys(sealed_scored: EventStore, tmp_path: Path,
                                                    keys: tuple[Path, Path]) -> None:
    from procgrade.engine.errors import InputError, ProcgradeError

    private, public = keys
    with pytest.raises(ProcgradeError, match="not sealed"):
        write_receipt(sealed_scored, "bystander", private, tmp_path / "r")
    with pytest.raises(InputError, match="not an unencrypted PEM private key"):
        write_receipt(sealed_scored, RUN, public, tmp_path / "r")
    with pytest.raises(InputError, match="never overwrites a key"):
        generate_keys(private, tmp_path / "new.pub")


def test_cli_keygen_seal_sign_and_verify(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    from builders import write_jsonl

    source = write_jsonl(tmp_path / "run.jsonl", small_run())
    assert cli("ingest", "--db", url, str(source)).returncode == 0
    assert cli("keygen", str(tmp_path / "k.pem")).returncode == 0
    assert (tmp_path / "k.pem").stat().st_mode & 0o777 == 0o600
    proc = cli("seal", RUN, "--db", url, "--sign", str(tmp_path / "k.pem"), "--receipts", str(tmp_path / "rc"))
    assert proc.returncode == 0 and "signed receipt" in proc.stdout, proc.stderr
    proc = cli("verify-log", "--db", url, "--receipts", str(tmp_path / "rc"), "--public-key", str(tmp_path / "k.pem.pub"))
    assert proc.returncode == 0 and "receipts: ok (1 signed receipts" in proc.stdout, proc.stderr


def test_migration_records_seals_of_runs_sealed_before_it(store_url: str) -> None:
    from alembic import command

    from procgrade.engine.store.migrate import alembic_config, upgrade
    from procgrade.engine.store import normalize_url
    from procgrade.engine.store.sqlite import sqlite_engine
    from procgrade.engine.store.postgres import postgres_engine

    url = normalize_url(store_url)
    engine = sqlite_engine(url) if url.startswith("sqlite") else postgres_engine(url)
    try:
        config = alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0003")
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO runs (run_id, event_count, head_hash, sealed_event_count, "
                                    "sealed_head_hash) VALUES ('old', 0, NULL, 0, :g), ('open', 0, NULL, NULL, NULL)"),
                               {"g": "0" * 64})
        upgrade(engine)
        with engine.connect() as connection:
            assert [tuple(r) for r in connection.execute(text("SELECT run_id, event_count FROM seals"))] == [("old", 0)]
    finally:
        engine.dispose()
    store = open_store(store_url)
    try:
        assert seal_problems(store) == []
    finally:
        store.close()
