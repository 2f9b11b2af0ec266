"""One-line descriptions of events, for timelines (``procgrade show``) and reports."""

from __future__ import annotations

from procgrade.engine.events import (
    AcceptanceStarted, AcceptanceVerdict, Command, CompletionClaim, Compaction, Correction, Delegation, DenylistScan,
    Event, FileEdit, FileRead,
    Grade, JobFinished, JobPolled, JobStarted, Message, RunEnded, RunStarted, SourceRecord, StageEnded, StageStarted,
    TestResult, TestRun, Unparsed, WorkerReport,
)
from procgrade.engine.facts import test_outcome, verdict_outcome

__all__ = ["describe"]


def _clip(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(event: Event) -> str:
    """A short human description of what the event says."""
    match event:
        case RunStarted():
            parts = [f"harness {event.harness.name}" + (f" {event.harness.version}" if event.harness.version else "")]
            if event.model:
                parts.append(f"model {event.model}")
            if event.task_id:
                parts.append(f"task {event.task_id}")
            if event.imported:
                i = event.imported
                parts.append(f"imported as {i.format} from {', '.join(i.files[:2])}{' …' if len(i.files) > 2 else ''}"
                             f" ({i.records} records, {i.unparsed} unparsed, {i.redactions} secrets redacted)")
            return ", ".join(parts)
        case StageStarted():
            return f"stage {event.stage}" + (f": {event.title}" if event.title else "") + (
                f" (spec {event.spec_ref})" if event.spec_ref else "")
        case StageEnded():
            return f"stage {event.stage} ended" + (f": {event.status}" if event.status else "")
        case RunEnded():
            return "run ended" + (f": {event.status}" if event.status else "") + (f" ({_clip(event.reason)})" if event.reason else "")
        case Message():
            return (f"[{event.intent}] " if event.intent else "") + _clip(event.text)
        case Command():
            exit_text = f" → exit {event.exit_code}" if event.exit_code is not None else ""
            return f"$ {_clip(event.command, 70)}{exit_text}"
        case FileRead():
            return f"read {event.path}"
        case FileEdit():
            return f"{event.edit_kind} {event.path}" + (f" → {event.new_path}" if event.new_path else "")
        case TestRun():
            counts = ", ".join(f"{n} {label}" for n, label in (
                (event.passed, "passed"), (event.failed, "failed"), (event.errored, "errored"), (event.skipped, "skipped"),
            ) if n is not None)
            outcome = test_outcome(event) or "unknown"
            return f"tests {outcome}" + (f" ({counts})" if counts else "") + (f": {_clip(event.command, 50)}" if event.command else "")
        case Delegation():
            return f"delegate to {event.worker_id}: {_clip(event.instruction, 60)} [{len(event.context or ())} context items]"
        case WorkerReport():
            return f"report from {event.worker_id}" + (f" ({event.status})" if event.status else "") + f": {_clip(event.text, 60)}"
        case JobStarted():
            return f"job {event.job_id} started" + (f": {_clip(event.command, 60)}" if event.command else "")
        case JobPolled():
            return f"job {event.job_id} polled" + (f": {event.status}" if event.status else "")
        case JobFinished():
            return f"job {event.job_id} finished" + (f": exit {event.exit_code}" if event.exit_code is not None else "")
        case Compaction():
            sizes = f" ({event.tokens_before} → {event.tokens_after} tokens)" if event.tokens_before is not None else ""
            return "context compacted" + sizes
        case CompletionClaim():
            return "claims done" + (f" ({event.scope})" if event.scope else "") + f": {_clip(event.claim, 70)}"
        case Correction():
            return f"correction: {_clip(event.text)}"
        case AcceptanceStarted():
            return (f"acceptance check of task {event.task_id} on {event.backend}: suite {event.suite_sha256[:12]}"
                    + (f", workspace {event.workspace_sha256[:12]}" if event.workspace_sha256 else ""))
        case DenylistScan():
            hits = f": {_clip('; '.join(event.findings), 60)}" if event.findings else ""
            return f"denylist scan {event.status} ({event.files_scanned} files){hits}"
        case AcceptanceVerdict():
            counts = ", ".join(f"{n} {label}" for n, label in (
                (event.passed, "passed"), (event.failed, "failed"), (event.errored, "errored"), (event.skipped, "skipped"),
            ) if n is not None)
            reward = f" reward {event.reward}" if event.reward is not None else ""
            return (f"verdict {verdict_outcome(event)} by {event.verifier}{reward}"
                    + (f" ({counts})" if counts else "") + (f": {event.value}" if event.value else ""))
        case TestResult():
            return f"test {event.outcome}: {_clip(event.test_id, 70)}" + (f" [{event.group}]" if event.group else "")
        case Unparsed():
            return f"unparsed record {event.record or ''}: {_clip(event.reason, 60)}"
        case Grade():
            what = f"{event.layer}" + (f" {event.item}" if event.item else "")
            given = ("passed" if event.passed else "failed") if event.passed is not None else (
                f"{event.value}" + (f" on {event.scale_min}..{event.scale_max}" if event.scale_min is not None else "")
                if event.value is not None else "-")
            if event.status == "no_grade":
                given = "no grade"
            what += f" [sample {event.sample}]" if event.sample is not None else ""
            return f"grade {what}: {given}" + (f" ({_clip(event.rationale, 50)})" if event.rationale else "")
        case SourceRecord():
            return f"kept {event.record_type} record"
    return event.kind
