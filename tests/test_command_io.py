"""Job outputs and reads from command lines (engine/command_io.py), and the extractor-2 columns."""

from __future__ import annotations

import pytest

from procgrade.engine.command_io import command_io, normalised_command
from procgrade.engine.events import event_adapter
from procgrade.engine.facts import FACT_COLUMNS, area_of, command_hash, extract_facts


@pytest.mark.parametrize("command,expected", [
    ("python train.py > out.log 2>&1 &", ("job_started", "out.log")),
    ("nohup ./serve.sh > /tmp/serve.log 2>&1 &", ("job_started", "/tmp/serve.log")),
    ("make 2>&1 | tee build.log &", ("job_started", "build.log")),
    ("python bench.py >> runs/bench.txt &", ("job_started", "runs/bench.txt")),
    ("nohup python worker.py &", ("job_started", "nohup.out")),
    ("nohup python worker.py", ("job_started", "nohup.out")),
    ("python worker.py 2> err.log &", ("job_started", None)),  # only stderr redirected: no output file known
    ("cmd & echo $!", ("job_started", None)),
    ("sleep 30; cat out.log", ("read", "out.log")),
    ("tail -n 20 out.log", ("read", "out.log")),
    ("head -c 100 data.bin | xxd", ("read", "data.bin")),
    ("python run.py > out.log 2>&1", (None, None)),  # foreground: not a job
    ("echo hi >> a.txt", (None, None)),
    ("ls -la && pwd", (None, None)),
    ("cat 'unbalanced", (None, None)),
    ("", (None, None)),
])
def test_command_io(command: str, expected: tuple) -> None:
    assert tuple(command_io(command)) == expected


@pytest.mark.parametrize("command,normal", [
    ("cd /app && timeout 60 bash -lc 'pytest -q'", "pytest -q"),
    ("FOO=1 BAR=2 pytest   -q", "pytest -q"),
    ("env A=b make test", "make test"),
    ("python -c \"print(1)\"", "python -c \"print(1)\""),
    ("cd a; cd b && make", "make"),
])
def test_normalised_command(command: str, normal: str) -> None:
    assert normalised_command(command) == normal


def test_area_of() -> None:
    assert [area_of(p) for p in ("src/a/b.py", "setup.py", "/etc/hosts", "/x", "../up.py", None)] == \
        ["src", ".", "/etc", "/", "..", None]


def _facts(**line: object) -> dict:
    event = event_adapter().validate_python({"run_id": "r", "seq": 1, "event_id": "r/1", "actor": "agent", **line})
    return dict(zip(FACT_COLUMNS, extract_facts(event)))


def test_extractor_2_columns() -> None:
    job = _facts(kind="job_started", job_id="j", command="python x.py > ./logs/x.log 2>&1 &")
    assert (job["io"], job["io_path"], job["path"]) == ("job_started", "logs/x.log", None)  # v1's path unchanged
    explicit = _facts(kind="job_started", job_id="j", command="x > a.log &", output_path="b.log")
    assert explicit["io_path"] == "b.log"
    read = _facts(kind="command", command="cd /app && tail -f ./logs/x.log", exit_code=0)
    assert (read["io"], read["io_path"], read["cmd_hash"]) == ("read", "logs/x.log",
                                                               command_hash("cd /app && tail -f ./logs/x.log"))
    assert read["cmd_key"] == command_hash("tail -f ./logs/x.log")
    assert _facts(kind="run_ended", actor="harness", status="budget_exhausted")["status"] == "budget_exhausted"
    edit = _facts(kind="file_edit", path="./src/a.py", edit_kind="modify")
    assert (edit["area"], edit["io"]) == ("src", None)
