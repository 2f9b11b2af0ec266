"""Stage membership derived from the log: which stage (or Arena round) each event belongs to.

Native runs mark stages with ``stage_started``/``stage_ended`` and need not repeat
``stage`` on every event in between; an Arena fix round opens with the human's (or
user's) ``correction``. The store keeps the result as the ``in_stage`` column, computed
at append (the same at ingest, at re-ingest and in ``verify-log``), and stage-scoped
rules of template semantics 2 read it.

The rule, one event at a time in seq order:

- ``stage_started`` (stage k) opens stage k (closing any stage still open); it is in k.
- ``stage_ended`` (stage k) is in k and closes it; k must be the open stage, if one is open.
- A ``correction`` by a ``user`` or ``human`` while no stage is open opens the next round
  (its own ``stage`` if it carries one, else one past the highest stage so far, or 1:
  round 0 is the base round before any correction, which needs a marker or per-event
  ``stage`` to be scoped). A round opened so lasts until the next such correction,
  ``stage_started`` or ``stage_ended``.
- Any other event is in the open stage. One that carries ``stage`` itself must agree
  with it; with no stage open, its own ``stage`` (or none) stands, as before markers.

A disagreement is an error at ingest (:class:`StageConflict`, located by the caller); logs
stored before derivation existed are derived leniently (the event's own ``stage`` wins),
the same way by the migration and by ``verify-log``, so both agree on old logs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_STAGE", "StageConflict", "StageTracker", "derive_stages", "tracker_after", "envelope"]

#: The largest stage or round index: what an event's ``stage`` may say (``engine.events.StageIndex``)
#: and what the stored ``in_stage`` column (a 32-bit integer on PostgreSQL) holds.
MAX_STAGE = 2**31 - 1


class StageConflict(ValueError):
    """An event's own ``stage`` disagrees with the stage its markers put it in."""

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.seq = seq


@dataclass
class StageTracker:
    """The derivation's state between events (the open stage, the highest stage so far)."""

    open: int | None = None
    #: True when the open stage was opened by a correction (a round), not by stage_started.
    round_open: bool = False
    highest: int | None = None
    strict: bool = True

    def opens_round(self, kind: str, actor: str) -> bool:
        """Would an event of ``kind`` by ``actor`` open a round now (a human's or user's
        correction while no stage, or only a round, is open)?"""
        return kind == "correction" and actor.split(":", 1)[0] in ("user", "human") and \
            (self.open is None or self.round_open)

    def step(self, seq: int, kind: str, actor: str, stage: int | None) -> int | None:
        """The derived stage of one event (given its envelope), updating the state."""
        if kind == "stage_started":
            self.open, self.round_open = stage, False
            derived = stage
        elif kind == "stage_ended":
            if self.open is not None and stage != self.open:
                self._conflict(seq, f"stage_ended closes stage {stage} but stage {self.open} is open")
            derived = stage
            self.open, self.round_open = None, False
        elif self.opens_round(kind, actor):
            derived = stage if stage is not None else (1 if self.highest is None else self.highest + 1)
            if derived > MAX_STAGE:  # the events' own stage field, and the stored column, stop here
                self._conflict(seq, f"this correction would open round {derived}, past the largest stage "
                                    f"index {MAX_STAGE} (stage {self.highest} came before it)")
            self.open, self.round_open = derived, True
        elif self.open is not None:
            if stage is not None and stage != self.open:
                if self._conflict(seq, f"the event says stage {stage} but it lies in stage {self.open} "
                                       "(opened by an earlier stage_started or correction)"):
                    derived = stage
                else:  # pragma: no cover - _conflict raises when strict
                    derived = stage
            else:
                derived = self.open
        else:
            derived = stage
        if derived is not None and (self.highest is None or derived > self.highest):
            self.highest = derived
        return derived

    def _conflict(self, seq: int, message: str) -> bool:
        if self.strict:
            raise StageConflict(seq, f"stage: {message}")
        return True


def derive_stages(envelopes: Iterable[tuple[int, str, str, int | None]], *, strict: bool = True,
                  tracker: StageTracker | None = None) -> list[int | None]:
    """The derived stage of each (seq, kind, actor, stage) in order; ``strict`` raises
    :class:`StageConflict` on a disagreement, else the event's own stage wins."""
    tracker = tracker or StageTracker(strict=strict)
    return [tracker.step(*envelope) for envelope in envelopes]


def tracker_after(envelopes: Iterable[tuple[int, str, str, int | None]], *, strict: bool = False) -> StageTracker:
    """The state after a stored prefix of a run (to continue deriving an append)."""
    tracker = StageTracker(strict=False)
    for envelope in envelopes:
        tracker.step(*envelope)
    tracker.strict = strict
    return tracker


def envelope(event: Any) -> tuple[int, str, str, int | None]:
    return (event.seq, event.kind, event.actor, event.stage)
