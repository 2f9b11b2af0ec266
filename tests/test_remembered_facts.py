"""The fact extractor remembers the columns of the common kinds by the fields they derive from:
what it hands back is what deriving them again gives, for every event, however many are seen."""

from __future__ import annotations

import random

import pytest

from procgrade.engine import facts
from procgrade.engine.events import Command, FileEdit, FileRead, TestRun
from procgrade.engine.facts import FACT_COLUMNS, _EXTRACTORS, extract_facts

_ENVELOPE = {"run_id": "r", "event_id": "e", "actor": "agent"}
FACT_COLUMNS_INDEX = {name: i for i, name in enumerate(FACT_COLUMNS)}


def columns(event: object) -> dict[str, object]:
    return {name: value for name, value in zip(FACT_COLUMNS, extract_facts(event)) if value is not None}


def test_a_command_seen_again_with_another_exit_code_is_derived_again() -> None:
    ok = Command(seq=1, command="cat ./app/../app/api.py", exit_code=0, **_ENVELOPE)
    failed = Command(seq=2, command="cat ./app/../app/api.py", exit_code=2, **_ENVELOPE)
    assert columns(ok)["outcome"] == "pass" and columns(failed)["outcome"] == "fail"
    assert columns(failed) == {**columns(ok), "exit_code": 2, "outcome": "fail"}
    assert columns(ok)["io_path"] == "app/api.py" and columns(ok)["io"] == "read"


def test_test_runs_derive_their_outcome_from_every_count() -> None:
    cases = [((0, 3, 0, 0), "pass"), ((1, 3, 1, 0), "fail"), ((0, 3, 0, 1), "error"), ((None, None, None, None), None),
             ((2, None, None, None), "fail")]
    for (code, passed, failed, errored), outcome in cases * 2:  # the second time from what is remembered
        event = TestRun(seq=1, command="pytest -q", exit_code=code, passed=passed, failed=failed, errored=errored,
                        **_ENVELOPE)
        assert extract_facts(event)[FACT_COLUMNS_INDEX["outcome"]] == outcome


def test_long_texts_are_derived_but_not_remembered() -> None:
    extractor = _EXTRACTORS[FileRead]
    path = "src/" + "x" * (facts._REMEMBERED_LENGTH + 10) + "/../a.py"
    held = len(extractor.remembered)
    got = columns(FileRead(seq=1, path=path, **_ENVELOPE))
    assert got["path"] == "src/a.py" and got["area"] == "src"
    assert len(extractor.remembered) == held


def test_what_is_remembered_is_bounded_and_answers_as_deriving_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many distinct edits, some seen again: each one's columns equal those derived afresh by
    the kind's own functions, and no more than the bound is kept."""
    extractor = _EXTRACTORS[FileEdit]
    monkeypatch.setattr(facts, "_REMEMBERED_FACTS", len(extractor.remembered) + 50)
    rng = random.Random(5)
    paths = [f"./src/{rng.choice('abc')}/../m{n}.py" for n in range(200)] + ["README.md", "/etc/hosts", "../x"]
    for seq in range(1, 1500):
        path, new = rng.choice(paths), rng.choice([None, *paths[:5]])
        how = rng.choice(["modify", "create", "rename"])
        event = FileEdit(seq=seq, path=path, new_path=new, edit_kind=how, **_ENVELOPE)
        normal = facts.normal_path(path)
        expected = {"path": normal, "edit_kind": how, "area": facts.area_of(normal)}
        if new is not None:
            expected["new_path"] = facts.normal_path(new)
        assert columns(event) == expected
    assert len(extractor.remembered) <= facts._REMEMBERED_FACTS


def test_an_unvalidated_copy_holding_other_types_does_not_answer_for_a_valid_event() -> None:
    """``True == 1`` as a key: a copy made without validation (``exit_code=True``) is derived but
    not remembered, so a valid event with exit code 1 gets its own columns."""
    odd = Command(seq=1, command="make odd-types", exit_code=0, **_ENVELOPE).model_copy(update={"exit_code": True})
    assert extract_facts(odd)[FACT_COLUMNS_INDEX["exit_code"]] is True
    valid = Command(seq=2, command="make odd-types", exit_code=1, **_ENVELOPE)
    assert type(extract_facts(valid)[FACT_COLUMNS_INDEX["exit_code"]]) is int
