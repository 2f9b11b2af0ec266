"""The importer framework every format stands on: trees, the run builder's contract,
redaction, shell-command file effects, test-run recognition, detection and the pipeline."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import small_run, write_jsonl
from import_checks import snapshot
from procgrade.engine.errors import InputError
from procgrade.engine.importers import plan_imports
from procgrade.engine.importers.base import REGISTRY, Importer, Unit
from procgrade.engine.importers.building import ImporterBug, RunBuilder, timestamp
from procgrade.engine.importers.patches import apply_patch_effects, unified_diff_effects
from procgrade.engine.importers.redaction import REDACTION_MARKER, Redactor, redact_text
from procgrade.engine.importers.shell import FileEffect, exit_code_from_text, file_effects
from procgrade.engine.importers.source_tree import open_tree, tree_of_bytes
from procgrade.engine.importers.test_runs import TestCounts, command_role, is_reproduction_command, is_test_command, parse_test_counts
from procgrade.engine.ingest import ingest_paths


# --- a tiny format used to exercise the framework ---------------------------------------------


class ToyImporter(Importer):
    """``*.toy.json``: {"id", "model", "steps": [{"type": "cmd"|"note"|"edit"|"verdict", ...}]}."""

    name = "toy"
    title = "test-only toy format"

    def sniff(self, tree: Any, rel: str) -> bool:
        return rel.endswith(".toy.json")

    def companions(self, tree: Any, rel: str) -> list[str]:
        side = rel.replace(".toy.json", ".toy-extra.txt")
        return [side] if tree.exists(side) else []

    def read(self, tree: Any, unit: Unit) -> list[Any]:
        doc = tree.json(unit.primary)
        builder = self.builder(tree, unit, str(doc.get("id", "anon")), workspace_root="/ws")
        meta = builder.record(unit.primary, "meta", {k: v for k, v in doc.items() if k != "steps"}, doc.get("id"))
        builder.start(harness="toy", model=meta.opt_str("model"), source=meta)
        for index, raw in enumerate(doc.get("steps", [])):
            rec = builder.record(unit.primary, f"steps[{index}]", raw, raw.get("id"))
            kind = rec.str("type")
            if kind == "cmd":
                builder.command(rec.str("command"), actor="agent", source=rec, output=rec.opt_str("output"),
                                exit_code=rec.opt_int("exit"))
            elif kind == "edit":
                builder.add("file_edit", actor="agent", source=rec, path=rec.str("path"), edit_kind="modify")
            elif kind == "verdict":
                builder.outcome("acceptance_verdict", source=rec, verifier="toy", status="evaluated",
                                reward=rec.str("reward"))
            elif kind == "skip-me":
                pass  # an importer bug: the record produces no event
            else:
                builder.keep(rec, kind)
        for extra in unit.companions:
            builder.keep(builder.record(extra, "1", {"text": tree.text(extra)}), "extra")
        return [builder.build()]


@pytest.fixture
def toy() -> Any:
    REGISTRY["toy"] = ToyImporter()
    try:
        yield REGISTRY["toy"]
    finally:
        del REGISTRY["toy"]


def toy_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": "r1", "model": "m-1",
        "steps": [
            {"type": "cmd", "id": "c1", "command": "cat /ws/src/a.py && pytest -q",
             "output": "===== 2 passed, 1 failed in 0.31s =====", "exit": 1},
            {"type": "verdict", "reward": "1"},
            {"type": "edit", "path": "/ws/src/a.py"},
            {"type": "note", "text": "export OPENAI_API_KEY=sk-proj-abcdefghij0123456789ABCDEFGHIJ"},
        ],
    }
    doc.update(changes)
    return doc


def write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


# --- the builder's contract --------------------------------------------------------------------


def test_builder_orders_provenance_process_then_outcomes(toy: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "a.toy.json", toy_doc())
    tree = open_tree(path)
    [run] = toy.read(tree, Unit("a.toy.json"))
    assert [e.kind for e in run.events] == [
        "run_started", "test_run", "file_read", "file_edit", "source_record", "acceptance_verdict"]
    assert [e.seq for e in run.events] == list(range(6))
    test_run = run.events[1]
    assert (test_run.passed, test_run.failed, test_run.exit_code) == (2, 1, 1)
    # The read comes from the command line; its parent is the command; workspace paths are relative.
    assert run.events[2].path == "src/a.py" and run.events[2].parent_seq == 1
    assert run.events[3].path == "src/a.py"
    start = run.events[0]
    assert start.harness.name == "toy" and start.model == "m-1"
    assert start.imported.format == "toy" and start.imported.records == 5 and start.imported.redactions == 1


def test_builder_keeps_each_record_whole_once_and_ids_are_stable(toy: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "a.toy.json", toy_doc())
    first = toy.read(open_tree(path), Unit("a.toy.json"))[0]
    again = toy.read(open_tree(path), Unit("a.toy.json"))[0]
    assert first.events == again.events
    command, read = first.events[1], first.events[2]
    assert command.payload["source"][0]["raw"]["command"] == "cat /ws/src/a.py && pytest -q"
    assert command.payload["source"][0]["id"] == "c1"
    assert read.payload == {"source": [{"file": "a.toy.json", "record": "steps[0]", "id": "c1", "at_seq": 1}]}
    assert [e.event_id for e in first.events[:3]] == [
        "toy/r1@start", "toy/r1@a.toy.json:steps[0]", "toy/r1@a.toy.json:steps[0]#1"]
    assert len({e.event_id for e in first.events}) == len(first.events)


def test_secrets_are_redacted_before_anything_is_built(toy: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "a.toy.json", toy_doc())
    run = toy.read(open_tree(path), Unit("a.toy.json"))[0]
    note = run.events[4]
    assert note.payload["source"][0]["raw"]["text"] == f"export OPENAI_API_KEY={REDACTION_MARKER}"
    assert "sk-proj" not in json.dumps([e.model_dump() for e in run.events])


def test_a_record_that_produces_no_event_is_an_importer_bug(toy: Any, tmp_path: Path) -> None:
    doc = toy_doc(steps=[{"type": "skip-me"}])
    path = write(tmp_path / "a.toy.json", doc)
    with pytest.raises(ImporterBug, match=r"a.toy.json:steps\[0\]"):
        toy.read(open_tree(path), Unit("a.toy.json"))


def test_builder_needs_provenance(tmp_path: Path) -> None:
    tree = tree_of_bytes("mem", {"x": b"{}"})
    builder = RunBuilder(tree, run_id="toy/x", format="toy", importer_version="1", files=["x"])
    with pytest.raises(ImporterBug, match="provenance"):
        builder.build()


@pytest.mark.parametrize(
    ("step", "field", "reason"),
    [
        ({"type": "cmd"}, "command", "missing"),
        ({"type": "cmd", "command": 12}, "command", "expected a string, got an integer 12"),
        ({"type": "cmd", "command": "ls", "exit": "0"}, "exit", "expected an integer"),
        ({"type": "cmd", "command": "ls", "exit": True}, "exit", "expected an integer, got a boolean"),
        ({"type": None}, "type", "must not be null"),
    ],
)
def test_bad_source_fields_are_located(toy: Any, tmp_path: Path, step: dict[str, Any], field: str, reason: str) -> None:
    path = write(tmp_path / "a.toy.json", toy_doc(steps=[{"type": "note"}, step]))
    with pytest.raises(InputError) as caught:
        toy.read(open_tree(path), Unit("a.toy.json"))
    assert str(caught.value).startswith(f"{path}:steps[1]: {field}: {reason}")


def test_a_value_no_event_can_hold_is_located_at_its_record(toy: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "a.toy.json", toy_doc(steps=[{"type": "verdict", "reward": "high"}]))
    with pytest.raises(InputError, match=r"a.toy.json:steps\[0\]: -: cannot make a acceptance_verdict event: reward"):
        toy.read(open_tree(path), Unit("a.toy.json"))


def test_unparsed_records_are_kept_and_counted(tmp_path: Path) -> None:
    tree = tree_of_bytes("mem", {"x.jsonl": b"{}\n{oops\n"})
    builder = RunBuilder(tree, run_id="toy/x", format="toy", importer_version="1", files=["x.jsonl"])
    builder.start(harness="toy")
    for line in tree.jsonl("x.jsonl"):
        if line.error:
            builder.unparsed("x.jsonl", line.line, line.text, line.error)
        else:
            builder.keep(builder.record("x.jsonl", line.line, line.value), "empty")
    run = builder.build()
    unparsed = run.events[2]
    assert unparsed.kind == "unparsed" and unparsed.record == "x.jsonl:2" and unparsed.actor == "system"
    assert unparsed.payload["source"][0]["raw"] == {"text": "{oops"}
    assert run.events[0].imported.unparsed == 1 and run.unparsed == 1


def test_stage_bookkeeping(tmp_path: Path) -> None:
    tree = tree_of_bytes("mem", {"x": b""})
    builder = RunBuilder(tree, run_id="toy/x", format="toy", importer_version="1", files=["x"])
    builder.start(harness="toy")
    rec = builder.record("x", "1", {"a": 1})
    builder.begin_stage(0, source=rec)
    builder.add("message", actor="user", source=rec, text="build it")
    builder.begin_stage(1, source=rec)
    builder.end_stage(source=rec, status="completed")
    kinds = [(e.kind, e.stage) for e in builder.build().events]
    assert kinds == [("run_started", None), ("stage_started", 0), ("message", 0), ("stage_ended", 0),
                     ("stage_started", 1), ("stage_ended", 1)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2025-01-02T03:04:05Z", "2025-01-02T03:04:05Z"),
        ("2025-01-02T03:04:05.123456789123+0000", "2025-01-02T03:04:05.123456789+00:00"),
        ("2025-01-02T03:04:05.5", None),  # no offset: the zone is unknown
        (1735787045, "2025-01-02T03:04:05.000000Z"),
        (1735787045500, "2025-01-02T03:04:05.500000Z"),
        (True, None),
        ("yesterday", None),
    ],
)
def test_timestamps(value: Any, expected: str | None) -> None:
    assert timestamp(value) == expected


# --- redaction ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789",
        "sk-ant-api03-Abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_" + "a1B2" * 9,
        "github_pat_" + "a1B2c3D4e5" * 5,
        "AIzaSyA-1234567890abcdefghijklmnopqrstu",
        "xoxb-1234567890-abcdefghij",
        "hf_" + "aB1" * 12,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    ],
)
def test_provider_secrets_are_redacted(secret: str) -> None:
    text, count = redact_text(f"before {secret} after")
    assert text == f"before {REDACTION_MARKER} after" and count == 1


def test_bearer_tokens_and_secret_assignments_are_redacted() -> None:
    text, count = redact_text('curl -H "Authorization: Bearer abcDEF123456ghiJKL789" https://x\n'
                              "DATABASE_PASSWORD=Zq8vK2mP9xL4wR7t\nexport API_TOKEN='n7Hq2Lw9Xc4Vb8Tz1'")
    assert count == 3
    assert "abcDEF" not in text and "Zq8vK2" not in text and "n7Hq2" not in text
    assert f"Bearer {REDACTION_MARKER}" in text and f"DATABASE_PASSWORD={REDACTION_MARKER}" in text


@pytest.mark.parametrize(
    "harmless",
    [
        "MAX_TOKENS=4096",
        "the token budget is spent",
        "SECRET_NAME=my_application_name",  # a word, not a secret: low entropy, no digits
        "git commit -m 'key fix'",
        "sha256=0123456789abcdef0123456789abcdef",
    ],
)
def test_ordinary_text_is_left_alone(harmless: str) -> None:
    assert redact_text(harmless) == (harmless, 0)


def test_secret_valued_keys_in_records_are_redacted_and_counted() -> None:
    redactor = Redactor()
    value = redactor.value({"env": {"api_key": "Q2x9Lm4Vt8Wz3Kp7", "model": "gpt-4o"},
                            "steps": ["token: sk-Abcdefghijklmnopqrstuvwx123"]})
    assert value == {"env": {"api_key": REDACTION_MARKER, "model": "gpt-4o"}, "steps": [f"token: {REDACTION_MARKER}"]}
    assert redactor.count == 2


@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once, _ = redact_text(text)
    assert redact_text(once) == (once, 0)


# --- shell commands, patches, test runs --------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "effects"),
    [
        ("cat a.py b.py", [("read", "a.py", None), ("read", "b.py", None)]),
        ("sed -n '1,40p' src/x.py", [("read", "src/x.py", None)]),
        ("sed -i 's/a/b/' src/x.py", [("edit", "src/x.py", "modify")]),
        ("grep -n foo src/a.py", [("read", "src/a.py", None)]),
        ("grep -rn foo .", []),
        ("grep -r 'class X' /workspace/pkg__1.0", []),
        ("cat > new.py <<'EOF'\nx = 1 > 0\nEOF", [("edit", "new.py", "create")]),
        ("echo hi >> log.txt", [("edit", "log.txt", "modify")]),
        ("rm -f a.py", [("edit", "a.py", "delete")]),
        ("cd app && head -n 5 README.md 2>/dev/null", [("read", "README.md", None)]),
        ("python -m pytest -q 2>&1 | tail -5", []),
        ("echo 'unbalanced", []),
        ("mkdir d\ntouch d/f\ncat 'two\nlines.txt'", [("edit", "d/f", "create"), ("read", "two\nlines.txt", None)]),
    ],
)
def test_file_effects_of_shell_commands(command: str, effects: list[tuple[str, str, str | None]]) -> None:
    assert [(e.action, e.path, e.edit_kind) for e in file_effects(command)] == effects


def test_renames_and_patches() -> None:
    assert file_effects("mv old.py new.py") == [FileEffect("edit", "old.py", "rename", "new.py")]
    diff = "git apply <<'EOF'\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/y.py\nEOF"
    assert [(e.path, e.edit_kind) for e in file_effects(diff)] == [("x.py", "modify"), ("y.py", "create")]
    envelope = ("*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n*** Move to: c.py\n@@\n"
                "*** Delete File: d.py\n*** End Patch")
    assert apply_patch_effects(envelope) == [
        FileEffect("edit", "a.py", "create"), FileEffect("edit", "b.py", "rename", "c.py"),
        FileEffect("edit", "d.py", "delete")]
    assert unified_diff_effects("diff --git a/p b/q\nrename from p\nrename to q\n") == [
        FileEffect("edit", "p", "rename", "q")]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q", True), ("cd x && python -m pytest tests/", True), ("uv run pytest", True),
        ("python -m unittest discover", True), ("go test ./...", True), ("cargo test", True),
        ("npm test", True), ("npm run test:unit", True), ("yarn test", True), ("pnpm test", True),
        ("npx jest", True), ("npx vitest run", True), ("make test", True), ("python manage.py test", True),
        ("cd app\npytest -q", True), ("bash run_tests.sh", True), ("bash /tests/run-tests.sh", True), ("timeout 60 pytest", True),
        ("pip install pytest", False), ("npm run build", False), ("make", False),
        ("python manage.py runserver", False), ("python reproduce.py", True), ("cat test_a.py", False),
        ("echo \"All tests passed\"", False), ("echo pytest && exit 0", False), ("printf 'OK: 5 passed'", False),
        ("python -c \"print('tests passed')\"", False), ("test -f out.txt && echo ok", False),
    ],
)
def test_test_runs_are_recognised_from_the_command(command: str, expected: bool) -> None:
    assert is_test_command(command) is expected


@pytest.mark.parametrize(
    ("command", "role"),
    [
        # Python
        ("pytest -q tests/test_a.py", "test"), ("python3 -m pytest -x", "test"), ("python -m unittest -v", "test"),
        ("tox -e py311", "test"), ("./tests/runtests.py queries", "test"), ("bin/test sympy/core", "test"),
        ("python -W ignore test_fix.py", "test"), ("python verify_fix.py", "test"), ("python /app/test.py", "test"),
        ("python reproduce_issue.py", "reproduction"), ("python3 repro.py 2>&1 | tail", "reproduction"),
        ("python -m py_compile a.py", "check"), ("mypy src", "check"), ("pip install -e .", None),
        # JVM
        ("javac Repro.java && java Repro", "reproduction"),
        ("javac -cp 'lib/*' ReproduceBug.java && java -cp '.:lib/*' ReproduceBug", "reproduction"),
        ("cd /w && javac -d /tmp/o $(find src -name '*.java') && java -cp /tmp/o Reproduce", "reproduction"),
        ("java -cp target/test-classes com.acme.FooTest", "test"), ("java Main", None), ("javac Main.java", "build"),
        ("java -jar app.jar", None), ("mvn -q clean test -Dtest=FooTest", "test"), ("./mvnw -pl core -am verify", "test"),
        ("mvn compile -q", "build"), ("mvn package -DskipTests", "build"), ("./gradlew :core:test --tests X", "test"),
        ("gradle check", "test"), ("gradle build -x test", "build"), ("ant test", "test"), ("sbt 'testOnly Foo'", "test"),
        # Rust, Go
        ("cargo test -p core", "test"), ("cargo +nightly test", "test"), ("cargo nextest run", "test"),
        ("cargo check", "check"), ("cargo clippy", "check"), ("cargo build --release", "build"),
        ("cargo run --example repro_issue", "reproduction"), ("go test -run TestX ./...", "test"),
        ("go vet ./...", "check"), ("go build ./...", "check"), ("go run reproduce.go", "reproduction"),
        ("go run ./cmd/server", None),
        # JS/TS
        ("npm test", "test"), ("npm run test-unit", "test"), ("npm run build", "build"), ("npm run lint", "check"),
        ("yarn jest src", "test"), ("npx jest", "test"), ("npx mocha", "test"), ("npx qunit", "test"),
        ("pnpm exec vitest", "test"), ("node --test", "test"), ("node repro.js", "reproduction"),
        ("tsc --noEmit", "check"), ("npm install", None),
        # shells, other ecosystems
        ("./reproduce.sh", "reproduction"), ("bash reproduce_bug.sh", "reproduction"), ("bash run_tests.sh", "test"),
        ("bundle exec rspec", "test"), ("bundle exec ruby -Itest test/foo_test.rb", "test"), ("rake test", "test"),
        ("php vendor/bin/phpunit", "test"), ("./vendor/bin/phpunit", "test"), ("ctest", "test"), ("make check", "test"),
        ("make -C build", "build"), ("dotnet test", "test"), ("timeout -s KILL 30 pytest", "test"),
        ("echo 'All tests passed'", None), ("ls -la", None), ("bash -c 'cd /app && pytest -q'", "test"),
        ("sh -c 'python reproduce.py'", "reproduction"), ("bash -c 'echo tests passed'", None),
        ("python setup.py test", "test"), ("python setup.py build", None),
    ],
)
def test_command_roles_across_ecosystems(command: str, role: str | None) -> None:
    assert command_role(command) == role
    assert is_test_command(command) is (role in ("test", "reproduction"))
    assert is_reproduction_command(command) is (role == "reproduction")


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        ("===== 3 passed, 1 failed, 2 errors in 0.12s =====", TestCounts(3, 1, 2, 0)),
        ("5 passed in 0.01s", TestCounts(5, 0, 0, 0)),
        ("==== 1 passed, 2 skipped, 1 xfailed in 1.0s ====", TestCounts(1, 0, 0, 3)),
        ("Ran 5 tests in 0.001s\n\nFAILED (failures=1, errors=1)", TestCounts(3, 1, 1, 0)),
        ("Ran 4 tests in 0.1s\n\nOK (skipped=1)", TestCounts(3, 0, 0, 1)),
        ("Tests:       1 failed, 4 passed, 5 total", TestCounts(4, 1, 0, 0)),
        ("      Tests  2 failed | 8 passed (10)", TestCounts(8, 2, 0, 0)),
        ("test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured", TestCounts(5, 0, 0, 1)),
        ("  3 passing (20ms)\n  1 failing", TestCounts(3, 1, 0, 0)),
        ("10 examples, 2 failures, 1 pending", TestCounts(7, 2, 0, 1)),
        ("--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)", TestCounts(1, 1, 0, 0)),
        ("Tests run: 3, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.1 s - in FooTest\n[INFO] Results:\n"
         "[ERROR] Tests run: 7, Failures: 1, Errors: 1, Skipped: 2", TestCounts(3, 1, 1, 2)),
        ("FooTest > bar FAILED\n5 tests completed, 2 failed, 1 skipped", TestCounts(2, 2, 0, 1)),
        ("# tests 6\n# pass 5\n# fail 1\n# skipped 0\n# todo 0", TestCounts(5, 1, 0, 0)),
        ("[        10 tests successful      ]\n[         1 tests failed          ]", TestCounts(10, 1, 0, 0)),
        ("compiling...", None),
    ],
)
def test_test_counts_from_runner_output(output: str, counts: TestCounts | None) -> None:
    assert parse_test_counts(output) == counts


@pytest.mark.parametrize(
    ("text", "code"),
    [("x\n[Command finished with exit code 2]", 2), ("Exit code: 0\nWall time: 1s", 0),
     ("<returncode>1</returncode>", 1), ("Process exited with code 127", 127), ("all good", None)],
)
def test_exit_codes_from_text(text: str, code: int | None) -> None:
    assert exit_code_from_text(text) == code


# --- trees, detection and the pipeline ---------------------------------------------------------


def test_a_single_file_sees_its_companions(toy: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "a.toy.json", toy_doc())
    (tmp_path / "a.toy-extra.txt").write_text("side")
    (tmp_path / "b.toy.json").write_text("{}")
    plan = plan_imports(open_tree(path), "toy")
    assert [(i.name, u) for i, u in plan.units] == [("toy", Unit("a.toy.json", ("a.toy-extra.txt",)))]


def test_directories_and_archives_give_the_same_runs(toy: Any, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    write(folder / "a.toy.json", toy_doc())
    write(folder / "sub" / "b.toy.json", toy_doc(id="r2"))
    (folder / "LICENSE").write_text("MIT")
    zipped = tmp_path / "runs.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, path.relative_to(folder).as_posix())
    tarred = tmp_path / "runs.tar.gz"
    with tarfile.open(tarred, "w:gz") as archive:
        archive.add(folder, arcname="runs")

    def runs_of(path: Path) -> list[Any]:
        tree = open_tree(path)
        plan = plan_imports(tree)
        assert [tree.label(f).rsplit("/", 1)[-1].rsplit("!", 1)[-1] for f in plan.unrecognised] == ["LICENSE"]
        return [run.events for imp, unit in plan.units for run in imp.read(tree, unit)]

    from_dir, from_zip, from_tar = runs_of(folder), runs_of(zipped), runs_of(tarred)
    assert len(from_dir) == 2
    strip = lambda runs: [[e.model_dump(exclude={"payload"}) for e in run] for run in runs]  # noqa: E731
    assert strip(from_dir) == strip(from_zip)
    assert [[e.kind for e in r] for r in from_tar] == [[e.kind for e in r] for r in from_dir]


def test_archive_errors_name_the_member(toy: Any, tmp_path: Path) -> None:
    zipped = tmp_path / "bad.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("x.toy.json", '{"id": "r", "steps": [{"type": "cmd"}]}')
    tree = open_tree(zipped)
    [(importer, unit)] = plan_imports(tree).units
    with pytest.raises(InputError, match=r"bad.zip!x.toy.json:steps\[0\]: command: missing"):
        importer.read(tree, unit)
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(InputError, match="unreadable archive"):
        open_tree(tmp_path / "broken.zip")


def test_archive_members_cannot_point_outside(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("../evil.json")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"{}"))
    (tmp_path / "evil.tar").write_bytes(buffer.getvalue())
    with pytest.raises(InputError, match="outside the archive"):
        open_tree(tmp_path / "evil.tar")


def test_strict_json_refuses_non_json_numbers(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"x": NaN}')
    (tmp_path / "b.json").write_text('{"x": 1e999}')
    (tmp_path / "c.json").write_text('{"x": 1,\n "y": }')
    tree = open_tree(tmp_path)
    with pytest.raises(InputError, match="NaN is not JSON"):
        tree.json("a.json")
    with pytest.raises(InputError, match="not finite"):
        tree.json("b.json")
    with pytest.raises(InputError, match=r"c.json:2: -: invalid JSON"):
        tree.json("c.json")
    assert tree.json is not None and tree.try_json("a.json") is None


def test_nothing_recognised_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="nothing here is in any known format"):
        plan_imports(open_tree(tmp_path))


def test_pipeline_is_all_or_nothing_and_idempotent(toy: Any, store: Any, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    write(folder / "a.toy.json", toy_doc())
    write_jsonl(folder / "native.jsonl", small_run("native-run"))
    done = ingest_paths(store, [folder])
    assert sorted((r.format, r.run_id, r.result.appended) for r in done.reports) == [
        ("native", "native-run", 8), ("toy", "toy/r1", 6)]
    info = store.run("toy/r1")
    assert (info.source_format, info.redactions, info.unparsed, info.model) == ("toy", 1, 0, "m-1")
    before = snapshot(store)
    again = ingest_paths(store, [folder])
    assert all(r.result.no_op for r in again.reports)
    assert snapshot(store) == before
    # A bad record in a second run leaves the whole ingest unwritten, the good run included.
    write(folder / "z.toy.json", toy_doc(id="r9", steps=[{"type": "edit"}]))
    write(folder / "b.toy.json", toy_doc(id="r3"))
    with pytest.raises(InputError, match=r"z.toy.json:steps\[0\]: path: missing"):
        ingest_paths(store, [folder])
    assert snapshot(store) == before


def test_cli_ingest_auto_names_the_format(toy: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from procgrade.engine.cli import app

    path = write(tmp_path / "a.toy.json", toy_doc())
    db = f"sqlite:///{tmp_path / 'p.db'}"
    result = CliRunner().invoke(app, ["ingest", str(path), "--db", db])
    assert result.exit_code == 0, result.output
    assert "(toy): run toy/r1: 6 events appended" in result.output
    bad = CliRunner().invoke(app, ["ingest", str(path), "--format", "nope", "--db", db])
    assert bad.exit_code == 2 and "unknown format 'nope'" in bad.output
    listed = CliRunner().invoke(app, ["formats"])
    assert listed.exit_code == 0 and "toy" in listed.output and "native" in listed.output


# --- regressions found in review ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('{\\"api_key\\": \\"Xk9pQ2rT7vLm3nB8wqZ4yy\\"}', "Xk9pQ2rT7vLm3nB8wqZ4yy"),  # JSON inside a string
        ("Authorization: Basic dXNlcjpzM2NyM3RQYXNzd29yZA==", "dXNlcjpzM2NyM3RQYXNzd29yZA=="),
        ("DATABASE_URL=postgres://admin:Xk9pQ2rT7vLm@db/app", "Xk9pQ2rT7vLm"),
        ('DJANGO_SECRET_KEY="django-insecure-k9#p2@r7v!m3n8wq"', "k9#p2@r7v!m3n8wq"),
    ],
)
def test_secret_forms_found_in_review_are_redacted(text: str, secret: str) -> None:
    redacted, count = redact_text(text)
    assert secret not in redacted and count >= 1, redacted


@pytest.mark.parametrize("command", ["> out.txt", "x=1 > out.txt", "< in.txt", "2>&1", "cat <<< hi"])
def test_commands_of_redirections_alone_do_not_crash(command: str) -> None:
    effects = file_effects(command)
    assert all(e.path not in ("<<<", "hi") for e in effects)
    if command.endswith("out.txt"):
        assert effects == [FileEffect("edit", "out.txt", "create")]


def test_paths_have_one_spelling_relative_to_the_workspace(tmp_path: Path) -> None:
    tree = tree_of_bytes("mem", {"x": b""})
    builder = RunBuilder(tree, run_id="toy/x", format="toy", importer_version="1", files=["x"], workspace_root="/w/")
    assert [builder.workspace_path(p) for p in ("/w/src/a.py", "/w//src/a.py", "./src/a.py", "src//a.py", "/w",
                                                "/w/../etc/passwd")] == [
        "src/a.py", "src/a.py", "src/a.py", "src/a.py", ".", "/etc/passwd"]


def test_reimport_from_a_parent_folder_is_a_no_op(toy: Any, store: Any, tmp_path: Path) -> None:
    write(tmp_path / "logs" / "day" / "a.toy.json", toy_doc())
    first = ingest_paths(store, [tmp_path / "logs" / "day" / "a.toy.json"])
    assert first.reports[0].result.appended == 6
    again = ingest_paths(store, [tmp_path / "logs"])
    assert [r.result.no_op for r in again.reports] == [True]


def test_hidden_log_folders_are_read_but_dot_files_and_vcs_folders_are_not(toy: Any, tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "projects" / "a.toy.json", toy_doc())
    write(tmp_path / ".git" / "b.toy.json", toy_doc(id="r2"))
    write(tmp_path / ".c.toy.json", toy_doc(id="r3"))
    assert open_tree(tmp_path).files() == [".claude/projects/a.toy.json"]


def test_archive_members_with_one_name_are_refused(tmp_path: Path) -> None:
    zipped = tmp_path / "dup.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("logs/a.jsonl", "{}")
        archive.writestr("logs/./a.jsonl", "{}")
    with pytest.raises(InputError, match="a second archive member named 'logs/a.jsonl'"):
        open_tree(zipped)


def test_detecting_formats_does_not_load_jsonschema() -> None:
    # every ingest imports every importer to detect formats; only a DevAI trajectory needs jsonschema
    import subprocess
    import sys

    code = ("import sys; from procgrade.engine.importers import importers; importers(); "
            "print('jsonschema' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
