"""Content identity of rules and rule sets: sha256 over RFC 8785 canonical JSON.

A rule is hashed in its normalised form (defaults filled in, lists that are
sets sorted), so two spellings of the same rule hash alike. A rule set's hash
covers its rules plus the engine's template-semantics and fact-extractor
versions: a change to either gives new scores, never silently different ones.
"""

from __future__ import annotations

from typing import Any

from engine.canonical import canonical_json, sha256_hex
from engine.facts import EXTRACTOR_VERSION
from rules.model import RuleSet
from rules.monitor import SEMANTICS_VERSION

__all__ = ["normalised_rule", "rule_hash", "ruleset_document", "ruleset_hash"]

# Keys whose list values are sets (their order carries no meaning).
_SET_LISTS = {"kind", "actor", "present", "absent", "checks"}


def _normalise(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [_normalise(v) for v in value]
        if key in _SET_LISTS or key in ("equals", "prefix") or all(not isinstance(i, (dict, list)) for i in items):
            return sorted(set(items), key=lambda i: canonical_json(i))
        # lists of predicates (any-of) and comparisons: order-free as well
        return sorted(items, key=canonical_json)
    return value


def normalised_rule(rule: Any) -> dict[str, Any]:
    return _normalise(rule.model_dump(mode="json"))


def rule_hash(rule: Any) -> str:
    return sha256_hex(canonical_json(normalised_rule(rule)))


def ruleset_document(ruleset: RuleSet) -> dict[str, Any]:
    """The canonical body of a rule set as stored and hashed."""
    return {
        "name": ruleset.name,
        "version": ruleset.version,
        "description": ruleset.description,
        "rules": sorted((normalised_rule(r) for r in ruleset.rules), key=lambda r: r["id"]),
        "semantics_version": SEMANTICS_VERSION,
        "extractor_version": EXTRACTOR_VERSION,
    }


def ruleset_hash(ruleset: RuleSet) -> str:
    return sha256_hex(canonical_json(ruleset_document(ruleset)))
