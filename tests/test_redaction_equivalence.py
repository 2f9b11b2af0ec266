"""The fast redaction (one Aho-Corasick scan for markers, JSON bytes looked at whole, slow
patterns tried only where a match can start) redacts exactly what the per-string reference
does: same text, same count, for texts and whole records built from secrets, near-misses,
markers, escapes, case variants and the non-ASCII letters that fold to ASCII ones."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import redaction_reference as reference
from procgrade.engine.importers import redaction
from import_checks import FIXTURES

_FRAGMENTS = [
    "sk-proj-abcdefghijklmnopqrstuvwx123", "sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123", "task-", "desk-sk-",
    "AKIAIOSFODNN7EXAMPLE", "ASIA", "ghp_0123456789abcdefghijABCDEFGHIJ0123456789", "github_pat_", "glpat-",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv", "xoxb-123456789012-abcdefghij", "sk_live_0123456789abcdefXYZ",
    "hf_abcdefghijklmnopqrstuvwxyz0123456", "gsk_", "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "private key",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123", "bearer ", "BEARER\t", "Basic dXNlcjpwYXNzd29yZA==",
    "https://user:passw0rd1234@host.example", "http://", "@", "://", "attachment://0e6942290e51cda9", "u\"s:",
    "p\u0001ss", "\u00a0", "\x1c", "ftp://a:b", "wxyz@",
    "OPENAI_API_KEY=a8F7d6S5a4S3d2F1g0H9", "password: 'hunter2hunter2hunter2X9'", 'token": "Zx9Yw8Vu7Ts6Rq5Po4Nm"',
    "\\\"secret\\\": \\\"a1b2c3d4e5f6g7h8i9j0k\\\"", "auth=", "key", "KEY", "Token", "passwd", "api-key:",
    "input_tokens", "keyboard", "monkey", " ", "\n", "\t", "\"", "\\", "=", ":", "-", "_", "/", "0123456789",
    "abcdefghijklmnop", "\u212aey", "\u0130", "\u0131", "\u017fecret", "s\u212a-", "é", "😀", "[REDACTED-SECRET]",
]
_TEXTS = st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join)
_KEYS = st.sampled_from(["api_key", "apiKey", "token", "input_tokens", "password", "AUTH", "name", "text", "\u212aey",
                         "content", "secret_value", "x"])
_RECORDS = st.recursive(
    st.one_of(_TEXTS, st.integers(), st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=16)


@settings(max_examples=500, deadline=None)
@given(_TEXTS)
def test_texts_are_redacted_as_the_reference_redacts_them(text: str) -> None:
    assert redaction.redact_text(text) == reference.redact_text(text)


@settings(max_examples=300, deadline=None)
@given(_RECORDS)
def test_records_are_redacted_as_the_reference_redacts_them(record: Any) -> None:
    fast, slow = redaction.Redactor(), reference.Redactor()
    got, want = fast.value(record), slow.value(record)
    assert json.dumps(got) == json.dumps(want)
    assert fast.count == slow.count


_LINE_STYLES = {
    "compact": lambda record: json.dumps(record, separators=(",", ":"), ensure_ascii=False),
    "spaced": lambda record: json.dumps(record, ensure_ascii=False),
    "indented": lambda record: json.dumps(record, indent=2, ensure_ascii=False),
    "ascii escapes": lambda record: json.dumps(record),
    "escaped slashes": lambda record: json.dumps(record, ensure_ascii=False).replace("/", "\\/"),
}


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_KEYS, _RECORDS, max_size=4), st.sampled_from(sorted(_LINE_STYLES)))
def test_a_line_said_unchanged_is_unchanged_however_it_is_written(record: dict[str, Any], style: str) -> None:
    """Native ingest skips redacting a line :func:`unchanged_json_line` clears from its bytes:
    whatever the writer's blanks and escapes, a cleared line is one the reference leaves alone."""
    if redaction.unchanged_json_line(_LINE_STYLES[style](record).encode()):
        probe = reference.Redactor()
        assert json.dumps(probe.value(record)) == json.dumps(record)
        assert probe.count == 0


@pytest.mark.parametrize("raw, unchanged", [
    (b'{"text":"Next I will fix the handler.","payload":{"role":"assistant","tokens":3114}}', True),
    (b'{"payload": {"api_key": "a8F7d6S5a4S3d2F1g0H9zz"}}', False),  # blanks between a secret's key and value
    (b'{"payload":{"note":"\\u0073k-proj-abcdefghijklmnopqrstuvwx123"}}', False),  # an escape spells "sk-"
    (b'{"remote":"https:\\/\\/deploy:Zq8vW3nR5tY7uI9oP1aS@git.example.test"}', False),
])
def test_lines_cleared_from_their_bytes(raw: bytes, unchanged: bool) -> None:
    assert redaction.unchanged_json_line(raw) is unchanged


def test_a_real_log_is_redacted_as_the_reference_redacts_it() -> None:
    doc = json.loads((FIXTURES / "inspect" / "browser_agent_log.json").read_text())
    records = [doc, *doc["samples"][0]["events"]]
    fast, slow = redaction.Redactor(), reference.Redactor()
    assert [fast.value(r) for r in records] == [slow.value(r) for r in records]
    assert fast.count == slow.count


@pytest.mark.parametrize("record", [
    {"api_key": "a8F7d6S5a4S3d2F1g0H9zz"},
    {"messages": [{"content": "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx123"}]},
    ["curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz123'"],
    {"nested": {"url": "https://user:passw0rd1234@host.example/x"}},
])
def test_records_holding_secrets_are_copied_and_redacted(record: Any) -> None:
    fast = redaction.Redactor()
    got = fast.value(record)
    assert got != record and redaction.REDACTION_MARKER in json.dumps(got) and fast.count >= 1
    assert redaction.REDACTION_MARKER not in json.dumps(record)  # the source record is left as it was


_URL_PIECES = st.lists(st.sampled_from(["https", "attachment", "://", ":", "@", "/", " ", "\n", "\u00a0", "\x1c", "\"",
                                        "\\", "\u0001", "user", "pw0rd1234", "x", "é", "host.example"]),
                       max_size=10).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(["url", "text"]), _URL_PIECES, max_size=2))
def test_links_are_passed_over_only_when_no_credentials_can_follow(record: Any) -> None:
    # ``://`` hits are dropped from the whole-record look when no credentials can follow them
    fast, slow = redaction.Redactor(), reference.Redactor()
    assert json.dumps(fast.value(record)) == json.dumps(slow.value(record))
    assert fast.count == slow.count


@pytest.mark.parametrize("text", ["https://user:pw0rd1234@host.example", "ftp://u\"s:\u0001pw0rd@h", "x://é:éééé@h",
                                  "see attachment://0e69 and https://a:bcde@f", "https://u:abc@h"])
def test_credentials_after_a_link_are_found_whatever_precedes_them(text: str) -> None:
    fast, slow = redaction.Redactor(), reference.Redactor()
    assert fast.value({"text": text}) == slow.value({"text": text})
    assert fast.count == slow.count


_LINE_BYTES = st.lists(st.sampled_from([fragment.encode() for fragment in _FRAGMENTS if "\n" not in fragment]
                                      + [b"\r", b"{", b"}", b"\"", b"\\u0073", b"\\/", b"\xff", b"\xc4"]),
                       max_size=10).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.dictionaries(_KEYS, _RECORDS, max_size=3), st.sampled_from(sorted(_LINE_STYLES))).map(
        lambda pair: _LINE_STYLES[pair[1]](pair[0]).replace("\n", " ").encode()),
    _LINE_BYTES), max_size=12))
def test_a_block_of_lines_clears_only_lines_the_per_line_scan_clears(lines: list[bytes]) -> None:
    """Native ingest scans a block of lines at once (:func:`unchanged_json_lines`): a line it
    clears is one the per-line scan clears, whatever its neighbours hold (no marker spans two
    lines); for any other it hands on what the per-line scan of that line alone finds (the same
    markers, the same unsure answer), and the per-line look at those gives the per-line answer.
    Bytes that are not JSON never raise: the block is scanned before any line is validated."""
    flags = redaction.unchanged_json_lines(lines)
    assert len(flags) == len(lines)
    for line, flag in zip(lines, flags):
        alone = redaction._line_marker_hits(line.lower())
        if flag is True:
            assert alone == ([], False)
            assert redaction.unchanged_json_line(line) is True
            continue
        markers, unsure = flag
        assert (sorted(markers), unsure) == (sorted(alone[0]), alone[1]) and (markers or unsure)
        if _valid_json(line):
            assert redaction.unchanged_json_line(line, flag) is redaction.unchanged_json_line(line)


def _valid_json(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def test_a_marker_split_across_two_lines_is_not_found() -> None:
    """``s`` ending one line and ``k-...`` starting the next are no ``sk-``: both lines are clear;
    a cut-off line holding a marker is left to the per-line look, never parsed here."""
    lines = [b'{"a":"s', b'k-proj-abcdefghijklmnopqrstuvwx123"}', b'{"note":"\\u0073k-proj-abcdefghijklmnopqrstuvwx"}',
             b"", b'{"text": "the token']
    flags = redaction.unchanged_json_lines(lines)
    assert [flag is True for flag in flags] == [True, True, False, True, False]
    assert flags[2] == ([], True) and flags[4] == ([len(b'{"text": "the ')], False)  # an escape; "token"
    assert redaction.unchanged_json_lines([]) == []


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from([b'"', b"\\", b"u", b"0", b"a", b"F", b"\n", b"\x01", b"\xc3\xa9", b"x", b":"]),
                max_size=24).map(b"".join), st.integers(0, 3))
def test_the_string_scanner_ends_a_string_where_the_pattern_does(tail: bytes, lead: int) -> None:
    """:func:`_after_string` reads strings with the standard library's scanner where it can, and
    ends each exactly where the unrolled pattern does: valid escapes or not, left open or not,
    with bytes of UTF-8 text, control characters and the quotes and colons that follow."""
    blob = b"x" * lead + b'"' + tail
    expected = redaction._JSON_STRING.match(blob, lead)
    assert redaction._after_string(blob, blob.decode("latin-1"), lead) == \
        (expected.end() if expected is not None else len(blob))
