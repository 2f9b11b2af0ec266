"""Rule files: YAML validated into the rule language, with located errors, a published JSON
Schema, and content hashes that ignore spelling but not meaning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jsonschema
import orjson
import pytest
from ruamel.yaml import YAML

from procgrade.engine.errors import InputError
from procgrade.rules.identity import rule_hash, ruleset_hash
from procgrade.rules.loading import DEFAULT_RULESET, load_ruleset, parse_ruleset
from procgrade.rules.model import BEHAVIOUR_PATTERNS, BINARY_CHECKS, ruleset_json_schema

ROOT = Path(__file__).resolve().parent.parent

RULE = """\
name: t
version: 1
rules:
  - id: claim-backed
    title: Claims are backed
    rationale: Because.
    template: precedence_since
    activation: {kind: completion_claim}
    target: {kind: test_run, equals: {outcome: pass}}
    reset: {kind: file_edit}
"""


def test_default_ruleset_loads_and_covers_the_issue() -> None:
    ruleset = load_ruleset()
    ids = {r.id for r in ruleset.rules}
    assert (ruleset.version, ruleset.semantics, len(ids)) == (2, 2, 15)
    assert all(r.rationale.strip() for r in ruleset.rules)
    # every Arena behaviour pattern and binary check has a rule
    assert {r.pattern for r in ruleset.rules} == set(BEHAVIOUR_PATTERNS)
    assert {c for r in ruleset.rules for c in r.checks} == set(BINARY_CHECKS)
    # every rationale states its evidence grade or its reason
    assert all("Evidence" in r.rationale or "Reason" in r.rationale or "issue 10" in r.rationale
               for r in ruleset.rules)
    # rules the evidence reversed are gone; v1 stays loadable as it was
    assert not ids & {"read-before-edit", "verify-after-edit", "plan-before-first-edit"}
    v1 = load_ruleset(ROOT / "rules" / "sets" / "default-v1.yaml")
    assert (v1.version, v1.semantics, len(v1.rules)) == (1, 1, 11)


def test_semantics_1_cannot_use_what_semantics_2_added() -> None:
    text = (ROOT / "rules" / "sets" / "default-v1.yaml").read_text()
    with pytest.raises(InputError, match="need semantics 2"):
        parse_ruleset(text.replace("key: cmd_hash", "key: cmd_key"), "v1.yaml")


def test_default_ruleset_validates_against_the_published_schema() -> None:
    document = YAML(typ="safe").load(DEFAULT_RULESET.read_text())
    jsonschema.validate(document, ruleset_json_schema())
    bad = dict(document, rules=[dict(document["rules"][0], weight=1.5)])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, ruleset_json_schema())


def test_schema_rules_command_prints_the_schema() -> None:
    done = subprocess.run([sys.executable, "-m", "procgrade.engine.cli", "schema", "rules"], capture_output=True,
                          check=True, cwd=ROOT)
    assert orjson.loads(done.stdout)["title"] == "procgrade rule set"


@pytest.mark.parametrize("change,line,field,reason", [
    (("rationale: Because.", "rationale: Because.\n    colour: red"), 7, "rules[0].colour", "unknown field"),
    (("{kind: completion_claim}", "{kind: completion_claims}"), 8, "rules[0].activation.kind", "Input should be"),
    (("version: 1", "version: 1.5"), 2, "version", "Input should be a valid integer"),
    (("template: precedence_since", "template: precedence_since\n    weight: 0.5"), 8, "rules[0].weight",
     "Input should be a valid integer"),
    (("{outcome: pass}", "{exit_code: pass}"), 9, "rules[0].target.equals", "exit_code is a int column"),
    (("reset: {kind: file_edit}", ""), 4, "rules[0].reset", "Field required"),
])
def test_bad_rule_files_name_line_and_field(tmp_path: Path, change: tuple[str, str], line: int, field: str,
                                            reason: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULE.replace(*change))
    with pytest.raises(InputError) as info:
        load_ruleset(path)
    assert info.value.source == str(path)
    assert info.value.field == field
    assert reason in info.value.reason
    assert info.value.line == line, str(info.value)


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(RULE.replace("    title: Claims are backed\n", "    title: Claims are backed\n    title: Again\n"))
    with pytest.raises(InputError) as info:
        load_ruleset(path)
    assert info.value.line == 6 and "duplicate" in info.value.reason


def test_duplicate_rule_ids_are_refused() -> None:
    doubled = RULE + RULE.split("rules:\n", 1)[1]
    with pytest.raises(InputError, match="used twice"):
        parse_ruleset(doubled, "doubled.yaml")


def test_hash_ignores_spelling_but_not_meaning() -> None:
    base = parse_ruleset(RULE, "a.yaml")
    respelled = parse_ruleset(
        RULE.replace("{kind: file_edit}", "{kind: [file_edit]}").replace("{outcome: pass}", "{outcome: [pass]}"),
        "b.yaml")
    assert rule_hash(base.rules[0]) == rule_hash(respelled.rules[0])
    assert ruleset_hash(base) == ruleset_hash(respelled)
    reordered = parse_ruleset(RULE.replace("{kind: file_edit}", "{kind: [file_edit, command]}"), "c.yaml")
    swapped = parse_ruleset(RULE.replace("{kind: file_edit}", "{kind: [command, file_edit]}"), "d.yaml")
    assert ruleset_hash(reordered) == ruleset_hash(swapped) != ruleset_hash(base)
    weighted = parse_ruleset(RULE.replace("template: precedence_since", "template: precedence_since\n    weight: 2"),
                             "e.yaml")
    assert ruleset_hash(weighted) != ruleset_hash(base)


def test_validate_rules_command_prints_the_detection_table(tmp_path: Path) -> None:
    corpus = ROOT / "tests" / "fixtures" / "planted"
    done = subprocess.run([sys.executable, "-m", "procgrade.engine.cli", "validate-rules", str(corpus)], capture_output=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert (b"detected 44/44 faults (100%); 0 clean twins falsely flagged; 0 fault runs also flagged by another "
            b"rule; at least 2 cases per rule; patterns 8/8, checks 5/5 validated") in done.stdout
    # A corpus whose twins are swapped flags a clean twin and misses the fault: exit 1.
    import shutil

    broken = tmp_path / "planted"
    corpus = ROOT / "tests" / "fixtures" / "planted-v1"
    shutil.copytree(corpus / "read-before-edit", broken / "read-before-edit")
    (broken / "read-before-edit" / "fault.jsonl").rename(broken / "read-before-edit" / "tmp.jsonl")
    (broken / "read-before-edit" / "clean.jsonl").rename(broken / "read-before-edit" / "fault.jsonl")
    (broken / "read-before-edit" / "tmp.jsonl").rename(broken / "read-before-edit" / "clean.jsonl")
    done = subprocess.run([sys.executable, "-m", "procgrade.engine.cli", "validate-rules", str(broken), "--rules",
                           str(ROOT / "rules" / "sets" / "default-v1.yaml")], capture_output=True, cwd=ROOT)
    assert done.returncode == 1
    assert b"detected 0/1 faults (0%); 1 clean twins falsely flagged" in done.stdout
