"""Per-run pages of the report: the run's timeline with the rule violations marked on the events
they cite.

:func:`run_page` gathers the plain data (what ``procgrade show`` and ``procgrade explain`` print:
each event described by :func:`procgrade.engine.timeline.describe`, and the findings of the rule set's
monitor with the seqs that decided them); :func:`run_section` renders it as one ``<section>`` of
the report, ``id`` :func:`run_anchor`, each event row ``id`` :func:`event_anchor`, so findings and
the report's other tables link straight to the events they are about.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from procgrade.engine.analysis.dataset import NOT_GRADED
from procgrade.engine.reporting.markup import anchor, esc, fmt_num
from procgrade.engine.rescoring import run_findings
from procgrade.engine.scoring import ScoreDocument, score_document
from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore
from procgrade.engine.timeline import describe
from procgrade.rules.model import RuleSet
from procgrade.rules.monitor import Finding, RunMonitor

__all__ = [
    "RuleSummary",
    "RunPage",
    "TimelineEvent",
    "Violation",
    "event_anchor",
    "first_events",
    "run_anchor",
    "run_infos",
    "run_page",
    "run_section",
    "run_sections",
]


@dataclass(frozen=True)
class TimelineEvent:
    seq: int
    stage: int | None
    actor: str
    kind: str
    what: str
    #: Ids of the rules with a violation citing this event, in rule-set order.
    violated_rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Violation:
    rule: str
    title: str
    seq: int | None
    stage: int | None
    cited: tuple[int, ...]


@dataclass(frozen=True)
class RuleSummary:
    rule: str
    title: str
    pattern: str | None
    fulfilled: int
    violated: int
    vacuous: int
    score: Fraction | None


@dataclass(frozen=True)
class RunPage:
    run_id: str
    model: str | None
    harness: str | None
    task_id: str | None
    format: str
    event_count: int
    head_hash: str | None
    ruleset: str
    process_score: Fraction | None
    rules: tuple[RuleSummary, ...]
    violations: tuple[Violation, ...]
    events: tuple[TimelineEvent, ...]
    #: Violations and events of a huge run left out of the page (see the caps below).
    violations_omitted: int = 0
    events_omitted: int = 0


#: A run's page shows at most this many events (the first ones, then those its shown violations
#: cite) and this many violations; the rest is summarised with a pointer to ``procgrade show``.
TIMELINE_CAP = 2000
VIOLATIONS_CAP = 500


def run_anchor(run_id: str) -> str:
    """The fragment id of a run's section: ``run-<slug>-<digest>``."""
    return anchor("run", run_id)


def event_anchor(run_id: str, seq: int) -> str:
    return f"{run_anchor(run_id)}-seq-{seq}"


def _stored_stream(store: EventStore, run_id: str) -> tuple[str, Any]:
    """The stream that holds the run, with its stored info: the run itself, or, when only its grades
    arrived (before any trajectory), its grades stream ``<run>@grades``, which the analysis shows
    under the run's id."""
    from procgrade.engine.errors import UnknownRunError
    from procgrade.engine.grades.record import grades_stream

    try:
        return run_id, store.run(run_id)
    except UnknownRunError:
        stream = grades_stream(run_id)
        return stream, store.run(stream)  # neither: the "no run" error names the grades stream


def _findings(store: EventStore, ruleset: RuleSet, run_id: str, info: Any, digest: str | None,
              monitor: RunMonitor | None = None) -> tuple[dict[str, list[Finding]], ScoreDocument]:
    """:func:`procgrade.engine.rescoring.run_findings` for a run whose info is read already, with the rule
    set's hash computed once per report rather than once per run (it canonicalises every rule), and
    ``monitor`` (a :class:`RunMonitor` of ``ruleset``) reused: compiling the rules costs more than
    monitoring a small run, so a report compiles them once and resets the monitor for each run."""
    if digest is None:
        return run_findings(store, ruleset, run_id)
    if monitor is None:
        monitor = RunMonitor(ruleset)
    else:
        monitor.reset()
    for rows in ScoreStore(store).fact_batches(run_id):
        monitor.feed(rows)
    findings = monitor.finish()
    document = score_document(ruleset, findings, run_id=run_id, head_hash=info.head_hash or "",
                              event_count=info.event_count, ruleset_digest=digest, model_events=monitor.model_events)
    return findings, document


def run_infos(store: EventStore) -> dict[str, Any]:
    """Every stored stream's info by id, in one query (for :func:`run_page`'s ``infos``)."""
    return {info.run_id: info for info in store.runs()}


def first_events(store: EventStore, run_ids: Sequence[str]) -> dict[str, list[Any]]:
    """The first :data:`TIMELINE_CAP` events of each of ``run_ids`` (stored stream ids), in seq order, read
    in one query per :data:`procgrade.engine.store.base.IDS_PER_QUERY` runs rather than one per run (for :func:`run_page`'s ``timelines``)."""
    from procgrade.engine.stored import to_event

    found: dict[str, list[Any]] = {run_id: [] for run_id in run_ids}
    for row in store.stored_where(run_ids=sorted(found), seq_below=TIMELINE_CAP):
        found[row[0]].append(to_event(tuple(row)))
    return found


def stored_stream_of(run_id: str, infos: dict[str, Any]) -> str | None:
    """The stream holding ``run_id`` among ``infos`` (as :func:`_stored_stream` finds it), or None."""
    from procgrade.engine.grades.record import grades_stream

    if run_id in infos:
        return run_id
    stream = grades_stream(run_id)
    return stream if stream in infos else None


def run_page(store: EventStore, run_id: str, ruleset: RuleSet, *, digest: str | None = None,
             infos: dict[str, Any] | None = None, timelines: dict[str, list[Any]] | None = None,
             monitor: RunMonitor | None = None) -> RunPage:
    """A run's timeline and its findings under ``ruleset`` (computed from the log, as ``explain`` does).
    A caller making many pages passes what it read for all of them at once: ``digest``, the rule set's
    hash; ``infos``, :func:`run_infos`; ``timelines``, :func:`first_events` of the stored streams;
    ``monitor``, one ``RunMonitor(ruleset)`` for every page (reset before each run; used with ``digest``)."""
    stored = stored_stream_of(run_id, infos) if infos is not None else None
    if stored is None:
        stored, info = _stored_stream(store, run_id)
    else:
        info = infos[stored]  # type: ignore[index]
    findings, document = _findings(store, ruleset, stored, info, digest, monitor)
    titles = {rule.id: rule.title for rule in ruleset.rules}
    violated = [f for rule in ruleset.rules for f in findings[rule.id] if f.verdict == "violated"]
    violations = tuple(Violation(f.rule, titles[f.rule], f.seq, f.stage, tuple(f.cited))
                       for f in violated[:VIOLATIONS_CAP])
    total_violations = len(violated)
    del violated, findings
    citing: dict[int, list[str]] = {}
    for violation in violations:
        for seq in violation.cited:
            rules = citing.setdefault(seq, [])
            if violation.rule not in rules:
                rules.append(violation.rule)
    # The first events, then the cited ones beyond them: never the whole of a huge run.
    if timelines is not None and stored in timelines:
        shown = list(timelines[stored])
    else:
        shown = list(store.events_between(stored, 0, TIMELINE_CAP - 1))
    shown += [event for seq in sorted(s for s in citing if s >= TIMELINE_CAP)
              for event in store.events_between(stored, seq, seq)]
    events = tuple(
        TimelineEvent(event.seq, event.stage, event.actor, event.kind, describe(event),
                      tuple(citing.get(event.seq, ())))
        for event in shown
    )
    rules = tuple(
        RuleSummary(rule["id"], titles[rule["id"]], rule["pattern"], rule["fulfilled"], rule["violated"],
                    rule["vacuous"], None if rule["score"] is None
                    else Fraction(int(rule["score"]["num"]), int(rule["score"]["den"])))
        for rule in document.body["rules"]
    )
    return RunPage(run_id=run_id, model=info.model, harness=info.harness, task_id=info.task_id,
                   format=info.source_format or "native", event_count=info.event_count, head_hash=info.head_hash,
                   ruleset=ruleset.name, process_score=document.process_score, rules=rules,
                   violations=violations, events=events, violations_omitted=total_violations - len(violations),
                   events_omitted=info.event_count - len(events))


def _seq_link(run_id: str, seq: int) -> str:
    return f'<a href="#{event_anchor(run_id, seq)}">{seq}</a>'


def _where(violation: Violation) -> str:
    if violation.seq is not None:
        return f"seq {violation.seq}"
    return f"stage {violation.stage}" if violation.stage is not None else "the run"


def _rules_table(page: RunPage) -> str:
    rows = []
    for rule in page.rules:
        css = ' class="has-violation"' if rule.violated else ""
        rows.append(f"<tr{css}><td><code>{esc(rule.rule)}</code></td><td>{esc(rule.title)}</td>"
                    f"<td>{esc(rule.pattern or '-')}</td><td class=\"num\">{rule.fulfilled}</td>"
                    f"<td class=\"num\">{rule.violated}</td><td class=\"num\">{rule.vacuous}</td>"
                    f"<td class=\"num\">{esc(fmt_num(rule.score, 4))}</td></tr>")
    return ('<table class="rules"><thead><tr><th>rule</th><th>title</th><th>pattern</th><th>fulfilled</th>'
            '<th>violated</th><th>vacuous</th><th>score</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def _violations_list(page: RunPage) -> str:
    if not page.violations:
        return '<p class="no-violations">No rule is violated on this run.</p>'
    more = (f'<p class="note omitted">and {page.violations_omitted} more violations: '
            f"<code>procgrade explain {esc(page.run_id)}</code> lists them all.</p>" if page.violations_omitted else "")
    items = []
    for violation in page.violations:
        cited = ", ".join(_seq_link(page.run_id, seq) for seq in violation.cited) or "-"
        items.append(f'<li class="finding violated" data-rule="{esc(violation.rule)}">'
                     f"<code>{esc(violation.rule)}</code> "
                     f"violated at {esc(_where(violation))}: {esc(violation.title)}; cites seq {cited}</li>")
    return '<ol class="findings">' + "".join(items) + "</ol>" + more


def _omitted(page: RunPage) -> str:
    """The note under a huge run's timeline: how much is left out and how to see it."""
    if not page.events_omitted:
        return ""
    return (f'<p class="note omitted">{page.events_omitted} of {page.event_count} events are not shown here '
            f"(the first {min(TIMELINE_CAP, page.event_count)} are, and those the listed violations cite): "
            f"<code>procgrade show {esc(page.run_id)}</code> prints the whole timeline.</p>")


def _timeline(page: RunPage) -> str:
    rows = []
    previous = -1
    for event in page.events:
        if event.seq != previous + 1:
            rows.append(f'<tr class="gap"><td colspan="5">... {event.seq - previous - 1} events ...</td></tr>')
        previous = event.seq
        tags = "".join(f'<span class="finding-tag" data-rule="{esc(rule)}">{esc(rule)}</span>'
                       for rule in event.violated_rules)
        css = "event cited" if event.violated_rules else "event"
        rows.append(f'<tr id="{event_anchor(page.run_id, event.seq)}" class="{css}" data-seq="{event.seq}">'
                    f'<td class="num">{event.seq}</td>'
                    f'<td class="num">{esc("" if event.stage is None else event.stage)}</td>'
                    f"<td>{esc(event.actor)}</td><td>{esc(event.kind)}</td>"
                    f'<td class="what">{esc(event.what)}{tags}</td></tr>')
    return ('<table class="timeline"><thead><tr><th>seq</th><th>stage</th><th>actor</th><th>kind</th><th>what</th>'
            '</tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def run_section(page: RunPage, *, outcome: str | None = None, group: tuple[str, str] | None = None) -> str:
    """The run's ``<section>``: provenance, rule verdicts, violations with links, and the timeline."""
    facts = [("model", page.model), ("harness", page.harness), ("task", page.task_id), ("format", page.format),
             ("events", str(page.event_count)), ("head", page.head_hash),
             (f"process score ({page.ruleset})",
              NOT_GRADED if page.process_score is None else fmt_num(page.process_score, 4)), ("outcome", outcome)]
    if group is not None:
        facts.insert(0, (f"group ({group[0]})", group[1]))
    details = "".join(f"<dt>{esc(name)}</dt><dd>{esc(value if value is not None else '-')}</dd>"
                      for name, value in facts)
    return (f'<section class="run" id="{run_anchor(page.run_id)}" data-run-id="{esc(page.run_id)}">'
            f"<h3>Run <code>{esc(page.run_id)}</code></h3><dl class=\"facts\">{details}</dl>"
            f"<h4>Rule violations ({len(page.violations) + page.violations_omitted})</h4>{_violations_list(page)}"
            f"<details><summary>Every rule on this run</summary>{_rules_table(page)}</details>"
            f"<h4>Timeline</h4>{_timeline(page)}{_omitted(page)}"
            '<p class="back"><a href="#runs">back to the runs</a></p></section>')


def run_sections(pages: Sequence[RunPage], outcomes: dict[str, str | None], groups: dict[str, tuple[str, str]]) -> str:
    return "".join(run_section(page, outcome=outcomes.get(page.run_id), group=groups.get(page.run_id))
                   for page in pages)
