"""Annotator designs: which annotation of an item each rule reads, and why items are left out."""

from __future__ import annotations

import pytest

from procgrade.engine.analysis.annotators import Annotation, design, resolve

KEY = ("run", "outcome", "success", -1)


def _item(*answers: object) -> dict[tuple[str, str, str, int], list[Annotation]]:
    """Annotations in order; a string answer is an abstention."""
    return {KEY: [Annotation(seq, f"human:{chr(65 + seq)}", "s", None, None if isinstance(a, str) else a,
                             a if isinstance(a, str) else None) for seq, a in enumerate(answers)]}


@pytest.mark.parametrize(("name", "answers", "label", "reason"), [
    ("primary", (True, False), True, None),
    ("primary", ("Unsure", False), None, "abstained"),  # never the secondary's label instead
    ("human", ("Unsure", False), None, "abstained"),
    ("secondary", (True, False), False, None),
    ("secondary", (True,), None, "single-annotated"),
    ("secondary", (True, "N/A"), None, "abstained"),
    ("majority", (True, False, True), True, None),
    ("majority", (True, False), None, "no majority"),
    ("majority", (True, "Unsure", True), True, None),
    ("majority", ("Unsure", "N/A"), None, "abstained"),
    ("majority", (True,), None, "single-annotated"),
    ("adjudicated", (True, True), True, None),
    ("adjudicated", (True, False), None, "unresolved disagreement"),
    ("adjudicated", (True, False, False), False, None),  # the adjudicator decides
    ("adjudicated", (True, True, False), True, None),  # agreement needs no adjudicator
    ("adjudicated", (True, "Unsure"), None, "abstained"),
])
def test_rules(name: str, answers: tuple[object, ...], label: object, reason: str | None) -> None:
    resolved = resolve(design(name), _item(*answers))
    assert (resolved.labels.get(KEY), resolved.excluded.get(KEY)) == (label, reason)


def test_stated_order_wins_over_import_order() -> None:
    from procgrade.engine.analysis.annotators import annotations_of
    from procgrade.engine.events import Grade

    def grade(seq: int, actor: str, passed: bool, order: int) -> Grade:
        return Grade(run_id="run", seq=seq, event_id=f"e{seq}", actor=actor, layer="outcome", item="success",
                     passed=passed, scale="binary", annotation=order)

    grades = [grade(1, "human:A", True, 2), grade(2, "human:B", False, 1), grade(3, "judge:x", True, 1)]
    items = annotations_of(grades, design("primary"), lambda g: KEY, lambda g: g.passed)
    assert [a.actor for a in items[KEY]] == ["human:B", "human:A"]  # judges are not human annotations
    assert resolve(design("primary"), items).labels[KEY] is False
    assert resolve(design("primary:judge"), annotations_of(grades, design("primary:judge"), lambda g: KEY,
                                                           lambda g: g.passed)).labels[KEY] is True


def test_designs() -> None:
    assert (design("human:alice").kind, design("human").kind, design("majority").over) == ("grader", "set", "human")
    with pytest.raises(ValueError, match="human or judge"):
        design("primary:robots")
