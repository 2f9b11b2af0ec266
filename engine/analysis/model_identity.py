"""One model is one group: the model name analysis groups runs by.

Harness logs spell one model many ways (``gpt-4o``, ``openai/gpt-4o``, ``gpt-4o-2024-05-13``). The log
keeps the raw string (it is evidence); analysis groups by a *model identity* made from it:

1. an alias file entry for the raw string, if any (exact match);
2. otherwise the **normalised** name, or an alias file entry for the normalised name.

Normalisation (:func:`normalise_model`), applied in this order:

* surrounding whitespace is dropped (letter case is kept: ``GPT-4o`` and ``gpt-4o`` differ unless an alias
  joins them);
* routing prefixes (matched ignoring case) are dropped, repeatedly, from the front: ``openai/``, ``anthropic/``,
  ``openrouter/``, ``litellm_proxy/``, ``litellm/``, ``azure/``, ``bedrock/``, ``vertex_ai/``,
  ``google/``, ``gemini/``, ``deepseek/``, ``mistral/``, ``together_ai/``, ``groq/``, ``fireworks_ai/``,
  ``hosted_vllm/``, ``ollama/`` (so ``openrouter/anthropic/claude-3.5-sonnet`` becomes ``claude-3.5-sonnet``);
  a name that is nothing but a prefix is kept as it is;
* one trailing date snapshot is dropped: ``-YYYY-MM-DD`` (``gpt-4o-2024-05-13``), ``-YYYYMMDD``
  (``claude-3-5-sonnet-20241022``) or ``@YYYYMMDD`` (Vertex AI), when the date is a real calendar date
  from 2000 on (``-20241399`` and long numeric endpoint ids are left alone).

Snapshots of one model are thereby one group. When they must stay apart, an alias file says so.

Alias file (``--aliases FILE``): YAML or JSON, one mapping from a raw or a normalised name to the group
name, e.g. ``{"gpt-4o-2024-05-13": "gpt-4o (May)", "app-8687wa-1753680546005046674": "claude-sonnet-4"}``.
Keys and values must be non-empty strings; a bad file is an :class:`~procgrade.engine.errors.InputError` naming
the file and the entry.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from procgrade.engine.errors import InputError

__all__ = ["PROVIDER_PREFIXES", "ModelIdentity", "load_aliases", "normalise_model"]

#: Routing prefixes dropped from the front of a model name (lower case, with the slash).
PROVIDER_PREFIXES = (
    "openai/", "anthropic/", "openrouter/", "litellm_proxy/", "litellm/", "azure/", "bedrock/", "vertex_ai/",
    "google/", "gemini/", "deepseek/", "mistral/", "together_ai/", "groq/", "fireworks_ai/", "hosted_vllm/",
    "ollama/",
)

_DATE_SUFFIX = re.compile(r"(?:-(?P<y1>\d{4})-(?P<m1>\d{2})-(?P<d1>\d{2})|[-@](?P<y2>\d{4})(?P<m2>\d{2})(?P<d2>\d{2}))$")


def _is_date(year: str, month: str, day: str) -> bool:
    try:
        return _dt.date(int(year), int(month), int(day)).year >= 2000
    except ValueError:
        return False


def normalise_model(raw: str) -> str:
    """The normalised model name of ``raw`` (see the module docstring for every step)."""
    name = raw.strip()
    stripped = True
    while stripped:
        stripped = False
        for prefix in PROVIDER_PREFIXES:
            if name.lower().startswith(prefix) and len(name) > len(prefix):
                name = name[len(prefix):]
                stripped = True
                break
    match = _DATE_SUFFIX.search(name)
    if match is not None and match.start() > 0:
        parts = (match["y1"], match["m1"], match["d1"]) if match["y1"] else (match["y2"], match["m2"], match["d2"])
        if _is_date(*parts):
            name = name[: match.start()]
    return name


@dataclass(frozen=True)
class ModelIdentity:
    """Maps raw model strings to group names: the alias for the raw string, else the alias for its
    normalised form, else the normalised form. ``source`` names the alias file (for messages)."""

    aliases: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None

    def group(self, raw: str | None) -> str | None:
        """The group of a run whose model is ``raw`` (None stays None: a run without a model is no group)."""
        if raw is None or not raw.strip():
            return None
        if raw in self.aliases:
            return self.aliases[raw]
        normal = normalise_model(raw)
        return self.aliases.get(normal, normal)

    def members(self, raws: list[str]) -> dict[str, list[str]]:
        """``{group: sorted raw names}`` for the given raw names: what each group pools."""
        out: dict[str, set[str]] = {}
        for raw in raws:
            group = self.group(raw)
            if group is not None:
                out.setdefault(group, set()).add(raw)
        return {g: sorted(out[g]) for g in sorted(out)}


def load_aliases(path: Path | str) -> ModelIdentity:
    """A :class:`ModelIdentity` with the aliases of a YAML or JSON file (a mapping of names to groups)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), None, None, f"cannot read the alias file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(str(path), None, None, "the alias file is not UTF-8 text") from None
    data: object
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), exc.lineno, None, f"not valid JSON: {exc.msg}") from None
    else:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            data = YAML(typ="safe", pure=True).load(text)
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            raise InputError(str(path), line, None, f"not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(str(path), None, None, f"the alias file must be a mapping of model names to groups, "
                                                f"not {type(data).__name__}")
    aliases: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not key.strip():
            raise InputError(str(path), None, repr(key), "an alias key must be a non-empty model name")
        if not isinstance(value, str) or not value.strip():
            raise InputError(str(path), None, key, f"the group must be a non-empty string, not {value!r}")
        aliases[key] = value
    return ModelIdentity(aliases, str(path))
