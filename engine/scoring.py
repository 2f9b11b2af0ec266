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
import re
from dataclasses import dataclass
from operator import itemgetter
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from math import gcd, lcm
from hashlib import sha256 as _sha256
from typing import Any, NamedTuple

import orjson

from procgrade.engine.version import __version__ as ENGINE_VERSION
from procgrade.engine.canonical import canonical_json, canonical_json_of_typed, sha256_hex
from procgrade.rules.compiled import CompiledMonitor
from procgrade.rules.identity import rule_hash, ruleset_hash, versions_of
from procgrade.rules.model import BEHAVIOUR_PATTERNS, BINARY_CHECKS, RuleSet
from procgrade.rules.monitor import Finding, RunMonitor, Tally

__all__ = ["ScoreDocument", "RunScorer", "StoredForm", "score_run", "score_document", "FORMULA", "FORMULA_2",
           "DOCUMENT_FORMAT", "DOCUMENT_FORMATS", "rational", "display", "NOT_GRADED"]

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


class ScoreDocument:
    """A run's score document: its canonical bytes and what they say.

    ``body`` (the parsed document) may be given as None: it is then parsed from ``canonical`` when
    first asked for, so the one writer storing thousands of documents never parses them."""

    __slots__ = ("run_id", "ruleset_hash", "engine_version", "run_head_hash", "run_event_count",
                 "process_score", "_body", "canonical")

    def __init__(self, run_id: str, ruleset_hash: str, engine_version: str, run_head_hash: str,
                 run_event_count: int, process_score: Fraction | None, body: dict[str, Any] | None,
                 canonical: bytes) -> None:
        for name, value in (("run_id", run_id), ("ruleset_hash", ruleset_hash), ("engine_version", engine_version),
                            ("run_head_hash", run_head_hash), ("run_event_count", run_event_count),
                            ("process_score", process_score), ("_body", body), ("canonical", canonical)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ScoreDocument is immutable: cannot set {name}")

    @property
    def body(self) -> dict[str, Any]:
        if self._body is None:
            object.__setattr__(self, "_body", orjson.loads(self.canonical))
        return self._body  # type: ignore[return-value]

    @property
    def sha256(self) -> str:
        return sha256_hex(self.canonical)

    def _key(self) -> tuple[Any, ...]:
        return (self.run_id, self.ruleset_hash, self.engine_version, self.run_head_hash, self.run_event_count,
                self.process_score, self.canonical)

    def __eq__(self, other: object) -> bool:
        # the body is a function of the canonical bytes
        return isinstance(other, ScoreDocument) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (ScoreDocument, self._key()[:6] + (None, self.canonical))

    def __repr__(self) -> str:
        return (f"ScoreDocument(run_id={self.run_id!r}, ruleset_hash={self.ruleset_hash[:16]!r}, "
                f"run_event_count={self.run_event_count}, process_score={self.process_score!r})")


def rational(value: Fraction | None) -> dict[str, str] | None:
    """An exact rational as JSON: numerator and denominator as decimal strings."""
    if value is None:
        return None
    return {"num": str(value.numerator), "den": str(value.denominator)}


#: The canonical bytes of :func:`rational` of a reduced fraction, ``% (denominator, numerator)``:
#: what the generated fill writes without building the dict.
_RATIONAL_BYTES = b'{"den":"%d","num":"%d"}'


def display(value: Fraction | None, places: int = 4) -> str:
    """For people only: the rational rounded half-even to ``places`` decimals."""
    if value is None:
        return "-"
    quantum = Decimal(1).scaleb(-places)
    return str((Decimal(value.numerator) / Decimal(value.denominator)).quantize(quantum, rounding=ROUND_HALF_EVEN))


def _weighted_counts(entries: list[tuple[int, int, int]]) -> Fraction | None:
    """The weighted mean of the rule scores f / j over (weight, fulfilled f, judged j), rules
    with j = 0 left out (None when none is left): sum(w * f / j) / sum(w), exactly, in integers
    with one reduction at the end."""
    applicable = [(w, f, j) for w, f, j in entries if j]
    if not applicable:
        return None
    common = lcm(*(j for _, _, j in applicable))
    numerator = sum(w * f * (common // j) for w, f, j in applicable)
    return Fraction(numerator, common * sum(w for w, _, _ in applicable))


def _ratio(numerator: int, denominator: int) -> dict[str, str] | None:
    """:func:`rational` of ``numerator / denominator`` (None when the denominator is 0), reduced."""
    if not denominator:
        return None
    common = gcd(numerator, denominator)
    return {"num": str(numerator // common), "den": str(denominator // common)}


@dataclass(frozen=True)
class _Layout:
    """What a rule set's score documents share, built once per rule set: each rule's fixed fields,
    the rules of each pattern and check, the header fields, and the canonical bytes of a document
    with a numbered slot wherever a run's own values go (see :func:`_template`)."""

    rules: tuple[tuple[str, int, dict[str, Any]], ...]  # (id, weight, fixed fields) sorted by id
    patterns: tuple[tuple[str, tuple[str, ...]], ...]
    checks: tuple[tuple[str, tuple[str, ...]], ...]
    header: dict[str, Any]
    formula: str
    coverage: bool


_LAYOUTS: dict[str, _Layout] = {}


def _layout(ruleset: RuleSet, digest: str) -> _Layout:
    layout = _LAYOUTS.get(digest)
    if layout is not None:
        return layout
    hashes = _rule_hashes(ruleset, digest)
    rules = tuple((rule.id, rule.weight, {
        "id": rule.id,
        "version": rule.version,
        "rule_hash": hashes[rule.id],
        "template": rule.template,
        "pattern": rule.pattern,
        "checks": sorted(rule.checks),
        "weight": rule.weight,
    }) for rule in sorted(ruleset.rules, key=lambda r: r.id))
    semantics_version, extractor_version = versions_of(ruleset)
    layout = _LAYOUTS[digest] = _Layout(
        rules=rules,
        patterns=tuple((name, tuple(sorted(r.id for r in ruleset.rules if r.pattern == name)))
                       for name in BEHAVIOUR_PATTERNS),
        checks=tuple((name, tuple(sorted(r.id for r in ruleset.rules if name in r.checks)))
                     for name in BINARY_CHECKS),
        header={"format": DOCUMENT_FORMATS[ruleset.semantics],
                "ruleset": {"name": ruleset.name, "version": ruleset.version, "hash": digest},
                "engine_version": ENGINE_VERSION, "semantics_version": semantics_version,
                "extractor_version": extractor_version},
        formula=FORMULA if ruleset.semantics == 1 else FORMULA_2,
        coverage=ruleset.semantics >= 2,
    )
    return layout


#: One rule's values in a run: (activations, fulfilled, violated, vacuous, score, violations).
RuleValues = tuple[Any, Any, Any, Any, Any, Any]


def _body(layout: _Layout, *, run_id: Any, head_hash: Any, event_count: Any, rules: list[RuleValues],
          patterns: Any, checks: Any, process_score: Any, coverage: tuple[Any, Any, Any]) -> dict[str, Any]:
    """The score document's body from a run's values (the one place its shape is written)."""
    rules_out: list[dict[str, Any]] = []
    for (_, _, fixed), (activations, fulfilled, violated, vacuous, score, violations) in zip(layout.rules, rules):
        entry = dict(fixed)
        entry["checks"] = list(fixed["checks"])
        entry["activations"] = activations
        entry["fulfilled"] = fulfilled
        entry["violated"] = violated
        entry["vacuous"] = vacuous
        entry["score"] = score
        entry["violations"] = violations
        rules_out.append(entry)
    header = layout.header
    body = {
        "format": header["format"],
        "run_id": run_id,
        "run_head_hash": head_hash,
        "run_event_count": event_count,
        "ruleset": dict(header["ruleset"]),
        "engine_version": header["engine_version"],
        "semantics_version": header["semantics_version"],
        "extractor_version": header["extractor_version"],
        "rules": rules_out,
        "patterns": patterns,
        "checks": checks,
        "process_score": process_score,
        "formula": layout.formula,
    }
    if layout.coverage:
        rules_applicable, judged_activations, model_events = coverage
        body["coverage"] = {
            "rules": len(rules_out),
            "rules_applicable": rules_applicable,
            "judged_activations": judged_activations,
            "model_events": model_events,
        }
    return body


def _canonical_document(body: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of a score document. Its keys are ASCII constants and it holds no float
    (counts, seqs and weights are integers, rationals are strings), so orjson's sorted output is
    the canonical form; an integer beyond 64 bits goes the reference way."""
    try:
        return canonical_json_of_typed(body)
    except orjson.JSONEncodeError:
        return canonical_json(body)


def _summary(layout: _Layout, counts: tuple[tuple[int, int, int], ...]) -> tuple[Any, ...]:
    """What depends only on the rules' (weight, fulfilled, judged): (process score, its JSON value,
    patterns, checks, rules applicable, judged activations)."""
    by_id = {rule_id: count for (rule_id, _, _), count in zip(layout.rules, counts)}
    process = _weighted_counts(list(counts))
    patterns = {name: {"rules": list(ids), "score": rational(_weighted_counts([by_id[i] for i in ids]))}
                for name, ids in layout.patterns}
    checks = {name: {"rules": list(ids), "score": rational(_weighted_counts([by_id[i] for i in ids]))}
              for name, ids in layout.checks}
    return (process, rational(process), patterns, checks, sum(1 for _, _, j in counts if j),
            sum(j for _, _, j in counts))


def score_document(
    ruleset: RuleSet, findings: dict[str, list[Finding]], *, run_id: str, head_hash: str, event_count: int,
    ruleset_digest: str | None = None, tallies: dict[str, Tally] | None = None, model_events: int = 0,
) -> ScoreDocument:
    """Assemble the canonical score document from a run's findings (all of them, or the
    violations plus ``tallies`` counting the rest)."""
    digest = ruleset_digest or ruleset_hash(ruleset)
    layout = _layout(ruleset, digest)
    values: list[RuleValues] = []
    counts: list[tuple[int, int, int]] = []
    for rule_id, weight, _ in layout.rules:
        found = findings[rule_id]
        violated = [f for f in found if f.verdict == "violated"]
        if tallies is not None:
            fulfilled, vacuous = tallies[rule_id].fulfilled, tallies[rule_id].vacuous
        else:
            fulfilled = sum(1 for f in found if f.verdict == "fulfilled")
            vacuous = sum(1 for f in found if f.verdict == "vacuous")
        judged = fulfilled + len(violated)
        counts.append((weight, fulfilled, judged))
        values.append((judged + vacuous, fulfilled, len(violated), vacuous, _ratio(fulfilled, judged),
                       [{"seq": f.seq, "stage": f.stage, "cited": list(f.cited)} for f in violated]))
    process, process_json, patterns, checks, applicable, judged_all = _summary(layout, tuple(counts))
    body = _body(layout, run_id=run_id, head_hash=head_hash, event_count=event_count, rules=values,
                 patterns=patterns, checks=checks, process_score=process_json,
                 coverage=(applicable, judged_all, model_events))
    return ScoreDocument(run_id, digest, ENGINE_VERSION, head_hash, event_count, process, body,
                         _canonical_document(body))


_RULE_HASHES: dict[str, dict[str, str]] = {}


def _rule_hashes(ruleset: RuleSet, digest: str) -> dict[str, str]:
    """Each rule's hash, computed once per rule set (keyed by the set's content hash)."""
    hashes = _RULE_HASHES.get(digest)
    if hashes is None:
        hashes = _RULE_HASHES[digest] = {rule.id: rule_hash(rule) for rule in ruleset.rules}
    return hashes


_SLOT = "\u0001slot{}\u0001"  # no rule field, name or hash can hold a control character


class _Template:
    """A rule set's score document as canonical bytes with a ``%s`` wherever a run's values go.

    Made once, from :func:`_body` with a marker in every run-dependent place serialised by
    :func:`_canonical_document` itself; so filling the slots with the canonical bytes of each
    value gives exactly the document :func:`score_document` makes (tests hold the two to it)."""

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout
        names: list[str] = []

        def slot(name: str) -> str:
            names.append(name)
            return _SLOT.format(len(names) - 1)

        rules = [tuple(slot(f"{i}.{field}") for field in ("activations", "fulfilled", "violated", "vacuous",
                                                           "score", "violations"))
                 for i in range(len(layout.rules))]
        patterns = {name: {"rules": list(ids), "score": slot(f"pattern.{name}")} for name, ids in layout.patterns}
        checks = {name: {"rules": list(ids), "score": slot(f"check.{name}")} for name, ids in layout.checks}
        body = _body(layout, run_id=slot("run_id"), head_hash=slot("run_head_hash"),
                     event_count=slot("run_event_count"), rules=rules,  # type: ignore[arg-type]
                     patterns=patterns, checks=checks, process_score=slot("process_score"),
                     coverage=(slot("rules_applicable"), slot("judged_activations"), slot("model_events")))
        text = _canonical_document(body).replace(b"%", b"%%")
        order: list[int] = []
        for number in range(len(names)):
            marker = orjson.dumps(_SLOT.format(number))
            if text.count(marker) != 1:
                if not layout.coverage and names[number] in ("rules_applicable", "judged_activations", "model_events"):
                    continue
                raise AssertionError(f"score template: slot {names[number]} appears {text.count(marker)} times")
            order.append(number)
        order.sort(key=lambda number: text.index(orjson.dumps(_SLOT.format(number))))
        for number in order:
            text = text.replace(orjson.dumps(_SLOT.format(number)), b"%s")
        self.text = text
        #: where each named value goes in the ``%`` tuple (None: not in this format)
        self.position = {names[number]: at for at, number in enumerate(order)}
        self.size = len(order)
        self.rule_positions = [tuple(self.position[f"{i}.{field}"] for field in ("activations", "fulfilled",
                                                                                  "violated", "vacuous", "score",
                                                                                  "violations"))
                               for i in range(len(layout.rules))]
        index = {rule_id: i for i, (rule_id, _, _) in enumerate(layout.rules)}
        #: (position of a pattern's or check's score, indices of its rules in layout order)
        self.subtotals = [(self.position[f"{prefix}.{name}"], tuple(index[i] for i in ids))
                          for prefix, groups in (("pattern", layout.patterns), ("check", layout.checks))
                          for name, ids in groups]
        self.scores: dict[tuple[tuple[int, int, int], ...], tuple[Fraction | None, bytes]] = {}

    def subtotal(self, counts: tuple[tuple[int, int, int], ...]) -> tuple[Fraction | None, bytes]:
        """(weighted score, its canonical bytes) of some rules' (weight, fulfilled, judged),
        remembered: a pattern or check has few rules, and runs repeat their few count patterns."""
        found = self.scores.get(counts)
        if found is None:
            if len(self.scores) >= 50_000:
                self.scores.clear()
            value = _weighted_counts(list(counts))
            found = self.scores[counts] = (value, _dumps(rational(value)))
        return found


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


#: Between a document's values as the store keeps them (procgrade.engine.store.score_templates.SEPARATOR).
_SEPARATOR = b"\x1f"

#: A rule's run-dependent fields, in the order of :attr:`_Template.rule_positions`.
_RULE_FIELDS = ("activations", "fulfilled", "violated", "vacuous", "score", "violations")


def _between_slots(text: bytes) -> list[bytes]:
    """The pieces of a ``%`` template around its ``%s`` slots (``%%`` escapes kept): piece k comes
    before slot k, and there is one more piece than slots."""
    pieces, start = [], 0
    for match in re.finditer(rb"%[%s]", text):
        if match.group() == b"%s":
            pieces.append(text[start:match.start()])
            start = match.end()
    pieces.append(text[start:])
    return pieces


def _rule_filler(inner: bytes, order: tuple[str, ...], seen: dict[tuple[int, int], bytes]) -> tuple[Any, Any]:
    """(``plain(fulfilled, vacuous)``, ``violated(fulfilled, vacuous, violations)``): the bytes of
    one rule's stretch of run-dependent values (``inner``, its fields in ``order``) and the values
    themselves in that order, joined by :data:`_SEPARATOR`; the first remembered in ``seen`` (a rule
    without violations has few distinct counts across runs)."""

    pick = itemgetter(*[_RULE_FIELDS.index(name) for name in order])  # _RULE_FIELDS order -> text order
    small, ratios = _SMALL_INTS, _RATIOS

    def violated(fulfilled: int, vacuous: int, found: list[Finding]) -> tuple[bytes, bytes]:
        failed = len(found)
        judged = fulfilled + failed
        activations = judged + vacuous
        values = pick((small[activations] if activations < 4096 else b"%d" % activations,
                       small[fulfilled] if fulfilled < 4096 else b"%d" % fulfilled,
                       small[failed] if failed < 4096 else b"%d" % failed,
                       small[vacuous] if vacuous < 4096 else b"%d" % vacuous,
                       ratios.get((fulfilled, judged)) or _ratio_bytes(fulfilled, judged),
                       _violations_bytes(found) if found else b"[]"))
        return inner % values, _SEPARATOR.join(values)

    def plain(fulfilled: int, vacuous: int) -> tuple[bytes, bytes]:
        if len(seen) >= 50_000:
            seen.clear()
        found = seen[(fulfilled, vacuous)] = violated(fulfilled, vacuous, [])
        return found

    return plain, violated


def _subtotal_memo(weights: tuple[int, ...], memo: dict[tuple[int, ...], tuple[Fraction | None, bytes]]) -> Any:
    """``learn(key)``: (weighted score, its canonical bytes) of rules of ``weights`` whose counts
    are ``key`` = (fulfilled, judged) of each in turn, remembered in ``memo`` (a run's few rules
    of a pattern or check repeat their counts across runs)."""

    def learn(key: tuple[int, ...]) -> tuple[Fraction | None, bytes]:
        """:func:`_weighted_counts` and the bytes of its :func:`rational`, in integers."""
        if len(memo) >= 50_000:
            memo.clear()
        judged = key[1::2]
        applicable = [(weight, fulfilled, j) for weight, fulfilled, j in zip(weights, key[0::2], judged) if j]
        if not applicable:
            found = memo[key] = (None, b"null")
            return found
        common = lcm(*[j for _, _, j in applicable])
        numerator = sum([weight * fulfilled * (common // j) for weight, fulfilled, j in applicable])
        denominator = common * sum([weight for weight, _, _ in applicable])
        divisor = gcd(numerator, denominator)
        numerator, denominator = numerator // divisor, denominator // divisor
        found = memo[key] = (Fraction(numerator, denominator), _RATIONAL_BYTES % (denominator, numerator))
        return found

    return learn


def _violations_bytes(violated: list[Finding]) -> bytes:
    """The canonical bytes of a rule's ``violations`` list: each object's keys written in sorted
    order and ``cited`` as the tuple it is (orjson writes a tuple as an array), so orjson neither
    sorts nor copies (0.2 us of a violated rule's 0.8)."""
    return orjson.dumps([{"cited": f.cited, "seq": f.seq, "stage": f.stage} for f in violated])


#: The decimal bytes of the small counts most documents hold.
_SMALL_INTS = tuple(b"%d" % n for n in range(4096))


def _int_bytes(value: int) -> bytes:
    return _SMALL_INTS[value] if 0 <= value < 4096 else b"%d" % value


_RATIOS: dict[tuple[int, int], bytes] = {}


def _ratio_bytes(numerator: int, denominator: int) -> bytes:
    found = _RATIOS.get((numerator, denominator))
    if found is None:
        if len(_RATIOS) >= 50_000:
            _RATIOS.clear()
        found = _RATIOS[(numerator, denominator)] = _dumps(_ratio(numerator, denominator))
    return found


class StoredForm(NamedTuple):
    """What the store keeps of a run's score document, as a worker sends it to the one writer: the
    process score, the document's sha256 (hex), and either the values that fill the rule set's
    template into it (joined by U+001F, one per slot) or, where there are none, the document whole."""

    process: Fraction | None
    sha256: str
    values: bytes | None
    document: bytes | None


class RunScorer:
    """A rule set made ready once for scoring many runs in turn (a batch, a task).

    Per run, only the run's own work remains: the rules run as generated code
    (:class:`procgrade.rules.compiled.CompiledMonitor`, reset between runs), and the document is
    written into the rule set's canonical template (:class:`_Template`) by a generated fill
    function rather than built and serialised whole.
    Not shared between threads: one scorer scores one run at a time.
    """

    def __init__(self, ruleset: RuleSet, digest: str | None = None) -> None:
        self.ruleset = ruleset
        self.digest = digest or ruleset_hash(ruleset)
        self._monitor = CompiledMonitor(ruleset, detail=False)
        self._template = _Template(_layout(ruleset, self.digest))
        by_id = {monitor.id: monitor.tally for monitor in self._monitor.monitors}
        #: each rule's tally (zeroed, never replaced, between runs) in the document's rule order
        self._tallies = [by_id[rule_id] for rule_id, _, _ in self._template.layout.rules]
        template = self._template
        #: per rule, in document order: (id, weight, its six slots, its tally), unpacked once a run
        self._plan = [(rule_id, weight, *where, tally) for (rule_id, weight, _), where, tally
                      in zip(template.layout.rules, template.rule_positions, self._tallies)]
        position = template.position
        self._header_positions = (
            position["run_id"], position["run_head_hash"], position["run_event_count"], position["process_score"],
            (position["rules_applicable"], position["judged_activations"], position["model_events"])
            if template.layout.coverage else None)
        self._fill = self._fill_function()

    @property
    def template_text(self) -> bytes:
        """The rule set's document with ``%s`` wherever a run's values go (``%%`` a literal
        ``%``): filled with the values :meth:`filled` gives (split at U+001F), it is the document."""
        return self._template.text

    def stored(self, batches: Iterable[Iterable[tuple[Any, ...]]], *, run_id: str, head_hash: str,
               event_count: int) -> StoredForm:
        """The run's :class:`StoredForm`. The document is hashed as soon as it is made, while its
        8 KB are still in the processor's cache, and then dropped when values stand for it: the
        writer never reads it (re-scoring 10,000 small runs, 4% of the time went to decoding and
        hashing documents that had gone cold in a batch of thousands). The values stand for it
        when they are one per slot of :attr:`template_text`: always, as canonical JSON escapes the
        separator in every value, but checked, as a writer relies on it."""
        document, process, values = self.filled(batches, run_id=run_id, head_hash=head_hash, event_count=event_count)
        digest = _sha256(document).hexdigest()
        if values is not None and values.count(_SEPARATOR) == self._template.size - 1:
            return StoredForm(process, digest, values, None)
        return StoredForm(process, digest, None, document)

    def canonical(self, batches: Iterable[Iterable[tuple[Any, ...]]], *, run_id: str, head_hash: str,
                  event_count: int) -> tuple[bytes, Fraction | None]:
        """(canonical document bytes, process score) of a run from its fact rows (given in
        batches, in seq order): what a worker sends back."""
        return self.filled(batches, run_id=run_id, head_hash=head_hash, event_count=event_count)[:2]

    def filled(self, batches: Iterable[Iterable[tuple[Any, ...]]], *, run_id: str, head_hash: str,
               event_count: int) -> tuple[bytes, Fraction | None, bytes | None]:
        """:meth:`canonical` and the values of :attr:`template_text`'s slots that make the
        document (what the store keeps of it), joined by U+001F (canonical JSON escapes every
        control character, so no value holds one); None for them when the document was made whole."""
        monitor = self._monitor
        monitor.reset()
        for rows in batches:
            monitor.feed(rows)
        findings = monitor.finish_in_place()
        try:
            return self._fill(findings, run_id, head_hash, event_count, monitor.model_events)
        except orjson.JSONEncodeError:  # an integer beyond 64 bits: the reference path
            document = score_document(self.ruleset, findings, run_id=run_id, head_hash=head_hash,
                                      event_count=event_count, ruleset_digest=self.digest,
                                      tallies=monitor.tallies(), model_events=monitor.model_events)
            return document.canonical, document.process_score, None

    def _fill_function(self) -> Any:
        """``fill(findings, run_id, head_hash, event_count, model_events)`` -> (document bytes,
        process score, values joined): the rule set's template filled by straight-line generated
        code (each rule's counts, score and violations, each subtotal, the header), values in template order;
        what the loop over the rules would compute, without the loop (tests hold it to
        :func:`score_document`'s bytes). A rule whose six values are one stretch of its object is
        filled as one piece (its fixed fields between them included); the values are every slot's
        own, for :attr:`template_text`, joined by :data:`_SEPARATOR` (a rule's six joined once)."""
        template = self._template
        names: dict[str, Any] = {"_text": template.text, "_small": _SMALL_INTS, "_ratios": _RATIOS,
                                 "_ratio_bytes": _ratio_bytes, "_dumps": _dumps, "_violations": _violations_bytes}
        lines = ["def fill(findings, run_id, head_hash, event_count, model_events):"]
        values: list[str] = [""] * template.size

        def count_bytes(expr: str) -> str:
            return f"(_small[{expr}] if {expr} < 4096 else b'%d' % ({expr}))"

        segments = _between_slots(template.text)
        inside: set[int] = set()  # slots folded into a rule's own template
        folded: dict[int, int] = {}  # the first slot of a folded rule's stretch -> the rule
        counts = []
        for i, (rule_id, weight, *where, tally) in enumerate(self._plan):
            names[f"_tally{i}"], names[f"_id{i}"] = tally, rule_id
            lines += [f"    f{i} = _tally{i}.fulfilled", f"    v{i} = _tally{i}.vacuous",
                      f"    x{i} = findings[_id{i}]", f"    j{i} = f{i} + len(x{i})"]
            counts.append(f"({weight}, f{i}, j{i})")
            first = min(where)
            if sorted(where) == list(range(first, first + len(where))):
                # the rule's six values are one stretch of its object: filled as one piece, a rule
                # without violations remembered by (fulfilled, vacuous)
                order = tuple(field for _, field in sorted(zip(where, _RULE_FIELDS)))
                inner = b"%s" + b"".join(segments[k] + b"%s" for k in range(first + 1, first + len(where)))
                names[f"_plain_seen{i}"] = seen = {}
                names[f"_plain{i}"], names[f"_violated{i}"] = _rule_filler(inner, order, seen)
                inside.update(range(first + 1, first + len(where)))
                lines.append(f"    p{i} = (_violated{i}(f{i}, v{i}, x{i}) if x{i} else "
                             f"(_plain_seen{i}.get((f{i}, v{i})) or _plain{i}(f{i}, v{i})))")
                folded[first] = i
                continue
            at_activations, at_fulfilled, at_violated, at_vacuous, at_score, at_violations = where
            values[at_activations] = count_bytes(f"(j{i} + v{i})")
            values[at_fulfilled] = count_bytes(f"f{i}")
            values[at_violated] = count_bytes(f"len(x{i})")
            values[at_vacuous] = count_bytes(f"v{i}")
            values[at_score] = f"(_ratios.get((f{i}, j{i})) or _ratio_bytes(f{i}, j{i}))"
            values[at_violations] = f"(_violations(x{i}) if x{i} else b'[]')"
        weights = [weight for _, weight, *_ in self._plan]
        for number, (where, members) in enumerate(template.subtotals):
            memo: dict[tuple[int, ...], tuple[Fraction | None, bytes]] = {}
            names[f"_seen{number}"] = memo
            names[f"_learn{number}"] = _subtotal_memo(tuple(weights[m] for m in members), memo)
            key = "".join(f"f{m}, j{m}, " for m in members)
            values[where] = f"(_seen{number}.get(_k := ({key})) or _learn{number}(_k))[1]"
        # The process score weighs every rule, so nearly every run has counts of its own (a memo
        # of them missed 1,993 of the bench's 2,000 runs): computed straight, in the integers of
        # :func:`_weighted_counts` (a rule never judged has fulfilled nothing: its term is 0
        # whatever ``or 1`` divides by).
        names.update(_lcm=lcm, _gcd=gcd, _Fraction=Fraction, _rational=_RATIONAL_BYTES)
        rules_count = len(counts)
        lines += [f"    _w = {' + '.join(f'({w} if j{i} else 0)' for i, w in enumerate(weights)) or '0'}",
                  "    if _w:",
                  f"        _c = _lcm({', '.join(f'j{i} or 1' for i in range(rules_count))})",
                  "        _n = " + (" + ".join(f"{'' if w == 1 else f'{w} * '}f{i} * (_c // (j{i} or 1))"
                                             for i, w in enumerate(weights)) or "0"),
                  "        _g = _gcd(_n, _c * _w)",
                  "        _n, _d = _n // _g, _c * _w // _g",
                  "        process, process_bytes = _Fraction(_n, _d), _rational % (_d, _n)",
                  "    else:",
                  "        process, process_bytes = None, b'null'"]
        at_run_id, at_head, at_count, at_process, at_coverage = self._header_positions
        values[at_run_id], values[at_head] = "_dumps(run_id)", "_dumps(head_hash)"
        values[at_count], values[at_process] = "b'%d' % event_count", "process_bytes"
        if at_coverage is not None:
            lines.append(f"    applicable = {' + '.join(f'(1 if j{i} else 0)' for i in range(len(counts)))}")
            lines.append(f"    judged_all = {' + '.join(f'j{i}' for i in range(len(counts)))}")
            values[at_coverage[0]] = count_bytes("applicable")
            values[at_coverage[1]] = count_bytes("judged_all")
            values[at_coverage[2]] = "b'%d' % model_events"
        assert all(value or at in inside or at in folded for at, value in enumerate(values)), \
            "every slot of the template is filled"
        names["_text"] = b"".join(segments[at] + b"%s" for at in range(template.size) if at not in inside) \
            + segments[template.size]
        lines += [f"    s{at} = {value}" for at, value in enumerate(values) if value]
        in_document = "".join(f"p{folded[at]}[0], " if at in folded else f"s{at}, "
                              for at in range(template.size) if at not in inside)
        in_template = "".join(f"p{folded[at]}[1], " if at in folded else f"s{at}, "
                              for at in range(template.size) if at not in inside)
        names["_separator"] = _SEPARATOR
        lines.append(f"    return _text % ({in_document}), process, _separator.join(({in_template}))")
        namespace: dict[str, Any] = {"__builtins__": __builtins__, **names}
        exec(compile("\n".join(lines) + "\n", "<procgrade score template>", "exec"), namespace)
        return namespace["fill"]

    def score(self, batches: Iterable[Iterable[tuple[Any, ...]]], *, run_id: str, head_hash: str,
              event_count: int) -> ScoreDocument:
        """The score document of a run from its fact rows (given in batches, in seq order)."""
        canonical, process = self.canonical(batches, run_id=run_id, head_hash=head_hash, event_count=event_count)
        return ScoreDocument(run_id, self.digest, ENGINE_VERSION, head_hash, event_count, process, None, canonical)


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
