"""Annotator designs: which grade of an item a comparison reads, and why an item is left out.

An annotation study grades each item (run, layer, item, round) by one or more graders: people
(``human:<id>``) and judges (``judge:<model>``). What ``calibrate --reference/--candidate`` name:

* a **grader**: an actor (``human:alice``, ``judge:gpt-4o``) or a sheet name;
* a **set**: ``human`` or ``judge`` (every actor of that class); an item several of them graded is
  read at its first annotation (below), never at the first *answer*: an abstention there leaves the
  item out instead of letting the next annotator's label stand in for it;
* a **rule** over the human annotations of each item (``RULE:judge`` applies it to the judges):

  - ``primary``: the item's first annotation, ``secondary`` its second;
  - ``majority``: the label more than half of the answering annotators gave (two or more annotations);
  - ``adjudicated``: the label the first two annotators agree on, else the last later annotation
    (the adjudicator's); without one, the item is left out (``unresolved disagreement``, or
    ``abstained`` when one of the two abstained).

The *order of annotation* of an item is the one the sheet states (``annotation``: 1 primary, 2
secondary, ...), else the order the grades were imported in (seq); each grader counts once per item
(its first grade). Items are left out with a reason, and counted: ``abstained`` (the annotation read
is ``Unsure``, ``N/A``, ...), ``single-annotated`` (a rule needs an annotation the item does not have),
``no majority``, ``unresolved disagreement``. Nothing here imports a statistics library.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from procgrade.engine.events import Grade

__all__ = ["ABSTAINED", "RULES_OF_ORDER", "SETS", "SINGLE", "Annotation", "Design", "Resolved", "design", "resolve"]

#: Grader names that select a class of actors.
SETS = ("human", "judge")
#: Rules that pick one label per item from its annotations.
RULES_OF_ORDER = ("primary", "secondary", "majority", "adjudicated")
ABSTAINED = "abstained"
SINGLE = "single-annotated"
NO_MAJORITY = "no majority"
UNRESOLVED = "unresolved disagreement"

#: (run, layer, item or "", round or -1)
Key = tuple[str, str, str, int]


@dataclass(frozen=True)
class Annotation:
    """One grader's annotation of one item: its label, or the abstention written."""

    seq: int
    actor: str
    sheet: str
    order: int | None
    label: Any
    abstained: str | None


@dataclass(frozen=True)
class Design:
    """What ``--reference``/``--candidate`` named: ``kind`` grader, set or rule (``over`` the set a rule reads)."""

    name: str
    kind: str
    over: str | None = None

    def selects(self, grade: Grade) -> bool:
        """Whether ``grade`` is one this design reads from."""
        target = self.over if self.kind == "rule" else self.name
        if self.kind in ("set", "rule"):
            return grade.actor == target or grade.actor.startswith(f"{target}:")
        return grade.actor == self.name or grade.sheet == self.name

    @property
    def text(self) -> str:
        if self.kind == "rule":
            return f"{self.name} (rule over the {self.over} annotations of each item)"
        if self.kind == "set":
            return f"{self.name} (every {self.name} grader; an item read at its first annotation)"
        return self.name


def design(name: str) -> Design:
    """The design ``name`` stands for (see the module docstring)."""
    rule, _, over = name.partition(":")
    if rule in RULES_OF_ORDER:
        if over and over not in SETS:
            raise ValueError(f"{name!r}: a rule applies to human or judge annotations ({rule}:human, {rule}:judge)")
        return Design(name, "rule", over or "human")
    if name in SETS:
        return Design(name, "set")
    return Design(name, "grader")


def annotations_of(grades: Iterable[Grade], design_: Design, key: Callable[[Grade], Key],
                   label: Callable[[Grade], Any]) -> dict[Key, list[Annotation]]:
    """Per item, the annotations ``design_`` reads from, one per grader, in order of annotation."""
    found: dict[Key, dict[str, Annotation]] = {}
    for grade in grades:  # seq order
        if not design_.selects(grade):
            continue
        value = label(grade)
        if value is None and grade.abstained is None:
            continue  # no label on this scale (e.g. a value on a binary layer)
        per_item = found.setdefault(key(grade), {})
        per_item.setdefault(grade.actor, Annotation(grade.seq, grade.actor, grade.sheet or "", grade.annotation,
                                                     value, grade.abstained))
    return {k: sorted(v.values(), key=_order) for k, v in found.items()}


def _order(a: Annotation) -> tuple[int, int]:
    return (a.order if a.order is not None else 10**6, a.seq)


@dataclass(frozen=True)
class Resolved:
    """A design's label per item, the items left out with their reason, and every answer per item
    (for re-grading statistics)."""

    labels: dict[Key, Any]
    excluded: dict[Key, str]


def resolve(design_: Design, items: dict[Key, list[Annotation]]) -> Resolved:
    """One label per item under ``design_``, or the reason the item is left out."""
    labels: dict[Key, Any] = {}
    excluded: dict[Key, str] = {}
    for key, annotations in items.items():
        label, reason = _pick(design_, annotations)
        if reason is None:
            labels[key] = label
        else:
            excluded[key] = reason
    return Resolved(labels, excluded)


def _answer(a: Annotation) -> tuple[Any, str | None]:
    return (None, ABSTAINED) if a.abstained is not None else (a.label, None)


def _pick(design_: Design, annotations: list[Annotation]) -> tuple[Any, str | None]:
    if design_.kind != "rule" or design_.name.startswith("primary"):
        return _answer(annotations[0])
    rule = design_.name.partition(":")[0]
    if rule == "secondary":
        return (None, SINGLE) if len(annotations) < 2 else _answer(annotations[1])
    if len(annotations) < 2:
        return None, SINGLE
    if rule == "majority":
        answered = [a.label for a in annotations if a.abstained is None]
        if not answered:
            return None, ABSTAINED
        (top, count), *rest = Counter(answered).most_common() + [(None, 0)]
        return (top, None) if 2 * count > len(answered) else (None, NO_MAJORITY)
    first, second = annotations[0], annotations[1]
    if first.abstained is None and second.abstained is None and first.label == second.label:
        return first.label, None
    if len(annotations) > 2:
        return _answer(annotations[-1])
    if first.abstained is not None or second.abstained is not None:
        return None, ABSTAINED  # nobody adjudicated, and one of the two gave no label to agree on
    return None, UNRESOLVED
