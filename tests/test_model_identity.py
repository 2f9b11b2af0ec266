"""Model identity (engine/analysis/model_identity.py): one model is one group."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from procgrade.engine.analysis.model_identity import ModelIdentity, load_aliases, normalise_model
from procgrade.engine.errors import InputError


@pytest.mark.parametrize(("raw", "normal"), [
    ("gpt-4o", "gpt-4o"),
    ("openai/gpt-4o", "gpt-4o"),
    ("gpt-4o-2024-05-13", "gpt-4o"),
    ("openai/gpt-4o-2024-08-06", "gpt-4o"),
    ("anthropic/claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("openrouter/anthropic/claude-3.5-sonnet", "claude-3.5-sonnet"),  # prefixes stacked
    ("litellm_proxy/minimax-m2.7", "minimax-m2.7"),
    ("OpenAI/GPT-4o", "GPT-4o"),  # prefixes match in any case; the name keeps its case
    ("vertex_ai/claude-3-5-sonnet@20241022", "claude-3-5-sonnet"),
    ("  gpt-4o  ", "gpt-4o"),
    # left alone: not a date, not a prefix, or nothing but a prefix
    ("openai/app-8687wa-1753680546005046674", "app-8687wa-1753680546005046674"),
    ("model-20241399", "model-20241399"),
    ("gpt-4o-2024-13-01", "gpt-4o-2024-13-01"),
    ("openai/openrouter-llama-4-maverick", "openrouter-llama-4-maverick"),
    ("openai/", "openai/"),
    ("20241022", "20241022"),
])
def test_normalisation(raw: str, normal: str) -> None:
    assert normalise_model(raw) == normal


def test_groups_pool_spellings_and_runs_without_a_model_are_no_group() -> None:
    identity = ModelIdentity()
    assert identity.group(None) is None and identity.group("  ") is None
    assert identity.members(["gpt-4o", "openai/gpt-4o", "gpt-4o-2024-05-13", "claude-opus-4"]) == {
        "claude-opus-4": ["claude-opus-4"], "gpt-4o": ["gpt-4o", "gpt-4o-2024-05-13", "openai/gpt-4o"]}


def test_aliases_by_raw_name_win_over_aliases_by_normalised_name(tmp_path: Path) -> None:
    path = tmp_path / "aliases.yaml"
    path.write_text("# snapshots kept apart, endpoints named\n"
                    "gpt-4o-2024-05-13: gpt-4o (May 2024)\n"
                    "gpt-4o: gpt-4o (latest)\n"
                    "app-8687wa-1753680546005046674: claude-sonnet-4\n", encoding="utf-8")
    identity = load_aliases(path)
    assert identity.group("gpt-4o-2024-05-13") == "gpt-4o (May 2024)"  # raw entry
    assert identity.group("openai/gpt-4o-2024-08-06") == "gpt-4o (latest)"  # normalised entry
    assert identity.group("openai/app-8687wa-1753680546005046674") == "claude-sonnet-4"
    assert identity.group("claude-opus-4") == "claude-opus-4"
    as_json = tmp_path / "aliases.json"
    as_json.write_text(json.dumps({"gpt-4o": "four-o"}), encoding="utf-8")
    assert load_aliases(as_json).group("openai/gpt-4o") == "four-o"
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    assert load_aliases(empty).aliases == {}


@pytest.mark.parametrize(("name", "text", "message"), [
    ("list.yaml", "- gpt-4o\n", "must be a mapping"),
    ("number.yaml", "gpt-4o: 4\n", "gpt-4o: the group must be a non-empty string"),
    ("blank.json", '{"gpt-4o": " "}', "the group must be a non-empty string"),
    ("broken.json", '{"gpt-4o": ', "not valid JSON"),
    ("broken.yaml", "a: [b\n", "not valid YAML"),
])
def test_bad_alias_files_are_located_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as caught:
        load_aliases(path)
    assert str(path) in str(caught.value)
    with pytest.raises(InputError, match="cannot read"):
        load_aliases(tmp_path / "missing.yaml")
