"""Predicates compiled to fast checks over fact rows (the canonical back-end's view of an event).

A fact row is a tuple in :data:`ROW_COLUMNS` order: the envelope columns rules
may read, then the typed fact columns. Nothing here parses JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.facts import FACT_COLUMNS
from rules.model import Predicate

__all__ = ["ROW_COLUMNS", "COLUMN", "actor_matches", "compile_any", "compile_predicate", "kinds_of"]

ROW_COLUMNS: tuple[str, ...] = ("seq", "kind", "actor", "stage") + tuple(FACT_COLUMNS)
COLUMN = {name: i for i, name in enumerate(ROW_COLUMNS)}
SEQ, KIND, ACTOR, STAGE = 0, 1, 2, 3

RowCheck = Callable[[tuple[Any, ...]], bool]


def actor_matches(actor: str, wanted: tuple[str, ...]) -> bool:
    """Does ``actor`` belong to one of the actor classes in ``wanted``?

    ``model`` is ``agent`` or ``subagent:<id>``; ``any`` is everyone; any other class
    ``X`` is ``X`` itself or ``X:<id>``.
    """
    base = actor.split(":", 1)[0]
    for cls in wanted:
        if cls == "any" or cls == base:
            return True
        if cls == "model" and base in ("agent", "subagent"):
            return True
    return False


_OPS: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def compile_predicate(predicate: Predicate, default_actor: str) -> RowCheck:
    """A function row -> bool that holds when ``predicate`` matches the row."""
    kinds = frozenset(predicate.kinds())
    actors = predicate.actors(default_actor)
    actor_cache: dict[str, bool] = {}
    checks: list[RowCheck] = []
    for column, wanted in sorted(predicate.equals.items()):
        index = COLUMN[column]
        allowed = frozenset(wanted if isinstance(wanted, list) else [wanted])
        checks.append(lambda row, i=index, a=allowed: row[i] is not None and row[i] in a)
    for column, prefixes in sorted(predicate.prefix.items()):
        index = COLUMN[column]
        starts = tuple(sorted(prefixes))
        checks.append(lambda row, i=index, p=starts: row[i] is not None and row[i].startswith(p))
    for column in predicate.present:
        checks.append(lambda row, i=COLUMN[column]: row[i] is not None)
    for column in predicate.absent:
        checks.append(lambda row, i=COLUMN[column]: row[i] is None)
    for comparison in predicate.compare:
        op, value, index = _OPS[comparison.op], comparison.value, COLUMN[comparison.field]
        checks.append(lambda row, i=index, f=op, v=value: row[i] is not None and f(row[i], v))

    def matches(row: tuple[Any, ...]) -> bool:
        if row[KIND] not in kinds:
            return False
        actor = row[ACTOR]
        ok = actor_cache.get(actor)
        if ok is None:
            ok = actor_cache[actor] = actor_matches(actor, actors)
        if not ok:
            return False
        for check in checks:
            if not check(row):
                return False
        return True

    return matches


def compile_any(predicates: list[Predicate], default_actor: str) -> RowCheck:
    """A check that holds when any of ``predicates`` matches (never, for an empty list)."""
    compiled = [compile_predicate(p, default_actor) for p in predicates]
    if not compiled:
        return lambda row: False
    if len(compiled) == 1:
        return compiled[0]
    return lambda row: any(check(row) for check in compiled)


def kinds_of(predicates: list[Predicate]) -> set[str]:
    kinds: set[str] = set()
    for predicate in predicates:
        kinds.update(predicate.kinds())
    return kinds
