"""The redaction rules as they were written before they were made fast (engine/importers/redaction.py
at the start of issue 16): a per-string, regex-per-family reference that the fast version must
agree with, result for result and count for count (tests/test_redaction_equivalence.py)."""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any


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

    lowered = text.lower()
    if any(marker in lowered for marker in _TOKEN_MARKERS):
        text = _TOKENS.sub(token, text)
    if "bearer" in lowered:
        text = _BEARER.sub(bearer, text)
    if "basic" in lowered:
        text = _BASIC.sub(bearer, text)
    if "://" in text:
        text = _URL_CREDENTIALS.sub(bearer, text)
    if any(word in lowered for word in _NAME_WORDS):
        text = _ASSIGNMENT.sub(assignment, text)
    return text, count


class Redactor:
    """Redacts whole JSON values (records) and keeps the running count for one run."""

    def __init__(self) -> None:
        self.count = 0

    def text(self, value: str) -> str:
        redacted, found = redact_text(value)
        self.count += found
        return redacted

    def value(self, value: Any) -> Any:
        """A copy of ``value`` with every string redacted; a string under a key that names
        a secret (``"api_key": "..."``) is redacted whole when it looks like one."""
        if isinstance(value, str):
            return self.text(value) if _may_hold_secret(value) else value
        if isinstance(value, dict):
            result = {}
            for key, item in value.items():
                if isinstance(item, str) and isinstance(key, str) and _SECRET_KEY.match(key) and _looks_secret(item) and len(item) >= 16:
                    self.count += 1
                    result[key] = REDACTION_MARKER
                else:
                    result[key] = self.value(item)
            return result
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value


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


def _may_hold_secret(text: str) -> bool:
    if len(text) < _SHORTEST_SECRET:
        return False
    return _ANY_MARKER.search(text.lower()) is not None
