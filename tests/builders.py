"""Test data: native event lines (dicts -> JSONL) and an independent reference chain.

The reference chain (:func:`reference_head`) is written from the documented
rule, not from engine code: ``hash[n] = sha256(hash[n-1] || RFC8785(header[n]))``
where the header is the event with ``None`` fields left out and its payload
replaced by ``payload_sha256 = sha256(RFC8785(payload))``, starting from 32 zero
bytes. It holds for events built here (no explicit ``None`` fields).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import rfc8785

from procgrade.engine.events import Event, event_adapter
from procgrade.engine.stages import StageConflict

RUN = "run-1"
SHA_A = "a" * 64
SHA_B = "b" * 64


def ev(kind: str, seq: int, run_id: str = RUN, *, actor: str = "agent", **fields: Any) -> dict[str, Any]:
    """One native event line as a dict (event_id ``<run>/<seq>`` unless given)."""
    line: dict[str, Any] = {
        "run_id": run_id,
        "seq": seq,
        "event_id": fields.pop("event_id", f"{run_id}/{seq}"),
        "kind": kind,
        "actor": actor,
    }
    line.update(fields)
    return line


def run_started(run_id: str = RUN, **fields: Any) -> dict[str, Any]:
    fields.setdefault("harness", {"name": "test-harness", "version": "1.2.3"})
    fields.setdefault("model", "model-x")
    fields.setdefault("task_id", "task-7")
    fields.setdefault("ts", "2024-05-01T10:00:00Z")
    fields.setdefault("payload", {"source": "builders", "argv": ["run", "--fast"]})
    return ev("run_started", 0, run_id, actor="harness", **fields)


def small_run(run_id: str = RUN) -> list[dict[str, Any]]:
    """A small valid run: run_started at seq 0 ... run_ended at seq 7."""
    return [
        run_started(run_id),
        ev("message", 1, run_id, text="Plan: read the spec, then edit main.py.", intent="plan",
           ts="2024-05-01T10:00:01Z", payload={"role": "assistant", "tokens": 17}),
        ev("file_read", 2, run_id, path="spec/PRD.md", parent_seq=1),
        ev("file_edit", 3, run_id, path="src/main.py", edit_kind="modify", diff_sha256=SHA_A, parent_seq=2,
           payload={"diff": "--- a\n+++ b\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"}),
        ev("command", 4, run_id, command="python -m pip install -e .", exit_code=0, duration_ms=1520,
           output_sha256=SHA_B, cwd="/work"),
        ev("test_run", 5, run_id, command="pytest -q", passed=12, failed=0, skipped=1, exit_code=0,
           duration_ms=3400),
        ev("completion_claim", 6, run_id, claim="All tests pass; the feature is done.", scope="run"),
        ev("run_ended", 7, run_id, actor="harness", status="completed", ts="2024-05-01T10:05:00Z"),
    ]


def extra_events(run_id: str, start: int, count: int) -> list[dict[str, Any]]:
    """``count`` more valid events from seq ``start`` (commands and messages alternating)."""
    out = []
    for seq in range(start, start + count):
        if seq % 2:
            out.append(ev("command", seq, run_id, command=f"make step-{seq}", exit_code=seq % 3,
                          payload={"n": seq}))
        else:
            out.append(ev("message", seq, run_id, text=f"progress note {seq}", intent="progress"))
    return out


def line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode("utf-8")


def jsonl(events: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(line(e) + b"\n" for e in events)


def write_jsonl(path: Path, events: Iterable[dict[str, Any]]) -> Path:
    path.write_bytes(jsonl(events))
    return path


def write_lines(path: Path, lines: Sequence[bytes]) -> Path:
    """Write raw lines (for malformed input); line N of the file is ``lines[N-1]``."""
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def models(events: Iterable[dict[str, Any]]) -> list[Event]:
    adapter = event_adapter()
    return [adapter.validate_python(e) for e in events]


def allow_updates(store: Any, db_kind: str, *tables: str) -> None:
    """Turn off the append-only guard against UPDATE on ``tables``, as the database's owner can:
    where a tamper test starts (SQLite drops ``<table>_refuse_update``, PostgreSQL disables
    ``<table>_refuse_change``)."""
    from sqlalchemy import text

    with store.engine.begin() as conn:
        for table in tables:
            conn.execute(text(f"DROP TRIGGER {table}_refuse_update" if db_kind == "sqlite"
                              else f"ALTER TABLE {table} DISABLE TRIGGER {table}_refuse_change"))


def _drop_none(value: dict[str, Any]) -> dict[str, Any]:
    return {k: (_drop_none(v) if isinstance(v, dict) and k == "harness" else v)
            for k, v in value.items() if v is not None}


def reference_canonical(value: Any) -> bytes:
    """RFC 8785, plus the documented extension: integers beyond +-(2**53-1) as exact digits."""
    if isinstance(value, bool) or value is None:
        return rfc8785.dumps(value)
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return b"{" + b",".join(rfc8785.dumps(k) + b":" + reference_canonical(value[k]) for k in keys) + b"}"
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(reference_canonical(v) for v in value) + b"]"
    return rfc8785.dumps(value)


def reference_header(event: dict[str, Any]) -> bytes:
    header = _drop_none(dict(event))
    payload = header.pop("payload", {})
    header["payload_sha256"] = hashlib.sha256(reference_canonical(payload)).hexdigest()
    return reference_canonical(header)


def reference_hashes(events: Iterable[dict[str, Any]]) -> list[str]:
    prev = bytes(32)
    out = []
    for event in events:
        prev = hashlib.sha256(prev + reference_header(event)).digest()
        out.append(prev.hex())
    return out


def reference_head(events: Sequence[dict[str, Any]]) -> str:
    return reference_hashes(events)[-1]


def every_kind_run(run_id: str, length: int) -> list[dict[str, Any]]:
    """A valid run of ``length`` events cycling through every kind, every optional field set,
    with awkward text (non-BMP, control characters, quotes) and payloads holding floats,
    nulls, nesting and non-BMP keys."""
    # (no NUL in text: PostgreSQL text cannot hold it; see test_store.test_nul_characters_...)
    texts = ["plain", "caf\u00e9 \u2028 \U0001f600 \x01\x1f\x7f \"q\" \\ / \t\n", "\u4e2d\u6587" * 3, ""]
    out = [run_started(run_id, model_settings={"temperature": 0.2, "top_p": 1.0, "seed": 7, "stop": None},
                       labels={"team": "a", "\U0001f600": "smile"}, dataset_hash=SHA_A, image="img:1",
                       harness={"name": "h", "version": "2", "commit": "abc"})]
    for seq in range(1, length):
        text = texts[seq % len(texts)] + f" #{seq}"
        payload = {"seq": seq, "ratio": seq / 7, "neg": -seq, "none": None, "nested": {"l": [1, 2.5, "x", None]},
                   "\U0001f600k": True, "\ue000k": False, "big_safe": 2**53 - 1,
                   "nul": "a\x00b"}
        common = {"payload": payload, "ts": f"2024-05-01T10:{seq // 60 % 60:02d}:{seq % 60:02d}.123456+02:00",
                  "stage": seq % 3, "parent_seq": seq - 1}
        kind = seq % 17
        if kind == 0:
            out.append(ev("stage_started", seq, run_id, actor="harness", spec_ref=f"PRD#{seq}", title=text, **common))
        elif kind == 1:
            out.append(ev("message", seq, run_id, text=text, intent="reasoning", **common))
        elif kind == 2:
            out.append(ev("command", seq, run_id, command=f"echo {text}", exit_code=-(seq % 255), duration_ms=seq,
                          output_sha256=SHA_B, cwd="/w", **common))
        elif kind == 3:
            out.append(ev("file_read", seq, run_id, path=f"src/{seq}.py", **common))
        elif kind == 4:
            out.append(ev("file_edit", seq, run_id, path=f"src/{seq}.py", edit_kind="rename",
                          new_path=f"src/{seq}b.py", diff_sha256=SHA_A, **common))
        elif kind == 5:
            out.append(ev("test_run", seq, run_id, command="pytest", passed=seq, failed=1, errored=0, skipped=2,
                          exit_code=1, duration_ms=10, output_sha256=SHA_A, **common))
        elif kind == 6:
            out.append(ev("delegation", seq, run_id, worker_id=f"w{seq}", instruction=text,
                          context=["a.py", "spec.md", text], **common))
        elif kind == 7:
            out.append(ev("worker_report", seq, run_id, actor=f"subagent:w{seq}", worker_id=f"w{seq}", text=text,
                          status="partial", evidence=["log.txt"], **common))
        elif kind == 8:
            out.append(ev("job_started", seq, run_id, job_id=f"j{seq}", command="make all", **common))
        elif kind == 9:
            out.append(ev("job_polled", seq, run_id, actor="harness", job_id=f"j{seq}", status="unknown", **common))
        elif kind == 10:
            out.append(ev("job_finished", seq, run_id, job_id=f"j{seq}", exit_code=0, output_sha256=SHA_B, **common))
        elif kind == 11:
            out.append(ev("compaction", seq, run_id, actor="harness", tokens_before=100_000, tokens_after=3_000,
                          summary=text, **common))
        elif kind == 12:
            out.append(ev("completion_claim", seq, run_id, claim=text, scope="stage", **common))
        elif kind == 13:
            out.append(ev("correction", seq, run_id, actor="human:alice", text=text, **common))
        elif kind == 14:
            out.append(ev("stage_ended", seq, run_id, actor="harness", status="failed", **common))
        elif kind == 15:
            out.append(ev("test_run", seq, run_id, **common))  # nothing known
        else:
            out.append(ev("run_ended", seq, run_id, actor="harness", status="timeout", reason=text, **common))
    return _stages_agree(out)


def _stages_agree(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every event inside an open stage (or round) that stage, as the store requires of
    events that carry one (engine.stages); events outside keep their own."""
    from procgrade.engine.stages import StageTracker

    tracker = StageTracker()
    for line in lines:
        if tracker.open is not None and line["kind"] != "stage_started" and \
                ("stage" in line or line["kind"] == "stage_ended") and \
                not tracker.opens_round(line["kind"], line["actor"]):
            line["stage"] = tracker.open
        tracker.step(line["seq"], line["kind"], line["actor"], line.get("stage"))
    return lines


# --- hypothesis strategies: random valid runs ---------------------------------------------------
#
# The domain is what both databases can hold today: typed int fields within int64 (``stage``
# within int32) and no NUL in typed text. The edges outside it are covered by explicit tests
# in test_store.py (test_model_valid_values_are_stored_exactly_or_refused_as_input).

def record_pool_starts(monkeypatch: Any, block_lines: int, min_blocks: int | None = None,
                       blocks_read: list[int] | None = None) -> list[int]:
    """Native ingest in blocks of ``block_lines`` lines with two workers allowed (the pool starting
    after ``min_blocks`` blocks when given); returns the list each pool start appends its size to
    (and appends the blocks read before it to ``blocks_read``, when given)."""
    import procgrade.engine.native_workers as native_workers

    monkeypatch.setattr(native_workers, "BLOCK_LINES", block_lines)
    if min_blocks is not None:
        monkeypatch.setattr(native_workers, "POOL_MIN_BLOCKS", min_blocks)
    monkeypatch.setenv("PROCGRADE_INGEST_WORKERS", "2")
    starts: list[int] = []
    real_start = native_workers.PreparePool._start

    def start(self: native_workers.PreparePool) -> None:
        starts.append(self.workers)
        if blocks_read is not None:
            blocks_read.append(self._blocks_read)
        real_start(self)

    monkeypatch.setattr(native_workers.PreparePool, "_start", start)
    return starts


from hypothesis import reject, strategies as st  # noqa: E402

INT64 = 2**63 - 1
_safe_chars = st.characters(codec="utf-8", exclude_characters="\x00")
h_text = st.text(_safe_chars, max_size=16)
h_nonempty = st.text(_safe_chars, min_size=1, max_size=12)
h_sha = st.text("0123456789abcdef", min_size=64, max_size=64)
h_count = st.integers(min_value=0, max_value=INT64)
h_int = st.integers(min_value=-INT64, max_value=INT64)
h_ts = st.builds(
    lambda d, t, frac, zone: f"2024-{d[0]:02d}-{d[1]:02d}T{t[0]:02d}:{t[1]:02d}:{t[2]:02d}{frac}{zone}",
    st.tuples(st.integers(1, 12), st.integers(1, 28)),
    st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)),
    st.sampled_from(["", ".5", ".123456789"]),
    st.sampled_from(["Z", "+02:00", "-11:30"]),
)
h_actor = st.sampled_from(["agent", "harness", "user", "human", "grader", "judge", "system"]) | st.builds(
    lambda p, n: f"{p}:{n}", st.sampled_from(["subagent", "human", "grader", "judge"]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@/+-]{0,10}", fullmatch=True))
h_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)
h_payload = st.dictionaries(st.text(max_size=8), h_json, max_size=4)


def _opt(**fields: st.SearchStrategy) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


def _kind(kind: str, required: dict[str, st.SearchStrategy] | None = None,
          **optional: st.SearchStrategy) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"kind": st.just(kind), **(required or {})}, optional=optional)


h_body = st.one_of(
    _kind("message", {"text": h_text}, intent=st.sampled_from(["plan", "progress", "question", "answer",
                                                               "summary", "reasoning", "other"])),
    _kind("command", {"command": h_text}, exit_code=h_int, duration_ms=h_count, output_sha256=h_sha, cwd=h_text),
    _kind("file_read", {"path": h_nonempty}),
    _kind("file_edit", {"path": h_nonempty, "edit_kind": st.sampled_from(["create", "modify", "delete", "rename"])},
          diff_sha256=h_sha, new_path=h_text),
    _kind("test_run", {}, command=h_text, passed=h_count, failed=h_count, errored=h_count, skipped=h_count,
          exit_code=h_int, duration_ms=h_count, output_sha256=h_sha),
    _kind("delegation", {"worker_id": h_nonempty, "instruction": h_text}, context=st.lists(h_text, max_size=3)),
    _kind("worker_report", {"worker_id": h_nonempty, "text": h_text},
          status=st.sampled_from(["success", "failure", "partial"]), evidence=st.lists(h_text, max_size=3)),
    _kind("job_started", {"job_id": h_nonempty}, command=h_text),
    _kind("job_polled", {"job_id": h_nonempty}, status=st.sampled_from(["running", "finished", "unknown"])),
    _kind("job_finished", {"job_id": h_nonempty}, exit_code=h_int, output_sha256=h_sha),
    _kind("compaction", {}, tokens_before=h_count, tokens_after=h_count, summary=h_text),
    _kind("completion_claim", {"claim": h_text}, scope=st.sampled_from(["step", "stage", "run"])),
    _kind("correction", {"text": h_text}),
    _kind("stage_started", {"stage": st.integers(0, 2**31 - 1)}, spec_ref=h_text, title=h_text),
    _kind("stage_ended", {"stage": st.integers(0, 2**31 - 1)}, status=st.sampled_from(["completed", "failed", "aborted"])),
    _kind("run_ended", {}, status=st.sampled_from(["completed", "failed", "aborted", "timeout", "error"]),
          reason=h_text),
)
h_envelope = _opt(ts=h_ts, stage=st.integers(0, 2**31 - 1), payload=h_payload)
h_start = _kind(
    "run_started",
    {"harness": st.fixed_dictionaries({"name": h_nonempty}, optional={"version": h_text, "commit": h_text})},
    model=h_text, model_settings=st.dictionaries(st.text(max_size=6), h_json, max_size=3), task_id=h_text,
    dataset_hash=h_text, image=h_text, labels=st.dictionaries(h_text, h_text, max_size=3),
)
h_run_id = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,15}", fullmatch=True)


@st.composite
def h_runs(draw: st.DrawFn, min_size: int = 1, max_size: int = 12, run_id: str | None = None) -> list[dict[str, Any]]:
    """A valid run (as native line dicts) of ``min_size``..``max_size`` events."""
    rid = run_id or draw(h_run_id)
    n = draw(st.integers(min_size, max_size))
    ids = draw(st.lists(st.text(_safe_chars, min_size=1, max_size=12), min_size=n, max_size=n, unique=True))
    events = []
    for seq in range(n):
        body = draw(h_start) if seq == 0 else draw(h_body)
        envelope = draw(h_envelope)
        if body["kind"] in ("stage_started", "stage_ended"):
            envelope.pop("stage", None)
        line = {"run_id": rid, "seq": seq, "event_id": ids[seq],
                "actor": draw(h_actor), **envelope, **body}
        if seq and draw(st.booleans()):
            line["parent_seq"] = draw(st.integers(0, seq - 1))
        events.append(line)
    try:
        return _stages_agree(events)
    except StageConflict:  # a correction after stage 2**31 - 1 would open a round past the largest index
        reject()
