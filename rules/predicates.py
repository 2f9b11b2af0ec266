"""Predicates compiled to fast checks over fact rows (the canonical back-end's view of an event).

A fact row is a tuple in :data:`ROW_COLUMNS` order: the envelope columns rules
may read, then the typed fact columns. Nothing here parses JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from procgrade.engine.store.scores import FACT_ROW_COLUMNS
from procgrade.rules.model import Predicate

__all__ = ["ROW_COLUMNS", "COLUMN", "Matcher", "actor_matches", "compile_any", "compile_predicate", "condition_sources",
           "PrefixMemo",
           "kinds_of"]

ROW_COLUMNS: tuple[str, ...] = FACT_ROW_COLUMNS  # what the store reads for rules, in this order
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


def _conditions(predicate: Predicate) -> tuple[RowCheck, ...]:
    """The column conditions of ``predicate`` (beyond kind and actor), as row checks."""
    checks: list[RowCheck] = []
    for column, wanted in sorted(predicate.equals.items()):
        index = COLUMN[column]
        allowed = frozenset(wanted if isinstance(wanted, list) else [wanted])
        checks.append(lambda row, i=index, a=allowed: row[i] is not None and row[i] in a)
    for column, prefixes in sorted(predicate.prefix.items()):
        index = COLUMN[column]
        starts = tuple(sorted(prefixes))
        checks.append(lambda row, i=index, p=starts: row[i] is not None and row[i].startswith(p))
    for column, prefixes in sorted(predicate.not_prefix.items()):
        index = COLUMN[column]
        starts = tuple(sorted(prefixes))
        checks.append(lambda row, i=index, p=starts: row[i] is None or not row[i].startswith(p))
    for column in predicate.present:
        checks.append(lambda row, i=COLUMN[column]: row[i] is not None)
    for column in predicate.absent:
        checks.append(lambda row, i=COLUMN[column]: row[i] is None)
    for comparison in predicate.compare:
        op, value, index = _OPS[comparison.op], comparison.value, COLUMN[comparison.field]
        checks.append(lambda row, i=index, f=op, v=value: row[i] is not None and f(row[i], v))
    return tuple(checks)


#: Python operators of the comparisons (what :data:`_OPS` computes), for generated code.
_OP_SOURCE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class PrefixMemo:
    """Whether a text starts with one of some prefixes, remembered per text: a text column's
    values repeat within and across runs (commands, paths), and testing twenty prefixes costs
    more than one dict lookup. Verdicts are 1 (starts with one) and 2 (with none)."""

    __slots__ = ("prefixes", "seen")

    #: Texts remembered before the memo starts afresh, and the longest text remembered (a memo
    #: holds at most about a megabyte).
    LIMIT = 4096
    LONGEST = 256

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        self.prefixes = prefixes
        self.seen: dict[str, int] = {}

    def learn(self, text: str) -> int:
        verdict = 1 if text.startswith(self.prefixes) else 2
        if len(text) <= self.LONGEST:
            seen = self.seen
            if len(seen) >= self.LIMIT:
                seen.clear()
            seen[text] = verdict
        return verdict


def condition_sources(predicate: Predicate, constant: Callable[[Any], str],
                      memo: Callable[[tuple[str, ...]], tuple[str, str]] | None = None) -> tuple[str, ...]:
    """The column conditions of ``predicate`` as Python expressions over ``row``, in
    :func:`_conditions`' order and with its exact tests (generated code evaluates them alike);
    ``constant(value)`` names a value the expressions refer to. Given ``memo`` (prefixes -> the
    names of a :class:`PrefixMemo`'s ``seen`` dict and ``learn`` method), prefix tests ask it."""
    sources: list[str] = []
    for column, wanted in sorted(predicate.equals.items()):
        i = COLUMN[column]
        allowed = constant(frozenset(wanted if isinstance(wanted, list) else [wanted]))
        sources.append(f"(row[{i}] is not None and row[{i}] in {allowed})")
    for column, prefixes in sorted(predicate.prefix.items()):
        i = COLUMN[column]
        if memo is None:
            sources.append(f"(row[{i}] is not None and row[{i}].startswith({constant(tuple(sorted(prefixes)))}))")
        else:
            seen, learn = memo(tuple(sorted(prefixes)))
            sources.append(f"(row[{i}] is not None and ({seen}.get(row[{i}]) or {learn}(row[{i}])) == 1)")
    for column, prefixes in sorted(predicate.not_prefix.items()):
        i = COLUMN[column]
        if memo is None:
            sources.append(f"(row[{i}] is None or not row[{i}].startswith({constant(tuple(sorted(prefixes)))}))")
        else:
            seen, learn = memo(tuple(sorted(prefixes)))
            sources.append(f"(row[{i}] is None or ({seen}.get(row[{i}]) or {learn}(row[{i}])) == 2)")
    for column in predicate.present:
        sources.append(f"row[{COLUMN[column]}] is not None")
    for column in predicate.absent:
        sources.append(f"row[{COLUMN[column]}] is None")
    for comparison in predicate.compare:
        i = COLUMN[comparison.field]
        sources.append(f"(row[{i}] is not None and row[{i}] {_OP_SOURCE[comparison.op]} {constant(comparison.value)})")
    return tuple(sources)


class _Entry:
    """One predicate's test once the kind is known: the actor, then the column conditions."""

    __slots__ = ("actors", "checks")

    def __init__(self, actors: tuple[str, ...], checks: tuple[RowCheck, ...]) -> None:
        self.actors, self.checks = actors, checks

    def test(self) -> RowCheck:
        """The entry as one plain function (the hot path: no bound-method call, no loop for
        the common shapes), the actor's class looked up once per distinct actor string."""
        checks = self.checks
        if self.actors == ("any",):
            if len(checks) == 1:
                return checks[0]
            return lambda row: all(check(row) for check in checks)
        actors, cache = self.actors, {}

        def actor_ok(actor: str) -> bool:
            ok = cache[actor] = actor_matches(actor, actors)
            return ok

        if not checks:
            def test(row: tuple[Any, ...]) -> bool:
                ok = cache.get(row[ACTOR])
                return actor_ok(row[ACTOR]) if ok is None else ok
        elif len(checks) == 1:
            only = checks[0]

            def test(row: tuple[Any, ...]) -> bool:
                ok = cache.get(row[ACTOR])
                if ok is None:
                    ok = actor_ok(row[ACTOR])
                return ok and only(row)
        else:
            def test(row: tuple[Any, ...]) -> bool:
                ok = cache.get(row[ACTOR])
                if ok is None:
                    ok = actor_ok(row[ACTOR])
                if not ok:
                    return False
                for check in checks:
                    if not check(row):
                        return False
                return True
        return test


class Matcher:
    """Any-of predicates, grouped by kind, so an event is only tested against the
    predicates that name its kind; :meth:`for_kind` resolves that grouping ahead of
    time for monitors that dispatch on kind themselves."""

    __slots__ = ("table", "entries", "predicates")

    def __init__(self, predicates: list[Predicate], default_actor: str) -> None:
        by_kind: dict[str, list[_Entry]] = {}
        #: kind -> (actor classes, predicate) in the order of ``entries`` (for :meth:`source_for_kind`)
        self.predicates: dict[str, list[tuple[tuple[str, ...], Predicate]]] = {}
        for predicate in predicates:
            entry = _Entry(predicate.actors(default_actor), _conditions(predicate))
            for kind in predicate.kinds():
                by_kind.setdefault(kind, []).append(entry)
                self.predicates.setdefault(kind, []).append((entry.actors, predicate))
        self.entries = by_kind
        self.table: dict[str, Any] = {kind: _merge(entries) for kind, entries in by_kind.items()}

    def for_kind(self, kind: str, actor: str | None = None) -> Any:
        """None (never matches this kind), True (always does), or a row check for the rest; given
        the row's ``actor`` too, with the actor tests already decided (the check left reads
        columns only; it holds for rows of that kind by any actor of the same class)."""
        if actor is None:
            return self.table.get(kind)
        kept = [entry.checks for entry in self.entries.get(kind, ()) if actor_matches(actor, entry.actors)]
        if not kept:
            return None
        if any(not checks for checks in kept):
            return True
        tests = tuple(checks[0] if len(checks) == 1 else _all_of(checks) for checks in kept)
        if len(tests) == 1:
            return tests[0]
        if len(tests) == 2:
            first, second = tests
            return lambda row: first(row) or second(row)
        return lambda row: any(test(row) for test in tests)

    def source_for_kind(self, kind: str, actor: str, constant: Callable[[Any], str],
                        memo: Callable[[tuple[str, ...]], tuple[str, str]] | None = None) -> str | None:
        """:meth:`for_kind` as a Python expression over ``row``: None (never matches), ``"True"``
        (always does), or the column conditions left, tested in the same order."""
        kept = [predicate for actors, predicate in self.predicates.get(kind, ()) if actor_matches(actor, actors)]
        if not kept:
            return None
        conditions = [condition_sources(predicate, constant, memo) for predicate in kept]
        if any(not sources for sources in conditions):
            return "True"
        return " or ".join(f"({' and '.join(sources)})" for sources in conditions)

    def kinds(self) -> set[str]:
        return set(self.table)

    def __call__(self, row: tuple[Any, ...]) -> bool:
        test = self.table.get(row[KIND])
        return test is not None and (test is True or test(row))


def _all_of(checks: tuple[RowCheck, ...]) -> RowCheck:
    if len(checks) == 2:
        first, second = checks
        return lambda row: first(row) and second(row)

    def test(row: tuple[Any, ...]) -> bool:
        for check in checks:
            if not check(row):
                return False
        return True

    return test


def _merge(entries: list[_Entry]) -> Any:
    if any(e.actors == ("any",) and not e.checks for e in entries):
        return True
    if len(entries) == 1:
        return entries[0].test()
    tests = tuple(entry.test() for entry in entries)
    if len(tests) == 2:
        first, second = tests
        return lambda row: first(row) or second(row)
    return lambda row: any(test(row) for test in tests)


def compile_any(predicates: list[Predicate], default_actor: str) -> Matcher:
    """A matcher that holds when any of ``predicates`` matches (never, for an empty list)."""
    return Matcher(predicates, default_actor)


def compile_predicate(predicate: Predicate, default_actor: str) -> Matcher:
    """A matcher that holds when ``predicate`` matches the row."""
    return Matcher([predicate], default_actor)


def kinds_of(predicates: list[Predicate]) -> set[str]:
    kinds: set[str] = set()
    for predicate in predicates:
        kinds.update(predicate.kinds())
    return kinds
