"""Why a verdict came out as it did, for people: the events that did not count, and why a
rule was vacuous.

A finding cites the seqs that decided it. What it cannot show is the event that *looked*
like the awaited one but did not count ("seq 3 test_run by harness: not the model's",
"seq 9 test_run: outcome is fail, not pass"): this module finds those near misses in the
window a verdict looked at, and says in words why a rule had nothing to judge. It reads
the same fact rows as the monitor and never changes a score.
"""

from __future__ import annotations

from typing import Any

from procgrade.rules.model import (
    AbsenceRule,
    CountRule,
    DistinctRule,
    ExistenceRule,
    NoRepeatRule,
    PrecedenceRule,
    PrecedenceSinceRule,
    Predicate,
    ResponseRule,
    as_list,
)
from procgrade.rules.monitor import VACUOUS, VIOLATED, Finding, applicability_guard
from procgrade.rules.predicates import ACTOR, COLUMN, KIND, SEQ, actor_matches

__all__ = ["near_misses", "vacuous_reason", "MAX_NOTES"]

#: At most this many near misses are listed per finding.
MAX_NOTES = 8


def _why_not(predicate: Predicate, default_actor: str, row: tuple[Any, ...]) -> str | None:
    """Why ``row`` (of one of the predicate's kinds) does not match it; None when it does."""
    actors = predicate.actors(default_actor)
    if not actor_matches(row[ACTOR], actors):
        who = "the model's" if actors == ("model",) else " or ".join(actors) + "'s"
        return f"by {row[ACTOR]}: not {who}"
    for column, wanted in sorted(predicate.equals.items()):
        allowed = wanted if isinstance(wanted, list) else [wanted]
        value = row[COLUMN[column]]
        if value not in allowed:
            return f"{column} is {value if value is not None else 'unknown'}, not {' or '.join(map(str, allowed))}"
    for column, prefixes in sorted(predicate.prefix.items()):
        value = row[COLUMN[column]]
        if value is None or not value.startswith(tuple(prefixes)):
            return f"{column} {value!r} is not under {', '.join(prefixes)}"
    for column, prefixes in sorted(predicate.not_prefix.items()):
        value = row[COLUMN[column]]
        if value is not None and value.startswith(tuple(prefixes)):
            return f"{column} {value!r} is exempt ({', '.join(p for p in prefixes if value.startswith(p))})"
    for column in predicate.present:
        if row[COLUMN[column]] is None:
            return f"no {column}"
    for column in predicate.absent:
        if row[COLUMN[column]] is not None:
            return f"has {column}"
    for comparison in predicate.compare:
        value = row[COLUMN[comparison.field]]
        if value is None:
            return f"{comparison.field} unknown"
    return None


def _misses(predicates: list[Predicate], default_actor: str, rows: list[tuple[Any, ...]]) -> list[str]:
    notes: list[str] = []
    for row in rows:
        candidates = [p for p in predicates if row[KIND] in p.kinds()]
        if not candidates:
            continue
        reasons = [_why_not(p, default_actor, row) for p in candidates]
        if all(r is not None for r in reasons):
            notes.append(f"seq {row[SEQ]} {row[KIND]} {reasons[0]}")
        if len(notes) >= MAX_NOTES:
            break
    return notes


def near_misses(rule: Any, finding: Finding, rows: list[tuple[Any, ...]]) -> list[str]:
    """Events in the window ``finding`` looked at that were of a kind the rule awaited but did
    not count, each with the reason (for violated findings; empty otherwise)."""
    if finding.verdict != VIOLATED:
        return []
    seq = finding.seq
    if isinstance(rule, (PrecedenceRule, PrecedenceSinceRule)) and seq is not None:
        start = finding.cited[0] if isinstance(rule, PrecedenceSinceRule) and len(finding.cited) > 1 else -1
        window = [r for r in rows if start < r[SEQ] < seq]
        return _misses(as_list(rule.target), "any", window)
    if isinstance(rule, ResponseRule) and seq is not None:
        end = finding.cited[-1] if len(finding.cited) > 1 else None
        window = [r for r in rows if r[SEQ] > seq and (end is None or r[SEQ] <= end)]
        return _misses(as_list(rule.target), "any", window)
    if isinstance(rule, NoRepeatRule) and rule.reset is not None and len(finding.cited) > 1:
        window = [r for r in rows if finding.cited[0] < r[SEQ] < finding.cited[-1]]
        return _misses(as_list(rule.reset), "any", window)
    if isinstance(rule, ExistenceRule) or (isinstance(rule, CountRule) and rule.min > 0):
        return _misses(as_list(rule.match), "model", rows)
    return []


def _describe(predicates: list[Predicate], default_actor: str) -> str:
    parts = []
    for predicate in predicates:
        actors = predicate.actors(default_actor)
        who = "" if actors == ("any",) else f" by {'the model' if actors == ('model',) else ' or '.join(actors)}"
        conditions = [f"{c} {v if not isinstance(v, list) else '/'.join(map(str, v))}" for c, v in sorted(predicate.equals.items())]
        parts.append("/".join(predicate.kinds()) + who + (f" ({', '.join(conditions)})" if conditions else ""))
    return " or ".join(parts)


def vacuous_reason(rule: Any, findings: list[Finding], rows: list[tuple[Any, ...]]) -> str | None:
    """Why ``rule`` judged nothing in this run (None when it judged something)."""
    if any(f.verdict != VACUOUS for f in findings):
        return None
    scope = "stage" if rule.scope == "stage" else "run"
    if isinstance(rule, (CountRule, ExistenceRule, AbsenceRule)):
        guard = applicability_guard(rule)
        if guard is None:
            return f"not applicable: the model did nothing in the {scope}"
        why = "it applies only where one happened" if getattr(rule, "applies_if", None) is not None \
            else "nothing it guards happened"
        return f"not applicable: no {_describe(guard, 'model')} in the {scope} ({why})"
    if isinstance(rule, DistinctRule):
        return (f"not applicable: no {_describe(as_list(rule.match), 'model')} in the first {rule.early_percent}% "
                "of the model's events")
    activation = as_list(getattr(rule, "activation", None))
    if not findings:
        kinds = {k for p in activation for k in p.kinds()}
        others = [n for n in _misses(activation, "model", [r for r in rows if r[KIND] in kinds]) if ": not " in n]
        reason = f"no activation: the run has no {_describe(activation, 'model')}"
        if rule.scope == "stage":
            reason += " inside a stage"
        return reason + (f" ({'; '.join(others)})" if others else "")
    if isinstance(rule, PrecedenceSinceRule) and rule.reset_required:
        return (f"every activation vacuous: no {_describe(as_list(rule.reset), 'any')} before it "
                "(the rule judges only after one)")
    if isinstance(rule, ResponseRule) and rule.open_at_end == "vacuous":
        return "every activation vacuous: nothing resolved it and no deadline came, so nothing depended on it"
    correlation = rule.correlation() if hasattr(rule, "correlation") else None
    if correlation is not None:
        return f"every activation vacuous: its {correlation.activation} is unknown, so nothing can relate to it"
    return "every activation vacuous"
