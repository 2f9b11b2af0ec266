"""Plans, product specs and planted bugs: validation with located errors, the published JSON Schema, planting,
and the product under test (fresh copy, empty SQLite or PostgreSQL database, health check, start log)."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.errors import InputError
from procgrade.oracles.browser_plans import apply_plant, load_browser_task, load_plan, plan_json_schema, product_json_schema
from procgrade.oracles.product_server import ProductDidNotStart, started_product

TASK = Path(__file__).resolve().parents[1] / "tasks" / "tablelunch"


def _plan(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = """id: p
title: A plan
users: [alice, bob]
steps:
  - title: Open
    user: bob
    actions: [{goto: /}, {click: {role: button, name: Go}}]
    checks:
      - says: It greets
        text_visible: Hello
        variants: [Hi]
"""


def test_the_sample_task_loads_with_its_plans_and_planted_bugs() -> None:
    task = load_browser_task(TASK)
    assert [p.id for p in task.plans] == ["confirm-order", "empty-order", "item-note", "quantity-limit",
                                          "rename-item", "service-fee", "shared-order"]
    kinds = {bug.kind for _, bug in task.planted}
    assert kinds == {"cent_off", "reverts", "dropped", "no_refusal", "timing", "obvious", "two_users"}
    assert {bug.plan for _, bug in task.planted} == {p.id for p in task.plans}
    assert task.plan("shared-order").users == ["alice", "bob"]
    assert len(task.plans_sha256) == 64


def test_every_sample_plan_and_product_match_the_published_schema() -> None:
    yaml = YAML(typ="safe")
    for path in sorted((TASK / "plans").glob("*.yaml")):
        jsonschema.validate(yaml.load(path.read_text()), plan_json_schema())
    jsonschema.validate(yaml.load((TASK / "product.yaml").read_text()), product_json_schema())
    result = CliRunner().invoke(app, ["schema", "plan"])
    assert result.exit_code == 0 and json.loads(result.stdout)["title"] == "procgrade browser test plan"


@pytest.mark.parametrize(("change", "line", "field", "reason"), [
    (("    user: bob", "    user: carol"), None, None, "steps[0].user 'carol' is not one of users (alice, bob)"),
    (("      - says: It greets\n", "      - says: It greets\n        url: /x\n"), 9, "steps[0].checks[0]",
     "a check must have exactly one of text_visible, text_absent, field_value, count, url (got text_visible, url)"),
    (("{goto: /}", "{reload: true}"), 5, "steps[0]", "a reload action needs allow_reload: true"),
    (("{goto: /}", "{gotoo: /}"), 7, "steps[0].actions[0].gotoo", "unknown field"),
    (("        variants: [Hi]\n", ""), None, None, None),
])
def test_plan_errors_name_the_file_line_and_field(tmp_path: Path, change: tuple[str, str], line: int | None,
                                                  field: str | None, reason: str | None) -> None:
    path = _plan(tmp_path, GOOD.replace(*change))
    if reason is None:
        assert load_plan(path).steps[0].checks[0].wordings == ("Hello",)
        return
    with pytest.raises(InputError) as caught:
        load_plan(path)
    assert caught.value.reason == reason
    assert caught.value.source == str(path)
    if line is not None:
        assert (caught.value.line, caught.value.field) == (line, field)


def test_plan_id_must_match_its_file_and_seed_files_must_exist(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="'p' differs from the file name 'q'"):
        load_plan(_plan(tmp_path, GOOD, "q.yaml"))
    with pytest.raises(InputError, match="seed.script: 'seed.py' is not a file"):
        load_plan(_plan(tmp_path, GOOD.replace("users:", "seed: {script: seed.py}\nusers:")))
    with pytest.raises(InputError, match="must be a normalised path inside the plans folder"):
        load_plan(_plan(tmp_path, GOOD.replace("users:", "seed: {script: ../seed.py}\nusers:")))


def test_a_planted_edit_must_match_the_reference_exactly_once(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "tablelunch"
    shutil.copytree(TASK, copy)
    plant = copy / "planted" / "cent-off" / "plant.yaml"
    plant.write_text(plant.read_text().replace("return (subtotal * FEE + 50) // 100", "return nothing"))
    with pytest.raises(InputError, match=r"edits: \[0\]: the old text occurs 0 times in app.py"):
        load_browser_task(copy)
    task = load_browser_task(TASK)
    name, bug = task.planted[0]
    planted = apply_plant(task.reference_build, bug, tmp_path / name)
    assert bug.edits[0].new in (planted / "app.py").read_text()
    assert bug.edits[0].old not in (planted / "app.py").read_text()


def test_the_product_starts_fresh_on_an_empty_sqlite_database(tmp_path: Path) -> None:
    task = load_browser_task(TASK)
    seen = []
    for _ in range(2):
        with started_product(task.product, task.reference_build) as product:
            assert product.base_url.startswith("http://127.0.0.1:")
            with urllib.request.urlopen(product.base_url + "/health") as response:
                assert response.read() == b"ok"
            body = b"username=zoe&password=pw"
            urllib.request.urlopen(urllib.request.Request(product.base_url + "/signup", data=body))
            db = product.database_url.removeprefix("sqlite:///")
            users = sqlite3.connect(db).execute("SELECT name FROM users").fetchall()
            seen.append((users, product.workspace))
            assert product.workspace != task.reference_build and (product.workspace / "app.py").is_file()
            assert b"[procgrade] healthy" in product.start_log()
        assert not product.workspace.exists()
    assert [s[0] for s in seen] == [[("zoe",)], [("zoe",)]]  # each start is on an empty database
    assert not (task.reference_build / "product.db").exists()


def test_a_product_that_does_not_start_raises_with_its_start_log(tmp_path: Path) -> None:
    task = load_browser_task(TASK)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "app.py").write_text("import sqlite3\nraise SystemExit('schema error: no such table: orders')\n")
    with pytest.raises(ProductDidNotStart) as caught:
        with started_product(task.product, broken):
            pass
    assert "exited 1 before it answered its health check" in caught.value.reason
    assert b"schema error: no such table: orders" in caught.value.log
    failing_setup = tmp_path / "setup"
    failing_setup.mkdir()
    (failing_setup / "app.py").write_text("def broken(:\n")
    with pytest.raises(ProductDidNotStart, match="the setup command .* exited 1") as caught:
        with started_product(task.product, failing_setup):
            pass
    assert b"SyntaxError" in caught.value.log


def test_a_postgresql_product_gets_a_fresh_database_dropped_afterwards(tmp_path: Path) -> None:
    import psycopg

    from procgrade.oracles.browser_plans import ProductSpec
    from procgrade.oracles.product_server import DEFAULT_POSTGRES

    app_dir = tmp_path / "pgapp"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(
        "import os, psycopg\nfrom http.server import HTTPServer, BaseHTTPRequestHandler\n"
        "conn = psycopg.connect(os.environ['DATABASE_URL'], autocommit=True)\n"
        "tables = conn.execute(\"SELECT count(*) FROM pg_tables WHERE schemaname = 'public'\").fetchone()[0]\n"
        "conn.execute('CREATE TABLE items (id int)')\n"
        "class H(BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(str(tables).encode())\n"
        "HTTPServer(('127.0.0.1', int(os.environ['PORT'])), H).serve_forever()\n")
    spec = ProductSpec(start="{python} app.py", database="postgresql", start_timeout_sec=30)
    names = []
    for _ in range(2):
        with started_product(spec, app_dir) as product:
            with urllib.request.urlopen(product.base_url + "/") as response:
                assert response.read() == b"0"  # an empty database every time
            names.append(product.database_url.rsplit("/", 1)[1])
    with psycopg.connect(DEFAULT_POSTGRES) as admin:
        left = admin.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", (names,)).fetchall()
    assert left == [] and names[0] != names[1]


def test_the_judge_layers_model_serves_the_agent_grader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter speaks the judge layer's ChatModel contract (``complete(ChatRequest) -> ChatResponse``)."""
    import dataclasses
    import sys
    import types

    from procgrade.oracles.grader_llm import JudgeLayerClient

    @dataclasses.dataclass(frozen=True)
    class ChatRequest:
        messages: tuple
        tools: tuple = ()
        response_format: str = "json_schema"
        temperature: float | None = None

    fake = types.ModuleType("procgrade.judges.client")
    fake.ChatRequest = ChatRequest  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "procgrade.judges.client", fake)
    seen = []

    class Model:
        endpoint = types.SimpleNamespace(model="judge-model")

        def complete(self, request: ChatRequest) -> Any:
            seen.append(request)
            return types.SimpleNamespace(content=None, model="judge-model-2024", tool_calls=(
                {"id": "c1", "type": "function", "function": {"name": "click", "arguments": '{"text": "Go"}'}},
                {"id": "c2", "type": "function", "function": {"name": "type", "arguments": "not json"}}))

    client = JudgeLayerClient(Model())
    reply = client.chat([{"role": "user", "content": "hi"}], [{"type": "function", "function": {"name": "click"}}])
    assert client.model == "judge-model" and reply.model == "judge-model-2024"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("c1", "click", {"text": "Go"}), ("c2", "type", None)]
    assert seen[0].response_format == "none" and seen[0].tools[0]["function"]["name"] == "click"
