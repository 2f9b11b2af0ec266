"""The report's headline block: what a reader should see first. How many runs were graded and how many were
not (and why), how many groups and tasks the comparison spans, whether the process ranking agrees with the
outcome ranking (Kendall tau-b and Spearman with their bootstrap intervals), whether the process score
separates resolved from unresolved runs (AUC), and every statistic the data could not support, with the
reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from procgrade.engine.analysis.graded_runs import Selection
from procgrade.engine.reporting.markup import NOT_AVAILABLE, esc, fmt_num, short_run_id

__all__ = ["headline_section"]


def _correlation(result: Mapping[str, Any] | None, name: str) -> str:
    entry = (result or {}).get(name) or {}
    if entry.get("statistic") is None:
        return "undefined"
    if entry.get("low") is None or entry.get("high") is None:
        return f"{fmt_num(entry['statistic'], 2)} (no interval)"
    return f"{fmt_num(entry['statistic'], 2)} [{fmt_num(entry['low'], 2)}, {fmt_num(entry['high'], 2)}]"


#: Group names the headline lists below the count of groups (the groups table lists them all).
GROUPS_LISTED = 4


def _group_names(groups: Sequence[str]) -> str:
    """The first :data:`GROUPS_LISTED` group names as short labels (the full name on hover: a
    model id can be 30 characters of opaque digits), and how many more the groups table holds."""
    listed = ", ".join(f'<code title="{esc(group)}">{esc(short_run_id(group, limit=24))}</code>'
                       for group in groups[:GROUPS_LISTED])
    more = len(groups) - GROUPS_LISTED
    return listed + (f" and {more} more" if more > 0 else "")


def headline_section(*, runs: int, selection: Selection, by: str, groups: Sequence[str], tasks: Sequence[str],
                     comparison: Mapping[str, Any] | None, comparison_note: str | None, association: Any,
                     extra_suppressed: Sequence[str]) -> str:
    reasons: dict[str, int] = {}
    for entry in selection.left_out:
        key = "below --min-coverage" if "--min-coverage" in entry.reason else entry.reason.removeprefix("not graded: ")
        reasons[key] = reasons.get(key, 0) + 1
    not_graded = "; ".join(f"{n} {reason}" for reason, n in reasons.items()) or "none"
    # (label, value, data-fact key); a group's names go in a smaller line of their own below its count
    facts: list[tuple[str, str, str]] = [
        ("runs", f"{runs}", "runs"),
        ("graded", f"{len(selection.graded)}", "graded"),
        ("not graded", f"{len(selection.left_out)}" + (f" ({not_graded})" if selection.left_out else ""),
         "not-graded"),
        (f"groups by {by}", f"{len(groups)}", "groups"),
        ("tasks (graded runs)", str(len(tasks)), "tasks"),
    ]
    details = {"groups": _group_names(groups)} if groups else {}
    suppressed: list[str] = []
    block = (comparison or {}).get("rank_agreement") or {}
    result = block.get("result")
    if comparison is None:
        facts.append(("process vs outcome rank agreement", f"{NOT_AVAILABLE}: {comparison_note or 'no data'}",
                      "tau"))
        suppressed.append(f"rank agreement: {comparison_note or 'no comparison'}")
    elif result is None:
        facts.append(("process vs outcome rank agreement", f"{NOT_AVAILABLE}: {block.get('note') or ''}", "tau"))
        suppressed.append(f"rank agreement: {block.get('note')}")
    else:
        over = block.get("over")
        size = (f"{result.get('n')} groups over {len(block.get('tasks') or ())} tasks (task bootstrap)"
                if over == "tasks" else f"{result.get('n')} groups (bootstrap over groups)")
        facts.append((f"Kendall tau-b, process vs {comparison.get('outcome_metric')}",
                      f"{_correlation(result, 'kendall_tau_b')}; {size}", "tau"))
        facts.append(("Spearman rho", _correlation(result, "spearman"), "rho"))
        for note in result.get("notes") or ():
            suppressed.append(f"rank agreement: {note}")
    if comparison is not None:
        for row in comparison.get("groups") or ():
            summary = (row.get("outcome") or {}).get("summary") or {}
            if summary.get("interval_note") and summary.get("pass_at_1_interval") is None:
                suppressed.append(f"pass@1 interval of {row['group']}: {summary['interval_note']}")
        for excluded in comparison.get("excluded") or ():
            suppressed.append(f"not ranked: {excluded['group']}: {excluded['reason']}")
    if association is not None:
        pooled = association.discrimination_of()
        if pooled.auc is not None:
            auc = f"{pooled.auc:.2f}" + (f" ({pooled.low:.2f}\u2013{pooled.high:.2f})" if pooled.low is not None
                                         else " (no interval)")
            facts.append(("AUC of the process score for resolution",
                          f"{auc}; {pooled.resolved} resolved vs {pooled.unresolved} unresolved runs", "auc"))
        else:
            facts.append(("AUC of the process score for resolution", f"{NOT_AVAILABLE}: {pooled.note}", "auc"))
    suppressed += list(extra_suppressed)
    items = "".join(f'<div class="fact" data-fact="{key}"><dt>{esc(name)}</dt><dd>{esc(value)}</dd>'
                    + (f'<dd class="detail">{details[key]}</dd>' if key in details else "") + "</div>"
                    for name, value, key in facts)
    listed = "".join(f"<li>{esc(note)}</li>" for note in suppressed)
    return (f'<dl class="headline">{items}</dl>'
            + (f'<details class="suppressed" open><summary>Statistics not shown, and why ({len(suppressed)})</summary>'
               f"<ul>{listed}</ul></details>" if suppressed else ""))
