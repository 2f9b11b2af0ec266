"""What the command line prints quotes the data as stored: Rich's emoji codes stay text.

A run id (or path, or command) holding ``:fire:`` was printed as an emoji by ``ingest``,
``rescore`` and the other commands, so the id on screen was not the id to pass back.
These tests run the installed console script, as a user types it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
PROCGRADE = Path(sys.executable).parent / "procgrade"
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"
RUN = "demo:fire:run"


def _procgrade(*args: str, cwd: Path) -> str:
    done = subprocess.run([str(PROCGRADE), *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def test_run_ids_with_emoji_codes_are_printed_as_they_are(tmp_path: Path) -> None:
    lines = []
    for line in EXAMPLE.read_bytes().splitlines():
        event = orjson.loads(line)
        event["run_id"], event["event_id"] = RUN, f"{RUN}/{event['seq']}"
        lines.append(orjson.dumps(event))
    (tmp_path / "run.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    db = "sqlite:///store.db"
    _procgrade("init", "--db", db, cwd=tmp_path)
    printed = {
        "ingest": _procgrade("ingest", "--db", db, "run.jsonl", cwd=tmp_path),
        "runs": _procgrade("runs", "--db", db, cwd=tmp_path),
        "rescore": _procgrade("rescore", "--all", "--db", db, cwd=tmp_path),
    }
    for command, text in printed.items():
        assert RUN in text, (command, text)
        assert "\N{FIRE}" not in text, (command, text)
