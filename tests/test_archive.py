"""Columnar archives: export of sealed runs, verification from the archive alone (a changed
byte in any column is caught), and re-scoring from the archive to the same bytes as from the
store, on both databases, with a local path and a file:// URL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builders import ev, run_started, small_run, write_jsonl
from procgrade.engine.archive import ARCHIVE_COLUMNS, export_archive, open_archive, run_file, verify_archive
from procgrade.engine.errors import InputError, ProcgradeError
from procgrade.engine.executors import LocalExecutor
from procgrade.engine.facts import EXTRACTOR_VERSION, FACT_COLUMNS
from procgrade.engine.ingest import ingest_native
from procgrade.engine.parallel_scoring import score_many, verify_many
from procgrade.engine.rescoring import score_runs
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.store.scores import ScoreStore
from procgrade.rules.loading import load_ruleset

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"
PROCGRADE = [sys.executable, "-m", "procgrade.engine.cli"]


def every_column_run(run_id: str) -> list[dict]:
    """A run in which every archived column holds a value somewhere (floats in a payload too)."""
    return [
        run_started(run_id, model_settings={"temperature": 0.5}),
        ev("stage_started", 1, run_id, actor="harness", stage=0, spec_ref="specs/s0.md", ts="2024-05-01T10:00:01Z"),
        ev("message", 2, run_id, stage=0, text="plan", intent="plan", parent_seq=1),
        ev("file_edit", 3, run_id, stage=0, path="./a/../b.py", new_path="c.py", edit_kind="rename"),
        ev("command", 4, run_id, stage=0, command="make  build", exit_code=2, payload={"ratio": 1.0}),
        ev("test_run", 5, run_id, stage=0, command="pytest -q", passed=3, failed=1, errored=2, exit_code=1),
        ev("delegation", 6, run_id, stage=0, worker_id="w1", instruction="do it", context=["a", "b"]),
        ev("worker_report", 7, run_id, stage=0, worker_id="w1", text="done", status="success", evidence=["c.py"]),
        ev("job_started", 8, run_id, stage=0, job_id="j1", command="train", output_path="out/log.txt"),
        ev("job_finished", 9, run_id, stage=0, job_id="j1", exit_code=0, output_path="out/log.txt"),
        ev("completion_claim", 10, run_id, stage=0, claim="done"),
        ev("stage_ended", 11, run_id, actor="harness", stage=0),
        ev("run_ended", 12, run_id, actor="harness", status="completed"),
    ]


def faulty_run(run_id: str) -> list[dict]:
    return [
        run_started(run_id),
        ev("stage_started", 1, run_id, actor="harness", stage=0, spec_ref="specs/s0.md"),
        ev("file_edit", 2, run_id, stage=0, path="app.py", edit_kind="modify"),
        ev("test_run", 3, run_id, stage=0, command="pytest -q", passed=3, failed=2, exit_code=1),
        ev("test_run", 4, run_id, stage=0, command="pytest -q", passed=3, failed=2, exit_code=1),
        ev("completion_claim", 5, run_id, stage=0, claim="ALL PASSED"),
        ev("stage_ended", 6, run_id, actor="harness", stage=0),
    ]


def _populate(store: EventStore, tmp_path: Path, *, seal: bool = True) -> list[str]:
    files = [EXAMPLE, write_jsonl(tmp_path / "every.jsonl", every_column_run("every/1:x+y")),
             write_jsonl(tmp_path / "faulty.jsonl", faulty_run("faulty-1")),
             write_jsonl(tmp_path / "small.jsonl", small_run("small-1"))]
    ingest_native(store, files)
    run_ids = [info.run_id for info in store.runs()]
    if seal:
        for run_id in run_ids:
            store.seal(run_id)
    return run_ids


@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_export_verify_and_rescore_from_archive_give_the_store_bytes(store: EventStore, store_url: str,
                                                                     tmp_path: Path, as_url: bool) -> None:
    run_ids = _populate(store, tmp_path)
    dest = tmp_path / "archive"
    location = dest.as_uri() if as_url else str(dest)
    archived = export_archive(store, location)
    assert [r.run_id for r in archived] == run_ids
    # One file per run, sorted by seq, the run's head, count and extractor in its metadata.
    for run in archived:
        info = store.run(run.run_id)
        table = pq.read_table(dest / run_file(run.run_id))
        assert table.column_names == list(ARCHIVE_COLUMNS) and "payload" not in table.column_names
        assert table.column("seq").to_pylist() == list(range(info.event_count))
        meta = orjson.loads(table.schema.metadata[b"procgrade"])
        assert (meta["run_id"], meta["head_hash"], meta["event_count"], meta["extractor_version"]) == (
            run.run_id, info.sealed_head_hash, info.event_count, EXTRACTOR_VERSION)
        sorting = pq.ParquetFile(dest / run_file(run.run_id)).metadata.row_group(0).sorting_columns
        assert sorting and sorting[0].column_index == ARCHIVE_COLUMNS.index("seq")
    reports = verify_archive(location)
    assert [r.run_id for r in reports] == run_ids and all(r.ok for r in reports), [r.problems for r in reports]
    assert sum(r.events_checked for r in reports) == sum(store.run(r).event_count for r in run_ids)

    ruleset = load_ruleset()
    from_store = {o.document.run_id: o.document.canonical for o in score_runs(store, run_ids, ruleset)}
    outcomes = score_many(store, None, ruleset, archive=location)
    assert {o.document.run_id: o.document.canonical for o in outcomes} == from_store
    assert not any(o.written for o in outcomes)  # the same key and bytes: nothing new stored
    # Verification of the stored scores from the archive agrees too.
    checked, drifts = verify_many(store, archive=location)
    assert checked == len(run_ids) and drifts == []


def test_a_changed_byte_in_any_column_is_caught(store: EventStore, tmp_path: Path) -> None:
    _populate(store, tmp_path)
    dest = tmp_path / "archive"
    export_archive(store, str(dest))
    run_id = "every/1:x+y"
    path = dest / run_file(run_id)
    original = pq.read_table(path)
    as_written = path.read_bytes()
    assert verify_archive(str(dest), [run_id])[0].ok
    for name in ARCHIVE_COLUMNS:
        values = original.column(name).to_pylist()
        row = next(i for i, v in enumerate(values) if v is not None)
        changed = list(values)
        if isinstance(values[row], int):
            changed[row] = values[row] ^ 1
        else:
            text = values[row]
            flip = ord(text[-1]) ^ 1
            changed[row] = text[:-1] + chr(flip)
        table = original.set_column(original.column_names.index(name), original.schema.field(name),
                                    pa.array(changed, type=original.schema.field(name).type))
        pq.write_table(table, path)
        report = verify_archive(str(dest), [run_id])[0]
        assert not report.ok, f"a changed {name} went unnoticed"
    path.write_bytes(as_written)
    assert verify_archive(str(dest), [run_id])[0].ok
    # A flipped byte in the file itself, and a changed head in the metadata.
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert not verify_archive(str(dest), [run_id])[0].ok
    pq.write_table(original.replace_schema_metadata({b"procgrade": orjson.dumps(
        {**orjson.loads(original.schema.metadata[b"procgrade"]), "head_hash": "0" * 64})}), path)
    assert any("metadata head_hash" in p for p in verify_archive(str(dest), [run_id])[0].problems)


def test_only_sealed_runs_are_archived_and_an_unfinished_archive_is_refused(store: EventStore,
                                                                            tmp_path: Path) -> None:
    run_ids = _populate(store, tmp_path, seal=False)
    with pytest.raises(InputError, match="not sealed"):
        export_archive(store, str(tmp_path / "a"), [run_ids[0]])
    assert export_archive(store, str(tmp_path / "a")) == []  # no sealed run yet
    store.seal("faulty-1")
    assert [r.run_id for r in export_archive(store, str(tmp_path / "a"))] == ["faulty-1"]
    store.seal("small-1")
    # Exporting again adds the new run and keeps the one already there.
    assert [r.run_id for r in export_archive(store, str(tmp_path / "a"))] == ["faulty-1", "small-1"]
    assert [r.run_id for r in open_archive(str(tmp_path / "a")).runs] == ["faulty-1", "small-1"]
    (tmp_path / "a" / "archive.json").unlink()
    with pytest.raises(InputError, match="no archive.json"):
        open_archive(str(tmp_path / "a"))


def test_rescore_from_archive_refuses_a_run_the_store_holds_differently(tmp_path: Path) -> None:
    a = open_store(f"sqlite:///{tmp_path}/a.db", create=True)
    b = open_store(f"sqlite:///{tmp_path}/b.db", create=True)
    try:
        ingest_native(a, [write_jsonl(tmp_path / "x.jsonl", faulty_run("r"))])
        a.seal("r")
        export_archive(a, str(tmp_path / "arch"))
        ingest_native(b, [write_jsonl(tmp_path / "y.jsonl", faulty_run("r")[:-1])])
        b.seal("r")
        with pytest.raises(InputError, match="archived at head"):
            score_many(b, None, load_ruleset(), archive=str(tmp_path / "arch"))
        assert ScoreStore(b).scores() == []
    finally:
        a.close()
        b.close()


def test_output_does_not_depend_on_workers_or_chunking(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    store = open_store(url, create=True)
    try:
        files = [write_jsonl(tmp_path / f"r{i}.jsonl", faulty_run(f"run-{i:02d}")) for i in range(7)]
        ingest_native(store, [EXAMPLE, *files])
        for info in store.runs():
            store.seal(info.run_id)
        export_archive(store, str(tmp_path / "arch"))
        ruleset = load_ruleset()
        one = [o.document.canonical for o in score_many(store, None, ruleset)]
        import procgrade.engine.executors as executors

        original = executors.MIN_TASK_EVENTS
        try:
            executors.MIN_TASK_EVENTS = 1  # one run per task
            with LocalExecutor(2) as pool:
                seen: list[int] = []
                two = [o.document.canonical for o in score_many(store, None, ruleset, executor=pool,
                                                                archive=str(tmp_path / "arch"),
                                                                on_events=seen.append)]
        finally:
            executors.MIN_TASK_EVENTS = original
        assert two == one
        assert sum(seen) == sum(i.event_count for i in store.runs())
    finally:
        store.close()


def test_cli_archive_export_verify_and_rescore_from_archive(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    store = open_store(url, create=True)
    try:
        _populate(store, tmp_path)
    finally:
        store.close()
    dest = str(tmp_path / "arch")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*PROCGRADE, *args], capture_output=True, text=True, cwd=ROOT)

    done = run("archive", "export", dest, "--db", url)
    assert done.returncode == 0, done.stderr
    assert "archived 4 runs" in done.stdout
    done = run("archive", "verify", dest, "--workers", "2")
    assert done.returncode == 0 and "4 archived runs verify" in done.stdout, done.stderr
    done = run("rescore", "--all", "--from-archive", dest, "--db", url)
    assert done.returncode == 0, done.stderr
    done = run("verify", "--db", url, "--workers", "2")
    assert done.returncode == 0 and "4 stored scores reproduce" in done.stdout, done.stderr
    path = tmp_path / "arch" / run_file("faulty-1")
    table = pq.read_table(path)
    pq.write_table(table.set_column(2, table.schema.field("event_id"),
                                    pa.array(["faulty-1/X"] + table.column("event_id").to_pylist()[1:])), path)
    done = run("archive", "verify", dest)
    assert done.returncode == 1 and "faulty-1: seq 0: hash mismatch" in done.stderr
    done = run("archive", "verify", str(tmp_path / "nowhere"))
    assert done.returncode != 0 and "no archive.json" in done.stderr and "Traceback" not in done.stderr


def test_the_writer_stores_a_batch_once_and_refuses_different_bytes_for_a_stored_key(store: EventStore,
                                                                                    tmp_path: Path) -> None:
    from procgrade.engine.errors import ScoreDriftError
    from procgrade.engine.parallel_scoring import store_scores

    _populate(store, tmp_path)
    outcomes = score_many(store, ["faulty-1", "small-1"], load_ruleset())
    assert [o.written for o in outcomes] == [True, True]
    rows = ScoreStore(store).scores()
    assert store_scores(store, rows) == [False, False]  # idempotent: the same bytes again
    changed = rows[1].__class__(**{**rows[1].__dict__, "document_sha256": "0" * 64})
    extra = rows[0].__class__(**{**rows[0].__dict__, "run_id": "every/1:x+y"})
    with pytest.raises(ScoreDriftError, match="small-1"):
        store_scores(store, [extra, changed])
    assert ScoreStore(store).scores() == rows  # nothing of the refused batch was written
