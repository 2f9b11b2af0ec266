"""Rule sets compiled to generated Python: one function per (actor class, kind) that does, inline,
what every interested rule's handler in :mod:`procgrade.rules.monitor` does with a row.

The interpreted monitor calls one handler per interested rule and, inside it, one function per
predicate role and condition (about 37 calls a row on the default rule set). A
:class:`CompiledMonitor` keeps the interpreted monitor's rule objects (their state, their
``finish``, their tallies and findings) and only replaces how rows reach them: the first row of
each kind by each actor class builds, from the rule model, the source of one function holding
every interested rule's role tests (the same column conditions, in the same order) and state
updates, ``compile()``s it once per rule set (code objects are cached by their source) and binds
it to this monitor's state. A row then costs one call.

The interpreted monitor stays the reference: ``tests/test_compiled_monitor.py`` holds the two to
identical findings, tallies and score documents over generated runs and the shipped rule sets.
Templates without a generated form here (``chain_response``, ``chain_precedence``,
``not_coexistence``, and ``count``/``existence``/``absence``/``distinct`` scoped by stage) are fed
by their interpreted handler, called from the generated function (:data:`GENERATED` lists the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import CodeType, FunctionType
from typing import Any

from procgrade.rules.model import RuleSet
from procgrade.rules.monitor import (
    FULFILLED,
    MAX_CITED,
    VACUOUS,
    VIOLATED,
    Finding,
    RunMonitor,
    _Count,
    _Distinct,
    _Monitor,
    _NoRepeat,
    _Precedence,
    _PrecedenceSince,
    _Response,
    _Satisfies,
    _slot_order,
)
from procgrade.rules.predicates import SEQ, PrefixMemo

__all__ = ["CompiledMonitor", "GENERATED", "generated_source"]

#: Rule monitors whose handlers have a generated form (scope ``run`` only for count and distinct).
GENERATED = (_Precedence, _PrecedenceSince, _Response, _NoRepeat, _Satisfies, _Count, _Distinct)

_UNSEEN = object()
#: Code objects by their source: a rule set compiles once per process, whatever the monitors.
_CODE: dict[str, CodeType] = {}


def _generated(monitor: _Monitor) -> bool:
    if isinstance(monitor, (_Count, _Distinct)):
        return not monitor.stage_scoped
    return isinstance(monitor, GENERATED)


class _Writer:
    """Source lines of one function and the values its names refer to."""

    def __init__(self, memos: dict[tuple[str, ...], PrefixMemo] | None = None) -> None:
        self.lines: list[str] = []
        self.values: dict[str, Any] = {}
        self._named: dict[tuple[type, Any], str] = {}
        #: prefix memos by their prefixes, shared by every function of one monitor
        self.memos = {} if memos is None else memos

    def memo(self, prefixes: tuple[str, ...]) -> tuple[str, str]:
        """Names of the ``seen`` dict and ``learn`` method of the memo of ``prefixes``."""
        memo = self.memos.get(prefixes)
        if memo is None:
            memo = self.memos[prefixes] = PrefixMemo(prefixes)
        return self.name(memo.seen, "seen"), self.name(memo.learn, "learn")

    def name(self, value: Any, hint: str = "c") -> str:
        """A global name for ``value`` in the generated function (the same value, one name)."""
        try:
            key: Any = (type(value), value)
            hash(key)
        except TypeError:
            key = (type(value), id(value))
        found = self._named.get(key)
        if found is None:
            found = self._named[key] = f"{hint}{len(self.values)}"
            self.values[found] = value
        return found

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)


class _Rule:
    """Writes one rule's handler body: its names, its role tests and its verdicts."""

    def __init__(self, writer: _Writer, monitor: _Monitor, number: int, kind: str, actor: str) -> None:
        self.w, self.m, self.kind, self.actor = writer, monitor, kind, actor
        self.p = f"r{number}_"
        self.count_only = monitor.tally is not None
        self.findings = writer.name(monitor.findings.append, self.p + "findings")
        self.tally = writer.name(monitor.tally, self.p + "tally") if self.count_only else None
        self.rule_id = writer.name(monitor.id, self.p + "id")

    def test(self, matcher: Any) -> str | None:
        return matcher.source_for_kind(self.kind, self.actor, lambda value: self.w.name(value, self.p + "c"),
                                       self.w.memo)

    def state(self, value: Any, label: str) -> str:
        return self.w.name(value, self.p + label)

    def emit(self, depth: int, verdict: str, seq: str, part: str, cited: Iterable[tuple[str, bool]]) -> None:
        """What :meth:`_Monitor.emit` (or its counting form) does; ``cited`` are (expression, may
        be None) in ascending order."""
        if self.count_only and verdict != VIOLATED:
            self.w.line(depth, f"{self.tally}.{'fulfilled' if verdict == FULFILLED else 'vacuous'} += 1")
            return
        cited = list(cited)
        stage = part if self.m.stage_scoped else "None"
        sure = [expr for expr, maybe in cited if not maybe]
        if len(sure) == len(cited):
            values = "(" + "".join(f"{expr}, " for expr, _ in cited) + ")"
        else:
            values = "tuple([_c for _c in (" + "".join(f"{expr}, " for expr, _ in cited) + ") if _c is not None])"
        self.w.line(depth, f"{self.findings}(_new(_Finding, ({self.rule_id}, {verdict!r}, {seq}, {stage}, {values})))")

    def target_keys(self, depth: int, keys_var: str) -> None:
        """``keys_var`` = the keys a target row relates to (:meth:`_Keyed.target_keys`)."""
        m = self.m
        if m.t_single is None:
            self.w.line(depth, f"{keys_var} = {self.state(m.target_keys, 'target_keys')}(row)")
        elif m.t_single < 0:
            self.w.line(depth, f"{keys_var} = (None,)")
        else:
            self.w.line(depth, f"{keys_var} = (row[{m.t_single}],) if row[{m.t_single}] is not None else ()")


def _write_rule(rule: _Rule, depth: int) -> bool:
    """Write ``rule``'s body at ``depth`` (the row is in ``row``, its seq in ``seq``, the model's
    events so far in ``n``); False when the rule ignores rows of this kind by this actor."""
    m, w = rule.m, rule.w
    part = "part"
    if isinstance(m, _Count):
        match = rule.test(m.match)
        guard = None if m.guard is None else rule.test(m.guard)
        if match is None and guard is None:
            return False
        at = _when(rule, depth, match)
        if at is not None:
            w.line(at, f"{rule.state(m.matched, 'matched')}.setdefault(None, []).append(seq)")
        at = _when(rule, depth, guard)
        if at is not None:
            w.line(at, f"{rule.state(m.applicable, 'applicable')}.add(None)")
        return True
    if isinstance(m, _Distinct):
        match = rule.test(m.match)
        if match is None:
            return False
        at = _when(rule, depth, match)
        w.line(at, f"{rule.state(m.matched, 'matched')}.setdefault(None, []).append((n, seq, row[{m.key_index}]))")
        return True
    roles: dict[str, str | None]
    if isinstance(m, _Precedence):
        roles = {"act": rule.test(m.activation), "tgt": rule.test(m.target)}
    elif isinstance(m, _PrecedenceSince):
        roles = {"act": rule.test(m.activation), "tgt": rule.test(m.target), "rst": rule.test(m.reset)}
    elif isinstance(m, _Response):
        roles = {"act": rule.test(m.activation), "tgt": rule.test(m.target), "ddl": rule.test(m.deadline)}
    elif isinstance(m, _NoRepeat):
        roles = {"act": rule.test(m.activation), "rst": rule.test(m.reset)}
    elif isinstance(m, _Satisfies):
        roles = {"act": rule.test(m.activation)}
    else:
        raise TypeError(type(m).__name__)
    if all(test is None for test in roles.values()):
        return False
    if m.stage_scoped:
        w.line(depth, f"part = row[{m.stage_col}]")
        w.line(depth, "if part is not None:")
        depth += 1
    else:
        part = "None"
    if isinstance(m, _Precedence):
        _precedence(rule, depth, part, roles)
    elif isinstance(m, _PrecedenceSince):
        _precedence_since(rule, depth, part, roles)
    elif isinstance(m, _Response):
        _response(rule, depth, part, roles)
    elif isinstance(m, _NoRepeat):
        _no_repeat(rule, depth, part, roles)
    else:
        _satisfies(rule, depth, part, roles)
    return True


def _when(rule: _Rule, depth: int, test: str | None) -> int | None:
    """Open ``if test:`` (nothing for a test that always holds); the body's depth, or None when
    the test never holds."""
    if test is None:
        return None
    if test == "True":
        return depth
    rule.w.line(depth, f"if {test}:")
    return depth + 1


def _activation_key(rule: _Rule, depth: int, part: str) -> int:
    """``key`` of the activation; a correlated activation without one is vacuous. The depth
    where the activation is judged."""
    m = rule.m
    if m.a_key is None:
        rule.w.line(depth, "key = None")
        return depth
    rule.w.line(depth, f"key = row[{m.a_key}]")
    rule.w.line(depth, "if key is None:")
    rule.emit(depth + 1, VACUOUS, "seq", part, [("seq", False)])
    rule.w.line(depth, "else:")
    return depth + 1


def _record_target(rule: _Rule, depth: int, part: str, last_target: str) -> None:
    m, w = rule.m, rule.w
    if m.t_single is None:
        rule.target_keys(depth, "keys")
        w.line(depth, "for key in keys:")
        w.line(depth + 1, f"{last_target}[({part}, key)] = seq")
    elif m.t_single < 0:
        w.line(depth, f"{last_target}[({part}, None)] = seq")
    else:
        w.line(depth, f"if row[{m.t_single}] is not None:")
        w.line(depth + 1, f"{last_target}[({part}, row[{m.t_single}])] = seq")


def _precedence(rule: _Rule, depth: int, part: str, roles: dict[str, str | None]) -> None:
    m, w = rule.m, rule.w
    last_target = rule.state(m.last_target, "last_target")
    at = _when(rule, depth, roles["act"])
    if at is not None:
        at = _activation_key(rule, at, part)
        if m.rule.only_first:
            judged = rule.state(m.judged, "judged")
            w.line(at, f"if ({part}, key) not in {judged}:")
            at += 1
            w.line(at, f"{judged}.add(({part}, key))")
        w.line(at, f"earlier = {last_target}.get(({part}, key))")
        w.line(at, "if earlier is not None:")
        rule.emit(at + 1, FULFILLED, "seq", part, [("earlier", False), ("seq", False)])
        w.line(at, "else:")
        rule.emit(at + 1, VIOLATED, "seq", part, [("seq", False)])
    at = _when(rule, depth, roles["tgt"])
    if at is not None:
        _record_target(rule, at, part, last_target)


def _precedence_since(rule: _Rule, depth: int, part: str, roles: dict[str, str | None]) -> None:
    m, w = rule.m, rule.w
    last_target, last_reset = rule.state(m.last_target, "last_target"), rule.state(m.last_reset, "last_reset")
    at = _when(rule, depth, roles["act"])
    if at is not None:
        at = _activation_key(rule, at, part)
        w.line(at, f"reset = {last_reset}.get(({part}, {'key' if m.r_key is not None else 'None'}))")
        w.line(at, f"target = {last_target}.get(({part}, key))")
        if m.rule.reset_required:
            w.line(at, "if reset is None:")
            rule.emit(at + 1, VACUOUS, "seq", part, [("seq", False)])
            w.line(at, "elif target is not None and (reset is None or target > reset):")
        else:
            w.line(at, "if target is not None and (reset is None or target > reset):")
        rule.emit(at + 1, FULFILLED, "seq", part, [("target", False), ("seq", False)])
        w.line(at, "else:")
        rule.emit(at + 1, VIOLATED, "seq", part, [("reset", True), ("seq", False)])
    at = _when(rule, depth, roles["tgt"])
    if at is not None:
        _record_target(rule, at, part, last_target)
    at = _when(rule, depth, roles.get("rst"))
    if at is not None:
        if m.r_key is None:
            w.line(at, f"{last_reset}[({part}, None)] = seq")
        else:
            w.line(at, f"if row[{m.r_key}] is not None:")
            w.line(at + 1, f"{last_reset}[({part}, row[{m.r_key}])] = seq")


def _response(rule: _Rule, depth: int, part: str, roles: dict[str, str | None]) -> None:
    m, w = rule.m, rule.w
    pending, by_part = rule.state(m.pending, "pending"), rule.state(m.pending_by_part, "pending_by_part")
    at = _when(rule, depth, roles["tgt"])
    if at is not None:
        w.line(at, f"if {pending}:")  # nothing pending: a target resolves nothing
        at += 1
        if m.t_single is not None and m.t_single < 0:  # uncorrelated: the one key None
            w.line(at, "key = None")
        else:
            rule.target_keys(at, "keys")
            w.line(at, "for key in keys:")
            at += 1
        w.line(at, f"waiting = {pending}.pop(({part}, key), None)")
        w.line(at, "if waiting:")
        w.line(at + 1, f"{by_part}[{part}].discard(({part}, key))")
        w.line(at + 1, "for start in waiting:")
        if m.within is None:
            rule.emit(at + 2, FULFILLED, "start", part, [("start", False), ("seq", False)])
        else:
            w.line(at + 2, f"if seq - start > {rule.state(m.within, 'within')}:")
            rule.emit(at + 3, VIOLATED, "start", part, [("start", False), ("seq", False)])
            w.line(at + 2, "else:")
            rule.emit(at + 3, FULFILLED, "start", part, [("start", False), ("seq", False)])
    at = _when(rule, depth, roles["ddl"])
    if at is not None:
        w.line(at, f"slots = {by_part}.pop({part}, None)")
        w.line(at, "if slots:")
        w.line(at + 1, "for slot in sorted(slots, key=_slot_order):")
        w.line(at + 2, f"for start in {pending}.pop(slot):")
        rule.emit(at + 3, VIOLATED, "start", part, [("start", False), ("seq", False)])
    at = _when(rule, depth, roles["act"])
    if at is not None:
        at = _activation_key(rule, at, part)
        w.line(at, f"{pending}.setdefault(({part}, key), []).append(seq)")
        w.line(at, f"{by_part}.setdefault({part}, set()).add(({part}, key))")


def _no_repeat(rule: _Rule, depth: int, part: str, roles: dict[str, str | None]) -> None:
    m, w = rule.m, rule.w
    last, last_reset = rule.state(m.last, "last"), rule.state(m.last_reset, "last_reset")
    at = _when(rule, depth, roles["act"])
    if at is not None:
        w.line(at, f"key = row[{m.key_index}]")
        w.line(at, "if key is None:")
        rule.emit(at + 1, VACUOUS, "seq", part, [("seq", False)])
        w.line(at, "else:")
        w.line(at + 1, f"previous = {last}.get(({part}, key))")
        w.line(at + 1, f"reset = {last_reset}.get({part})")
        w.line(at + 1, "if previous is not None and (reset is None or reset < previous):")
        rule.emit(at + 2, VIOLATED, "seq", part, [("previous", False), ("seq", False)])
        w.line(at + 1, "else:")
        rule.emit(at + 2, FULFILLED, "seq", part, [("seq", False)])
        w.line(at + 1, f"{last}[({part}, key)] = seq")
    at = _when(rule, depth, roles["rst"])
    if at is not None:
        w.line(at, f"{last_reset}[{part}] = seq")


def _satisfies(rule: _Rule, depth: int, part: str, roles: dict[str, str | None]) -> None:
    m, w = rule.m, rule.w
    at = _when(rule, depth, roles["act"])
    assert at is not None
    require = rule.test(m.require)
    if require is None:
        rule.emit(at, VIOLATED, "seq", part, [("seq", False)])
        return
    if require == "True":
        rule.emit(at, FULFILLED, "seq", part, [("seq", False)])
        return
    w.line(at, f"if {require}:")
    rule.emit(at + 1, FULFILLED, "seq", part, [("seq", False)])
    w.line(at, "else:")
    rule.emit(at + 1, VIOLATED, "seq", part, [("seq", False)])


def generated_source(monitors: list[_Monitor], kind: str, actor: str,
                     owner: Any = None) -> tuple[str, dict[str, Any]] | None:
    """(source of ``feed_row(row, n)``, the values its names refer to) for rows of ``kind`` by
    ``actor``'s class, or None when no rule reacts to them."""
    w = _Writer(getattr(owner, "_prefix_memos", None))
    w.line(0, "def feed_row(row, n):")
    w.line(1, f"seq = row[{SEQ}]")
    reacting = False
    for number, monitor in enumerate(monitors):
        if _generated(monitor):
            start = len(w.lines)
            w.line(1, f"# {monitor.id}")
            if _write_rule(_Rule(w, monitor, number, kind, actor), 1):
                reacting = True
            else:
                del w.lines[start:]
            continue
        handler = monitor.handler(kind, actor)
        if handler is not None:  # no generated form: the interpreted handler, with the count it may read
            reacting = True
            w.line(1, f"# {monitor.id} (interpreted)")
            w.line(1, f"{w.name(owner, '_owner')}.model_events = n")
            w.line(1, f"{w.name(handler, f'r{number}_handler')}(row)")
    if not reacting:
        return None
    w.values.update(_new=_new, _Finding=Finding, _slot_order=_slot_order)
    return "\n".join(w.lines) + "\n", w.values


def _function(source: str, values: dict[str, Any]) -> Callable[..., None]:
    code = _CODE.get(source)
    if code is None:
        if len(_CODE) >= 4096:
            _CODE.clear()
        module = compile(source, "<procgrade compiled rules>", "exec")
        code = _CODE[source] = next(c for c in module.co_consts if isinstance(c, CodeType))
    return FunctionType(code, {"__builtins__": __builtins__, **values})


_sort_key = Finding.sort_key
#: A tuple subclass made without its Python-level ``__new__`` (findings, in generated code too).
_new = tuple.__new__


def _finisher(monitor: _Monitor, owner: RunMonitor) -> Callable[[], None] | None:
    """What finishes ``monitor`` under ``owner``'s generated functions: None when its ``finish``
    does nothing, a shortcut where the run-scoped state makes the general loop one step."""
    if type(monitor).finish is _Monitor.finish:
        return None
    if isinstance(monitor, _Response):
        pending, finish = monitor.pending, monitor.finish
        return lambda: finish() if pending else None  # nothing pending: nothing to emit
    if isinstance(monitor, _Distinct) and not monitor.stage_scoped:
        return _distinct_finisher(monitor, owner)
    if isinstance(monitor, _Count) and not monitor.stage_scoped:
        return _count_finisher(monitor, owner)
    return monitor.finish


def _run_verdicts(monitor: _Monitor) -> tuple[Callable[[], None], Callable[[bool, tuple[int, ...]], None]]:
    """(vacuous(), verdict(fulfilled, cited)): ``monitor.emit``'s effect for a verdict on the run as
    a whole (no seq, no stage). A monitor that only counts (re-scoring) gets the count, or the
    violation's finding, directly: through ``emit`` each took two calls with the cited seqs spread
    and gathered again (1-2 us of the 60 a small run costs beyond its events)."""
    tally = monitor.tally
    if tally is None:
        emit = monitor.emit
        return (lambda: emit(VACUOUS, None, None),
                lambda ok, cited: emit(FULFILLED if ok else VIOLATED, None, None, *cited))
    findings, rule_id = monitor.findings, monitor.id

    def vacuous() -> None:
        tally.vacuous += 1

    def verdict(ok: bool, cited: tuple[int, ...]) -> None:
        if ok:
            tally.fulfilled += 1
        else:
            findings.append(_new(Finding, (rule_id, VIOLATED, None, None, cited)))

    return vacuous, verdict


def _distinct_finisher(monitor: _Distinct, owner: RunMonitor) -> Callable[[], None]:
    """:meth:`_Distinct.finish` for scope ``run``: its one partition (None) when anything matched."""
    matched = monitor.matched
    percent, limit = monitor.rule.early_percent, monitor.rule.max
    vacuous, verdict = _run_verdicts(monitor)

    def finish() -> None:
        found = matched.get(None)
        if not found:  # nothing matched: no partition, no finding
            return
        window = percent * owner.model_events
        firsts: dict[Any, int] = {}
        for rank, seq, key in found:
            if key is not None and rank * 100 <= window and key not in firsts:
                firsts[key] = seq
        if not firsts:
            vacuous()
            return
        verdict(len(firsts) <= limit, tuple(sorted(firsts.values())[:MAX_CITED]))

    return finish


def _count_finisher(monitor: _Count, owner: RunMonitor) -> Callable[[], None]:
    """:meth:`_Count.finish` for scope ``run``, whose one partition is None."""
    judged_all, any_model = monitor.semantics < 2, monitor.guard_any_model
    applicable, matched, low, high = monitor.applicable, monitor.matched, monitor.low, monitor.high
    vacuous, verdict = _run_verdicts(monitor)

    def finish() -> None:
        if any_model and owner.model_events:
            applicable.add(None)
        if not judged_all and None not in applicable:
            vacuous()
            return
        seqs = matched.get(None, ())
        verdict(len(seqs) >= low and (high is None or len(seqs) <= high), tuple(seqs[:MAX_CITED]))

    return finish


class CompiledMonitor(RunMonitor):
    """A :class:`RunMonitor` whose rows reach the rules through generated functions, one per
    (actor class, kind); findings, tallies and ``finish`` are the interpreted monitor's."""

    def __init__(self, ruleset: RuleSet, *, detail: bool = True) -> None:
        super().__init__(ruleset, detail=detail)
        self._prefix_memos: dict[tuple[str, ...], PrefixMemo] = {}
        clears: list[Callable[[], None]] = []
        self._run_partitions: list[Callable[[Any], None]] = []
        for monitor in self.monitors:
            clears.append(monitor.findings.clear)
            clears.extend(getattr(monitor, name).clear for name in monitor._STATE)
            if not monitor.stage_scoped and "partitions" in monitor._STATE:
                self._run_partitions.append(monitor.partitions.add)  # type: ignore[attr-defined]
        #: what :meth:`_Monitor.clear` empties, every rule's, as one flat list (containers are never replaced)
        self._clears = tuple(clears)
        self._tallies = tuple(monitor.tally for monitor in self.monitors if monitor.tally is not None)
        #: (rule id, findings, what finishes the rule or None when its ``finish`` has nothing to do)
        self._finishers = tuple((monitor.id, monitor.findings, _finisher(monitor, self)) for monitor in self.monitors)
        self._active_finishers = tuple(finisher for _, _, finisher in self._finishers if finisher is not None)
        #: every rule's own findings list by rule id (lists are cleared, never replaced)
        self._live_findings = {rule_id: found for rule_id, found, _ in self._finishers}

    def reset(self) -> None:
        """:meth:`RunMonitor.reset`, flattened."""
        self.model_events = 0
        for clear in self._clears:
            clear()
        for tally in self._tallies:
            tally.fulfilled = tally.vacuous = 0
        for add in self._run_partitions:
            add(None)

    def finish(self) -> dict[str, list[Finding]]:
        """:meth:`RunMonitor.finish`, calling only the rules' ``finish`` that have work to do."""
        result: dict[str, list[Finding]] = {}
        for rule_id, found, finisher in self._finishers:
            if finisher is not None:
                finisher()
            result[rule_id] = sorted(found, key=_sort_key) if len(found) > 1 else found[:]
        return result

    def finish_in_place(self) -> dict[str, list[Finding]]:
        """:meth:`finish` without copies: each rule's own list of findings, sorted in place, valid
        until the next :meth:`reset` (for a caller that writes them out at once, as scoring does)."""
        for finisher in self._active_finishers:
            finisher()
        for found in self._live_findings.values():
            if len(found) > 1:
                found.sort(key=_sort_key)
        return self._live_findings

    def _handlers(self, kind: str, actor: str, table: dict[str, Any]) -> Any:  # type: ignore[override]
        made = generated_source(self.monitors, kind, actor, self)
        function = None if made is None else _function(*made)
        table[kind] = function
        return function

    def feed(self, rows: Iterable[tuple[Any, ...]]) -> None:
        dispatch, unseen = self._dispatch, _UNSEEN
        n = self.model_events
        try:
            for row in rows:
                entry = dispatch.get(row[2])
                if entry is None:
                    entry = self._actor(row[2])
                model, table = entry
                if model:
                    n += 1
                function = table.get(row[1], unseen)
                if function is unseen:
                    function = self._handlers(row[1], row[2], table)
                if function is not None:
                    function(row, n)
        finally:
            self.model_events = n
