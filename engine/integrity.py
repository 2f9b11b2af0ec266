"""Cross-table checks the hash chain alone cannot make: seals and score rows against the log.

``verify-log`` recomputes each run's chain; but a seal whose columns were cleared, or a score
row whose ``run_head_hash`` was changed, leaves every chain intact. These checks compare the
``seals`` record (written once by a trigger, see migration 0005), the run's sealed columns and
every score row with the stored chain, and name the run and seq of each disagreement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore

__all__ = ["IntegrityProblem", "integrity_problems", "seal_problems"]


@dataclass(frozen=True)
class IntegrityProblem:
    run_id: str
    seq: int | None
    reason: str

    def __str__(self) -> str:
        where = f"seq {self.seq}: " if self.seq is not None else ""
        return f"{self.run_id}: {where}{self.reason}"


def seal_problems(store: EventStore, run_ids: Iterable[str] | None = None) -> list[IntegrityProblem]:
    """Sealed runs that lost or changed their seal, and seals that no longer match the chain."""
    seals = store.seals()
    infos = {info.run_id: info for info in store.runs()}
    wanted = sorted(infos if run_ids is None else set(run_ids))
    problems: list[IntegrityProblem] = []
    for run_id in wanted:
        info = infos.get(run_id)
        if info is None:
            if run_id in seals:
                count = seals[run_id][0]
                problems.append(IntegrityProblem(run_id, count - 1 if count else None,
                                                 "the run was sealed but its row is gone"))
            continue
        seal = seals.get(run_id)
        if seal is not None:
            count, head = seal
            last = count - 1 if count else None
            if info.sealed_head_hash is None:
                problems.append(IntegrityProblem(run_id, last, f"sealed at {count} events (head {head[:12]}) but "
                                                 "the run's sealed columns are cleared"))
            elif (info.sealed_event_count, info.sealed_head_hash) != (count, head):
                problems.append(IntegrityProblem(run_id, last, f"the run's seal ({info.sealed_event_count} events, "
                                                 f"head {info.sealed_head_hash[:12]}) differs from the seal recorded "
                                                 f"when it was sealed ({count} events, head {head[:12]})"))
            if count and store.hash_at(run_id, count - 1) != head:
                problems.append(IntegrityProblem(run_id, last, "the stored chain at the sealed length does not end "
                                                 f"in the sealed head {head[:12]}"))
            if info.event_count != count:
                problems.append(IntegrityProblem(run_id, min(info.event_count, count),
                                                 f"the run holds {info.event_count} events but was sealed at {count}"))
        elif info.sealed_head_hash is not None:
            problems.append(IntegrityProblem(run_id, (info.sealed_event_count or 0) - 1,
                                             "the run is marked sealed but no seal was ever recorded"))
    return problems


def integrity_problems(store: EventStore, run_ids: Iterable[str] | None = None) -> list[IntegrityProblem]:
    """Seal problems, and score rows whose head is not the chain's hash at their length."""
    wanted = None if run_ids is None else set(run_ids)
    problems = seal_problems(store, wanted)
    infos = {info.run_id: info for info in store.runs()}
    for run_id, ruleset, count, head in ScoreStore(store).score_heads():
        if wanted is not None and run_id not in wanted:
            continue
        info = infos.get(run_id)
        last = count - 1 if count else None
        if info is None:
            problems.append(IntegrityProblem(run_id, last, f"a score under rule set {ruleset[:16]} names a run "
                                             "that is not stored"))
            continue
        if count > info.event_count:
            problems.append(IntegrityProblem(run_id, info.event_count, f"the score under rule set {ruleset[:16]} "
                                             f"covers {count} events; the run holds {info.event_count}"))
            continue
        stored = store.hash_at(run_id, last) if count else None
        expected = stored if count else None
        if count and expected != head:
            problems.append(IntegrityProblem(run_id, last, f"the score under rule set {ruleset[:16]} records head "
                                             f"{head[:12]}; the chain's hash there is {str(expected)[:12]}"))
    return sorted(problems, key=lambda p: (p.run_id, -1 if p.seq is None else p.seq, p.reason))
