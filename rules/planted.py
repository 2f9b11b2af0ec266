"""Planted-fault validation: does each rule catch the fault it exists for, and only that?

A corpus directory holds one sub-directory per rule id, each with two native
runs: ``fault.jsonl`` commits exactly that rule's fault, ``clean.jsonl`` is the
same run with the fault repaired; or, for several scenarios per rule, one
sub-directory per case (``<rule-id>/<case>/{fault,clean}.jsonl``). A rule earns trust when it flags its fault
run (detection), stays silent on the clean twin (no false flag), and no other
rule flags the fault run (no collateral: the planted fault is attributed to
one rule, not smeared over several). ``procgrade validate-rules DIR`` runs this;
the module only computes, the CLI presents.

Runs are read straight from JSONL with :func:`procgrade.engine.native.read_native` and
scored with the canonical monitor, so validation needs no database and sees the
same fact rows the store would hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.events import Event
from procgrade.engine.facts import extract_facts
from procgrade.engine.native import read_native
from procgrade.engine.stages import StageConflict, derive_stages, envelope
from procgrade.rules.model import RuleSet
from procgrade.rules.monitor import VIOLATED, evaluate

__all__ = ["FAULT_FILE", "CLEAN_FILE", "PlantedCase", "PlantedResult", "discover", "validate_corpus",
           "summary", "uncovered", "coverage", "fact_rows", "violations"]

FAULT_FILE = "fault.jsonl"
CLEAN_FILE = "clean.jsonl"


@dataclass(frozen=True)
class PlantedCase:
    """One rule's planted pair: the run with the fault and its repaired twin."""

    rule_id: str
    fault_path: Path
    clean_path: Path
    case: str = ""


@dataclass
class PlantedResult:
    """How the rule set judged one planted pair (violation counts per rule, in rule-set order)."""

    rule_id: str
    detected: bool
    case: str = ""
    fault_violations: dict[str, int] = field(default_factory=dict)
    clean_violations: dict[str, int] = field(default_factory=dict)
    #: Rules that flag the clean twin (any rule, the case's own included).
    false_flags: list[str] = field(default_factory=list)
    #: Rules other than the case's own that also flag the fault run.
    collateral: list[str] = field(default_factory=list)


def discover(directory: Path) -> list[PlantedCase]:
    """The planted cases under ``directory``, sorted by rule id.

    Every sub-directory is a case named by its rule id (hidden ones are skipped);
    a case without both twins is an error rather than a silent skip, so a typo in
    a file name cannot drop a rule from validation.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(str(directory), None, None, "not a directory of planted cases")
    cases: list[PlantedCase] = []
    for rule_dir in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        subcases = sorted(p for p in rule_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
        folders = [(rule_dir, "")] if (rule_dir / FAULT_FILE).exists() or (rule_dir / CLEAN_FILE).exists() \
            or not subcases else [(sub, sub.name) for sub in subcases]
        for case_dir, case in folders:
            fault, clean = case_dir / FAULT_FILE, case_dir / CLEAN_FILE
            missing = [p.name for p in (fault, clean) if not p.is_file()]
            if missing:
                raise InputError(str(case_dir), None, None,
                                 f"missing {' and '.join(missing)}: each planted case needs {FAULT_FILE} and {CLEAN_FILE}")
            cases.append(PlantedCase(rule_dir.name, fault, clean, case))
    if not cases:
        raise InputError(str(directory), None, None,
                         f"no planted cases (expected <rule-id>/{FAULT_FILE} and <rule-id>/{CLEAN_FILE})")
    return cases


def fact_rows(events: Iterable[Event]) -> list[tuple[Any, ...]]:
    """The monitor's rows (``procgrade.rules.predicates.ROW_COLUMNS`` order), as the store would derive them
    (the derived stage too, strictly, as at ingest)."""
    events = list(events)
    stages = derive_stages([envelope(e) for e in events])
    return [(e.seq, e.kind, e.actor, e.stage) + extract_facts(e) + (stage,) for e, stage in zip(events, stages)]


def violations(ruleset: RuleSet, path: Path) -> dict[str, int]:
    """Violated findings per rule (every rule listed, in rule-set order) on the one run in ``path``."""
    runs = read_native(path)
    if len(runs) != 1:
        raise InputError(str(path), None, None, f"a planted run file holds exactly one run, found {len(runs)}")
    try:
        rows = fact_rows(runs[0].events)
    except StageConflict as exc:
        raise InputError(str(path), runs[0].line_of(exc.seq), "stage", str(exc).removeprefix("stage: ")) from None
    findings = evaluate(ruleset, rows)
    return {rule_id: sum(f.verdict == VIOLATED for f in found) for rule_id, found in findings.items()}


def validate_corpus(directory: Path, ruleset: RuleSet) -> list[PlantedResult]:
    """Score every planted pair under ``directory`` with ``ruleset``.

    Every case's rule id must name a rule of the set (checked before any run is
    read): a corpus for another rule set would otherwise report nonsense.
    """
    cases = discover(directory)
    known = {rule.id for rule in ruleset.rules}
    for case in cases:
        if case.rule_id not in known:
            raise InputError(str(case.fault_path.parent), None, None,
                             f"unknown rule id {case.rule_id!r}: rule set {ruleset.name!r} has no such rule")
    results: list[PlantedResult] = []
    for case in cases:
        on_fault = violations(ruleset, case.fault_path)
        on_clean = violations(ruleset, case.clean_path)
        results.append(PlantedResult(
            rule_id=case.rule_id,
            detected=on_fault[case.rule_id] >= 1,
            case=case.case,
            fault_violations=on_fault,
            clean_violations=on_clean,
            false_flags=[rule for rule, n in on_clean.items() if n],
            collateral=[rule for rule, n in on_fault.items() if n and rule != case.rule_id],
        ))
    return results


def summary(results: Iterable[PlantedResult]) -> tuple[int, int, int]:
    """(faults detected, faults total, clean twins falsely flagged): the headline of a validation."""
    results = list(results)
    return (sum(r.detected for r in results), len(results), sum(bool(r.false_flags) for r in results))


def coverage(results: Iterable[PlantedResult], ruleset: RuleSet) -> dict[str, Any]:
    """Cases per rule, and the Arena patterns and binary checks whose rules all have a detected
    case with no false flag (what a validation can vouch for)."""
    results = list(results)
    per_rule = {rule.id: [r for r in results if r.rule_id == rule.id] for rule in ruleset.rules}
    sound = {rid for rid, rs in per_rule.items() if rs and all(r.detected and not r.false_flags for r in rs)}
    patterns = sorted({rule.pattern for rule in ruleset.rules if rule.pattern and rule.id in sound})
    checks = sorted({c for rule in ruleset.rules if rule.id in sound for c in rule.checks})
    return {"cases_per_rule": {rid: len(rs) for rid, rs in per_rule.items()},
            "patterns": patterns, "checks": checks,
            "collateral": sum(bool(r.collateral) for r in results)}


def uncovered(results: Iterable[PlantedResult], ruleset: RuleSet) -> list[str]:
    """Rules of ``ruleset`` with no planted case: they are untested, not validated (rule-set order)."""
    covered = {r.rule_id for r in results}
    return [rule.id for rule in ruleset.rules if rule.id not in covered]
