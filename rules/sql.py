"""The SQL back-end: every template compiled to window-function SQL run by the store's database.

Same meaning as the canonical monitor (:mod:`procgrade.rules.monitor`, whose docstring is the
specification), evaluated by SQLite (3.28+) or PostgreSQL instead of Python. Each
rule becomes one query over the run's rows of the ``events`` table; all ordering and
state (last target or reset before an activation, next target or deadline after it,
the previous activation with the same key, the previous and next event of the
partition, per-partition counts and first seqs) is computed by the database from

- prefix aggregates ``MAX(CASE WHEN <role> THEN seq END) OVER (PARTITION BY run_id
  [, stage][, key] ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)``,
- suffix aggregates ("the first X after this row"), written as prefix aggregates over
  the reversed order ``ORDER BY seq DESC ... ROWS BETWEEN UNBOUNDED PRECEDING AND 1
  PRECEDING`` (the same rows as ``1 FOLLOWING AND UNBOUNDED FOLLOWING``, but aggregated
  incrementally by PostgreSQL, where a moving-head MIN frame is quadratic),
- ``LAG``/``LEAD``, ``ROW_NUMBER`` and ``GROUP BY``,

never correlated ``EXISTS`` subqueries (quadratic). Python only turns result rows
into :class:`~procgrade.rules.monitor.Finding` objects.

How the monitor's within-one-event order is kept: when activation, target, reset
and deadline may be keyed on different columns, each event contributes one row per
role it plays (a ``UNION ALL`` of role rows) carrying that role's key, and windows
order rows by ``(seq, role)`` with the roles numbered in the monitor's evaluation
order: activation, target, reset for the precedence templates (an activation sees
only what came strictly before it); target, deadline, activation for response (an
activation waits only for what comes strictly after it). A key is carried as two
columns, ``(ki, kt)`` = (integer value, text value), so values of different column
types never meet, exactly as Python's ``5 != "5"``.

Predicates compile to boolean SQL with bound parameters only; column names come from
the validated rule model. Prefixes compare ``substr(col, 1, length(p)) = p``
(exact and case-sensitive on both databases; ``LIKE`` is neither), actor classes the
same way. A rule string holding NUL never matches (no stored column text can hold it,
and PostgreSQL cannot even receive it), so it is compiled to false.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from procgrade.engine.facts import FACT_COLUMNS
from procgrade.rules.model import (
    AbsenceRule,
    ChainPrecedenceRule,
    ChainResponseRule,
    CountRule,
    DistinctRule,
    ExistenceRule,
    NoRepeatRule,
    NotCoexistenceRule,
    Predicate,
    PrecedenceRule,
    PrecedenceSinceRule,
    ResponseRule,
    RuleSet,
    SatisfiesRule,
    as_list,
)
from procgrade.rules.monitor import FULFILLED, MAX_CITED, VACUOUS, VIOLATED, Finding, applicability_guard

__all__ = ["evaluate_sql", "compile_rule", "CompiledRule", "SUPPORTED_DIALECTS"]

SUPPORTED_DIALECTS = ("sqlite", "postgresql")

#: Columns a predicate may name, and their type family (validated by the model already;
#: checked again here because names are the only thing placed in SQL text).
_COLUMN_TYPES: dict[str, str] = {"stage": "int", "in_stage": "int", **FACT_COLUMNS}
_FALSE = "1 = 0"
_TRUE = "1 = 1"
#: No seq, seq distance or count exceeds this (64-bit columns); rule bounds beyond it are
#: decided at compile time (SQLite cannot even bind a larger integer).
_INT64_MAX = 2**63 - 1


@dataclass
class CompiledRule:
    """One rule's query: ``sql`` takes ``params`` plus ``:run_id``.

    ``shape`` tells how to read the result rows: ``row`` (seq, stage, verdict, other
    cited seq), ``count`` (part, verdict, one cited seq or NULL) or ``pair``
    (part, verdict, first activation seq, first target seq).
    """

    rule_id: str
    stage_scoped: bool
    shape: str
    sql: str
    params: dict[str, Any] = field(default_factory=dict)


class _Params:
    """Bound parameters of one query (``:p0``, ``:p1``, ...)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def bind(self, value: Any) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f":{name}"


def _col(name: str) -> str:
    if name not in _COLUMN_TYPES and name not in ("seq", "kind", "actor", "run_id"):
        raise ValueError(f"unknown column {name!r}")  # pragma: no cover - the model validates names
    return f'"{name}"'


def _starts_with(column: str, prefix: str, p: _Params) -> str:
    """Exact, case-sensitive prefix test (NULL when the column is NULL)."""
    bound = p.bind(prefix)
    return f"substr({column}, 1, length(CAST({bound} AS TEXT))) = {bound}"


def _actor_sql(classes: Sequence[str], p: _Params) -> str:
    """``actor`` belongs to one of ``classes`` (see procgrade.rules.predicates.actor_matches)."""
    if "any" in classes:
        return _TRUE
    bases: list[str] = []
    for cls in classes:
        for base in (("agent", "subagent") if cls == "model" else (cls,)):
            if base not in bases:
                bases.append(base)
    alternatives = [f'"actor" IN ({", ".join(p.bind(b) for b in bases)})']
    alternatives += [_starts_with('"actor"', f"{b}:", p) for b in bases]
    return "(" + " OR ".join(alternatives) + ")"


_OPS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _predicate_sql(predicate: Predicate, default_actor: str, p: _Params) -> str:
    """A boolean SQL expression that is true exactly when the monitor's check is true
    (false or NULL otherwise: only AND/OR over NULL-able comparisons, never NOT)."""
    parts = [f'"kind" IN ({", ".join(p.bind(k) for k in predicate.kinds())})']
    actor = _actor_sql(predicate.actors(default_actor), p)
    if actor != _TRUE:
        parts.append(actor)
    for column, wanted in sorted(predicate.equals.items()):
        items = wanted if isinstance(wanted, list) else [wanted]
        items = [v for v in items if not (isinstance(v, str) and "\x00" in v)]
        if not items:
            return _FALSE
        parts.append(f"{_col(column)} IN ({', '.join(p.bind(v) for v in items)})")
    for column, prefixes in sorted(predicate.prefix.items()):
        starts = [s for s in sorted(set(prefixes)) if "\x00" not in s]
        if not starts:
            return _FALSE
        parts.append("(" + " OR ".join(_starts_with(_col(column), s, p) for s in starts) + ")")
    for column, prefixes in sorted(predicate.not_prefix.items()):
        starts = [s for s in sorted(set(prefixes)) if "\x00" not in s]
        if starts:  # (a prefix holding NUL excludes nothing)
            col = _col(column)
            # substr(...) = p is never NULL for a non-NULL column, so NOT is safe here
            parts.append(f"({col} IS NULL OR NOT (" + " OR ".join(_starts_with(col, s, p) for s in starts) + "))")
    for column in predicate.present:
        parts.append(f"{_col(column)} IS NOT NULL")
    for column in predicate.absent:
        parts.append(f"{_col(column)} IS NULL")
    for comparison in predicate.compare:
        parts.append(f"{_col(comparison.field)} {_OPS[comparison.op]} {p.bind(comparison.value)}")
    return "(" + " AND ".join(parts) + ")"


def _any_sql(predicates: list[Predicate], default_actor: str, p: _Params) -> str:
    """Any of ``predicates`` (false for none)."""
    if not predicates:
        return _FALSE
    return "(" + " OR ".join(_predicate_sql(pr, default_actor, p) for pr in predicates) + ")"


def _flag(condition: str) -> str:
    """A 0/1 column from a boolean that may be NULL (NULL is 0, as the monitor's False)."""
    return f"CASE WHEN {condition} THEN 1 ELSE 0 END"


class _Query:
    """Shared pieces of one rule's query: its scope, partition and base CTE."""

    def __init__(self, rule: Any, semantics: int = 2) -> None:
        self.rule = rule
        self.semantics = semantics
        self.p = _Params()
        self.stage_scoped = rule.scope == "stage"
        #: The stage a row is in: its own (semantics 1) or the one derived from the log.
        self.stage_col = "stage" if semantics == 1 else "in_stage"
        #: Window partition of the rule's scope (one run; or one stage of it).
        self.part = "run_id, stage" if self.stage_scoped else "run_id"
        self.scope_filter = f" AND {self.stage_col} IS NOT NULL" if self.stage_scoped else ""

    def base(self, flags: dict[str, str], columns: Sequence[str] = (), only_flagged: bool = True) -> str:
        """``ev``: the run's in-scope rows with a 0/1 column per role (optionally only rows
        playing some role) and the raw key ``columns``."""
        cols = "".join(f", {_col(c)}" for c in dict.fromkeys(columns))
        flag_cols = "".join(f", {_flag(sql)} AS {name}" for name, sql in flags.items())
        inner = (f"SELECT run_id, seq, {self.stage_col} AS stage{cols}{flag_cols} FROM events "
                 f"WHERE run_id = :run_id{self.scope_filter}")
        if only_flagged and flags:
            wanted = " OR ".join(f"{name} = 1" for name in flags)
            return f"ev AS (SELECT * FROM ({inner}) AS flagged WHERE {wanted})"
        return f"ev AS ({inner})"

    def compiled(self, shape: str, sql: str) -> CompiledRule:
        return CompiledRule(self.rule.id, self.stage_scoped, shape, " ".join(sql.split()), dict(self.p.values))


def _key(column: str | None) -> tuple[str, str]:
    """(ki, kt) select expressions carrying ``column``'s value (or no key)."""
    if column is None:
        return "CAST(NULL AS BIGINT)", "CAST(NULL AS TEXT)"
    if _COLUMN_TYPES[column] == "int":
        return _col(column), "CAST(NULL AS TEXT)"
    return "CAST(NULL AS BIGINT)", _col(column)


def _role_rows(roles: Sequence[tuple[int, str, str | None, bool]]) -> str:
    """``roles`` CTE: one row per (event, role) as (run_id, seq, stage, role, ki, kt).

    Each role is (number, flag column, key column or None, drop rows whose key is NULL).
    """
    selects = []
    for number, flag, column, keyed_only in roles:
        ki, kt = _key(column)
        where = f"{flag} = 1" + (f" AND {_col(column)} IS NOT NULL" if keyed_only and column else "")
        selects.append(f"SELECT run_id, seq, stage, {number} AS role, {ki} AS ki, {kt} AS kt FROM ev WHERE {where}")
    return "roles AS (" + " UNION ALL ".join(selects) + ")"


_PAST = "ORDER BY seq, role ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING"
# The suffix "ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING" in (seq, role) order, written as
# a prefix of the reversed order: PostgreSQL re-aggregates a frame whose head moves for MIN/MAX
# (no inverse transition), which is quadratic in the partition (29 s instead of 0.3 s for one
# response rule with a deadline over 100k events); a frame anchored at UNBOUNDED PRECEDING
# is aggregated incrementally.
_FUTURE = "ORDER BY seq DESC, role DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING"


def _correlation(rule: Any) -> tuple[str | None, tuple[str | None, ...], str | None]:
    """(activation column, target columns, reset column); targets relate by any of theirs."""
    corr = rule.correlation()
    if corr is None:
        return None, (None,), None
    return corr.activation, corr.target_columns(), corr.reset


def _target_roles(number: int, t_cols: tuple[str | None, ...]) -> list[tuple[int, str, str | None, bool]]:
    """One target role row per target column (a target relates by any of them)."""
    return [(number, "is_t", column, True) for column in t_cols]


def _precedence(rule: PrecedenceRule, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    a_col, t_cols, _ = _correlation(rule)
    a = _any_sql(as_list(rule.activation), "model", q.p)
    t = _any_sql(as_list(rule.target), "any", q.p)
    vacuous = "ki IS NULL AND kt IS NULL" if a_col else _FALSE
    keyed = f"{q.part}, ki, kt"
    only_first = f" AND (({vacuous}) OR rn = 1)" if rule.only_first else ""
    sql = f"""
    WITH {q.base({"is_a": a, "is_t": t}, [c for c in (a_col, *t_cols) if c])},
    {_role_rows([(0, "is_a", a_col, False), *_target_roles(1, t_cols)])},
    w AS (
      SELECT seq, stage, role, ki, kt,
        MAX(CASE WHEN role = 1 THEN seq END) OVER (PARTITION BY {keyed} {_PAST}) AS last_t,
        ROW_NUMBER() OVER (PARTITION BY {keyed}, role ORDER BY seq) AS rn
      FROM roles
    )
    SELECT seq, stage,
      CASE WHEN {vacuous} THEN '{VACUOUS}' WHEN last_t IS NOT NULL THEN '{FULFILLED}' ELSE '{VIOLATED}' END,
      CASE WHEN {vacuous} THEN NULL ELSE last_t END
    FROM w WHERE role = 0{only_first}
    ORDER BY seq
    """
    return q.compiled("row", sql)


def _precedence_since(rule: PrecedenceSinceRule, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    a_col, t_cols, r_col = _correlation(rule)
    a = _any_sql(as_list(rule.activation), "model", q.p)
    t = _any_sql(as_list(rule.target), "any", q.p)
    r = _any_sql(as_list(rule.reset), "any", q.p)
    vacuous = "ki IS NULL AND kt IS NULL" if a_col else _FALSE
    keyed = f"{q.part}, ki, kt"
    reset_partition = keyed if r_col else q.part
    no_reset = "last_r IS NULL" if rule.reset_required else _FALSE
    ok = "last_t IS NOT NULL AND (last_r IS NULL OR last_t > last_r)"
    sql = f"""
    WITH {q.base({"is_a": a, "is_t": t, "is_r": r}, [c for c in (a_col, *t_cols, r_col) if c])},
    {_role_rows([(0, "is_a", a_col, False), *_target_roles(1, t_cols), (2, "is_r", r_col, True)])},
    w AS (
      SELECT seq, stage, role, ki, kt,
        MAX(CASE WHEN role = 1 THEN seq END) OVER (PARTITION BY {keyed} {_PAST}) AS last_t,
        MAX(CASE WHEN role = 2 THEN seq END) OVER (PARTITION BY {reset_partition} {_PAST}) AS last_r
      FROM roles
    )
    SELECT seq, stage,
      CASE WHEN {vacuous} THEN '{VACUOUS}' WHEN {no_reset} THEN '{VACUOUS}'
           WHEN {ok} THEN '{FULFILLED}' ELSE '{VIOLATED}' END,
      CASE WHEN {vacuous} THEN NULL WHEN {no_reset} THEN NULL WHEN {ok} THEN last_t ELSE last_r END
    FROM w WHERE role = 0
    ORDER BY seq
    """
    return q.compiled("row", sql)


def _response(rule: ResponseRule, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    a_col, t_cols, _ = _correlation(rule)
    a = _any_sql(as_list(rule.activation), "model", q.p)
    t = _any_sql(as_list(rule.target), "any", q.p)
    deadlines = as_list(rule.deadline)
    flags = {"is_a": a, "is_t": t}
    roles = _target_roles(0, t_cols)
    if deadlines:
        flags["is_d"] = _any_sql(deadlines, "any", q.p)
        roles.append((1, "is_d", None, False))
    roles.append((2, "is_a", a_col, False))
    vacuous = "ki IS NULL AND kt IS NULL" if a_col else _FALSE
    keyed = f"{q.part}, ki, kt"
    next_d = (f"MIN(CASE WHEN role = 1 THEN seq END) OVER (PARTITION BY {q.part} {_FUTURE})"
              if deadlines else "CAST(NULL AS BIGINT)")
    # The first target after the activation resolves it, unless a deadline came first
    # (a target and a deadline in one event: the target, which the monitor handles first).
    by_target = "next_t IS NOT NULL AND (next_d IS NULL OR next_t <= next_d)"
    # (a seq distance never exceeds _INT64_MAX, so a larger ``within`` is never exceeded)
    bounded = rule.within is not None and rule.within < _INT64_MAX
    open_end = VACUOUS if rule.open_at_end == "vacuous" else VIOLATED
    too_late = f"next_t - seq > {q.p.bind(rule.within)}" if bounded else _FALSE
    sql = f"""
    WITH {q.base(flags, [c for c in (a_col, *t_cols) if c])},
    {_role_rows(roles)},
    w AS (
      SELECT seq, stage, role, ki, kt,
        MIN(CASE WHEN role = 0 THEN seq END) OVER (PARTITION BY {keyed} {_FUTURE}) AS next_t,
        {next_d} AS next_d
      FROM roles
    )
    SELECT seq, stage,
      CASE WHEN {vacuous} THEN '{VACUOUS}'
           WHEN {by_target} THEN CASE WHEN {too_late} THEN '{VIOLATED}' ELSE '{FULFILLED}' END
           WHEN next_d IS NULL THEN '{open_end}'
           ELSE '{VIOLATED}' END,
      CASE WHEN {vacuous} THEN NULL WHEN {by_target} THEN next_t ELSE next_d END
    FROM w WHERE role = 2
    ORDER BY seq
    """
    return q.compiled("row", sql)


def _chain(rule: ChainResponseRule | ChainPrecedenceRule, forward: bool, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    a = _any_sql(as_list(rule.activation), "model", q.p)
    t = _any_sql(as_list(rule.target), "any", q.p)
    step = "LEAD" if forward else "LAG"
    sql = f"""
    WITH {q.base({"is_a": a, "is_t": t}, only_flagged=False)},
    w AS (
      SELECT seq, stage, is_a,
        {step}(seq) OVER (PARTITION BY {q.part} ORDER BY seq) AS other,
        {step}(is_t) OVER (PARTITION BY {q.part} ORDER BY seq) AS other_t
      FROM ev
    )
    SELECT seq, stage, CASE WHEN other_t = 1 THEN '{FULFILLED}' ELSE '{VIOLATED}' END, other
    FROM w WHERE is_a = 1
    ORDER BY seq
    """
    return q.compiled("row", sql)


def _no_repeat(rule: NoRepeatRule, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    a = _any_sql(as_list(rule.activation), "model", q.p)
    r = _any_sql(as_list(rule.reset), "any", q.p)
    key = _col(rule.key)
    past = "ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING"
    repeated = "prev IS NOT NULL AND (last_r IS NULL OR last_r < prev)"
    sql = f"""
    WITH {q.base({"is_a": a, "is_r": r}, [rule.key])},
    w AS (
      SELECT seq, stage, is_a, {key} AS k,
        MAX(CASE WHEN is_a = 1 THEN seq END) OVER (PARTITION BY {q.part}, {key} {past}) AS prev,
        MAX(CASE WHEN is_r = 1 THEN seq END) OVER (PARTITION BY {q.part} {past}) AS last_r
      FROM ev
    )
    SELECT seq, stage,
      CASE WHEN k IS NULL THEN '{VACUOUS}' WHEN {repeated} THEN '{VIOLATED}' ELSE '{FULFILLED}' END,
      CASE WHEN k IS NULL THEN NULL WHEN {repeated} THEN prev ELSE NULL END
    FROM w WHERE is_a = 1
    ORDER BY seq
    """
    return q.compiled("row", sql)


def _satisfies(rule: SatisfiesRule, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    a = _any_sql(as_list(rule.activation), "model", q.p)
    req = _any_sql(as_list(rule.require), "any", q.p)
    sql = f"""
    WITH {q.base({"is_a": a, "is_q": req})}
    SELECT seq, stage, CASE WHEN is_q = 1 THEN '{FULFILLED}' ELSE '{VIOLATED}' END, CAST(NULL AS BIGINT)
    FROM ev WHERE is_a = 1
    ORDER BY seq
    """
    return q.compiled("row", sql)


def _partitions(q: _Query, aggregates: str) -> str:
    """``parts``: one row per partition of the scope (exactly one for scope run, part 0,
    even for an empty run: an aggregate without GROUP BY)."""
    if q.stage_scoped:
        return f"parts AS (SELECT stage AS part, {aggregates} FROM ev GROUP BY stage)"
    return f"parts AS (SELECT 0 AS part, {aggregates} FROM ev)"


def _count(rule: CountRule | ExistenceRule | AbsenceRule, low: int, high: int | None, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    m = _any_sql(as_list(rule.match), "model", q.p)
    bounds = [f"n >= {q.p.bind(low)}" if low <= _INT64_MAX else _FALSE]
    if high is not None and high < _INT64_MAX:
        bounds.append(f"n <= {q.p.bind(high)}")
    within = " AND ".join(bounds)
    flags = {"is_m": m}
    applies = "1 = 1"
    if semantics >= 2:
        guard = applicability_guard(rule)
        flags["is_g"] = _actor_sql(("model",), q.p) if guard is None else _any_sql(guard, "model", q.p)
        applies = "g > 0"
    # stage scope: every stage with an event is a partition, so all in-scope rows are kept
    ev = q.base(flags, only_flagged=not q.stage_scoped)
    part = "stage" if q.stage_scoped else "0"
    guard_sum = ", COALESCE(SUM(is_g), 0) AS g" if semantics >= 2 else ""
    sql = f"""
    WITH {ev},
    {_partitions(q, "COALESCE(SUM(is_m), 0) AS n" + guard_sum)},
    firsts AS (
      SELECT part, seq FROM (
        SELECT {part} AS part, seq, ROW_NUMBER() OVER (PARTITION BY {q.part} ORDER BY seq) AS rn
        FROM ev WHERE is_m = 1
      ) AS numbered WHERE rn <= {q.p.bind(MAX_CITED)}
    )
    SELECT parts.part,
      CASE WHEN NOT ({applies}) THEN '{VACUOUS}' WHEN {within} THEN '{FULFILLED}' ELSE '{VIOLATED}' END, firsts.seq
    FROM parts LEFT JOIN firsts ON firsts.part = parts.part AND {applies}
    ORDER BY parts.part, firsts.seq
    """
    return q.compiled("count", sql)


def _not_coexistence(rule: NotCoexistenceRule, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    a = _any_sql(as_list(rule.activation), "model", q.p)
    t = _any_sql(as_list(rule.target), "any", q.p)
    ev = q.base({"is_a": a, "is_t": t}, only_flagged=not q.stage_scoped)
    sql = f"""
    WITH {ev},
    {_partitions(q, "MIN(CASE WHEN is_a = 1 THEN seq END) AS fa, MIN(CASE WHEN is_t = 1 THEN seq END) AS ft")}
    SELECT part,
      CASE WHEN fa IS NULL AND ft IS NULL THEN '{VACUOUS}'
           WHEN fa IS NOT NULL AND ft IS NOT NULL THEN '{VIOLATED}' ELSE '{FULFILLED}' END,
      fa, ft
    FROM parts
    ORDER BY part
    """
    return q.compiled("pair", sql)


def _distinct(rule: DistinctRule, semantics: int = 2) -> CompiledRule:
    q = _Query(rule, semantics)
    m = _any_sql(as_list(rule.match), "model", q.p)
    model = _actor_sql(("model",), q.p)
    key = _col(rule.key)
    ev = q.base({"is_m": m, "is_model": model}, [rule.key], only_flagged=True)
    part = "stage" if q.stage_scoped else "0"
    # rank: the model events up to and including this row; total: all of the partition's
    sql = f"""
    WITH {ev},
    ranked AS (
      SELECT seq, {part} AS part, is_m, {key} AS k,
        SUM(is_model) OVER (PARTITION BY {q.part} ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS rnk,
        SUM(is_model) OVER (PARTITION BY {q.part}) AS total
      FROM ev
    ),
    early AS (
      SELECT part, k, MIN(seq) AS first_seq FROM ranked
      WHERE is_m = 1 AND k IS NOT NULL AND rnk * 100 <= {q.p.bind(rule.early_percent)} * total
      GROUP BY part, k
    ),
    parts AS (SELECT DISTINCT part FROM ranked WHERE is_m = 1),
    counted AS (SELECT part, COUNT(*) AS n FROM early GROUP BY part),
    cited AS (
      SELECT part, first_seq FROM (
        SELECT part, first_seq, ROW_NUMBER() OVER (PARTITION BY part ORDER BY first_seq) AS rn FROM early
      ) AS numbered WHERE rn <= {q.p.bind(MAX_CITED)}
    )
    SELECT parts.part,
      CASE WHEN counted.n IS NULL THEN '{VACUOUS}' WHEN counted.n <= {q.p.bind(rule.max)} THEN '{FULFILLED}'
           ELSE '{VIOLATED}' END,
      cited.first_seq
    FROM parts LEFT JOIN counted ON counted.part = parts.part LEFT JOIN cited ON cited.part = parts.part
    ORDER BY parts.part, cited.first_seq
    """
    return q.compiled("count", sql)


def compile_rule(rule: Any, semantics: int = 2) -> CompiledRule:
    """The query that evaluates ``rule`` over one run (bind ``run_id`` to run it)."""
    if isinstance(rule, CountRule):
        return _count(rule, rule.min, rule.max, semantics)
    if isinstance(rule, ExistenceRule):
        return _count(rule, 1, None, semantics)
    if isinstance(rule, AbsenceRule):
        return _count(rule, 0, 0, semantics)
    if isinstance(rule, PrecedenceRule):
        return _precedence(rule, semantics)
    if isinstance(rule, PrecedenceSinceRule):
        return _precedence_since(rule, semantics)
    if isinstance(rule, ResponseRule):
        return _response(rule, semantics)
    if isinstance(rule, ChainResponseRule):
        return _chain(rule, forward=True, semantics=semantics)
    if isinstance(rule, ChainPrecedenceRule):
        return _chain(rule, forward=False, semantics=semantics)
    if isinstance(rule, NoRepeatRule):
        return _no_repeat(rule, semantics)
    if isinstance(rule, NotCoexistenceRule):
        return _not_coexistence(rule, semantics)
    if isinstance(rule, SatisfiesRule):
        return _satisfies(rule, semantics)
    if isinstance(rule, DistinctRule):
        return _distinct(rule, semantics)
    raise TypeError(f"no SQL for rule {rule!r}")  # pragma: no cover - the model admits no other


def _findings(compiled: CompiledRule, rows: list[Any]) -> list[Finding]:
    rule, staged = compiled.rule_id, compiled.stage_scoped
    out: list[Finding] = []
    if compiled.shape == "row":
        for seq, stage, verdict, other in rows:
            cited = (seq,) if other is None else tuple(sorted((other, seq)))
            out.append(Finding(rule, verdict, seq, stage if staged else None, cited))
    elif compiled.shape == "count":
        cited_by_part: dict[Any, list[int]] = {}
        verdicts: dict[Any, str] = {}
        for part, verdict, seq in rows:
            verdicts[part] = verdict
            seqs = cited_by_part.setdefault(part, [])
            if seq is not None:
                seqs.append(seq)
        for part, verdict in verdicts.items():
            out.append(Finding(rule, verdict, None, part if staged else None, tuple(cited_by_part[part])))
    else:
        for part, verdict, first_a, first_t in rows:
            cited = tuple(sorted(c for c in (first_a, first_t) if c is not None))
            out.append(Finding(rule, verdict, None, part if staged else None, cited))
    return sorted(out, key=Finding.sort_key)


def evaluate_sql(store: Any, ruleset: RuleSet, run_id: str) -> dict[str, list[Finding]]:
    """Every rule of ``ruleset`` over run ``run_id`` of ``store``, evaluated by its database.

    Returns what :func:`procgrade.rules.monitor.evaluate` returns for the run's fact rows: findings
    per rule id in rule-set order, each list ordered by :meth:`Finding.sort_key`.
    """
    dialect = store.engine.dialect.name
    if dialect not in SUPPORTED_DIALECTS:
        raise ValueError(f"the SQL back-end supports {', '.join(SUPPORTED_DIALECTS)}, not {dialect!r}")
    compiled = [compile_rule(rule, ruleset.semantics) for rule in ruleset.rules]
    result: dict[str, list[Finding]] = {}
    with store.engine.connect() as conn:
        # All rules read one snapshot of the run, as the monitor reads its rows once, even
        # while a writer appends: SQLite's read transaction (the engine emits BEGIN) holds
        # its snapshot from the first read; PostgreSQL needs REPEATABLE READ for that
        # (under READ COMMITTED every statement takes a new one).
        if dialect == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        for query in compiled:
            rows = conn.execute(text(query.sql), {**query.params, "run_id": run_id}).all()
            result[query.rule_id] = _findings(query, [tuple(r) for r in rows])
    return result
