"""Strict input: duplicate keys, impossible timestamps and deep nesting are refused with
``FILE:LINE: field: reason`` in native and harness files; native ingest redacts secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builders import RUN, ev, line, small_run, write_jsonl, write_lines
from procgrade.engine.errors import InputError
from procgrade.engine.ingest import ingest_native, ingest_paths
from procgrade.engine.importers.redaction import REDACTION_MARKER
from procgrade.engine.json_guards import MAX_DEPTH, duplicate_key, nesting_error
from procgrade.engine.store import EventStore

ROOT = Path(__file__).resolve().parent.parent
CLAUDE = ROOT / "tests" / "fixtures" / "imports" / "claude-code" / "edge_cases.jsonl"


def lines_of(events: list[dict]) -> list[bytes]:
    return [line(e) for e in events]


def refused(store: EventStore, path: Path, *, native: bool = True) -> InputError:
    with pytest.raises(InputError) as info:
        ingest_native(store, [path]) if native else ingest_paths(store, [path])
    assert store.runs() == []
    return info.value


# --- duplicate keys ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,key", [
    ('{"a": 1, "a": 2}', "a"),
    ('{"a": {"b": 1, "c": {"b": 2, "b": 3}}}', "b"),
    ('{"a": 1, "\\u0061": 2}', "a"),
    ('[{"k": 1}, {"k": 2, "x": {"k": 3}}]', None),
    ('{"s": "\\"a\\": 1, \\"a\\": 2"}', None),
    ('{"a": "x", "b": {"a": "y"}}', None),
])
def test_duplicate_key_finder(text: str, key: str | None) -> None:
    assert duplicate_key(text) == key
    assert duplicate_key(text.encode()) == key


def test_native_duplicate_actor_is_refused_with_its_line(store: EventStore, tmp_path: Path) -> None:
    lines = lines_of(small_run())
    lines[4] = lines[4].replace(b'"actor": "agent"', b'"actor": "agent", "actor": "harness"')
    error = refused(store, write_lines(tmp_path / "dup.jsonl", lines))
    assert str(error).startswith(f"{tmp_path / 'dup.jsonl'}:5: actor: duplicate key")


def test_native_duplicate_inside_payload_and_escaped(store: EventStore, tmp_path: Path) -> None:
    lines = lines_of(small_run())
    lines[3] = lines[3].replace(b'"payload": {', b'"payload": {"exit_code": 1, "exit_code": 0, ')
    assert str(refused(store, write_lines(tmp_path / "a.jsonl", lines))).endswith(
        "exit_code: duplicate key: a JSON object must not repeat a key (the last value would silently win)")
    lines = lines_of(small_run())
    lines[4] = lines[4].replace(b'"exit_code": 0', b'"exit_code": 1, "exit\\u005fcode": 0')
    assert ":5: exit_code: duplicate key" in str(refused(store, write_lines(tmp_path / "b.jsonl", lines)))


def test_harness_duplicate_key_is_refused_with_its_line(store: EventStore, tmp_path: Path) -> None:
    lines = CLAUDE.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"type": "assistant"', b'"type": "assistant", "type": "user"', 1)
    assert lines[1].count(b'"type": "user"') == 1
    path = tmp_path / "claude.jsonl"
    path.write_bytes(b"\n".join(lines))
    error = refused(store, path, native=False)
    assert (error.line, error.field) == (2, "type") and "duplicate key" in error.reason


def test_harness_json_document_duplicate_key(tmp_path: Path) -> None:
    from procgrade.engine.importers.source_tree import open_tree

    path = tmp_path / "doc.json"
    path.write_text('{\n  "a": 1,\n  "b": {"c": 1,\n        "c": 2}\n}\n')
    with pytest.raises(InputError) as info:
        open_tree(path).json("doc.json")
    assert (info.value.line, info.value.field) == (4, "c")


# --- timestamps --------------------------------------------------------------------------------

@pytest.mark.parametrize("ts", ["2026-13-45T25:61:61Z", "2023-02-29T10:00:00Z", "2024-05-01T24:00:00Z",
                                "2024-05-01T10:60:00Z", "2024-05-01T10:00:00+24:00", "2024-04-31T00:00:00Z"])
def test_impossible_timestamp_is_refused(store: EventStore, tmp_path: Path, ts: str) -> None:
    events = small_run()
    events[2]["ts"] = ts
    error = refused(store, write_jsonl(tmp_path / "ts.jsonl", events))
    assert (error.line, error.field) == (3, "ts") and "not a real RFC 3339 instant" in error.reason


@pytest.mark.parametrize("ts", ["2024-02-29T23:59:60Z", "2024-05-01t10:00:00.123456789z", "2024-05-01 10:00:00-23:59"])
def test_real_timestamps_are_kept(store: EventStore, tmp_path: Path, ts: str) -> None:
    events = small_run()
    events[2]["ts"] = ts
    ingest_native(store, [write_jsonl(tmp_path / "ts.jsonl", events)])
    assert list(store.events(RUN))[2].ts == ts


# --- nesting -----------------------------------------------------------------------------------

def deep(levels: int) -> str:
    """JSON text nesting objects and arrays ``levels`` deep (built as text: json.dumps would
    itself hit the recursion limit)."""
    opening = "".join('{"k": ' if i % 2 == 0 else "[" for i in range(levels))
    closing = "".join("}" if i % 2 == 0 else "]" for i in reversed(range(levels)))
    return opening + '"bottom"' + closing


def test_nesting_check() -> None:
    assert nesting_error(deep(MAX_DEPTH)) is None
    assert nesting_error(deep(MAX_DEPTH + 1).encode()) == f"JSON nested deeper than {MAX_DEPTH} levels"
    assert nesting_error(json.dumps({"s": "[" * 5000})) is None  # brackets inside strings do not nest


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1000, 100_000])
def test_deep_native_payload_is_refused(store: EventStore, tmp_path: Path, levels: int) -> None:
    events = small_run()
    events[1]["payload"] = {"deep": "PLACE"}
    lines = lines_of(events)
    lines[1] = lines[1].replace(b'"PLACE"', deep(levels).encode())
    error = refused(store, write_lines(tmp_path / "deep.jsonl", lines))
    assert error.line == 2 and "nested deeper than" in error.reason


def test_deep_nesting_in_format_detection_and_claude_code_logs(store: EventStore, tmp_path: Path) -> None:
    # a first line so deep that detection cannot parse it: no RecursionError, a located refusal or a skip
    first = tmp_path / "first.jsonl"
    first.write_bytes(b"[" * 5000 + b"]" * 5000 + b"\n")
    with pytest.raises(InputError, match="nothing here is in any known format"):
        ingest_paths(store, [first])
    # a Claude Code log whose second record nests 1,000 levels deep
    lines = CLAUDE.read_bytes().split(b"\n")
    record = json.loads(lines[1])
    record["message"]["content"][0]["deep"] = "PLACE"
    lines[1] = json.dumps(record).encode().replace(b'"PLACE"', deep(1000).encode())
    path = tmp_path / "claude.jsonl"
    path.write_bytes(b"\n".join(lines))
    error = refused(store, path, native=False)
    assert error.line == 2 and "nested deeper than" in error.reason
    proc = subprocess.run([sys.executable, "-m", "procgrade.engine.cli", "ingest", "--db", f"sqlite:///{tmp_path}/c.db", str(path)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{path}:2: -: JSON nested deeper than"), proc.stderr


# --- secrets -----------------------------------------------------------------------------------

SECRETS = {
    "anthropic": "sk-ant-api03-" + "a1B2c3D4e5" * 4,
    "github": "ghp_" + "a1B2c3D4e5F6" * 3,
    "aws": "AKIA" + "ABCDEFGHIJKLMNOP",
    "bearer": "Authorization: Bearer " + "eyZ9x8Y7w6V5u4T3s2R1",
}


def test_native_ingest_redacts_secrets_and_counts_them(store: EventStore, tmp_path: Path) -> None:
    events = small_run()
    events[1]["payload"] = {"env": f"ANTHROPIC_API_KEY={SECRETS['anthropic']}", "note": SECRETS["github"]}
    events[4]["command"] = f"curl -H '{SECRETS['bearer']}' https://x.test && echo {SECRETS['aws']}"
    events[2]["payload"] = {"api_key": "Zq8vW3nR5tY7uI9oP1aS"}
    path = write_jsonl(tmp_path / "secrets.jsonl", events)
    [report] = ingest_native(store, [path])
    assert report.result.appended == 8
    stored = list(store.events(RUN))
    dumped = json.dumps([e.model_dump(mode="json") for e in stored])
    for secret in SECRETS.values():
        assert secret.split()[-1] not in dumped
    assert "Zq8vW3nR5tY7uI9oP1aS" not in dumped
    assert stored[1].payload["note"] == REDACTION_MARKER
    assert REDACTION_MARKER in stored[4].command  # type: ignore[attr-defined]
    assert store.run(RUN).redactions == 5
    # the same file again: the same redacted bytes, a no-op, the count unchanged
    [again] = ingest_native(store, [path])
    assert again.result.no_op and store.run(RUN).redactions == 5


def _escape_letters(text: str) -> str:
    """``text`` as the body of a JSON string with every letter and ``/`` written as a ``\\uXXXX`` escape."""
    return "".join(f"\\u{ord(c):04x}" if c.isalpha() or c == "/" else c for c in text)


def test_native_ingest_redacts_secrets_spelled_with_escapes(store: EventStore, tmp_path: Path) -> None:
    """A line's bytes need not hold a secret's letters: ``\\u0073k-...`` is ``sk-...`` once parsed,
    ``https:\\/\\/user:pass@host`` holds ``://``. What is redacted is what the line means."""
    events = small_run()
    events[2]["payload"] = {"note": "NOTE", "remote": "REMOTE"}
    credentials = "https://deploy:Zq8vW3nR5tY7uI9oP1aS@git.example.test/repo.git"
    lines = [json.dumps(e).encode() for e in events]
    lines[2] = (lines[2].replace(b'"NOTE"', b'"%s"' % _escape_letters(SECRETS["anthropic"]).encode())
                .replace(b'"REMOTE"', b'"%s"' % credentials.replace("/", "\\/").encode()))
    lowered = lines[2].lower()
    assert not any(marker in lowered for marker in (b"sk-", b"://", b"key", b"token", b"auth", b"secret"))
    [report] = ingest_native(store, [write_lines(tmp_path / "escaped.jsonl", lines)])
    assert report.result.appended == len(events)
    payload = list(store.events(RUN))[2].payload
    assert payload["note"] == REDACTION_MARKER
    assert payload["remote"] == credentials.replace("Zq8vW3nR5tY7uI9oP1aS", REDACTION_MARKER)
    assert store.run(RUN).redactions == 2


def test_native_runs_without_secrets_record_none(store: EventStore, tmp_path: Path) -> None:
    ingest_native(store, [write_jsonl(tmp_path / "clean.jsonl", small_run())])
    assert store.run(RUN).redactions is None
    assert [e.model_dump() for e in store.events(RUN)] == [e.model_dump() for e in
                                                           __import__("builders").models(small_run())]


def test_redaction_count_moves_only_with_new_events(store: EventStore, tmp_path: Path) -> None:
    events = small_run() + [ev("message", 8, text=f"token={SECRETS['github']}")]
    ingest_native(store, [write_jsonl(tmp_path / "a.jsonl", events[:8])])
    ingest_native(store, [write_jsonl(tmp_path / "b.jsonl", events)])
    assert store.run(RUN).redactions == 1
