"""Reading rule files: YAML (duplicate keys refused) validated into :class:`RuleSet`.

Errors name the file, the line and the field: ``rules.yaml:42: rules[3].target.kind: ...``.
"""

from __future__ import annotations

from pathlib import Path

from procgrade.engine.yaml_documents import parse_document, read_text, validate_document
from procgrade.rules.model import RuleSet

__all__ = ["load_ruleset", "parse_ruleset", "DEFAULT_RULESET"]

DEFAULT_RULESET = Path(__file__).parent / "sets" / "default.yaml"

#: The rule templates' discriminator values, which pydantic puts into error locations.
_TEMPLATE_TAGS = frozenset({
    "count", "existence", "absence", "precedence", "precedence_since", "response", "chain_response",
    "chain_precedence", "no_repeat", "not_coexistence", "satisfies", "distinct",
})


def load_ruleset(path: Path | str | None = None) -> RuleSet:
    """Load a rule set file (default: the built-in ``rules/sets/default.yaml``)."""
    path = Path(path) if path is not None else DEFAULT_RULESET
    return parse_ruleset(read_text(path), str(path))


def parse_ruleset(text: str, source: str) -> RuleSet:
    return validate_document(RuleSet, parse_document(text, source), source, union_tags=_TEMPLATE_TAGS)
