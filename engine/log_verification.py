"""verify-log: recompute a run's hash chain from what is stored and compare.

Every stored row is rebuilt into its validated model; its payload digest, its
typed fact columns and its chain hash are recomputed and compared with the row,
and the final hash with the run's recorded head (and sealed head). This catches
a row changed behind the triggers' back (triggers dropped, row edited): a
changed payload, fact column, envelope field or hash all break the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.engine.chain import GENESIS, link
from procgrade.engine.facts import extract_facts
from procgrade.engine.store import EventStore
from procgrade.engine.stages import StageTracker
from procgrade.engine.stored import FACT_SLICE, IN_STAGE, header_bytes, to_event

__all__ = ["LogVerification", "verify_log"]

@dataclass
class LogVerification:
    run_id: str
    events_checked: int = 0
    head_hash: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_log(store: EventStore, run_id: str, *, max_problems: int = 20) -> LogVerification:
    info = store.run(run_id)
    report = LogVerification(run_id)
    prev = GENESIS
    expected_seq = 0
    stages = StageTracker(strict=False)  # lenient as the migration: logs stored before derivation agree
    for row in store.stored_events(run_id):
        seq = row[1]
        if len(report.problems) >= max_problems:
            report.problems.append("... (stopped after too many problems)")
            break
        if seq != expected_seq:
            report.problems.append(f"seq {expected_seq}: missing (next stored seq is {seq})")
            expected_seq = seq
        expected_seq += 1
        try:
            event = to_event(row)
        except (ValidationError, ValueError) as exc:
            report.problems.append(f"seq {seq}: stored row is not a valid event: {exc}")
            prev = row[-1]
            continue
        payload_sha = sha256_hex(canonical_json(event.payload))
        if payload_sha != row[-2]:
            report.problems.append(f"seq {seq}: payload does not match its stored sha256")
        if tuple(row[FACT_SLICE]) != extract_facts(event):
            report.problems.append(f"seq {seq}: typed fact columns differ from the event's facts")
        in_stage = stages.step(event.seq, event.kind, event.actor, event.stage)
        if row[IN_STAGE] != in_stage:
            report.problems.append(f"seq {seq}: derived stage column is {row[IN_STAGE]}, the log gives {in_stage}")
        expected = link(prev, header_bytes(event))
        if expected != row[-1]:
            report.problems.append(f"seq {seq}: hash mismatch (stored {row[-1][:12]}, recomputed {expected[:12]})")
        prev = expected
        report.events_checked += 1
        if info.sealed and report.events_checked == info.sealed_event_count and prev != info.sealed_head_hash:
            report.problems.append(f"seq {seq}: recomputed hash differs from the sealed head hash")
    report.head_hash = prev if report.events_checked else None
    if expected_seq < info.event_count:
        missing = f"seq {expected_seq}" if expected_seq == info.event_count - 1 else f"seqs {expected_seq}..{info.event_count - 1}"
        report.problems.append(f"{missing}: missing (the run records {info.event_count} events, {expected_seq} are stored)")
    elif expected_seq > info.event_count:
        report.problems.append(f"seq {info.event_count}: stored beyond the run's recorded {info.event_count} events")
    if info.event_count and report.head_hash != info.head_hash:
        report.problems.append(f"recomputed head {str(report.head_hash)[:12]} differs from recorded head {str(info.head_hash)[:12]}")
    return report
