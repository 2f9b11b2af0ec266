"""Secrets never reach the store: API keys, bearer tokens and private keys are replaced
by a fixed marker in every string of a source record before anything is built from it.

Harness logs hold whatever the agent saw: ``env`` output, ``.env`` files it read,
``curl -H "Authorization: Bearer ..."`` commands. The patterns cover the common
providers' key formats plus high-entropy values assigned to names that say they
are secret (``OPENAI_API_KEY=...``, ``"token": "..."``). Redaction runs before the
payload is hashed, so the same source always gives the same stored bytes, and
the number of replacements is recorded on the run.
"""

from __future__ import annotations

import functools
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate
from json.decoder import scanstring
from typing import Any

import orjson

__all__ = ["REDACTION_MARKER", "LineHits", "Redactor", "redact_text", "shannon_entropy", "unchanged_json",
           "unchanged_json_line", "unchanged_json_lines"]

#: What every secret is replaced by. Fixed, so re-imports store the same bytes.
REDACTION_MARKER = "[REDACTED-SECRET]"

# Provider key formats: each match is a whole secret.
_TOKEN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("anthropic", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ("github", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("gitlab", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("google", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("slack", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("stripe", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("huggingface", r"\bhf_[A-Za-z0-9]{30,}"),
    ("groq", r"\bgsk_[A-Za-z0-9]{40,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
)
_TOKENS = re.compile("|".join(f"(?:{pattern})" for _, pattern in _TOKEN_PATTERNS))
# Where a match of ``_TOKENS`` can start: each alternative's first literal characters. They are
# found with one Aho-Corasick scan; ``re`` tries ``_TOKENS`` itself (``\b`` then an alternation)
# at every position of the text.
_TOKEN_STARTS = ("-----BEGIN ", "sk-", "AKIA", "ASIA", "ABIA", "ACCA", *(f"gh{c}_" for c in "pousr"), "github_pat_",
                 "glpat-", "AIza", *(f"xox{c}-" for c in "abposr"), "sk_", "rk_", "hf_", "gsk_", "eyJ")

# "Bearer <token>" (Authorization headers), whatever the token looks like.
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=-]{16,})")
# "Authorization: Basic <base64>" and credentials in URLs (scheme://user:password@host).
_BASIC = re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{12,}={0,2})")
_URL_CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)([^/\s@]{4,})(?=@)")

# NAME=value / NAME: value / "name": "value" where the name says secret.
_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key|private[_-]?key|auth)[A-Za-z0-9_.-]*"
# Matched from the secret word on (what precedes it in the name does not change the verdict):
# a leading ``[A-Za-z0-9_.-]*`` would be retried at every position of long outputs.
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<name>(?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key|private[_-]?key|auth)
             [A-Za-z0-9_.-]*(?:\\*["'])?\s*[=:]\s*(?:\\*["'])?)
    (?P<value>(?<=["'])[^\s"'\\]{16,}|[A-Za-z0-9_+/=.~-]{16,})
    """
)
_SECRET_KEY = re.compile(r"(?i)^" + _SECRET_NAME + r"$")

#: Bits per character above which an assigned value counts as a secret, not a word.
ENTROPY_THRESHOLD = 3.5


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s character distribution."""
    if not value:
        return 0.0
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _looks_secret(value: str) -> bool:
    if REDACTION_MARKER in value:
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and shannon_entropy(value) >= ENTROPY_THRESHOLD


def redact_text(text: str) -> tuple[str, int]:
    """``text`` with every secret replaced by the marker, and how many were replaced."""
    count = 0

    def token(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return REDACTION_MARKER

    def bearer(match: re.Match[str]) -> str:
        nonlocal count
        if REDACTION_MARKER in match.group(2):
            return match.group(0)
        count += 1
        return match.group(1) + REDACTION_MARKER

    def assignment(match: re.Match[str]) -> str:
        nonlocal count
        if not _looks_secret(match.group("value")):
            return match.group(0)
        count += 1
        return match.group("name") + REDACTION_MARKER

    present = _markers_present(text.lower())  # one scan says which families are worth running
    if not present.isdisjoint(_TOKEN_MARKERS):
        text = _sub_at(_TOKENS, _find_token_starts, text, token)
    if "bearer" in present:
        text = _sub_at(_BEARER, _find_bearer_starts, text, bearer, folded=True)
    if "basic" in present:
        text = _sub_at(_BASIC, _find_basic_starts, text, bearer, folded=True)
    if "://" in text and "@" in text:  # the credentials end where the host begins, at an "@"
        text = _URL_CREDENTIALS.sub(bearer, text)
    if not present.isdisjoint(_NAME_WORDS):
        text = _sub_at(_ASSIGNMENT, _find_assignment_starts, text, assignment, folded=True)
    return text, count


# Where matches of the case-insensitive patterns can start, in the lower-cased text.
_BEARER_STARTS = ("bearer",)
_BASIC_STARTS = ("basic",)
_ASSIGNMENT_STARTS = ("api", "secret", "token", "passw", "access", "private", "auth")
# The non-ASCII letters ``re``'s IGNORECASE matches to ASCII ones (documented for ``[a-z]``).
_FOLDS_TO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")


def _finder(literals: tuple[str, ...]) -> Any:
    """Every position (sorted) where one of ``literals`` starts in a text, overlapping ones too."""
    try:
        import ahocorasick_rs
    except ImportError:  # pragma: no cover
        anywhere = re.compile("(?=(?:" + "|".join(re.escape(literal) for literal in literals) + "))")
        return lambda text: [m.start() for m in anywhere.finditer(text)]
    automaton = ahocorasick_rs.AhoCorasick(list(literals))
    return lambda text: sorted({start for _, start, _ in automaton.find_matches_as_indexes(text, overlapping=True)})


def _sub_at(pattern: re.Pattern[str], starts: Any, text: str, replace: Any, *, folded: bool = False) -> str:
    """``pattern.sub(replace, text)``, trying ``pattern`` only where ``starts`` finds a place a
    match of it can begin (the same leftmost, non-overlapping matches, found much faster: ``re``
    scans for a literal quickly, but tries a pattern that opens with ``\b``, an alternation or
    ``(?i)`` at every position). With ``folded``, ``starts`` is looked for in the lower-cased
    text, for a case-insensitive ``pattern``; that is exact while lower-casing keeps every
    position and no character that ``(?i)`` matches to an ASCII letter is there but those
    letters themselves (``İ ı ſ K`` are), else ``pattern.sub`` itself runs."""
    if folded:
        where = text.lower()
        if not text.isascii() and (len(where) != len(text) or any(c in text for c in _FOLDS_TO_ASCII)):
            return pattern.sub(replace, text)
    else:
        where = text
    pieces: list[str] = []
    position = last = 0
    for at in starts(where):
        if at < position:  # inside the last match
            continue
        match = pattern.match(text, at)
        if match is None:
            continue
        pieces.append(text[last:match.start()])
        pieces.append(replace(match))
        last = position = match.end()
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


class Redactor:
    """Redacts whole JSON values (records) and keeps the running count for one run."""

    def __init__(self) -> None:
        self.count = 0

    def text(self, value: str) -> str:
        redacted, found = redact_text(value)
        self.count += found
        return redacted

    def value(self, value: Any) -> Any:
        """``value`` with every string redacted (a copy where anything changed); a string under a
        key that names a secret (``"api_key": "..."``) is redacted whole when it looks like one.

        A record is first looked at whole, as JSON bytes (one C-level pass): most hold no
        marker any rule needs, and are then returned as they are, unwalked."""
        if isinstance(value, (dict, list)) and _unchanged(value):
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value) if _may_hold_secret(value) else value
        if isinstance(value, dict):
            result = {}
            for key, item in value.items():
                if isinstance(item, str):
                    if len(item) >= _SHORTEST_SECRET:
                        if len(item) >= 16 and isinstance(key, str) and _is_secret_key(key) and _looks_secret(item):
                            self.count += 1
                            item = REDACTION_MARKER
                        elif _marker_in(item.lower()):
                            item = self.text(item)
                    result[key] = item
                elif isinstance(item, (dict, list)):
                    result[key] = self._walk(item)
                else:
                    result[key] = item
            return result
        if isinstance(value, list):
            return [self._walk(item) if isinstance(item, (str, dict, list)) else item for item in value]
        return value


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    return _SECRET_KEY.match(key) is not None


# Characters whose lower case (``str.lower``) or ``(?i)`` match is an ASCII letter of a marker
# while their UTF-8 bytes are not: ``İ``, ``ı``, ``ſ``, the Kelvin sign.
_UNFOLDED = (b"\xc4\xb0", b"\xc4\xb1", b"\xc5\xbf", b"\xe2\x84\xaa")


def _unchanged(value: Any) -> bool:
    """Whether redacting ``value`` would change nothing, decided from its JSON bytes (orjson)
    without walking it (:func:`unchanged_json`). False (walk it) when unsure."""
    try:
        blob = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return unchanged_json(blob)


def unchanged_json(blob: bytes) -> bool:
    """Whether redacting the value orjson wrote as ``blob`` would change nothing: most records
    hold no marker any rule needs, and where markers are, only the strings holding them are
    looked at. False when unsure.

    Sound because every rule needs a marker in the (lower-cased) string it changes, a key
    naming a secret holds one too, and markers hold no character orjson escapes: a marker in a
    string is a marker in its JSON token (an escape can only add false hits, which cost a look).
    Lower-casing bytes folds ASCII only; the few other letters that fold to ASCII answer False."""
    return _unchanged_text(blob, _marker_hits)


def unchanged_json_line(line: bytes, found: LineHits | None = None) -> bool:
    """:func:`unchanged_json` for JSON text others wrote (blanks around colons, any escapes):
    False too where an escape may spell a marker's letter or ``/`` (``\\u0073k-`` is ``sk-``).
    ``found``: what :func:`unchanged_json_lines` found in the line, which is then not scanned again."""
    hits, unsure = _line_marker_hits(line.lower()) if found is None else found
    return not unsure and _hits_unchanged(line, hits)


#: What the marker scan finds in one line: (where markers start, overlapping ones included,
#: whether the line holds a sequence that may hide one: an escape, a letter that folds).
LineHits = tuple[list[int], bool]


def unchanged_json_lines(lines: Sequence[bytes]) -> list[bool | LineHits]:
    """For each of ``lines`` (JSON lines without their newline): True where one scan of them all
    finds no marker and no unsure sequence (redacting it would change nothing), else what it
    found in that line (the per-line scan's answer), which :func:`unchanged_json_line` must look
    at, once the line is known to be valid JSON (its look parses parts of it). Most lines hold
    nothing, and one scan of a block costs what a few scans of single lines do. No marker or
    unsure sequence holds a newline, so none found in the joined text spans two lines."""
    flags: list[bool | LineHits] = [True] * len(lines)
    found = _line_matches(b"\n".join(lines).lower())
    if found:
        ends = list(accumulate(len(line) + 1 for line in lines))  # where each line's successor starts
        markers, unsure = len(_MARKERS), set()
        hits: dict[int, list[int]] = {}
        for pattern, start, _ in found:
            at = bisect_right(ends, start)
            if at not in hits:
                hits[at] = []
            if pattern < markers:
                hits[at].append(start - (ends[at - 1] if at else 0))
            else:
                unsure.add(at)
        for at, starts in hits.items():
            flags[at] = (starts, at in unsure)
    return flags


def _unchanged_text(blob: bytes, marker_hits: Any) -> bool:
    hits, unsure = marker_hits(blob.lower())  # (``lower`` keeps non-ASCII bytes as they are)
    return not unsure and _hits_unchanged(blob, hits)


def _hits_unchanged(blob: bytes, hits: list[int]) -> bool:
    """:func:`_unchanged_text` once the scan found ``hits`` (where markers start in ``blob``
    lower-cased, which has its length) and nothing unsure: only the strings holding them are
    looked at. ``://`` and the credentials that may follow it are found in ``blob`` itself:
    neither holds a letter, so lower-casing changes nothing they match (a hit's line is not
    lower-cased again)."""
    if not hits:
        return True
    end = 0
    text = None  # ``blob`` as Latin-1 text, for the string scanner (:func:`_after_string`)
    for position in sorted(hits):
        if position < end:  # in the string just looked at
            continue
        if blob[position:position + 3] == b"://" and _url_credentials_at(blob, position) is None:
            continue  # a link or an ``attachment://`` reference: no credentials can follow (see below)
        start = _opening_quote(blob, position)
        if start < 0:
            return False
        if text is None:
            text = blob.decode("latin-1")
        end = _after_string(blob, text, start)
        colon = _KEY_COLON.match(blob, end)
        if colon is not None:  # a key: its rule looks at the string it holds
            value_at = colon.end()
            if not _key_names_secret(blob[start:end]) or blob[value_at:value_at + 1] != b'"':
                continue
            held = orjson.loads(blob[value_at:_after_string(blob, text, value_at)])
            if len(held) >= 16 and _looks_secret(held):
                return False
        elif _string_changes(blob[start:end]):
            return False
    return True


def _key_names_secret(token: bytes) -> bool:
    """Whether the JSON string ``token``, a key, names a secret; remembered for short keys (a log
    repeats its few keys: ``"tokens"`` holds the marker ``token`` in every model call's usage)."""
    known = _key_verdicts.get(token)
    if known is None:
        known = _is_secret_key(orjson.loads(token))
        if len(token) <= 256:  # so the memory holds at most 4096 short keys
            if len(_key_verdicts) >= 4096:
                _key_verdicts.clear()
            _key_verdicts[token] = known
    return known


_key_verdicts: dict[bytes, bool] = {}


# What follows a key in JSON text: blanks, a colon, blanks (orjson writes the colon alone).
_KEY_COLON = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*")


# What must follow a ``://`` for ``_URL_CREDENTIALS`` to match there, in JSON bytes: its classes
# hold every byte of the JSON spelling of every character the text's classes hold (an escaped
# ``\"``, ``\\`` or ``\u0001``; UTF-8 bytes; bytes ``\s`` is ASCII only, narrower than text
# ``\s``), so no match here means none in the string. The only rule ``://`` is a marker of.
_url_credentials_at = re.compile(rb"://[^/\s:@]+:[^/\s@]{4,}@").match


def _string_changes(token: bytes) -> bool:
    """Whether redaction changes the JSON string ``token``. Remembered (up to
    :data:`_VERDICT_BYTES` of tokens): a transcript repeats its strings (every model call carries
    the conversation so far), and the answer is the same."""
    global _verdict_bytes
    known = _verdicts.get(token)
    if known is not None:
        return known
    text = orjson.loads(token)
    verdict = len(text) >= _SHORTEST_SECRET and redact_text(text)[1] > 0
    if _verdict_bytes + len(token) > _VERDICT_BYTES:
        _verdicts.clear()
        _verdict_bytes = 0
    _verdicts[token] = verdict
    _verdict_bytes += len(token)
    return verdict


_verdicts: dict[bytes, bool] = {}
_verdict_bytes = 0
_VERDICT_BYTES = 16 << 20


def _escaped(blob: bytes, quote: int) -> bool:
    """Whether the ``"`` at ``quote`` follows an odd run of backslashes (is inside a string)."""
    before = quote
    while before and blob[before - 1] == 0x5C:
        before -= 1
    return (quote - before) % 2 == 1


def _opening_quote(blob: bytes, position: int) -> int:
    """The opening quote of the JSON string holding ``position`` (a marker, so inside a string:
    inside one every ``"`` is escaped; the first bare one before is where it opens), or -1."""
    quote = position
    while True:
        quote = blob.rfind(b'"', 0, quote)
        if quote < 0 or not _escaped(blob, quote):
            return quote


def _after_string(blob: bytes, text: str, opening: int) -> int:
    """Where the JSON string opening at ``opening`` ends (after its closing quote). ``text`` is
    ``blob`` decoded as Latin-1 (a character a byte: the offsets agree), which the standard
    library's JSON string scanner reads four to five times faster than ``re`` matches
    :data:`_JSON_STRING` (strings of 10 KB: 16-25 us against 88-93; the decoding, 13 us for a
    400 KB sample, is done once a text). Where it stops at what JSON does not allow (an unknown
    escape, a string left open), the pattern decides, as it always did: where both read a
    string, both end it at its first unescaped quote."""
    try:
        return scanstring(text, opening + 1, False)[1]
    except ValueError:
        found = _JSON_STRING.match(blob, opening)
        return found.end() if found is not None else len(blob)


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


# What each family of patterns needs in the (lower-cased) text before its regex is worth running.
_TOKEN_MARKERS = ("sk-", "sk_", "rk_", "akia", "asia", "abia", "acca", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                  "github_pat_", "glpat-", "aiza", "xox", "hf_", "gsk_", "eyj", "private key")
_NAME_WORDS = ("key", "secret", "token", "passw", "auth")

# Every pattern above needs one of these (lower-cased) in the string, and at least this many
# characters: a string without them is left alone without running the regexes (most are).
_MARKERS = ("sk-", "sk_", "rk_", "akia", "asia", "abia", "acca", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
            "github_pat_", "glpat-", "aiza", "xox", "hf_", "gsk_", "eyj", "private key", "bearer", "basic", "://", "key",
            "secret", "token", "passw", "auth")
_SHORTEST_SECRET = 15  # "xoxb-" and ten characters


# One alternation over the lower-cased text: a single scan (``re.I`` or a loop of ``in`` is slower).
_ANY_MARKER = re.compile("|".join(re.escape(marker) for marker in _MARKERS))
_ANY_MARKER_BYTES = re.compile("|".join(re.escape(marker) for marker in _MARKERS).encode())


def _scanner() -> Any:
    """Finds any marker in lower-cased UTF-8 bytes: an Aho-Corasick automaton (ahocorasick-rs,
    about ten times faster than ``re``'s alternation, which tries it at every position), or
    that alternation where the library is missing. Markers are ASCII, and UTF-8 spells ASCII
    characters with ASCII bytes only, so a marker is in a text iff it is in its bytes."""
    try:
        import ahocorasick_rs
    except ImportError:  # pragma: no cover - a dependency; the regex gives the same answers
        return lambda data: _ANY_MARKER_BYTES.search(data) is not None
    automaton = ahocorasick_rs.BytesAhoCorasick([marker.encode() for marker in _MARKERS])
    return lambda data: bool(automaton.find_matches_as_indexes(data))


_has_marker = _scanner()


def _hits_scanner(unsure: tuple[bytes, ...]) -> tuple[Any, Any]:
    """Two scans of lower-cased UTF-8 bytes, for markers and for ``unsure`` sequences (that may
    hide a marker): (where markers start, overlapping ones included, and whether the bytes hold
    an unsure sequence); and every match, overlapping ones included, as (pattern, start, end),
    the pattern a marker when below ``len(_MARKERS)`` (the end is not always given)."""
    try:
        import ahocorasick_rs
    except ImportError:  # pragma: no cover
        markers_only = re.compile(b"(?=(" + _ANY_MARKER_BYTES.pattern + b"))")
        unsure_only = re.compile(b"|".join(map(re.escape, unsure)))

        def scan_without_library(data: bytes) -> tuple[list[int], bool]:
            return [m.start() for m in markers_only.finditer(data)], unsure_only.search(data) is not None

        def matches_without_library(data: bytes) -> list[tuple[int, int, int]]:
            return [(0, m.start(), 0) for m in markers_only.finditer(data)] + \
                [(len(_MARKERS), m.start(), 0) for m in unsure_only.finditer(data)]

        return scan_without_library, matches_without_library
    automaton = ahocorasick_rs.BytesAhoCorasick([marker.encode() for marker in _MARKERS] + list(unsure))
    markers = len(_MARKERS)

    def scan(data: bytes) -> tuple[list[int], bool]:
        found = automaton.find_matches_as_indexes(data, overlapping=True)
        hits = [start for index, start, _ in found if index < markers]
        return hits, len(hits) != len(found)

    def matches(data: bytes) -> list[tuple[int, int, int]]:
        return automaton.find_matches_as_indexes(data, overlapping=True)

    return scan, matches


_marker_hits = _hits_scanner(_UNFOLDED)[0]
#: Escapes that may spell a marker's letter or ``/`` in JSON text orjson did not write.
_LETTER_ESCAPES = (b"\\u", b"\\/")
_line_marker_hits, _line_matches = _hits_scanner(_UNFOLDED + _LETTER_ESCAPES)


def _present_scanner() -> Any:
    """Which markers lower-cased text holds (overlapping ones included), in one scan."""
    try:
        import ahocorasick_rs
    except ImportError:  # pragma: no cover
        return lambda lowered: {marker for marker in _MARKERS if marker in lowered}
    automaton = ahocorasick_rs.BytesAhoCorasick([marker.encode() for marker in _MARKERS])
    return lambda lowered: {_MARKERS[index] for index, _, _ in automaton.find_matches_as_indexes(
        lowered.encode("utf-8", "surrogatepass"), overlapping=True)}


_markers_present = _present_scanner()


def _marker_in(lowered: str) -> bool:
    """Whether lower-cased text holds a marker."""
    return _has_marker(lowered.encode("utf-8", "surrogatepass"))


def _may_hold_secret(text: str) -> bool:
    if len(text) < _SHORTEST_SECRET:
        return False
    return _marker_in(text.lower())


# The finders of the places where the slow patterns can start (made once, at import).
_find_token_starts = _finder(_TOKEN_STARTS)
_find_bearer_starts = _finder(_BEARER_STARTS)
_find_basic_starts = _finder(_BASIC_STARTS)
_find_assignment_starts = _finder(_ASSIGNMENT_STARTS)
