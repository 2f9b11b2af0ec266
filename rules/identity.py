"""Content identity of rules and rule sets: sha256 over RFC 8785 canonical JSON.

A rule is hashed in its normalised form (defaults filled in, lists that are
sets sorted), so two spellings of the same rule hash alike. A rule set's hash
covers its rules plus the engine's template-semantics and fact-extractor
versions: a change to either gives new scores, never silently different ones.
"""

from __future__ import annotations

from typing import Any

from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.rules.model import SEMANTICS, RuleSet

__all__ = ["normalised_rule", "rule_hash", "ruleset_document", "ruleset_hash", "versions_of"]

_SET_KEYS = {"kind", "actor", "present", "absent", "checks"}
_ROLE_KEYS = {"activation", "target", "reset", "deadline", "match", "require", "applies_if"}
#: Fields added after rule set v1 was hashed, with their defaults: left out of a rule's
#: normal form while at the default, so every v1 rule keeps the hash it was stored under.
_LATER_DEFAULTS = {"applies_if": None, "open_at_end": "violated", "not_prefix": {}}


def _as_sorted_set(value: Any) -> list[Any]:
    items = value if isinstance(value, list) else [value]
    return sorted(set(items), key=canonical_json)


def _normalise(value: Any, key: str | None = None) -> Any:
    """One spelling per meaning: scalars where lists are allowed become one-item lists,
    set-like lists are sorted, predicate lists (any-of) are sorted, and the correlation
    shorthand is expanded."""
    if key in _SET_KEYS and value is not None:
        return _as_sorted_set(value)
    if key in ("equals", "prefix", "not_prefix"):
        return {column: _as_sorted_set(wanted) for column, wanted in value.items()}
    if key in _ROLE_KEYS and value is not None:
        predicates = value if isinstance(value, list) else [value]
        return sorted((_normalise(p) for p in predicates), key=canonical_json)
    if key == "correlate" and value is not None:
        corr = {"activation": value, "target": None, "reset": None} if isinstance(value, str) else dict(value)
        corr["target"] = _as_sorted_set(corr.get("target") or corr["activation"])
        return corr
    if key == "compare":
        return sorted((_normalise(c) for c in value), key=canonical_json)
    if isinstance(value, dict):
        return {k: _normalise(v, k) for k, v in value.items()}
    return value


def normalised_rule(rule: Any) -> dict[str, Any]:
    return _normalise(_without_later_defaults(rule.model_dump(mode="json")))


def _without_later_defaults(value: Any) -> Any:
    """Drop fields added after v1 (rules' and predicates') while they hold their default."""
    if isinstance(value, dict):
        return {k: _without_later_defaults(v) for k, v in value.items()
                if not (k in _LATER_DEFAULTS and v == _LATER_DEFAULTS[k])}
    if isinstance(value, list):
        return [_without_later_defaults(v) for v in value]
    return value


def versions_of(ruleset: RuleSet) -> tuple[str, str]:
    """(template semantics, fact-extractor version) the set is evaluated with."""
    version = SEMANTICS[ruleset.semantics]
    return version, version


def rule_hash(rule: Any) -> str:
    return sha256_hex(canonical_json(normalised_rule(rule)))


def ruleset_document(ruleset: RuleSet) -> dict[str, Any]:
    """The canonical body of a rule set as stored and hashed."""
    return {
        "name": ruleset.name,
        "version": ruleset.version,
        "description": ruleset.description,
        "rules": sorted((normalised_rule(r) for r in ruleset.rules), key=lambda r: r["id"]),
        "semantics_version": versions_of(ruleset)[0],
        "extractor_version": versions_of(ruleset)[1],
    }


def ruleset_hash(ruleset: RuleSet) -> str:
    return sha256_hex(canonical_json(ruleset_document(ruleset)))
