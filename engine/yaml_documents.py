"""YAML files the user writes (rule sets, rubrics, browser plans) validated into strict models.

Every such file is read the same way so that every mistake is reported the same way: duplicate
keys are refused, and a YAML or validation error names the file, the line and the field
(``rules.yaml:42: rules[3].target.kind: unknown field``). The round-trip loader is used because
it remembers where each node came from; :func:`plain` turns its containers into the dicts and
lists strict pydantic models accept.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from procgrade.engine.errors import InputError

__all__ = ["dotted", "line_of", "load_model", "parse_document", "plain", "read_text", "validate_document",
           "without_union_tags"]

Model = TypeVar("Model", bound=BaseModel)


def read_text(path: Path, source: str | None = None) -> str:
    """The file's UTF-8 text; an unreadable file is an ``InputError`` naming ``source`` (default: the path)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source or str(path), None, None, f"cannot read: {exc}") from exc


def parse_document(text: str, source: str) -> Any:
    """The YAML document in ``text`` with its line numbers; duplicate keys and syntax errors are
    an ``InputError`` at the offending line."""
    yaml = YAML(typ="rt")  # round-trip: keeps line numbers; refuses duplicate keys
    yaml.allow_duplicate_keys = False
    try:
        return yaml.load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(source, mark.line + 1 if mark is not None else None, None, " ".join(str(exc).split())) from None


def validate_document(model: type[Model], document: Any, source: str, *,
                      union_tags: Collection[str] = ()) -> Model:
    """``document`` validated into ``model``; the first error is an ``InputError`` at its line and
    dotted field. ``union_tags`` are the discriminator values pydantic puts into error locations
    for the model's tagged unions (they are no field of the file, so they are left out)."""
    try:
        return model.model_validate(plain(document))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = without_union_tags(error["loc"], union_tags)
        reason = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            reason = "unknown field"
        raise InputError(source, line_of(document, loc), dotted(loc) or None, reason) from None


def load_model(path: Path, model: type[Model], *, not_a_mapping: str = "must be a YAML mapping",
               union_tags: Collection[str] = ()) -> Model:
    """Read, parse and validate one YAML file whose top level must be a mapping."""
    document = parse_document(read_text(path), str(path))
    if not isinstance(document, dict):
        raise InputError(str(path), None, None, not_a_mapping)
    return validate_document(model, document, str(path), union_tags=union_tags)


def plain(node: Any) -> Any:
    """ruamel's round-trip containers as plain dicts and lists (strict models need them)."""
    if isinstance(node, CommentedMap):
        return {str(k) if not isinstance(k, str) else k: plain(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [plain(v) for v in node]
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if type(node).__module__.startswith("ruamel"):
        # ScalarFloat, ScalarInt, ScalarBoolean, ...: the plain Python value
        for kind in (bool, int, float, str):
            if isinstance(node, kind):
                return kind(node)
    return node


def without_union_tags(loc: tuple[Any, ...], union_tags: Collection[str] = ()) -> tuple[Any, ...]:
    """Drop pydantic's union member names from a location: class names (``Predicate``), generic
    types (``list[...]``), ``str``/``int`` members, and the discriminator values ``union_tags``."""
    kept = []
    for part in loc:
        if isinstance(part, str) and (part in union_tags or part[:1].isupper() or "[" in part
                                      or part in ("str", "int")):
            continue
        kept.append(part)
    return tuple(kept)


def dotted(loc: tuple[Any, ...]) -> str:
    """A location as the user writes it: ``rules[3].target.kind``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def line_of(document: Any, loc: tuple[Any, ...]) -> int | None:
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
