"""DevAI judgments (metauto-ai/agent-as-a-judge): requirement-level grades of DevAI runs.

A judgment file is a DevAI task (``name``, ``query``, ``requirements``, ``preferences``,
flags) with ``satisfied`` filled in per requirement and preference; who judged is told by
where the file sits, as in the upstream benchmark (``benchmark/judgment/``)::

    <system>/human_as_a_judge/<task>.json               human:devai-experts
    <system>/agent_as_a_judge/gray_box/<task>.json      judge:agent-as-a-judge-gray-box
    <system>/agent_as_a_judge/black_box/<task>.json     judge:agent-as-a-judge-black-box

The run is ``devai/<system>/<task>`` (the file's stem, as the trajectory importer names
it; the ``name`` inside the file is not used: upstream has a truncated one). Mapping:

- each requirement -> a ``requirement`` grade: item ``str(requirement_id)``, ``passed``
  = ``satisfied``, ``criteria``, ``category``, ``prerequisites`` (as strings);
- each preference -> a ``preference`` grade (``passed`` None when ``satisfied`` is null);
- the task-level flags the human files carry (``executed_successfully``,
  ``satisfied_all_requirements``, ``satisfied_all_preferences``) -> ``outcome`` grades,
  item = the flag's name, kept as written (upstream's OpenHands task 31 says all
  requirements are satisfied although requirement 5 is not: derive from the requirements).

``satisfied`` null on a requirement means not judged (``passed`` None). The sheet is
``devai/human_as_a_judge``, ``devai/agent_as_a_judge/gray_box`` or ``.../black_box``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.grades.record import GradeRecord, NewRun, Place
from procgrade.engine.importers.base import run_id_for

__all__ = ["OUTCOME_FLAGS", "JudgeLayout", "judge_layout", "read_devai_judgment"]

OUTCOME_FLAGS = ("executed_successfully", "satisfied_all_requirements", "satisfied_all_preferences")
_JUDGES = {
    ("human_as_a_judge",): ("human:devai-experts", "devai/human_as_a_judge"),
    ("agent_as_a_judge", "gray_box"): ("judge:agent-as-a-judge-gray-box", "devai/agent_as_a_judge/gray_box"),
    ("agent_as_a_judge", "black_box"): ("judge:agent-as-a-judge-black-box", "devai/agent_as_a_judge/black_box"),
}
LAYOUT_HELP = ("<system>/human_as_a_judge/<task>.json or <system>/agent_as_a_judge/{gray_box,black_box}/<task>.json")


class JudgeLayout:
    """Who judged a DevAI run, and which run, from where the judgment file sits."""

    def __init__(self, system: str, folders: tuple[str, ...], task: str) -> None:
        self.system, self.task = system, task
        self.actor, self.sheet = _JUDGES[folders]
        #: The file's place in the upstream layout, kept in payloads (however the import was named).
        self.source = "/".join((system, *folders, f"{task}.json"))
        self.run_id = run_id_for("devai", f"{system}/{task}")


def judge_layout(path: Path) -> JudgeLayout | None:
    """The layout of ``path`` (a ``.json`` file), or None when it is not a judgment's place."""
    parts = Path(os.path.abspath(path)).parts  # the folders as named (symlinks not followed)
    if path.suffix.lower() != ".json" or len(parts) < 3:
        return None
    task = path.stem
    for folders in _JUDGES:
        n = len(folders)
        if len(parts) >= n + 2 and tuple(parts[-1 - n:-1]) == folders:
            system = parts[-2 - n]
            if system:
                return JudgeLayout(system, folders, task)
    return None


def looks_like_judgment(doc: Any) -> bool:
    return isinstance(doc, dict) and "requirements" in doc and "format" not in doc


def read_devai_judgment(doc: Any, layout: JudgeLayout, label: str) -> list[GradeRecord]:
    """The grades of one judgment file (already parsed); errors at ``label:record: field``."""
    if not isinstance(doc, dict):
        raise InputError(label, None, None, f"expected a JSON object (a DevAI judgment), got {_type(doc)}")
    new_run = NewRun(layout.system, task_id=layout.task, labels={"benchmark": "DevAI", "system": layout.system},
                     payload={"task": {k: doc[k] for k in ("name", "query", "tags") if k in doc}})

    def place(record: str) -> Place:
        return Place(label, record, layout.source)

    def grade(record: str, layer: str, item: str, passed: bool | None, raw: Any, **fields: Any) -> GradeRecord:
        return GradeRecord(place=place(record), run_id=layout.run_id, actor=layout.actor, sheet=layout.sheet,
                           layer=layer, item=item, passed=passed, raw=raw, new_run=new_run, **fields)

    requirements = _list(doc, "requirements", Place(label, None, layout.source), required=True)
    grades: list[GradeRecord] = []
    ids: dict[int, str] = {}
    for i, req in enumerate(requirements):
        where = f"requirements[{i}]"
        entry = _object(req, place(where))
        rid = _int(entry, "requirement_id", place(where))
        if rid in ids:
            raise place(where).error("requirement_id", f"{rid} is also the id of {ids[rid]}")
        ids[rid] = where
        prerequisites = _list(entry, "prerequisites", place(where), required=True)
        for k, prerequisite in enumerate(prerequisites):
            if not isinstance(prerequisite, int) or isinstance(prerequisite, bool):
                raise place(where).error(f"prerequisites[{k}]", f"expected a requirement id (an integer), "
                                                                 f"got {_type(prerequisite)}")
        grades.append(grade(where, "requirement", str(rid), _satisfied(entry, place(where)), req,
                            criteria=_text(entry, "criteria", place(where)),
                            category=_text(entry, "category", place(where), required=False),
                            prerequisites=tuple(str(p) for p in prerequisites)))
    for i, rid in enumerate(ids):
        for prerequisite in requirements[i]["prerequisites"]:
            if prerequisite not in ids:
                raise place(f"requirements[{i}]").error("prerequisites", f"requirement {prerequisite} is not in the file")
    seen: dict[int, str] = {}
    for i, pref in enumerate(_list(doc, "preferences", Place(label, None, layout.source), required=False)):
        where = f"preferences[{i}]"
        entry = _object(pref, place(where))
        pid = _int(entry, "preference_id", place(where))
        if pid in seen:
            raise place(where).error("preference_id", f"{pid} is also the id of {seen[pid]}")
        seen[pid] = where
        grades.append(grade(where, "preference", str(pid), _satisfied(entry, place(where)), pref,
                            criteria=_text(entry, "criteria", place(where))))
    for flag in OUTCOME_FLAGS:
        if flag not in doc:
            continue
        value = doc[flag]
        if value is not None and not isinstance(value, bool):
            raise InputError(label, None, flag, f"expected true, false or null, got {_type(value)}")
        grades.append(grade(flag, "outcome", flag, value, {flag: value}))
    return grades


def _object(value: Any, place: Place) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise place.error(None, f"expected an object, got {_type(value)}")
    return value


def _list(doc: dict[str, Any], key: str, place: Place, *, required: bool) -> Sequence[Any]:
    if key not in doc:
        if required:
            raise place.error(key, "missing")
        return []
    value = doc[key]
    if not isinstance(value, list):
        raise place.error(key, f"expected an array, got {_type(value)}")
    return value


def _int(entry: dict[str, Any], key: str, place: Place) -> int:
    value = entry.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise place.error(key, "missing" if key not in entry else f"expected an integer, got {_type(value)}")
    return value


def _text(entry: dict[str, Any], key: str, place: Place, *, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        reason = "missing" if key not in entry else f"expected non-empty text, got {_type(value)}"
        raise place.error(key, reason)
    return value


def _satisfied(entry: dict[str, Any], place: Place) -> bool | None:
    if "satisfied" not in entry:
        raise place.error("satisfied", "missing: a judgment says whether it is satisfied (true, false, or null)")
    value = entry["satisfied"]
    if value is not None and not isinstance(value, bool):
        raise place.error("satisfied", f"expected true, false or null, got {_type(value)}")
    return value


def _type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "null"}
    text = json.dumps(value, ensure_ascii=False, default=str)
    return f"{names.get(type(value), type(value).__name__)} {text[:40] + '...' if len(text) > 40 else text}"
