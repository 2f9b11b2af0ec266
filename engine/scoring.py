"""Score documents: one canonical JSON document per (run, rule set), reproducible to the byte.

The document holds the run's head hash, the rule set's hash, the engine's
versions, per-rule counts with the seqs that decided each violation, per-pattern
and per-check subtotals, and the process score as an exact rational with its
formula. Nothing in it depends on time, hash seeds, dict order or the database:
it is RFC 8785 canonical JSON of integers, strings and rationals written as
``{"num": "...", "den": "..."}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from procgrade.engine.version import __version__ as ENGINE_VERSION
from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.rules.identity import rule_hash, ruleset_hash, versions_of
from procgrade.rules.model import BEHAVIOUR_PATTERNS, BINARY_CHECKS, RuleSet
from procgrade.rules.monitor import Finding, RunMonitor, Tally

__all__ = ["ScoreDocument", "score_run", "score_document", "FORMULA", "FORMULA_2", "DOCUMENT_FORMAT",
           "DOCUMENT_FORMATS", "rational", "display", "NOT_GRADED"]

#: The document layout of each template semantics: rule sets of semantics 1 (scored before
#: issue 10) keep format 1 byte for byte; semantics 2 adds ``coverage``.
DOCUMENT_FORMATS = {1: "procgrade.score/1", 2: "procgrade.score/2"}
DOCUMENT_FORMAT = DOCUMENT_FORMATS[2]
#: How people are told a null process score.
NOT_GRADED = "not graded: no model decisions"
FORMULA = (
    "rule_score(r) = fulfilled(r) / (fulfilled(r) + violated(r)); "
    "process_score = sum(weight(r) * rule_score(r)) / sum(weight(r)) over rules r with fulfilled(r) + violated(r) > 0; "
    "pattern and check subtotals use the same formula over their rules; vacuous activations count in neither; "
    "null when no rule applies"
)
FORMULA_2 = (
    "rule_score(r) = fulfilled(r) / (fulfilled(r) + violated(r)); a rule applies when fulfilled(r) + violated(r) > 0; "
    "process_score = sum(weight(r) * rule_score(r)) / sum(weight(r)) over the rules that apply; "
    "pattern and check subtotals use the same formula over their rules; vacuous activations count in neither "
    "(a scope-level rule is vacuous where what it guards did not happen); "
    "null (not graded: no model decisions) when no rule applies"
)


@dataclass(frozen=True)
class ScoreDocument:
    run_id: str
    ruleset_hash: str
    engine_version: str
    run_head_hash: str
    run_event_count: int
    process_score: Fraction | None
    body: dict[str, Any]
    canonical: bytes

    @property
    def sha256(self) -> str:
        return sha256_hex(self.canonical)


def rational(value: Fraction | None) -> dict[str, str] | None:
    """An exact rational as JSON: numerator and denominator as decimal strings."""
    if value is None:
        return None
    return {"num": str(value.numerator), "den": str(value.denominator)}


def display(value: Fraction | None, places: int = 4) -> str:
    """For people only: the rational rounded half-even to ``places`` decimals."""
    if value is None:
        return "-"
    quantum = Decimal(1).scaleb(-places)
    return str((Decimal(value.numerator) / Decimal(value.denominator)).quantize(quantum, rounding=ROUND_HALF_EVEN))


def _weighted(entries: list[tuple[int, Fraction | None]]) -> Fraction | None:
    applicable = [(w, s) for w, s in entries if s is not None]
    if not applicable:
        return None
    return sum((Fraction(w) * s for w, s in applicable), Fraction(0)) / sum(w for w, _ in applicable)


def score_document(
    ruleset: RuleSet, findings: dict[str, list[Finding]], *, run_id: str, head_hash: str, event_count: int,
    ruleset_digest: str | None = None, tallies: dict[str, Tally] | None = None, model_events: int = 0,
) -> ScoreDocument:
    """Assemble the canonical score document from a run's findings (all of them, or the
    violations plus ``tallies`` counting the rest)."""
    digest = ruleset_digest or ruleset_hash(ruleset)
    hashes = _rule_hashes(ruleset, digest)
    rules_out: list[dict[str, Any]] = []
    rule_scores: dict[str, tuple[int, Fraction | None]] = {}
    for rule in sorted(ruleset.rules, key=lambda r: r.id):
        found = findings[rule.id]
        violated = [f for f in found if f.verdict == "violated"]
        if tallies is not None:
            fulfilled, vacuous = tallies[rule.id].fulfilled, tallies[rule.id].vacuous
        else:
            fulfilled = sum(1 for f in found if f.verdict == "fulfilled")
            vacuous = sum(1 for f in found if f.verdict == "vacuous")
        judged = fulfilled + len(violated)
        score = Fraction(fulfilled, judged) if judged else None
        rule_scores[rule.id] = (rule.weight, score)
        rules_out.append({
            "id": rule.id,
            "version": rule.version,
            "rule_hash": hashes[rule.id],
            "template": rule.template,
            "pattern": rule.pattern,
            "checks": sorted(rule.checks),
            "weight": rule.weight,
            "activations": fulfilled + len(violated) + vacuous,
            "fulfilled": fulfilled,
            "violated": len(violated),
            "vacuous": vacuous,
            "score": rational(score),
            "violations": [{"seq": f.seq, "stage": f.stage, "cited": list(f.cited)} for f in violated],
        })
    process = _weighted(list(rule_scores.values()))
    patterns = {
        name: _subtotal(name, [r for r in ruleset.rules if r.pattern == name], rule_scores)
        for name in BEHAVIOUR_PATTERNS
    }
    checks = {
        name: _subtotal(name, [r for r in ruleset.rules if name in r.checks], rule_scores)
        for name in BINARY_CHECKS
    }
    semantics_version, extractor_version = versions_of(ruleset)
    body = {
        "format": DOCUMENT_FORMATS[ruleset.semantics],
        "run_id": run_id,
        "run_head_hash": head_hash,
        "run_event_count": event_count,
        "ruleset": {"name": ruleset.name, "version": ruleset.version, "hash": digest},
        "engine_version": ENGINE_VERSION,
        "semantics_version": semantics_version,
        "extractor_version": extractor_version,
        "rules": rules_out,
        "patterns": patterns,
        "checks": checks,
        "process_score": rational(process),
        "formula": FORMULA if ruleset.semantics == 1 else FORMULA_2,
    }
    if ruleset.semantics >= 2:
        body["coverage"] = {
            "rules": len(rules_out),
            "rules_applicable": sum(1 for r in rules_out if r["fulfilled"] + r["violated"] > 0),
            "judged_activations": sum(r["fulfilled"] + r["violated"] for r in rules_out),
            "model_events": model_events,
        }
    return ScoreDocument(run_id, digest, ENGINE_VERSION, head_hash, event_count, process, body, canonical_json(body))


_RULE_HASHES: dict[str, dict[str, str]] = {}


def _rule_hashes(ruleset: RuleSet, digest: str) -> dict[str, str]:
    """Each rule's hash, computed once per rule set (keyed by the set's content hash)."""
    hashes = _RULE_HASHES.get(digest)
    if hashes is None:
        hashes = _RULE_HASHES[digest] = {rule.id: rule_hash(rule) for rule in ruleset.rules}
    return hashes


def _subtotal(name: str, rules: list[Any], rule_scores: dict[str, tuple[int, Fraction | None]]) -> dict[str, Any]:
    ids = sorted(r.id for r in rules)
    return {"rules": ids, "score": rational(_weighted([rule_scores[i] for i in ids]))}


def score_run(
    ruleset: RuleSet, batches: Iterable[Iterable[tuple[Any, ...]]], *, run_id: str, head_hash: str,
    event_count: int, ruleset_digest: str | None = None,
) -> ScoreDocument:
    """Evaluate ``ruleset`` over a run's fact rows (given in batches, in seq order) and
    return its score document."""
    monitor = RunMonitor(ruleset, detail=False)
    for rows in batches:
        monitor.feed(rows)
    findings = monitor.finish()
    return score_document(ruleset, findings, run_id=run_id, head_hash=head_hash, event_count=event_count,
                          ruleset_digest=ruleset_digest, tallies=monitor.tallies(), model_events=monitor.model_events)
