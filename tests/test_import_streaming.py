"""Reading big sources without holding them whole, and strict JSON at C speed, with the same
results as before: an Inspect ``.json`` log read sample by sample gives the very events the
whole-document parse gives; a broken sample, a repeated key or an unusual layout is reported
exactly as the whole parse reports it; ``strict_json``'s orjson path agrees with the exact
stdlib path; format detection gives an Inspect log to its importer from its first bytes,
without another format's sniffer parsing it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procgrade.engine.errors import InputError
from procgrade.engine.json_guards import key_endings
from procgrade.engine.importers import get_importer, plan_imports
from procgrade.engine.importers.json_items import split_array
from procgrade.engine.importers.source_tree import DuplicateKey, SourceTree, TooDeep, _exact_json, open_tree, strict_json
from import_checks import inspect_log as _log


def _write(path: Path, doc: dict[str, Any], *, indent: int | None = 2) -> Path:
    path.write_text(json.dumps(doc, indent=indent, ensure_ascii=False))
    return path


def _events(path: Path, *, whole: bool, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    importer = get_importer("inspect")
    tree = open_tree(path)
    (unit,) = [unit for _, unit in plan_imports(tree, "inspect").units]
    with monkeypatch.context() as patch:
        if whole:
            patch.setattr(SourceTree, "json_items", lambda self, rel, key: None)
        runs = list(importer.iter_runs(tree, unit))
    return [event.model_dump(mode="json") for run in runs for event in run.events]


def test_a_multi_sample_log_read_sample_by_sample_gives_the_events_of_the_whole_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "three.json", _log(3))
    tree = open_tree(path)
    split = tree.json_items("three.json", "samples")
    assert split is not None and len(split) == 3  # the streaming path is the one taken
    streamed = _events(path, whole=False, monkeypatch=monkeypatch)
    whole = _events(path, whole=True, monkeypatch=monkeypatch)
    assert streamed == whole
    assert len({e["run_id"] for e in streamed}) == 3


def test_runs_come_one_at_a_time(tmp_path: Path) -> None:
    path = _write(tmp_path / "two.json", _log(2))
    tree = open_tree(path)
    (unit,) = [unit for _, unit in plan_imports(tree).units]
    runs = get_importer("inspect").iter_runs(tree, unit)
    first = next(runs)
    assert first.run_id.endswith("/1_epoch_1")
    assert "two.json" not in tree._json_cache  # the document was never parsed whole
    assert next(runs).run_id.endswith("/2_epoch_1")


def test_a_compact_log_is_read_whole_with_the_same_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compact = _write(tmp_path / "compact.json", _log(2), indent=None)
    indented = _write(tmp_path / "indented.json", _log(2))
    assert open_tree(compact).json_items("compact.json", "samples") is None
    ids = lambda events: [(e["run_id"], e["seq"], e["kind"], e["payload"]) for e in events]  # noqa: E731
    # the file name is part of the payloads' sources: compare with the names made equal
    got = ids(_events(compact, whole=False, monkeypatch=monkeypatch))
    want = ids(_events(indented, whole=True, monkeypatch=monkeypatch))
    assert json.dumps(got).replace("compact.json", "X") == json.dumps(want).replace("indented.json", "X")


def _error(path: Path, *, whole: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    with pytest.raises(InputError) as caught:
        _events(path, whole=whole, monkeypatch=monkeypatch)
    return str(caught.value)


def test_a_repeated_key_in_a_later_sample_is_refused_with_the_whole_parse_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(_log(3), indent=2)
    third = text.index('"id": 3,')
    text = text[:third] + '"id": 3,\n      "epoch": 1,' + text[third + len('"id": 3,'):]  # "epoch" twice
    path = tmp_path / "dup.json"
    path.write_text(text)
    streamed = _error(path, whole=False, monkeypatch=monkeypatch)
    assert streamed == _error(path, whole=True, monkeypatch=monkeypatch)
    assert "dup.json:" in streamed and "epoch: duplicate key 'epoch'" in streamed


def test_a_broken_sample_is_reported_where_the_whole_parse_reports_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(_log(3), indent=2)
    second = text.index('"id": 2,')
    text = text[:second] + '"id": 2,,' + text[second + len('"id": 2,'):]
    path = tmp_path / "broken.json"
    path.write_text(text)
    streamed = _error(path, whole=False, monkeypatch=monkeypatch)
    assert streamed == _error(path, whole=True, monkeypatch=monkeypatch)
    assert "invalid JSON" in streamed and "broken.json" in streamed


def test_a_header_key_repeated_at_the_top_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(_log(2), indent=2).replace('"status": "success",', '"status": "success",\n  "status": "error",', 1)
    path = tmp_path / "top.json"
    path.write_text(text)
    assert open_tree(path).json_items("top.json", "samples") is None
    assert "duplicate key 'status'" in _error(path, whole=False, monkeypatch=monkeypatch)


def test_split_array_proves_its_spans() -> None:
    doc = {"version": 2, "samples": [{"a": "}\n    }"}, {"b": [1, {"c": 2}]}], "reductions": []}
    data = json.dumps(doc, indent=2).encode()
    split = split_array(data, "samples", strict_json)
    assert split is not None
    assert split.header == {"version": 2, "reductions": []}
    assert [item for _, item in split.items()] == doc["samples"]
    # an item whose closing line is not where the layout says: the item does not parse alone
    odd = data.replace(b'"b": [', b'"b":\n    }[', 1)
    split = split_array(odd, "samples", strict_json)
    if split is not None:
        with pytest.raises(ValueError):
            list(split.items())


def test_format_detection_gives_an_inspect_log_to_its_importer_without_parsing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "log.json", _log(2))
    tree = open_tree(path)
    parsed: list[str] = []
    original = SourceTree.json

    def spying(self: SourceTree, rel: str) -> Any:
        parsed.append(rel)
        return original(self, rel)

    monkeypatch.setattr(SourceTree, "json", spying)
    plan = plan_imports(tree)
    assert [(importer.name, unit.primary) for importer, unit in plan.units] == [("inspect", "log.json")]
    assert parsed == []


# --- strict JSON: the orjson path against the exact stdlib path --------------------------------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.sampled_from([None, 2]), st.booleans())
def test_strict_json_agrees_with_the_exact_parse(value: Any, indent: int | None, as_bytes: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=bool(indent))
    data: bytes | str = text.encode() if as_bytes else text
    got, want = strict_json(data), _exact_json(data)
    assert json.dumps(got) == json.dumps(want)
    assert _types(got) == _types(want)


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("text, key", [
    ('{"a": 1, "a": 2}', "a"),
    ('{"a" : 1, "a":2}', "a"),
    ('{"a": 1, "\\u0061": 2}', "a"),
    ('[{"x": "\\":", "k": 1, "k": 1}]', "k"),
    ('{"q\\\\": 1, "q\\\\": 2}', "q\\"),
])
def test_strict_json_refuses_every_repeated_key(text: str, key: str) -> None:
    for data in (text, text.encode()):
        with pytest.raises(DuplicateKey) as caught:
            strict_json(data)
        assert caught.value.key == key


@pytest.mark.parametrize("text", ['{"a": "\\":", "b": "x\\\\", "c": {"\\"": 1}}', '{"a\\"b": 1, "c": "d"}'])
def test_escaped_quotes_before_colons_are_not_counted_as_keys(text: str) -> None:
    assert strict_json(text) == json.loads(text)


def _key_endings_by_count(data: bytes | str) -> int:
    """The reference count: ``":`` after k or more backslashes by ``count``, alternating signs."""
    colon, backslash = ('":', "\\") if isinstance(data, str) else (b'":', b"\\")
    endings, sign, needle = 0, 1, colon
    while found := data.count(needle):  # type: ignore[arg-type]
        endings, sign, needle = endings + sign * found, -sign, backslash + needle
    return endings


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(['"', ":", "\\", "a", " ", "\n", "\t", "\r", '":', '\\":', "\\" * 9 + '":']),
                max_size=40),
       st.booleans())
def test_key_endings_counts_as_the_backslash_parity_rule_does(pieces: list[str], as_bytes: bool) -> None:
    # any text (not only JSON): the literal-search counts equal the plain ``count`` ones, runs of
    # backslashes longer than the table of searches included
    text = "".join(pieces)
    data: bytes | str = text.encode() if as_bytes else text
    want = _key_endings_by_count(data) + len(re.findall(r'(?<!\\)(?:\\\\)*"[ \t\r\n]+:', text))
    assert key_endings(data) == want


def test_strict_json_keeps_big_integers_exact_and_refuses_what_is_not_json() -> None:
    assert strict_json(b"[18446744073709551616, -9223372036854775809, 0.1234567890123456789012]") == \
        [18446744073709551616, -9223372036854775809, 0.12345678901234568]
    assert strict_json("123456789012345678901234567890") == 123456789012345678901234567890
    assert strict_json(b'"\\ud800"') == "\ud800"
    for bad in (b"[1e400]", b"NaN", b"[Infinity]"):
        with pytest.raises(ValueError):
            strict_json(bad)
    with pytest.raises(TooDeep, match="deeper than 128"):
        strict_json(b"[" * 129 + b"]" * 129)
    assert strict_json(b"[" * 128 + b"]" * 128) is not None


# --- the worker that reads while ingest writes ---------------------------------------------------


def _heads(store: Any) -> list[tuple[str, int, str]]:
    return [(info.run_id, info.event_count, info.head_hash) for info in store.runs()]


def test_a_log_read_by_a_worker_is_stored_as_when_read_in_process(
        store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from procgrade.engine.importers import inspect_ai, pipeline
    from procgrade.engine.ingest import ingest_paths
    from procgrade.engine.store import open_store

    path = _write(tmp_path / "three.json", _log(3))
    monkeypatch.setattr(inspect_ai, "_WORKER_BYTES", 0)
    monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", "1")  # whatever the machine's load
    started: list[bool] = []
    original = pipeline._workers
    monkeypatch.setattr(pipeline, "_workers", lambda *a: started.append(original(*a)) or started[-1])
    ingest_paths(store, [path])
    assert started == [1]
    monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", "0")
    alone = open_store(f"sqlite:///{tmp_path / 'alone.db'}", create=True)
    ingest_paths(alone, [path])
    assert started == [1, 0]
    assert _heads(store) == _heads(alone) and len(_heads(store)) == 3
    alone.close()


def test_an_error_the_worker_meets_is_raised_here_and_nothing_is_written(
        store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from procgrade.engine.importers import inspect_ai
    from procgrade.engine.ingest import ingest_paths

    doc = _log(3)
    del doc["samples"][2]["epoch"]
    path = _write(tmp_path / "bad.json", doc)
    monkeypatch.setattr(inspect_ai, "_WORKER_BYTES", 0)
    monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", "1")
    with pytest.raises(InputError) as caught:
        ingest_paths(store, [path])
    assert "bad.json" in str(caught.value) and "samples[2]" in str(caught.value) and caught.value.field == "epoch"
    assert _heads(store) == []
