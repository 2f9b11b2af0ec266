"""Native ingest: located input errors, all-or-nothing writes, idempotent re-ingest, and the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders import RUN, ev, extra_events, line, models, reference_head, small_run, write_jsonl, write_lines
from databases import fresh_url
from procgrade.engine.errors import EventIdConflictError, InputError, SeqConflictError, StoreError
from procgrade.engine.ingest import ingest_native
from procgrade.engine.native import dump_native, read_native
from procgrade.engine.store import EventStore, open_store

# --- helpers ------------------------------------------------------------------------------------


def snapshot(store: EventStore) -> tuple:
    """Everything the store holds: run rows and every stored event row."""
    return tuple((info, tuple(store.stored_events(info.run_id))) for info in store.runs())


def assert_located(exc: InputError, path: Path, line_no: int, field: str) -> None:
    text = str(exc)
    assert re.fullmatch(rf"{re.escape(str(path))}:{line_no}: {re.escape(field)}: \S.*", text, re.S), text
    assert "\n" not in text
    assert exc.source == str(path)
    assert exc.line == line_no
    assert (exc.field or "-") == field


def lines_of(events: list[dict]) -> list[bytes]:
    return [line(e) for e in events]


@pytest.fixture
def populated(store: EventStore, tmp_path: Path) -> EventStore:
    """A store already holding run ``other`` and the first three events of ``run-1``."""
    seed = tmp_path / "seed.jsonl"
    write_jsonl(seed, small_run("other") + small_run(RUN)[:3])
    ingest_native(store, [seed])
    return store


# --- the error paths ----------------------------------------------------------------------------


def _replace(index: int, new: bytes):
    def make(base: list[bytes]) -> list[bytes]:
        out = list(base)
        out[index] = new
        return out
    return make


def _bad_event(index: int, **changes):
    def make(base: list[bytes]) -> list[bytes]:
        out = list(base)
        event = json.loads(out[index])
        for key, value in changes.items():
            if value is _DROP:
                event.pop(key)
            else:
                event[key] = value
        out[index] = line(event)
        return out
    return make


_DROP = object()
RUN_LINES = lines_of(small_run())

ERROR_CASES = [
    # id, how to break the file, line, field, reason fragment
    ("bad-json", _replace(2, b'{"run_id": "run-1", "seq": 2, "kind": '), 3, "-", "invalid JSON"),
    ("not-an-object", _replace(2, b"[1, 2, 3]"), 3, "-", "object"),
    ("unknown-kind", _bad_event(2, kind="teleport"), 3, "kind", "teleport"),
    ("missing-kind", _bad_event(2, kind=_DROP), 3, "kind", "missing"),
    ("wrong-type-int-as-string", _bad_event(4, exit_code="0"), 5, "exit_code", "integer"),
    ("wrong-type-seq-as-string", _bad_event(4, seq="4"), 5, "seq", "integer"),
    ("wrong-type-str-as-int", _bad_event(1, text=42), 2, "text", "string"),
    ("missing-field", _bad_event(3, edit_kind=_DROP), 4, "edit_kind", "missing"),
    ("missing-envelope-field", _bad_event(6, actor=_DROP), 7, "actor", "missing"),
    ("missing-nested-field", _bad_event(0, harness={"version": "1"}), 1, "harness.name", "missing"),
    ("extra-field", _bad_event(4, exitcode=0), 5, "exitcode", "unknown field"),
    ("bad-actor", _bad_event(1, actor="robot"), 2, "actor", "pattern"),
    ("parent-not-earlier", _bad_event(2, parent_seq=2), 3, "parent_seq", "earlier"),
    ("seq-gap", lambda b: b[:3] + b[4:], 4, "seq", "gapless"),
    ("seq-out-of-order", lambda b: b[:4] + [b[5], b[4]] + b[6:], 5, "seq", "gapless"),
    ("seq-before-first-of-file", lambda b: b[5:7] + [b[3]], 3, "seq", "ascend"),
    ("duplicate-seq-different-content", lambda b: b[:4] + [line(ev("file_read", 2, path="other.md"))] + b[4:],
     5, "seq", "different content"),
    ("duplicate-seq-same-id-different-content",
     lambda b: b[:4] + [line({**json.loads(b[2]), "path": "changed.md"})] + b[4:], 5, "seq", "different content"),
    ("non-utf8", _replace(1, line(ev("message", 1, text="caf\u00e9")).replace("\u00e9".encode(), b"\xe9")),
     2, "-", "UTF-8"),
    ("non-utf8-lone-continuation", _replace(5, RUN_LINES[5][:-2] + b"\x80" + RUN_LINES[5][-2:]), 6, "-", "UTF-8"),
    ("event-id-reused", _bad_event(3, event_id=f"{RUN}/1"), 4, "event_id", "already used"),
    ("event-id-reused-across-runs",
     lambda b: b + [line(ev("run_started", 0, "run-2", actor="harness", harness={"name": "h"}, event_id=f"{RUN}/0"))],
     9, "event_id", "already used"),
    ("seq-0-not-run-started", _replace(0, line(ev("message", 0, text="hello"))), 1, "kind", "run_started"),
    ("run-started-not-at-0", _replace(3, line(ev("run_started", 3, actor="harness", harness={"name": "h"}))),
     4, "kind", "run_started"),
]


@pytest.mark.parametrize("make,line_no,field,fragment", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_bad_input_is_located_and_writes_nothing(populated: EventStore, tmp_path: Path,
                                                 make, line_no: int, field: str, fragment: str) -> None:
    before = snapshot(populated)
    path = write_lines(tmp_path / "bad.jsonl", make(RUN_LINES))
    with pytest.raises(InputError) as info:
        ingest_native(populated, [path])
    assert_located(info.value, path, line_no, field)
    assert fragment in info.value.reason
    assert snapshot(populated) == before
    # the same file without the break ingests fine (so the break is what was refused)
    good = write_jsonl(tmp_path / "good.jsonl", small_run())
    assert ingest_native(populated, [good])[0].result.event_count == 8


def test_bad_line_in_a_later_file_writes_nothing_from_earlier_files(store: EventStore, tmp_path: Path) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", small_run("run-a"))
    bad_lines = lines_of(small_run("run-b"))
    bad_lines[6] = b'{"oops"'
    bad = write_lines(tmp_path / "bad.jsonl", bad_lines)
    with pytest.raises(InputError) as info:
        ingest_native(store, [good, bad])
    assert_located(info.value, bad, 7, "-")
    assert store.runs() == []


def test_unreadable_file_is_an_input_error(store: EventStore, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(InputError) as info:
        ingest_native(store, [missing])
    assert str(info.value).startswith(f"{missing}: ")
    assert store.runs() == []


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-2.5E+999", b"9e308",
                                     b"1" + b"0" * 400 + b".0", b"-" + b"9" * 330 + b".5",
                                     b"1" + b"0" * 300 + b"e9", b"-" + b"9" * 308 + b"e1",
                                     b"1" + b"0" * 200 + b"." + b"0" * 150 + b"E+150"],
                         ids=["NaN", "Infinity", "-Infinity", "1e400", "-2.5E+999", "9e308",
                              "400-digit-decimal", "-330-digit-decimal", "301-digits-e9", "-308-nines-e1",
                              "201-digits-E+150"])
def test_nan_and_infinity_literals_are_refused_as_input_errors(store: EventStore, tmp_path: Path,
                                                               literal: bytes) -> None:
    """NaN/Infinity are not JSON (RFC 8259), and a number too large for a double parses to
    infinity: none has a canonical form, so the line must be refused, located, and nothing
    stored (not silently stored as null, not a raw exception)."""
    lines = lines_of(small_run())
    lines[1] = lines[1].replace(b'"tokens": 17', b'"tokens": ' + literal)
    assert literal in lines[1]
    path = write_lines(tmp_path / "nan.jsonl", lines)
    with pytest.raises(InputError) as info:
        ingest_native(store, [path])
    assert str(info.value).startswith(f"{path}:2: ")
    assert store.runs() == []


# --- what is written ----------------------------------------------------------------------------


def test_ingest_small_run(store: EventStore, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", small_run())
    [report] = ingest_native(store, [path])
    assert (report.run_id, report.events_read, report.duplicates_skipped) == (RUN, 8, 0)
    assert (report.result.appended, report.result.already_stored, report.result.event_count) == (8, 0, 8)
    assert report.result.head_hash == reference_head(small_run())
    info = store.run(RUN)
    assert (info.harness, info.harness_version, info.model, info.task_id) == ("test-harness", "1.2.3", "model-x", "task-7")
    assert (info.event_count, info.head_hash, info.sealed) == (8, reference_head(small_run()), False)
    assert list(store.events(RUN)) == models(small_run())
    assert "8 events appended" in report.summary


def test_identical_duplicated_line_is_skipped(store: EventStore, tmp_path: Path) -> None:
    lines = lines_of(small_run())
    # an immediate retry of line 3, and a late retry of line 2
    lines = lines[:3] + [lines[2]] + lines[3:6] + [lines[1]] + lines[6:]
    path = write_lines(tmp_path / "dup.jsonl", lines)
    [report] = ingest_native(store, [path])
    assert report.duplicates_skipped == 2
    assert report.events_read == 8
    assert report.result.event_count == 8
    assert report.result.head_hash == reference_head(small_run())


def test_same_json_with_other_key_order_and_spacing_is_a_duplicate(store: EventStore, tmp_path: Path) -> None:
    lines = lines_of(small_run())
    reordered = json.dumps(dict(reversed(list(small_run()[2].items()))), indent=None, separators=(", ", " : "))
    path = write_lines(tmp_path / "dup.jsonl", lines[:3] + [reordered.encode()] + lines[3:])
    [report] = ingest_native(store, [path])
    assert report.duplicates_skipped == 1 and report.result.event_count == 8


def test_blank_lines_and_crlf_are_tolerated_and_line_numbers_count_them(store: EventStore, tmp_path: Path) -> None:
    lines = [b""] + [l + b"\r" for l in lines_of(small_run())]
    lines[4] = line({**small_run()[3], "run_id": 1}) + b"\r"
    path = write_lines(tmp_path / "crlf.jsonl", lines)
    with pytest.raises(InputError) as info:
        ingest_native(store, [path])
    assert_located(info.value, path, 5, "run_id")
    good = write_lines(tmp_path / "crlf-good.jsonl", [b"", b"  "] + [l + b"\r" for l in lines_of(small_run())] + [b""])
    assert ingest_native(store, [good])[0].result.event_count == 8


def test_reingest_of_identical_file_is_a_no_op(store: EventStore, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", small_run())
    [first] = ingest_native(store, [path])
    rows_before = snapshot(store)
    [again] = ingest_native(store, [path])
    assert again.result.no_op
    assert (again.result.appended, again.result.already_stored) == (0, 8)
    assert again.result.event_count == first.result.event_count == 8
    assert again.result.head_hash == first.result.head_hash
    assert "nothing written" in again.summary
    assert snapshot(store) == rows_before


def test_extended_file_appends_only_the_new_events(store: EventStore, tmp_path: Path) -> None:
    full = small_run() + extra_events(RUN, 8, 4)
    first = write_jsonl(tmp_path / "first.jsonl", full[:5])
    second = write_jsonl(tmp_path / "second.jsonl", full)
    ingest_native(store, [first])
    stored_prefix = list(store.stored_events(RUN))
    [report] = ingest_native(store, [second])
    assert (report.result.appended, report.result.already_stored, report.result.event_count) == (7, 5, 12)
    assert report.result.head_hash == reference_head(full)
    assert list(store.stored_events(RUN))[:5] == stored_prefix
    assert list(store.events(RUN)) == models(full)


def test_continuation_file_without_the_prefix_appends(store: EventStore, tmp_path: Path) -> None:
    full = small_run() + extra_events(RUN, 8, 3)
    ingest_native(store, [write_jsonl(tmp_path / "a.jsonl", full[:8])])
    [report] = ingest_native(store, [write_jsonl(tmp_path / "b.jsonl", full[8:])])
    assert (report.result.appended, report.result.already_stored, report.result.event_count) == (3, 0, 11)
    assert report.result.head_hash == reference_head(full)


def test_continuation_that_leaves_a_gap_is_refused(store: EventStore, tmp_path: Path) -> None:
    full = small_run() + extra_events(RUN, 8, 3)
    ingest_native(store, [write_jsonl(tmp_path / "a.jsonl", full[:6])])
    before = snapshot(store)
    path = write_jsonl(tmp_path / "b.jsonl", full[7:])
    with pytest.raises(StoreError) as info:
        ingest_native(store, [path])
    assert isinstance(getattr(info.value, "cause", info.value), SeqConflictError)
    assert str(info.value).startswith(f"{path}:1: seq: ")
    assert snapshot(store) == before


def test_multi_run_file_where_second_run_conflicts_writes_nothing(store: EventStore, tmp_path: Path) -> None:
    ingest_native(store, [write_jsonl(tmp_path / "a.jsonl", small_run("run-a"))])
    before = snapshot(store)
    conflicting = small_run("run-a")
    conflicting[3] = ev("file_edit", 3, "run-a", path="src/other.py", edit_kind="create", event_id="run-a/3-bis")
    path = write_jsonl(tmp_path / "multi.jsonl", small_run("run-b") + conflicting + small_run("run-c"))
    with pytest.raises(StoreError) as info:
        ingest_native(store, [path])
    assert isinstance(getattr(info.value, "cause", info.value), SeqConflictError)
    assert str(info.value).startswith(f"{path}:12: seq: ")  # run-a's seq 3 is line 8 + 4
    assert snapshot(store) == before
    assert [r.run_id for r in store.runs()] == ["run-a"]


def test_multi_run_file_where_second_run_reuses_a_stored_event_id_writes_nothing(store: EventStore,
                                                                                   tmp_path: Path) -> None:
    ingest_native(store, [write_jsonl(tmp_path / "a.jsonl", small_run("run-a"))])
    before = snapshot(store)
    thief = small_run("run-c")
    thief[2]["event_id"] = "run-a/5"
    path = write_jsonl(tmp_path / "multi.jsonl", small_run("run-b") + thief)
    with pytest.raises(StoreError) as info:
        ingest_native(store, [path])
    assert isinstance(getattr(info.value, "cause", info.value), EventIdConflictError)
    assert str(info.value).startswith(f"{path}:11: seq: ")
    assert snapshot(store) == before


def test_two_files_reusing_an_event_id_in_one_ingest_is_an_event_id_conflict(store: EventStore,
                                                                              tmp_path: Path) -> None:
    """Both runs are new; the clash is between two rows of the same transaction."""
    first = write_jsonl(tmp_path / "one.jsonl", small_run("run-a"))
    clash = small_run("run-b")
    clash[4]["event_id"] = "run-a/4"
    second = write_jsonl(tmp_path / "two.jsonl", clash)
    with pytest.raises(StoreError) as info:
        ingest_native(store, [first, second])
    assert store.runs() == []
    cause = getattr(info.value, "cause", info.value)
    assert isinstance(cause, EventIdConflictError), f"{type(cause).__name__}: {cause}"
    assert str(info.value).startswith(f"{second}:5: ")


def test_ingest_with_seal(store: EventStore, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", small_run())
    [report] = ingest_native(store, [path], seal=True)
    assert report.result.sealed and ", sealed" in report.summary
    info = store.run(RUN)
    assert (info.sealed_event_count, info.sealed_head_hash) == (8, reference_head(small_run()))
    assert ingest_native(store, [path])[0].result.no_op


@pytest.mark.parametrize("packed", [False, True], ids=["directory", "archive"])
def test_format_native_reads_a_directory_or_archive_file_by_file(store: EventStore, tmp_path: Path,
                                                                 packed: bool) -> None:
    """``--format native DIR`` reads every native JSONL file under DIR (or in an archive), as
    ``--format auto`` and the named importers do; other files are listed as skipped, not read as
    native (a file named outright still is: its errors name its lines)."""
    import tarfile

    from procgrade.engine.ingest import ingest_paths

    folder = tmp_path / "runs"
    (folder / "nested").mkdir(parents=True)
    write_jsonl(folder / "b.jsonl", small_run("run-b"))
    write_jsonl(folder / "nested" / "a.jsonl", small_run("run-a"))
    (folder / "notes.txt").write_text("not a log\n")
    given = folder
    if packed:
        given = tmp_path / "runs.tar.gz"
        with tarfile.open(given, "w:gz") as archive:
            archive.add(folder, arcname="runs")
    done = ingest_paths(store, [given], format="native")
    assert [report.run_id for report in done.reports] == ["run-b", "run-a"]  # file order: b.jsonl, nested/a.jsonl
    assert all(report.format == "native" for report in done.reports)
    assert len(done.unrecognised) == 1 and done.unrecognised[0].endswith("notes.txt")
    for run_id in ("run-a", "run-b"):
        assert store.run(run_id).head_hash == reference_head(small_run(run_id))


def test_format_native_on_a_directory_without_native_files_writes_nothing(store: EventStore,
                                                                         tmp_path: Path) -> None:
    from procgrade.engine.ingest import ingest_paths

    good = write_jsonl(tmp_path / "good.jsonl", small_run())
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "trajectory.json").write_text('{"steps": []}\n')
    with pytest.raises(InputError) as info:
        ingest_paths(store, [good, folder], format="native")
    assert str(info.value).startswith(f"{folder}: -: nothing here is in the native format")
    assert store.runs() == []


def test_read_native_groups_runs_in_order_of_first_appearance(tmp_path: Path) -> None:
    a, b = small_run("run-a"), small_run("run-b")
    interleaved = [x for pair in zip(b, a) for x in pair]
    runs = read_native(write_jsonl(tmp_path / "x.jsonl", interleaved))
    assert [r.run_id for r in runs] == ["run-b", "run-a"]
    assert runs[1].events == models(a)
    assert runs[1].lines == [2, 4, 6, 8, 10, 12, 14, 16]
    assert runs[0].line_of(3) == 7


def test_dump_native_round_trips_through_read_native(tmp_path: Path) -> None:
    events = models(small_run())
    data = b"".join(dump_native(events))
    assert data.count(b"\n") == 8 and b"null" not in data
    [run] = read_native(write_lines(tmp_path / "d.jsonl", data.rstrip(b"\n").split(b"\n")))
    assert run.events == events


# --- the CLI ------------------------------------------------------------------------------------

CONSOLE_SCRIPT = Path(sys.executable).with_name("procgrade")


def cli(*args: str, script: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-m", "procgrade.engine.cli"]
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("PROCGRADE_DB", None)
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120, env=env)


def test_console_script_exists() -> None:
    assert CONSOLE_SCRIPT.exists(), CONSOLE_SCRIPT


@contextlib.contextmanager
def opened(url: str) -> Iterator[EventStore]:
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


def test_cli_ingest_bad_file_fails_with_located_message(store_url: str, tmp_path: Path) -> None:
    lines = lines_of(small_run())
    lines[4] = line({**json.loads(lines[4]), "exit_code": "zero"})
    path = write_lines(tmp_path / "bad.jsonl", lines)
    proc = cli("ingest", str(path), "--db", store_url, script=True)
    assert proc.returncode != 0
    err_lines = proc.stderr.strip().splitlines()
    assert any(re.fullmatch(rf"{re.escape(str(path))}:5: exit_code: \S.*", l) for l in err_lines), proc.stderr
    assert "Traceback" not in proc.stderr
    with opened(store_url) as s:
        assert s.runs() == []


def test_cli_ingest_non_utf8_file_fails_with_located_message(store_url: str, tmp_path: Path) -> None:
    lines = lines_of(small_run())
    lines[6] = lines[6].replace(b"All tests", b"All \xff tests")
    path = write_lines(tmp_path / "bad.jsonl", lines)
    proc = cli("ingest", str(path), "--db", store_url)
    assert proc.returncode != 0
    assert re.search(rf"^{re.escape(str(path))}:7: -: .*UTF-8", proc.stderr, re.M), proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_ingest_twice_then_runs_show_export_verify(store_url: str, tmp_path: Path) -> None:
    events = small_run() + extra_events(RUN, 8, 2) + small_run("run-z")
    path = write_jsonl(tmp_path / "run.jsonl", events)

    first = cli("ingest", str(path), "--db", store_url, script=True)
    assert first.returncode == 0, first.stderr
    assert f"run {RUN}: 10 events appended" in first.stdout
    assert "run run-z: 8 events appended" in first.stdout

    second = cli("ingest", str(path), "--db", store_url)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("nothing written") == 2, second.stdout

    runs = cli("runs", "--db", store_url)
    assert runs.returncode == 0, runs.stderr
    assert "2 runs" in runs.stdout
    row = next(l for l in runs.stdout.splitlines() if RUN in l)
    assert "test-harness 1.2.3" in row and "model-x" in row and "task-7" in row and "10" in row and "no" in row

    show = cli("show", RUN, "--db", store_url)
    assert show.returncode == 0, show.stderr
    for fragment in ("harness test-harness 1.2.3", "[plan] Plan: read the spec", "read spec/PRD.md",
                     "modify src/main.py", "$ python -m pip install -e . → exit 0", "tests pass (12 passed",
                     "claims done (run)", "run ended: completed", "make step-9"):
        assert fragment in show.stdout, (fragment, show.stdout)
    with opened(store_url) as s:
        head = s.run(RUN).head_hash
    assert head[:16] in show.stdout

    export = cli("export", RUN, "--db", store_url)
    assert export.returncode == 0, export.stderr
    exported = export.stdout.encode()
    assert exported.count(b"\n") == 10
    assert [json.loads(l) for l in exported.splitlines()] == [
        json.loads(l) for l in b"".join(dump_native(models(events[:10]))).splitlines()]
    out_file = tmp_path / "exported.jsonl"
    export_o = cli("export", RUN, "-o", str(out_file), "--db", store_url)
    assert export_o.returncode == 0 and out_file.read_bytes() == exported

    with fresh_url("sqlite", tmp_path / "elsewhere") as other_url:
        again = cli("ingest", str(out_file), "--db", other_url)
        assert again.returncode == 0, again.stderr
        with opened(other_url) as other:
            assert other.run(RUN).head_hash == head == reference_head(events[:10])

    verify = cli("verify-log", "--db", store_url)
    assert verify.returncode == 0, verify.stderr
    assert f"{RUN}: ok (10 events, head {head[:16]})" in verify.stdout
    assert "run-z: ok (8 events" in verify.stdout
    verify_one = cli("verify-log", "run-z", "--db", store_url, script=True)
    assert verify_one.returncode == 0 and RUN + ":" not in verify_one.stdout


def test_cli_unknown_run_fails_cleanly(store_url: str, tmp_path: Path) -> None:
    ok = cli("ingest", str(write_jsonl(tmp_path / "r.jsonl", small_run())), "--db", store_url)
    assert ok.returncode == 0, ok.stderr
    for command in ("show", "export", "verify-log"):
        proc = cli(command, "no-such-run", "--db", store_url)
        assert proc.returncode != 0, command
        assert "no-such-run" in proc.stderr and "Traceback" not in proc.stderr, (command, proc.stderr)
