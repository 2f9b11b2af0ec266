"""Score documents stored as their rule set's template and the run's own values.

Of a 7.8 KB score document under the built-in rule set, 6.9 KB (rule ids and hashes, their
templates, the formula) is the same in every run scored under that rule set: re-scoring 10,000
runs wrote 78 MB of it. The store keeps that text once, in ``score_templates`` under its sha256,
and per run only the values that fill its slots (about 1 KB), joined by U+001F: canonical JSON
escapes every control character, so no value holds one.

What a reader gets is the document, to the byte: the scorer makes the document and the values
from the same fill, and ``verify`` holds what a reader gets to the row's ``document_sha256``. A
document made any other way (the reference path, ``score_runs``) is stored whole, as every
document was before revision 0007.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from procgrade.engine.canonical import sha256_hex
from procgrade.engine.errors import StoreError

__all__ = ["SEPARATOR", "ScoreTemplate", "ScoreFill", "pack", "unpack"]

#: Between a document's values in its stored row.
SEPARATOR = "\x1f"


@dataclass(frozen=True)
class ScoreTemplate:
    """A score document's text with ``%s`` wherever a run's values go (``%%`` a literal ``%``)."""

    sha256: str
    text: str
    slots: int

    @classmethod
    def of(cls, text: bytes | str) -> "ScoreTemplate":
        raw = text.encode() if isinstance(text, str) else text
        decoded = raw.decode()
        return cls(sha256_hex(raw), decoded, decoded.replace("%%", "").count("%s"))


@dataclass(frozen=True)
class ScoreFill:
    """A document as ``template`` and the values of its slots (``values``, joined by :data:`SEPARATOR`)."""

    template: ScoreTemplate
    values: str


def pack(fill: ScoreFill) -> str | None:
    """What the row stores of a document made as ``fill``: its values, or None when they are not
    one per slot (a value holding the separator; the row then stores the document whole). That
    they fill the template into the document is the scorer's to keep (:meth:`RunScorer.filled`
    makes both from the same values; tests hold them to it): checking it here would cost each
    row a second fill, 11 us, half of what the shorter row saves."""
    values = fill.values
    return values if values.count(SEPARATOR) == fill.template.slots - 1 else None


def unpack(template: ScoreTemplate, values: str, *, run_id: str) -> str:
    """The document a row stores as ``values`` of ``template``; :class:`StoreError` naming the run
    and the template when they do not fit (a row or template changed behind the store's back)."""
    parts = values.split(SEPARATOR)
    problem: Any = None
    if len(parts) != template.slots:
        problem = f"{len(parts)} values for its {template.slots} slots"
    else:
        try:
            return template.text % tuple(parts)
        except (TypeError, ValueError) as exc:
            problem = exc
    raise StoreError(f"run {run_id}: the stored score does not fill its template {template.sha256[:16]}: {problem}")
