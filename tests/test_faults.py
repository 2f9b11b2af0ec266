"""Fault suite: ``kill -9`` at seeded random points of ingest, score and rescore with workers, on
both databases, leaves nothing partial, no worker behind, and a re-run that completes; hostile
input (hypothesis-mutated native and harness files) ends in a located error or a clean ingest,
never a traceback, and a refused file changes nothing. Bounded by count and time (about a
minute or two in all)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import extra_events, line, small_run, write_jsonl
from procgrade.engine.errors import ProcgradeError
from procgrade.engine.executors import MIN_TASK_EVENTS
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.log_verification import verify_log
from procgrade.engine.store import open_store
from procgrade.engine.store.scores import ScoreStore

ROOT = Path(__file__).resolve().parent.parent
CLAUDE = ROOT / "tests" / "fixtures" / "imports" / "claude-code" / "edge_cases.jsonl"
KILLS = 3  # per command and database


def procgrade(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PROCGRADE_DB", None)
    return subprocess.Popen([sys.executable, "-m", "procgrade.engine.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT, start_new_session=True)


def run_to_end(*args: str) -> tuple[int, str]:
    proc = procgrade(*args)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err.decode()


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_after(args: tuple[str, ...], delay: float) -> None:
    proc = procgrade(*args)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


@pytest.fixture
def big_source(tmp_path: Path) -> tuple[Path, list[str]]:
    runs = [f"k{i}" for i in range(6)]
    events = []
    for run in runs:
        events += small_run(run)[:7] + extra_events(run, 7, 1500)
    return write_jsonl(tmp_path / "big.jsonl", events), runs


def test_kill_9_during_ingest_leaves_nothing_partial(store_url: str, big_source: tuple[Path, list[str]]) -> None:
    source, runs = big_source
    open_store(store_url, create=True).close()
    rng = random.Random(12)
    for _ in range(KILLS):
        kill_after(("ingest", "--db", store_url, str(source)), rng.uniform(0.5, 4.0))
        store = open_store(store_url)
        try:
            counts = {info.run_id: info.event_count for info in store.runs()}
        finally:
            store.close()
        # one transaction: every run whole, or none of them
        assert counts in ({}, {run: 1507 for run in runs}), counts
        if counts:
            break
    code, err = run_to_end("ingest", "--db", store_url, str(source))
    assert code == 0 and "Traceback" not in err, err
    code, err = run_to_end("verify-log", "--db", store_url)
    assert code == 0, err


@pytest.fixture
def workers_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """Runs big enough that the local executor splits them into several tasks of at least
    MIN_TASK_EVENTS events, so ``rescore --workers 2`` really starts worker processes (the
    start-up threshold, PROCGRADE_WORKER_MIN_EVENTS, lowered to let it on this little work)."""
    monkeypatch.setenv("PROCGRADE_WORKER_MIN_EVENTS", "0")
    runs = [f"w{i}" for i in range(6)]
    per_run = MIN_TASK_EVENTS // 4
    events = []
    for run in runs:
        events += small_run(run)[:7] + extra_events(run, 7, per_run)
    return write_jsonl(tmp_path / "workers.jsonl", events), runs


def test_kill_9_during_score_and_rescore_with_workers(store_url: str, workers_source: tuple[Path, list[str]]) -> None:
    source, runs = workers_source
    assert run_to_end("ingest", "--db", store_url, str(source))[0] == 0
    rng = random.Random(34)
    for _ in range(KILLS):
        kill_after(("score", *runs, "--db", store_url), rng.uniform(0.5, 3.0))
    killed_with_workers = 0
    for _ in range(KILLS):
        proc = procgrade("rescore", "--all", "--workers", "2", "--db", store_url)
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            workers = children(proc.pid)
            if len(workers) >= 2:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.5))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed_with_workers += bool(workers)
        proc.communicate(timeout=60)
        gone_by = time.monotonic() + 2  # the parent-death signal is immediate; busy workers would run on
        while time.monotonic() < gone_by and any(alive(pid) for pid in workers):
            time.sleep(0.05)
        assert not [pid for pid in workers if alive(pid)], "rescore workers outlived their parent"
    assert killed_with_workers, "no rescore was killed while its workers ran: the test proved nothing"
    code, err = run_to_end("rescore", "--all", "--workers", "2", "--db", store_url)
    assert code == 0 and "Traceback" not in err, err
    code, err = run_to_end("verify", "--db", store_url)
    assert code == 0, err
    store = open_store(store_url)
    try:
        assert sorted(s.run_id for s in ScoreStore(store).scores()) == sorted(runs)
    finally:
        store.close()


# --- fuzzing hostile input (SQLite: the parsers are what is fuzzed) ----------------------------------

NATIVE_SEED = [line(e) for e in small_run() + extra_events("run-1", 8, 4)]
CLAUDE_SEED = CLAUDE.read_bytes().split(b"\n")

HOSTILE = [b'"actor": "harness", "actor": "agent", ', b"[" * 3000, b'"ts": "2026-13-45T25:61:61Z", ', b"\xff\xfe",
           b'"seq": 99999999999999999999, ', b"NaN", b"1e400", b'"\\ud800"', b"{}", b"\x00", b'"payload": ' + b"{" * 200,
           b'OPENAI_API_KEY=sk-proj-' + b"a1B2" * 8, b"\r\n", b'"kind": "run_started", ']


@st.composite
def mutated(draw: st.DrawFn, seed: list[bytes]) -> bytes:
    lines = list(seed)
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines) - 1))
        target = lines[index]
        action = draw(st.sampled_from(["insert", "delete", "replace", "duplicate", "swap", "truncate"]))
        at = draw(st.integers(0, max(0, len(target))))
        if action == "insert":
            lines[index] = target[:at] + draw(st.sampled_from(HOSTILE) | st.binary(max_size=8)) + target[at:]
        elif action == "delete":
            lines[index] = target[:at] + target[at + draw(st.integers(1, 12)):]
        elif action == "replace":
            lines[index] = target[:at] + draw(st.binary(min_size=1, max_size=4)) + target[at + 1:]
        elif action == "duplicate":
            lines.insert(index, target)
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        else:
            lines[index] = target[:at]
    return b"\n".join(lines) + b"\n"


def _ingest_or_refuse(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    store = open_store(f"sqlite:///{tmp_path}/fuzz.db", create=True)
    try:
        before = [(i.run_id, i.event_count, i.head_hash) for i in store.runs()]
        try:
            done = ingest_paths(store, [path])
        except ProcgradeError as exc:
            assert "\n" not in str(exc).strip() or "Traceback" not in str(exc)
            assert [(i.run_id, i.event_count, i.head_hash) for i in store.runs()] == before
            return
        for report in done.reports:
            assert verify_log(store, report.run_id).ok
    finally:
        store.close()


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)


@FUZZ
@given(data=mutated(NATIVE_SEED))
def test_fuzzed_native_input_is_ingested_or_refused_cleanly(tmp_path_factory: pytest.TempPathFactory,
                                                            data: bytes) -> None:
    _ingest_or_refuse(tmp_path_factory.mktemp("native"), "run.jsonl", data)


@FUZZ
@given(data=mutated(CLAUDE_SEED))
def test_fuzzed_claude_code_log_is_imported_or_refused_cleanly(tmp_path_factory: pytest.TempPathFactory,
                                                               data: bytes) -> None:
    _ingest_or_refuse(tmp_path_factory.mktemp("claude"), "session.jsonl", data)


CODEX = ROOT / "tests" / "fixtures" / "imports" / "codex" / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"
MINI = ROOT / "tests" / "fixtures" / "imports" / "swe-agent" / "native_mini-swe-agent-trajectory.json"
SMALL_FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None,
                      derandomize=True)


@SMALL_FUZZ
@given(data=mutated(CODEX.read_bytes().split(b"\n")))
def test_fuzzed_codex_rollout_is_imported_or_refused_cleanly(tmp_path_factory: pytest.TempPathFactory,
                                                             data: bytes) -> None:
    _ingest_or_refuse(tmp_path_factory.mktemp("codex"), CODEX.name, data)


@SMALL_FUZZ
@given(data=mutated(MINI.read_bytes().split(b"\n")))
def test_fuzzed_mini_swe_agent_trajectory_is_imported_or_refused_cleanly(tmp_path_factory: pytest.TempPathFactory,
                                                                         data: bytes) -> None:
    _ingest_or_refuse(tmp_path_factory.mktemp("mini"), MINI.name, data)


TASK = ROOT / "tasks" / "verrange"


def test_kill_9_during_accept_appends_a_whole_check_or_nothing(store_url: str, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "run.jsonl", small_run("judged"))
    assert run_to_end("ingest", "--db", store_url, str(source))[0] == 0
    args = ("accept", "--task", str(TASK), "--workspace", str(TASK / "controls" / "reference" / "app"),
            "--run", "judged", "--db", store_url)
    rng = random.Random(56)
    for _ in range(2):
        kill_after(args, rng.uniform(1.0, 6.0))
        store = open_store(store_url)
        try:
            kinds = [e.kind for e in store.events("judged")][8:]
        finally:
            store.close()
        checks = kinds.count("acceptance_started")
        assert kinds.count("acceptance_verdict") == checks, kinds  # never a check without its verdict
    code, err = run_to_end(*args)
    assert code == 0 and "Traceback" not in err, err
    code, err = run_to_end("verify-log", "--db", store_url)
    assert code == 0, err
