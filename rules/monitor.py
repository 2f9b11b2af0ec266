"""The canonical back-end: a one-pass streaming monitor per rule over a run's fact rows.

Semantics shared by every template (the SQL back-end implements the same):

- Order is ``seq`` only. Within one event, a rule judges the event as an
  activation against what came strictly before it, then lets it act as target,
  reset or deadline for later events (response rules resolve earlier pending
  activations with the event first).
- Scope ``run`` is one partition. Scope ``stage`` partitions events by their
  ``stage`` column; events without a stage are outside every stage and ignored.
- Correlation: activation and target (and reset, when asked) must agree on the
  named columns; an activation whose key is NULL is vacuous, a target whose key
  is NULL relates to nothing.
- Each activation gives one :class:`Finding`: fulfilled, violated or vacuous,
  citing the seqs that decided it (ascending). Scope-level templates (count,
  existence, absence, not_coexistence) give one finding per partition with
  ``seq`` None.
- Default actor filters: activations match only the model's own actors
  (``agent``, ``subagent:<id>``); targets, resets and deadlines match anyone.
  Harness events never activate a rule against the model unless a rule says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from rules.model import (
    AbsenceRule,
    ChainPrecedenceRule,
    ChainResponseRule,
    CountRule,
    ExistenceRule,
    NoRepeatRule,
    NotCoexistenceRule,
    PrecedenceRule,
    PrecedenceSinceRule,
    ResponseRule,
    RuleSet,
    SatisfiesRule,
    as_list,
)
from rules.predicates import COLUMN, SEQ, STAGE, compile_any, kinds_of

__all__ = ["Finding", "Tally", "SEMANTICS_VERSION", "evaluate", "RunMonitor", "MAX_CITED"]

#: Bumped whenever any template's meaning changes; part of every rule-set hash.
SEMANTICS_VERSION = "1"
#: Scope-level findings cite at most this many matching seqs (the first ones).
MAX_CITED = 8

FULFILLED, VIOLATED, VACUOUS = "fulfilled", "violated", "vacuous"
_ALL = "*"  # dispatch key for templates that watch every event


class Finding(NamedTuple):
    """One activation's verdict and the seqs that decided it (ascending)."""

    rule: str
    verdict: str
    seq: int | None
    stage: int | None
    cited: tuple[int, ...]

    def sort_key(self) -> tuple[int, int]:
        return (-1 if self.seq is None else self.seq, -1 if self.stage is None else self.stage)


@dataclass
class Tally:
    """A rule's result when only the score is wanted: counts, and the violations in full."""

    fulfilled: int = 0
    vacuous: int = 0


class _Monitor:
    """Base: one rule's state over one run."""

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self.id = rule.id
        self.stage_scoped = rule.scope == "stage"
        self.findings: list[Finding] = []
        self.tally: Tally | None = None  # set by RunMonitor(detail=False): count, do not keep

    def partition(self, row: tuple[Any, ...]) -> tuple[bool, Any]:
        """(in scope, partition key) of ``row``."""
        if self.stage_scoped:
            stage = row[STAGE]
            return stage is not None, stage
        return True, None

    def emit(self, verdict: str, seq: int | None, stage: Any, *cited: int | None) -> None:
        """Record a verdict; ``cited`` is given in ascending order (None entries are dropped)."""
        tally = self.tally
        if tally is not None and verdict != VIOLATED:
            if verdict == FULFILLED:
                tally.fulfilled += 1
            else:
                tally.vacuous += 1
            return
        self.findings.append(Finding(self.id, verdict, seq, stage if self.stage_scoped else None,
                                     tuple(c for c in cited if c is not None)))

    def kinds(self) -> set[str]:
        raise NotImplementedError

    def on(self, row: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        pass


class _Count(_Monitor):
    def __init__(self, rule: Any, low: int, high: int | None) -> None:
        super().__init__(rule)
        self.match = compile_any(as_list(rule.match), "model")
        self.low, self.high = low, high
        self.matched: dict[Any, list[int]] = {}
        self.partitions: set[Any] = set() if self.stage_scoped else {None}
        self._kinds = kinds_of(as_list(rule.match))

    def kinds(self) -> set[str]:
        return {_ALL} if self.stage_scoped else self._kinds

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        self.partitions.add(part)
        if self.match(row):
            self.matched.setdefault(part, []).append(row[SEQ])

    def finish(self) -> None:
        for part in sorted(self.partitions, key=lambda p: -1 if p is None else p):
            seqs = self.matched.get(part, [])
            ok = len(seqs) >= self.low and (self.high is None or len(seqs) <= self.high)
            self.emit(FULFILLED if ok else VIOLATED, None, part, *seqs[:MAX_CITED])


class _Keyed(_Monitor):
    """Templates with an optional correlation key."""

    def __init__(self, rule: Any) -> None:
        super().__init__(rule)
        corr = rule.correlation()
        self.a_key = COLUMN[corr.activation] if corr else None
        self.t_key = COLUMN[corr.target or corr.activation] if corr else None
        self.r_key = COLUMN[corr.reset] if corr and corr.reset else None

    @staticmethod
    def key(row: tuple[Any, ...], index: int | None) -> Any:
        return None if index is None else row[index]


class _Precedence(_Keyed):
    def __init__(self, rule: PrecedenceRule) -> None:
        super().__init__(rule)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.last_target: dict[tuple[Any, Any], int] = {}
        self.judged: set[tuple[Any, Any]] = set()
        self._kinds = kinds_of(as_list(rule.activation)) | kinds_of(as_list(rule.target))

    def kinds(self) -> set[str]:
        return self._kinds

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        seq = row[SEQ]
        if self.activation(row):
            key = self.key(row, self.a_key)
            if self.a_key is not None and key is None:
                self.emit(VACUOUS, seq, part, seq)
            elif not (self.rule.only_first and (part, key) in self.judged):
                self.judged.add((part, key))
                earlier = self.last_target.get((part, key))
                self.emit(FULFILLED if earlier is not None else VIOLATED, seq, part, earlier, seq)
        if self.target(row):
            key = self.key(row, self.t_key)
            if self.t_key is None or key is not None:
                self.last_target[(part, key)] = seq


class _PrecedenceSince(_Keyed):
    def __init__(self, rule: PrecedenceSinceRule) -> None:
        super().__init__(rule)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.reset = compile_any(as_list(rule.reset), "any")
        self.last_target: dict[tuple[Any, Any], int] = {}
        self.last_reset: dict[tuple[Any, Any], int] = {}
        self._kinds = kinds_of(as_list(rule.activation)) | kinds_of(as_list(rule.target)) | kinds_of(as_list(rule.reset))

    def kinds(self) -> set[str]:
        return self._kinds

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        seq = row[SEQ]
        if self.activation(row):
            key = self.key(row, self.a_key)
            if self.a_key is not None and key is None:
                self.emit(VACUOUS, seq, part, seq)
            else:
                reset = self.last_reset.get((part, key if self.r_key is not None else None))
                target = self.last_target.get((part, key))
                if reset is None and self.rule.reset_required:
                    self.emit(VACUOUS, seq, part, seq)
                elif target is not None and (reset is None or target > reset):
                    self.emit(FULFILLED, seq, part, target, seq)
                else:
                    self.emit(VIOLATED, seq, part, reset, seq)
        if self.target(row):
            key = self.key(row, self.t_key)
            if self.t_key is None or key is not None:
                self.last_target[(part, key)] = seq
        if self.reset(row):
            key = self.key(row, self.r_key)
            if self.r_key is None or key is not None:
                self.last_reset[(part, key)] = seq


class _Response(_Keyed):
    def __init__(self, rule: ResponseRule) -> None:
        super().__init__(rule)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.deadline = compile_any(as_list(rule.deadline), "any")
        self.within = rule.within
        self.pending: dict[tuple[Any, Any], list[int]] = {}
        self.pending_by_part: dict[Any, set[tuple[Any, Any]]] = {}
        self._kinds = (kinds_of(as_list(rule.activation)) | kinds_of(as_list(rule.target))
                       | kinds_of(as_list(rule.deadline)))

    def kinds(self) -> set[str]:
        return self._kinds

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        seq = row[SEQ]
        if self.target(row):
            key = self.key(row, self.t_key)
            waiting = self.pending.pop((part, key), None) if (self.t_key is None or key is not None) else None
            if waiting:
                self.pending_by_part[part].discard((part, key))
                for start in waiting:
                    late = self.within is not None and seq - start > self.within
                    self.emit(VIOLATED if late else FULFILLED, start, part, start, seq)
        if self.deadline(row):
            for slot in sorted(self.pending_by_part.pop(part, set()), key=_slot_order):
                for start in self.pending.pop(slot):
                    self.emit(VIOLATED, start, part, start, seq)
        if self.activation(row):
            key = self.key(row, self.a_key)
            if self.a_key is not None and key is None:
                self.emit(VACUOUS, seq, part, seq)
            else:
                self.pending.setdefault((part, key), []).append(seq)
                self.pending_by_part.setdefault(part, set()).add((part, key))

    def finish(self) -> None:
        for (part, _key), starts in self.pending.items():
            for start in starts:
                self.emit(VIOLATED, start, part, start)
        self.pending.clear()


def _slot_order(slot: tuple[Any, Any]) -> tuple[str, str]:
    return (repr(slot[0]), repr(slot[1]))


class _ChainResponse(_Monitor):
    def __init__(self, rule: ChainResponseRule) -> None:
        super().__init__(rule)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.waiting: dict[Any, int] = {}

    def kinds(self) -> set[str]:
        return {_ALL}

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        seq = row[SEQ]
        start = self.waiting.pop(part, None)
        if start is not None:
            self.emit(FULFILLED if self.target(row) else VIOLATED, start, part, start, seq)
        if self.activation(row):
            self.waiting[part] = seq

    def finish(self) -> None:
        for part, start in self.waiting.items():
            self.emit(VIOLATED, start, part, start)


class _ChainPrecedence(_Monitor):
    def __init__(self, rule: ChainPrecedenceRule) -> None:
        super().__init__(rule)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.previous: dict[Any, tuple[int, bool]] = {}

    def kinds(self) -> set[str]:
        return {_ALL}

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        seq = row[SEQ]
        if self.activation(row):
            before = self.previous.get(part)
            if before is not None and before[1]:
                self.emit(FULFILLED, seq, part, before[0], seq)
            else:
                self.emit(VIOLATED, seq, part, before[0] if before else None, seq)
        self.previous[part] = (seq, self.target(row))


class _NoRepeat(_Monitor):
    def __init__(self, rule: NoRepeatRule) -> None:
        super().__init__(rule)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.reset = compile_any(as_list(rule.reset), "any")
        self.key_index = COLUMN[rule.key]
        self.last: dict[tuple[Any, Any], int] = {}
        self.last_reset: dict[Any, int] = {}
        self._kinds = kinds_of(as_list(rule.activation)) | kinds_of(as_list(rule.reset))

    def kinds(self) -> set[str]:
        return self._kinds

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        seq = row[SEQ]
        if self.activation(row):
            key = row[self.key_index]
            if key is None:
                self.emit(VACUOUS, seq, part, seq)
            else:
                previous = self.last.get((part, key))
                reset = self.last_reset.get(part)
                if previous is not None and (reset is None or reset < previous):
                    self.emit(VIOLATED, seq, part, previous, seq)
                else:
                    self.emit(FULFILLED, seq, part, seq)
                self.last[(part, key)] = seq
        if self.reset(row):
            self.last_reset[part] = seq


class _NotCoexistence(_Monitor):
    def __init__(self, rule: NotCoexistenceRule) -> None:
        super().__init__(rule)
        self.first_a = compile_any(as_list(rule.activation), "model")
        self.first_b = compile_any(as_list(rule.target), "any")
        self.seen: dict[Any, list[int | None]] = {}
        self.partitions: set[Any] = set() if self.stage_scoped else {None}
        self._kinds = kinds_of(as_list(rule.activation)) | kinds_of(as_list(rule.target))

    def kinds(self) -> set[str]:
        return {_ALL} if self.stage_scoped else self._kinds

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        self.partitions.add(part)
        slot = self.seen.setdefault(part, [None, None])
        if slot[0] is None and self.first_a(row):
            slot[0] = row[SEQ]
        if slot[1] is None and self.first_b(row):
            slot[1] = row[SEQ]

    def finish(self) -> None:
        for part in sorted(self.partitions, key=lambda p: -1 if p is None else p):
            a, b = self.seen.get(part, [None, None])
            if a is None and b is None:
                self.emit(VACUOUS, None, part)
            else:
                cited = sorted(s for s in (a, b) if s is not None)
                self.emit(VIOLATED if a is not None and b is not None else FULFILLED, None, part, *cited)


class _Satisfies(_Monitor):
    def __init__(self, rule: SatisfiesRule) -> None:
        super().__init__(rule)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.require = compile_any(as_list(rule.require), "any")
        self._kinds = kinds_of(as_list(rule.activation))

    def kinds(self) -> set[str]:
        return self._kinds

    def on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if inside and self.activation(row):
            self.emit(FULFILLED if self.require(row) else VIOLATED, row[SEQ], part, row[SEQ])


def _monitor_for(rule: Any) -> _Monitor:
    if isinstance(rule, CountRule):
        return _Count(rule, rule.min, rule.max)
    if isinstance(rule, ExistenceRule):
        return _Count(rule, 1, None)
    if isinstance(rule, AbsenceRule):
        return _Count(rule, 0, 0)
    table = {
        PrecedenceRule: _Precedence, PrecedenceSinceRule: _PrecedenceSince, ResponseRule: _Response,
        ChainResponseRule: _ChainResponse, ChainPrecedenceRule: _ChainPrecedence, NoRepeatRule: _NoRepeat,
        NotCoexistenceRule: _NotCoexistence, SatisfiesRule: _Satisfies,
    }
    return table[type(rule)](rule)


class RunMonitor:
    """All rules of a set over one run: feed rows in seq order, then :meth:`finish`."""

    def __init__(self, ruleset: RuleSet, *, detail: bool = True) -> None:
        """With ``detail`` False only violations are kept as findings; fulfilled and vacuous
        activations are counted (see :meth:`tallies`), which is all a score needs."""
        self.monitors = [_monitor_for(rule) for rule in ruleset.rules]
        if not detail:
            for monitor in self.monitors:
                monitor.tally = Tally()
        dispatch: dict[str, list[Any]] = {}
        watch_all: list[Any] = []
        for monitor in self.monitors:
            kinds = monitor.kinds()
            if _ALL in kinds:
                watch_all.append(monitor.on)
            for kind in sorted(kinds - {_ALL}):
                dispatch.setdefault(kind, []).append(monitor.on)
        # Each kind's handlers, in rule order, with the watch-all monitors merged in.
        order = {m.on: i for i, m in enumerate(self.monitors)}
        kinds_seen = set(dispatch)
        self._dispatch = {
            kind: sorted(dispatch.get(kind, []) + watch_all, key=lambda h: order[h]) for kind in kinds_seen
        }
        self._default = sorted(watch_all, key=lambda h: order[h])

    def feed(self, rows: Iterable[tuple[Any, ...]]) -> None:
        dispatch, default = self._dispatch, self._default
        for row in rows:
            for handler in dispatch.get(row[1], default):
                handler(row)

    def finish(self) -> dict[str, list[Finding]]:
        """Findings per rule id (in rule-set order), each list ordered by (seq, stage)."""
        result: dict[str, list[Finding]] = {}
        for monitor in self.monitors:
            monitor.finish()
            result[monitor.id] = sorted(monitor.findings, key=Finding.sort_key)
        return result


    def tallies(self) -> dict[str, Tally]:
        """Counts of fulfilled and vacuous activations per rule (``detail=False`` only)."""
        return {m.id: m.tally for m in self.monitors if m.tally is not None}


def evaluate(ruleset: RuleSet, rows: Iterable[tuple[Any, ...]]) -> dict[str, list[Finding]]:
    """Run every rule of ``ruleset`` over one run's fact rows (in seq order)."""
    monitor = RunMonitor(ruleset)
    monitor.feed(rows)
    return monitor.finish()
