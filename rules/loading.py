"""Reading rule files: YAML (duplicate keys refused) validated into :class:`RuleSet`.

Errors name the file, the line and the field: ``rules.yaml:42: rules[3].target.kind: ...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from procgrade.engine.errors import InputError
from procgrade.rules.model import RuleSet

__all__ = ["load_ruleset", "parse_ruleset", "DEFAULT_RULESET"]

DEFAULT_RULESET = Path(__file__).parent / "sets" / "default.yaml"


def load_ruleset(path: Path | str | None = None) -> RuleSet:
    """Load a rule set file (default: the built-in ``rules/sets/default.yaml``)."""
    path = Path(path) if path is not None else DEFAULT_RULESET
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), None, None, f"cannot read: {exc}") from exc
    return parse_ruleset(text, str(path))


def parse_ruleset(text: str, source: str) -> RuleSet:
    yaml = YAML(typ="rt")  # round-trip: keeps line numbers; refuses duplicate keys
    yaml.allow_duplicate_keys = False
    try:
        document = yaml.load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(source, line, None, " ".join(str(exc).split())) from None
    try:
        return RuleSet.model_validate(_plain(document))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = _without_union_tags(error["loc"])
        reason = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            reason = "unknown field"
        return_line = _line_of(document, loc)
        raise InputError(source, return_line, _dotted(loc) or None, reason) from None


def _plain(node: Any) -> Any:
    """ruamel's round-trip containers as plain dicts and lists (strict models need them)."""
    if isinstance(node, CommentedMap):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [_plain(v) for v in node]
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if type(node).__module__.startswith("ruamel"):
        # ScalarFloat, ScalarInt, ScalarBoolean, ...: the plain Python value
        for plain in (bool, int, float, str):
            if isinstance(node, plain):
                return plain(node)
    return node


_TEMPLATE_TAGS = {
    "count", "existence", "absence", "precedence", "precedence_since", "response", "chain_response",
    "chain_precedence", "no_repeat", "not_coexistence", "satisfies", "distinct",
}


def _without_union_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop pydantic's union member names (``precedence``, ``Predicate``, ``list[...]``) from a location."""
    kept = []
    for part in loc:
        if isinstance(part, str) and (part in _TEMPLATE_TAGS or part[:1].isupper() or "[" in part
                                      or part in ("str", "int")):
            continue
        kept.append(part)
    return tuple(kept)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(document: Any, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the deepest node on ``loc`` that the YAML document knows."""
    node, line = document, None
    if hasattr(node, "lc"):
        line = node.lc.line + 1
    for part in loc:
        try:
            if isinstance(node, CommentedMap) and part in node:
                line = node.lc.data[part][0] + 1
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
                line = node.lc.data[part][0] + 1
                node = node[part]
            else:
                break
        except (KeyError, IndexError, AttributeError, TypeError):
            break
    return line
