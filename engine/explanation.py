"""``procgrade explain``: each rule's verdicts on a run, with the events they cite, for people."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text

from procgrade.engine.rescoring import run_findings
from procgrade.engine.scoring import display
from procgrade.engine.scoring import NOT_GRADED
from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore
from procgrade.engine.tables import Table
from procgrade.engine.timeline import describe
from procgrade.rules.loading import load_ruleset
from procgrade.rules.reasons import near_misses, vacuous_reason

__all__ = ["explain_run"]

_STYLE = {"fulfilled": "green", "violated": "bold red", "vacuous": "dim"}


def explain_run(store: EventStore, run_id: str, rules_path: Path | None = None, *,
                show_all: bool = False) -> list[Any]:
    """Renderables: a summary table, then per rule its violations (with ``show_all``, every
    activation) with each cited event described."""
    ruleset = load_ruleset(rules_path)
    findings, document = run_findings(store, ruleset, run_id)
    events = {event.seq: event for event in store.events(run_id)}
    rows = list(ScoreStore(store).fact_rows(run_id))
    shown_score = NOT_GRADED if document.process_score is None else display(document.process_score)
    coverage = document.body.get("coverage")
    covered = (f"; {coverage['rules_applicable']} of {coverage['rules']} rules applied, "
               f"{coverage['judged_activations']} judged activations, {coverage['model_events']} model events"
               if coverage else "")
    summary = Table("rule", "pattern", "fulfilled", "violated", "vacuous", "score", "why nothing was judged",
                    title=f"run {run_id} under rule set {ruleset.name} v{ruleset.version}: process score "
                          f"{shown_score}{covered}")
    by_id = {rule.id: rule for rule in ruleset.rules}
    for rule in document.body["rules"]:
        score = rule["score"]
        reason = vacuous_reason(by_id[rule["id"]], findings[rule["id"]], rows) if score is None else None
        summary.add_row(rule["id"], rule["pattern"] or "-", str(rule["fulfilled"]), str(rule["violated"]),
                        str(rule["vacuous"]),
                        "-" if score is None else f"{score['num']}/{score['den']}", reason or "")
    out: list[Any] = [summary]
    for rule in ruleset.rules:
        shown = [f for f in findings[rule.id] if show_all or f.verdict == "violated"]
        if not shown:
            continue
        lines = [Text(f"{rule.id}: {rule.title}", style="bold")]
        for finding in shown:
            where = f"seq {finding.seq}" if finding.seq is not None else (
                f"stage {finding.stage}" if finding.stage is not None else "the run")
            lines.append(Text(f"  {finding.verdict} at {where}", style=_STYLE[finding.verdict]))
            for seq in finding.cited:
                event = events.get(seq)
                what = describe(event) if event is not None else "(not stored)"
                actor = event.actor if event is not None else "?"
                lines.append(Text(f"    seq {seq} [{actor}] {event.kind if event else ''}: {what}"))
            for note in near_misses(rule, finding, rows):
                lines.append(Text(f"    did not count: {note}", style="yellow"))
        out.append(Group(*lines))
    return out
