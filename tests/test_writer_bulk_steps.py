"""The writer's bulk steps over a piece of prepared rows (the derived stages, stretch by stretch
between markers; the consecutive-rows check) do exactly what stepping row by row does: the same
stages, the same tracker state after, the same errors."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from procgrade.engine.errors import StoreError
from procgrade.engine.stages import StageConflict, StageTracker
from procgrade.engine.store.base import _check_consecutive_rows, _derive_stages, _stretch_in_bulk
from procgrade.engine.stored import IN_STAGE, STORED_COLUMNS

KINDS = ["message", "command", "file_read", "stage_started", "stage_ended", "correction", "run_ended"]
ACTORS = ["agent", "user", "human:x", "harness"]


def row(run_id: str, seq: int, kind: str, actor: str, stage: int | None) -> list:
    values: list = [None] * len(STORED_COLUMNS)
    values[0:7] = [run_id, seq, f"{run_id}/{seq}", None, kind, actor, stage]
    return values


pieces = st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(ACTORS),
                            st.one_of(st.none(), st.integers(0, 4))), max_size=12)
trackers = st.builds(StageTracker, open=st.one_of(st.none(), st.integers(0, 4)), round_open=st.booleans(),
                     highest=st.one_of(st.none(), st.integers(0, 6)))
# mostly pieces without markers, where the bulk path applies
plain_pieces = st.lists(st.tuples(st.sampled_from(["message", "command", "file_read"]), st.sampled_from(ACTORS),
                                  st.one_of(st.none(), st.integers(0, 3))), max_size=12)


def _stepped(rows: list, tracker: StageTracker) -> list | StageConflict:
    try:
        return [tracker.step(r[1], r[4], r[5], r[6]) for r in rows]
    except StageConflict as exc:
        return exc


@settings(max_examples=400)
@given(st.one_of(pieces, plain_pieces), trackers)
def test_a_stretch_in_bulk_is_the_stretch_stepped_row_by_row(piece: list, tracker: StageTracker) -> None:
    rows = [row("r", seq, kind, actor, stage) for seq, (kind, actor, stage) in enumerate(piece)]
    stepped_tracker = copy.deepcopy(tracker)
    stepped = _stepped(rows, stepped_tracker)
    bulk_tracker = copy.deepcopy(tracker)
    if not any(r[4] in ("stage_started", "stage_ended", "correction") for r in rows) and \
            _stretch_in_bulk(rows, bulk_tracker):
        assert not isinstance(stepped, StageConflict)
        assert [r[IN_STAGE] for r in rows] == stepped
        assert bulk_tracker == stepped_tracker
    else:  # nothing set, nothing moved: the caller steps row by row
        assert all(r[IN_STAGE] is None for r in rows) and bulk_tracker == tracker


@settings(max_examples=600)
@given(st.lists(st.one_of(pieces, plain_pieces), max_size=5).map(lambda parts: [x for part in parts for x in part]),
       trackers)
def test_derived_stages_are_the_stages_stepped_row_by_row(piece: list, tracker: StageTracker) -> None:
    """Any piece, markers and conflicts included: the same stages, state, and error."""
    rows = [row("r", seq, kind, actor, stage) for seq, (kind, actor, stage) in enumerate(piece)]
    stepped_tracker = copy.deepcopy(tracker)
    stepped = _stepped(rows, stepped_tracker)
    bulk_tracker = copy.deepcopy(tracker)
    try:
        _derive_stages(rows, bulk_tracker, lambda r: bulk_tracker.step(r[1], r[4], r[5], r[6]))
    except StageConflict as exc:
        assert isinstance(stepped, StageConflict) and (exc.seq, str(exc)) == (stepped.seq, str(stepped))
        return
    assert not isinstance(stepped, StageConflict)
    assert [r[IN_STAGE] for r in rows] == stepped
    assert bulk_tracker == stepped_tracker


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["r", "s"]), st.integers(0, 6)), max_size=8), st.sampled_from(["r", "s"]))
def test_the_consecutive_check_refuses_what_row_by_row_refuses(ids_seqs: list, run_id: str) -> None:
    rows = [row(rid, seq, "message", "agent", None) for rid, seq in ids_seqs]
    expected = None
    for i, r in enumerate(rows):
        if r[0] != run_id:
            expected = f"event {r[2]!r} belongs to run {r[0]}, not {run_id}"
            break
        if i and r[1] != rows[i - 1][1] + 1:
            expected = f"run {run_id}: seq {r[1]} does not follow seq {rows[i - 1][1]}"
            break
    try:
        _check_consecutive_rows(run_id, rows)
        got = None
    except StoreError as exc:
        got = str(exc)
    assert got == expected
