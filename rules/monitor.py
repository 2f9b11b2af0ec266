"""The canonical back-end: a one-pass streaming monitor per rule over a run's fact rows.

Semantics shared by every template (the SQL back-end implements the same):

- Order is ``seq`` only. Within one event, a rule judges the event as an
  activation against what came strictly before it, then lets it act as target,
  reset or deadline for later events (response rules resolve earlier pending
  activations with the event first).
- Scope ``run`` is one partition. Scope ``stage`` partitions events by their stage:
  under semantics 1 the event's own ``stage``, under semantics 2 the stage derived from
  the log (``in_stage``, see :mod:`procgrade.engine.stages`); events without one are outside every
  stage and ignored.
- Applicability (semantics 2): a scope-level template (count, existence, absence) judges
  a partition only if an ``applies_if`` event occurred in it (default: for absence, a
  model event of a kind the rule matches; for count and existence, any model event);
  otherwise the partition's finding is vacuous and cites nothing. ``distinct`` judges a
  partition only if a matching event lies in its window. A ``response`` with
  ``open_at_end: vacuous`` leaves an activation nothing resolved vacuous (citing it).
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
- One event in several roles: in ``precedence_since`` an event that is both target
  and reset leaves the target stale (the reset is applied last); in ``no_repeat``
  an event that is both activation and reset excuses the next repeat; in
  ``not_coexistence`` an event matching both sides is a violation citing it for
  both. ``response``'s ``within`` counts seqs across the whole run, whatever the
  scope, and a target that is also a deadline settles its own key first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from procgrade.rules.model import (
    AbsenceRule,
    ChainPrecedenceRule,
    ChainResponseRule,
    CountRule,
    DistinctRule,
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
from procgrade.rules.predicates import ACTOR, COLUMN, SEQ, STAGE, actor_matches, compile_any, kinds_of

__all__ = ["Finding", "Tally", "SEMANTICS_VERSION", "evaluate", "RunMonitor", "MAX_CITED"]

#: Bumped whenever any template's meaning changes; part of every rule-set hash.
SEMANTICS_VERSION = "2"
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
    """Base: one rule's state over one run (reusable: :meth:`clear` readies it for the next run)."""

    #: The per-run state containers, emptied in place by :meth:`clear` (handlers bind them once).
    _STATE: tuple[str, ...] = ()

    def __init__(self, rule: Any, semantics: int = 2) -> None:
        self.rule = rule
        self.id = rule.id
        self.semantics = semantics
        self.stage_scoped = rule.scope == "stage"
        #: Where a row's stage is read: the event's own (semantics 1) or the derived one.
        self.stage_col = STAGE if semantics == 1 else COLUMN["in_stage"]
        self.findings: list[Finding] = []
        self.tally: Tally | None = None  # set by count_only()
        #: The :class:`RunMonitor` feeding this rule (its count of model events so far).
        self.owner: Any = None

    def clear(self) -> None:
        """Forget the run fed so far; the compiled predicates and built handlers stay."""
        self.findings.clear()
        if self.tally is not None:
            self.tally.fulfilled = self.tally.vacuous = 0
        containers = self.__dict__.get("_containers")
        if containers is None:  # the containers are never replaced: look them up once
            containers = self._containers = tuple(getattr(self, name) for name in self._STATE)
        for state in containers:
            if state:
                state.clear()
        if not self.stage_scoped and "partitions" in self._STATE:
            self.partitions.add(None)  # type: ignore[attr-defined]  # scope run: its one partition

    def partition(self, row: tuple[Any, ...]) -> tuple[bool, Any]:
        """(in scope, partition key) of ``row``."""
        if self.stage_scoped:
            stage = row[self.stage_col]
            return stage is not None, stage
        return True, None

    def emit(self, verdict: str, seq: int | None, stage: Any, *cited: int | None) -> None:
        """Record a verdict; ``cited`` is given in ascending order (None entries are dropped)."""
        self.findings.append(Finding(self.id, verdict, seq, stage if self.stage_scoped else None,
                                     tuple(c for c in cited if c is not None)))

    def count_only(self) -> None:
        """Keep violations as findings but only count fulfilled and vacuous activations.

        Called before any handler is built: handlers bind ``self.emit`` once."""
        tally = self.tally = Tally()
        keep = self.emit

        def emit(verdict: str, seq: int | None, stage: Any, *cited: int | None) -> None:
            if verdict == FULFILLED:
                tally.fulfilled += 1
            elif verdict == VACUOUS:
                tally.vacuous += 1
            else:
                keep(verdict, seq, stage, *cited)

        self.emit = emit  # type: ignore[method-assign]

    def kinds(self) -> set[str]:
        raise NotImplementedError

    def on(self, row: tuple[Any, ...]) -> None:
        """Feed one row (the generic path; :meth:`handler` gives the per-kind fast path)."""
        handler = self.handler(row[1])
        if handler is not None:
            handler(row)

    def handler(self, kind: str, actor: str | None = None) -> Any:
        """The function that feeds rows of ``kind`` to this rule, or None when it ignores them.

        Templates on the hot path build it with their role tests resolved for the kind
        (see :meth:`procgrade.rules.predicates.Matcher.for_kind`); the others feed every watched kind
        through :meth:`_on`.
        """
        kinds = self.kinds()
        return self._on if (_ALL in kinds or kind in kinds) else None

    def _on(self, row: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        pass


class _Count(_Monitor):
    _STATE = ("matched", "partitions", "applicable")

    def __init__(self, rule: Any, low: int, high: int | None, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.match = compile_any(as_list(rule.match), "model")
        self.low, self.high = low, high
        self.matched: dict[Any, list[int]] = {}
        self.partitions: set[Any] = set() if self.stage_scoped else {None}
        self._kinds = kinds_of(as_list(rule.match))
        #: Semantics 2: the applicability guard (None: every partition is judged).
        self.guard: Any = None
        self.guard_any_model = False
        self.applicable: set[Any] = set()
        if semantics >= 2:
            guard = applicability_guard(rule)
            if guard is None:
                self.guard_any_model = True
            else:
                self.guard = compile_any(guard, "model")
                self._kinds = self._kinds | kinds_of(guard)

    def kinds(self) -> set[str]:
        return {_ALL} if (self.stage_scoped or self.guard_any_model) else self._kinds

    def handler(self, kind: str, actor: str | None = None) -> Any:
        """Scope ``run`` under a :class:`RunMonitor`: only the kinds the rule or its guard name
        (the one partition always exists; "any model event" is the run's count of them)."""
        if self.stage_scoped or self.owner is None:
            return super().handler(kind, actor)
        match = self.match.for_kind(kind, actor)
        guard = None if self.guard is None else self.guard.for_kind(kind, actor)
        if match is None and guard is None:
            return None
        matched, applicable = self.matched, self.applicable

        def on(row: tuple[Any, ...]) -> None:
            if match is not None and (match is True or match(row)):
                matched.setdefault(None, []).append(row[SEQ])
            if guard is not None and (guard is True or guard(row)):
                applicable.add(None)

        return on

    def _on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside:
            return
        self.partitions.add(part)
        if self.match(row):
            self.matched.setdefault(part, []).append(row[SEQ])
        if self.guard_any_model:
            if actor_matches(row[ACTOR], ("model",)):
                self.applicable.add(part)
        elif self.guard is not None and self.guard(row):
            self.applicable.add(part)

    def finish(self) -> None:
        judged_all = self.semantics < 2
        if self.guard_any_model and not self.stage_scoped and self.owner is not None and self.owner.model_events:
            self.applicable.add(None)
        for part in sorted(self.partitions, key=lambda p: -1 if p is None else p):
            if not judged_all and part not in self.applicable:
                self.emit(VACUOUS, None, part)
                continue
            seqs = self.matched.get(part, [])
            ok = len(seqs) >= self.low and (self.high is None or len(seqs) <= self.high)
            self.emit(FULFILLED if ok else VIOLATED, None, part, *seqs[:MAX_CITED])


def applicability_guard(rule: Any) -> list[Any] | None:
    """What makes a scope-level rule applicable under semantics 2: its ``applies_if``; by
    default, for absence, the model doing a kind of thing the rule matches; None meaning
    "any model event" (count and existence)."""
    from procgrade.rules.model import AbsenceRule, Predicate

    explicit = getattr(rule, "applies_if", None)
    if explicit is not None:
        return as_list(explicit)
    if isinstance(rule, AbsenceRule):
        kinds = sorted({k for p in as_list(rule.match) for k in p.kinds()})
        return [Predicate(kind=kinds, actor="model")]
    return None


class _Keyed(_Monitor):
    """Templates with an optional correlation key."""

    def __init__(self, rule: Any, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        corr = rule.correlation()
        self.a_key = COLUMN[corr.activation] if corr else None
        #: A target relates by any of these columns; None when the rule is not correlated.
        self.t_keys = tuple(COLUMN[c] for c in corr.target_columns()) if corr else None
        self.r_key = COLUMN[corr.reset] if corr and corr.reset else None
        #: Fast path: -1 when uncorrelated, the column index when targets relate by one column,
        #: None when by several (then :meth:`target_keys` decides).
        self.t_single = -1 if self.t_keys is None else (self.t_keys[0] if len(self.t_keys) == 1 else None)

    def target_keys(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """The keys a target row relates to: (None,) when uncorrelated, else its non-NULL
        values of the target columns (each once, in column order)."""
        if self.t_keys is None:
            return (None,)
        keys: list[Any] = []
        for index in self.t_keys:
            value = row[index]
            if value is not None and value not in keys:
                keys.append(value)
        return tuple(keys)

    @staticmethod
    def key(row: tuple[Any, ...], index: int | None) -> Any:
        return None if index is None else row[index]


class _Precedence(_Keyed):
    _STATE = ("last_target", "judged")

    def __init__(self, rule: PrecedenceRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.last_target: dict[tuple[Any, Any], int] = {}
        self.judged: set[tuple[Any, Any]] = set()


    def handler(self, kind: str, actor: str | None = None) -> Any:
        act, tgt = self.activation.for_kind(kind, actor), self.target.for_kind(kind, actor)
        if act is None and tgt is None:
            return None
        stage_scoped, a_key, target_keys, t_single = self.stage_scoped, self.a_key, self.target_keys, self.t_single
        stage_col = self.stage_col
        only_first, judged, last_target, emit = self.rule.only_first, self.judged, self.last_target, self.emit

        def on(row: tuple[Any, ...]) -> None:
            part = row[stage_col] if stage_scoped else None
            if stage_scoped and part is None:
                return
            seq = row[SEQ]
            if act is not None and (act is True or act(row)):
                key = None if a_key is None else row[a_key]
                if a_key is not None and key is None:
                    emit(VACUOUS, seq, part, seq)
                elif not (only_first and (part, key) in judged):
                    judged.add((part, key))
                    earlier = last_target.get((part, key))
                    emit(FULFILLED if earlier is not None else VIOLATED, seq, part, earlier, seq)
            if tgt is not None and (tgt is True or tgt(row)):
                if t_single is None:
                    for key in target_keys(row):
                        last_target[(part, key)] = seq
                elif t_single < 0:
                    last_target[(part, None)] = seq
                elif row[t_single] is not None:
                    last_target[(part, row[t_single])] = seq

        return on


class _PrecedenceSince(_Keyed):
    _STATE = ("last_target", "last_reset")

    def __init__(self, rule: PrecedenceSinceRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.reset = compile_any(as_list(rule.reset), "any")
        self.last_target: dict[tuple[Any, Any], int] = {}
        self.last_reset: dict[tuple[Any, Any], int] = {}


    def handler(self, kind: str, actor: str | None = None) -> Any:
        act, tgt, rst = self.activation.for_kind(kind, actor), self.target.for_kind(kind, actor), self.reset.for_kind(kind, actor)
        if act is None and tgt is None and rst is None:
            return None
        stage_scoped, a_key, target_keys, r_key = self.stage_scoped, self.a_key, self.target_keys, self.r_key
        stage_col = self.stage_col
        t_single = self.t_single
        reset_required, emit = self.rule.reset_required, self.emit
        last_target, last_reset = self.last_target, self.last_reset

        def on(row: tuple[Any, ...]) -> None:
            part = row[stage_col] if stage_scoped else None
            if stage_scoped and part is None:
                return
            seq = row[SEQ]
            if act is not None and (act is True or act(row)):
                key = None if a_key is None else row[a_key]
                if a_key is not None and key is None:
                    emit(VACUOUS, seq, part, seq)
                else:
                    reset = last_reset.get((part, key if r_key is not None else None))
                    target = last_target.get((part, key))
                    if reset is None and reset_required:
                        emit(VACUOUS, seq, part, seq)
                    elif target is not None and (reset is None or target > reset):
                        emit(FULFILLED, seq, part, target, seq)
                    else:
                        emit(VIOLATED, seq, part, reset, seq)
            if tgt is not None and (tgt is True or tgt(row)):
                if t_single is None:
                    for key in target_keys(row):
                        last_target[(part, key)] = seq
                elif t_single < 0:
                    last_target[(part, None)] = seq
                elif row[t_single] is not None:
                    last_target[(part, row[t_single])] = seq
            if rst is not None and (rst is True or rst(row)):
                key = None if r_key is None else row[r_key]
                if r_key is None or key is not None:
                    last_reset[(part, key)] = seq

        return on


class _Response(_Keyed):
    _STATE = ("pending", "pending_by_part")

    def __init__(self, rule: ResponseRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.deadline = compile_any(as_list(rule.deadline), "any")
        self.within = rule.within
        self.pending: dict[tuple[Any, Any], list[int]] = {}
        self.pending_by_part: dict[Any, set[tuple[Any, Any]]] = {}


    def handler(self, kind: str, actor: str | None = None) -> Any:
        act, tgt = self.activation.for_kind(kind, actor), self.target.for_kind(kind, actor)
        ddl = self.deadline.for_kind(kind, actor)
        if act is None and tgt is None and ddl is None:
            return None
        stage_scoped, a_key, within, emit = self.stage_scoped, self.a_key, self.within, self.emit
        stage_col = self.stage_col
        target_keys, t_single = self.target_keys, self.t_single
        pending, pending_by_part = self.pending, self.pending_by_part

        def on(row: tuple[Any, ...]) -> None:
            part = row[stage_col] if stage_scoped else None
            if stage_scoped and part is None:
                return
            seq = row[SEQ]
            if tgt is not None and (tgt is True or tgt(row)):
                keys = target_keys(row) if t_single is None else (
                    (None,) if t_single < 0 else ((row[t_single],) if row[t_single] is not None else ()))
                for key in keys:
                    waiting = pending.pop((part, key), None)
                    if waiting:
                        pending_by_part[part].discard((part, key))
                        for start in waiting:
                            late = within is not None and seq - start > within
                            emit(VIOLATED if late else FULFILLED, start, part, start, seq)
            if ddl is not None and (ddl is True or ddl(row)):
                for slot in sorted(pending_by_part.pop(part, set()), key=_slot_order):
                    for start in pending.pop(slot):
                        emit(VIOLATED, start, part, start, seq)
            if act is not None and (act is True or act(row)):
                key = None if a_key is None else row[a_key]
                if a_key is not None and key is None:
                    emit(VACUOUS, seq, part, seq)
                else:
                    pending.setdefault((part, key), []).append(seq)
                    pending_by_part.setdefault(part, set()).add((part, key))

        return on
    def finish(self) -> None:
        verdict = VACUOUS if self.rule.open_at_end == "vacuous" else VIOLATED
        for (part, _key), starts in self.pending.items():
            for start in starts:
                self.emit(verdict, start, part, start)
        self.pending.clear()


def _slot_order(slot: tuple[Any, Any]) -> tuple[str, str]:
    return (repr(slot[0]), repr(slot[1]))


class _ChainResponse(_Monitor):
    _STATE = ("waiting",)

    def __init__(self, rule: ChainResponseRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.waiting: dict[Any, int] = {}

    def kinds(self) -> set[str]:
        return {_ALL}

    def _on(self, row: tuple[Any, ...]) -> None:
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
    _STATE = ("previous",)

    def __init__(self, rule: ChainPrecedenceRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.target = compile_any(as_list(rule.target), "any")
        self.previous: dict[Any, tuple[int, bool]] = {}

    def kinds(self) -> set[str]:
        return {_ALL}

    def _on(self, row: tuple[Any, ...]) -> None:
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
    _STATE = ("last", "last_reset")

    def __init__(self, rule: NoRepeatRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.reset = compile_any(as_list(rule.reset), "any")
        self.key_index = COLUMN[rule.key]
        self.last: dict[tuple[Any, Any], int] = {}
        self.last_reset: dict[Any, int] = {}


    def handler(self, kind: str, actor: str | None = None) -> Any:
        act, rst = self.activation.for_kind(kind, actor), self.reset.for_kind(kind, actor)
        if act is None and rst is None:
            return None
        stage_scoped, key_index, emit, last, last_reset = (
            self.stage_scoped, self.key_index, self.emit, self.last, self.last_reset)
        stage_col = self.stage_col

        def on(row: tuple[Any, ...]) -> None:
            part = row[stage_col] if stage_scoped else None
            if stage_scoped and part is None:
                return
            seq = row[SEQ]
            if act is not None and (act is True or act(row)):
                key = row[key_index]
                if key is None:
                    emit(VACUOUS, seq, part, seq)
                else:
                    previous = last.get((part, key))
                    reset = last_reset.get(part)
                    if previous is not None and (reset is None or reset < previous):
                        emit(VIOLATED, seq, part, previous, seq)
                    else:
                        emit(FULFILLED, seq, part, seq)
                    last[(part, key)] = seq
            if rst is not None and (rst is True or rst(row)):
                last_reset[part] = seq

        return on


class _NotCoexistence(_Monitor):
    _STATE = ("seen", "partitions")

    def __init__(self, rule: NotCoexistenceRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.first_a = compile_any(as_list(rule.activation), "model")
        self.first_b = compile_any(as_list(rule.target), "any")
        self.seen: dict[Any, list[int | None]] = {}
        self.partitions: set[Any] = set() if self.stage_scoped else {None}
        self._kinds = kinds_of(as_list(rule.activation)) | kinds_of(as_list(rule.target))

    def kinds(self) -> set[str]:
        return {_ALL} if self.stage_scoped else self._kinds

    def _on(self, row: tuple[Any, ...]) -> None:
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
    def __init__(self, rule: SatisfiesRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.activation = compile_any(as_list(rule.activation), "model")
        self.require = compile_any(as_list(rule.require), "any")


    def handler(self, kind: str, actor: str | None = None) -> Any:
        act = self.activation.for_kind(kind, actor)
        if act is None:
            return None
        require, stage_scoped, emit = self.require, self.stage_scoped, self.emit
        stage_col = self.stage_col

        def on(row: tuple[Any, ...]) -> None:
            part = row[stage_col] if stage_scoped else None
            if stage_scoped and part is None:
                return
            if act is True or act(row):
                seq = row[SEQ]
                emit(FULFILLED if require(row) else VIOLATED, seq, part, seq)

        return on


class _Distinct(_Monitor):
    """Distinct keys among matching events in the first ``early_percent`` % of the model's events."""

    _STATE = ("model_count", "matched")

    def __init__(self, rule: DistinctRule, semantics: int = 2) -> None:
        super().__init__(rule, semantics)
        self.match = compile_any(as_list(rule.match), "model")
        self.key_index = COLUMN[rule.key]
        #: per partition: model events so far, and (rank, seq, key) of each matching one
        self.model_count: dict[Any, int] = {}
        self.matched: dict[Any, list[tuple[int, int, Any]]] = {}

    def kinds(self) -> set[str]:
        return {_ALL}

    def handler(self, kind: str, actor: str | None = None) -> Any:
        """Scope ``run`` under a :class:`RunMonitor`: only matching kinds; an event's rank among
        the model's events is the run's count of them so far (this event included)."""
        if self.stage_scoped or self.owner is None:
            return super().handler(kind, actor)
        match = self.match.for_kind(kind, actor)
        if match is None:
            return None
        owner, key_index, matched = self.owner, self.key_index, self.matched

        def on(row: tuple[Any, ...]) -> None:
            if match is True or match(row):
                matched.setdefault(None, []).append((owner.model_events, row[SEQ], row[key_index]))

        return on

    def _on(self, row: tuple[Any, ...]) -> None:
        inside, part = self.partition(row)
        if not inside or not actor_matches(row[ACTOR], ("model",)):
            if inside and self.match(row):  # a matching non-model event (the rule asked for it)
                self.matched.setdefault(part, []).append((self.model_count.get(part, 0), row[SEQ], row[self.key_index]))
            return
        rank = self.model_count[part] = self.model_count.get(part, 0) + 1
        if self.match(row):
            self.matched.setdefault(part, []).append((rank, row[SEQ], row[self.key_index]))

    def finish(self) -> None:
        percent, limit = self.rule.early_percent, self.rule.max
        by_owner = not self.stage_scoped and self.owner is not None
        for part in sorted(self.matched, key=lambda p: -1 if p is None else p):
            total = self.owner.model_events if by_owner else self.model_count.get(part, 0)
            firsts: dict[Any, int] = {}
            for rank, seq, key in self.matched[part]:
                if key is not None and rank * 100 <= percent * total and key not in firsts:
                    firsts[key] = seq
            if not firsts:
                self.emit(VACUOUS, None, part)
                continue
            cited = sorted(firsts.values())[:MAX_CITED]
            self.emit(FULFILLED if len(firsts) <= limit else VIOLATED, None, part, *cited)


def _monitor_for(rule: Any, semantics: int = 2) -> _Monitor:
    if isinstance(rule, CountRule):
        return _Count(rule, rule.min, rule.max, semantics)
    if isinstance(rule, ExistenceRule):
        return _Count(rule, 1, None, semantics)
    if isinstance(rule, AbsenceRule):
        return _Count(rule, 0, 0, semantics)
    table = {
        PrecedenceRule: _Precedence, PrecedenceSinceRule: _PrecedenceSince, ResponseRule: _Response,
        ChainResponseRule: _ChainResponse, ChainPrecedenceRule: _ChainPrecedence, NoRepeatRule: _NoRepeat,
        NotCoexistenceRule: _NotCoexistence, SatisfiesRule: _Satisfies, DistinctRule: _Distinct,
    }
    return table[type(rule)](rule, semantics)


class RunMonitor:
    """All rules of a set over one run: feed rows in seq order, then :meth:`finish`.

    Compiling the rules (predicates, per-kind handlers) is the costly part of a small run, so a
    monitor is reusable: :meth:`reset` readies it for the next run with everything compiled kept.
    """

    def __init__(self, ruleset: RuleSet, *, detail: bool = True) -> None:
        """With ``detail`` False only violations are kept as findings; fulfilled and vacuous
        activations are counted (see :meth:`tallies`), which is all a score needs."""
        self.monitors = [_monitor_for(rule, ruleset.semantics) for rule in ruleset.rules]
        #: Events by the model's own actors (``agent``, ``subagent:<id>``) fed so far.
        self.model_events = 0
        for monitor in self.monitors:
            monitor.owner = self
            if not detail:
                monitor.count_only()
        #: actor -> (is a model actor, kind -> the rules' handlers for rows of that actor and kind);
        #: the tables are shared by actors of one class (``subagent:a`` and ``subagent:b``)
        self._dispatch: dict[str, tuple[bool, dict[str, tuple[Any, ...]]]] = {}
        self._by_class: dict[str, tuple[bool, dict[str, tuple[Any, ...]]]] = {}

    def reset(self) -> None:
        """Forget the run fed so far (findings, tallies, every rule's state)."""
        self.model_events = 0
        for monitor in self.monitors:
            monitor.clear()

    def _actor(self, actor: str) -> tuple[bool, dict[str, tuple[Any, ...]]]:
        """The dispatch entry of ``actor``: what a predicate tests of an actor is its class (the
        part before ``:``), so actors of one class share one table of handlers."""
        base = actor.split(":", 1)[0]
        entry = self._by_class.get(base)
        if entry is None:
            entry = self._by_class[base] = (actor_matches(actor, ("model",)), {})
        if len(self._dispatch) >= 10_000:  # many distinct sub-agent ids: the tables stay
            self._dispatch.clear()
        self._dispatch[actor] = entry
        return entry

    def _handlers(self, kind: str, actor: str, table: dict[str, tuple[Any, ...]]) -> tuple[Any, ...]:
        """The rules' handlers for rows of ``kind`` by ``actor``'s class, in rule-set order
        (built once per kind and class, each with its predicates' actor tests resolved)."""
        handlers = tuple(h for h in (m.handler(kind, actor) for m in self.monitors) if h is not None)
        table[kind] = handlers
        return handlers

    def feed(self, rows: Iterable[tuple[Any, ...]]) -> None:
        dispatch = self._dispatch
        for row in rows:
            entry = dispatch.get(row[2])
            if entry is None:
                entry = self._actor(row[2])
            model, table = entry
            if model:
                self.model_events += 1
            handlers = table.get(row[1])
            if handlers is None:
                handlers = self._handlers(row[1], row[2], table)
            for handler in handlers:
                handler(row)

    def finish(self) -> dict[str, list[Finding]]:
        """Findings per rule id (in rule-set order), each list ordered by (seq, stage)."""
        result: dict[str, list[Finding]] = {}
        for monitor in self.monitors:
            monitor.finish()
            found = monitor.findings
            result[monitor.id] = sorted(found, key=Finding.sort_key) if len(found) > 1 else found[:]
        return result

    def tallies(self) -> dict[str, Tally]:
        """Counts of fulfilled and vacuous activations per rule (``detail=False`` only)."""
        return {m.id: Tally(m.tally.fulfilled, m.tally.vacuous) for m in self.monitors if m.tally is not None}


def evaluate(ruleset: RuleSet, rows: Iterable[tuple[Any, ...]]) -> dict[str, list[Finding]]:
    """Run every rule of ``ruleset`` over one run's fact rows (in seq order)."""
    monitor = RunMonitor(ruleset)
    monitor.feed(rows)
    return monitor.finish()
