"""Which system a run belongs to: what the archive says, and what the user adds at ingest.

A leaderboard archive holds several systems' runs of the same tasks. A run's identity and
its provenance must keep them apart, so importers take the system from where archives put
it (:func:`experiment_of`):

- SWE-bench's experiments layout ``evaluation/<split>/<date>_<system>/trajs/<instance>.traj``
  (also ``.../logs/<instance>/...``): the experiment folder is the system, ``<split>`` the
  split, the benchmark ``swe-bench``;
- a folder holding a ``metadata.yaml`` (SWE-bench submissions: ``info.name`` or ``name`` is
  the display name, ``tags.model`` or ``model`` the model when there is one);
- SWE-agent's run folders (``<model>__<data>__<config>__t-0.00__p-0.95__c-3.00__install-1``,
  ``<config>__<model>__t-0.00__p-1.00__c-3.00___<dataset>``) and OpenHands' eval folders
  (``<model>_maxiter_100_N_v0.9``);
- the folder above a ``trajs`` folder (SWE-bench submissions keep their trajectories there).

Generic folders on the way up (``trajs``, ``trajectories``, ``logs``, ``outputs``, ``results``,
...) are passed over.

A folder named after the run's own instance (SWE-agent 1.x writes ``<run>/<instance>/
<instance>.traj``) is skipped. Any other folder is not taken for a system: a file in
``~/Downloads`` is not the system "Downloads".

What the user adds (``procgrade ingest --system/--model/--label``, :func:`overrides`) applies
to every run of that ingest, for formats that do not carry it; a different value the archive
does carry is an error naming both (:func:`resolve`), never silently replaced.
"""

from __future__ import annotations

import contextlib
import contextvars
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from procgrade.engine.errors import InputError
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["Experiment", "Overrides", "experiment_of", "identify", "overrides", "current_overrides", "resolve",
           "qualified_native_id", "parse_labels"]

_GENERIC = {"trajs", "traj", "trajectories", "logs", "log", "outputs", "output", "results", "runs", "eval_outputs",
            "predictions"}
# SWE-agent's run folders (``...__t-0.00__p-0.95__c-3.00...``), OpenHands' eval folders (``..._maxiter_100_N_v1.0``).
_RUN_FOLDER = re.compile(r"__t-\d[\d.]*__p-\d[\d.]*__c-\d[\d.]*|_maxiter_\d+")
_LABEL_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
METADATA = "metadata.yaml"


@dataclass(frozen=True)
class Experiment:
    """The system a run's folders name, and what its ``metadata.yaml`` says."""

    system: str | None = None
    split: str | None = None
    benchmark: str | None = None
    name: str | None = None                # the display name metadata.yaml gives
    models: tuple[str, ...] = ()           # the models metadata.yaml names

    def labels(self) -> dict[str, str]:
        found = {"system": self.system, "split": self.split, "benchmark": self.benchmark, "system_name": self.name}
        return {key: value for key, value in found.items() if value}


def experiment_of(tree: SourceTree, rel: str, *, instance_id: str | None = None) -> Experiment:
    """The experiment ``rel`` belongs to, from its folders (see the module docstring)."""
    folders = tree.folders(rel)
    index = len(folders) - 1
    below_generic = False
    while index >= 0:
        name = folders[index]
        if name == instance_id or name.lower() in _GENERIC:
            below_generic = below_generic or name == "trajs"
            index -= 1
            continue
        break
    if index < 0:
        return Experiment()
    name = folders[index]
    under_evaluation = index >= 2 and folders[index - 2] == "evaluation"
    metadata = _metadata(tree, rel, folders, index)
    if not (under_evaluation or metadata is not None or _RUN_FOLDER.search(name) or below_generic):
        return Experiment()
    meta = metadata or {}
    info = meta.get("info") if isinstance(meta.get("info"), dict) else {}
    title = info.get("name") if isinstance(info.get("name"), str) else meta.get("name")
    tags = meta.get("tags") if isinstance(meta.get("tags"), dict) else {}
    models = tags.get("model", meta.get("model"))
    if isinstance(models, str):
        models = [models]
    models = tuple(m for m in models if isinstance(m, str) and m) if isinstance(models, list) else ()
    return Experiment(system=name, split=folders[index - 1] if under_evaluation else None,
                      benchmark="swe-bench" if under_evaluation else None,
                      name=title.strip() if isinstance(title, str) and title.strip() else None, models=models)


def identify(tree: SourceTree, rel: str, native: str, *, instance_id: str | None = None,
             model: str | None = None) -> tuple[str, Experiment]:
    """The native id of a run of a leaderboard format (one run per task instance), qualified by
    its system (the archive's, else ``--system``) or, when none is known, its raw model; and the
    experiment its folders name. An archive's system that ``--system`` contradicts is an error."""
    experiment = experiment_of(tree, rel, instance_id=instance_id)
    given = current_overrides()
    where = tree.label(rel)
    system = resolve("system", experiment.system, given.system, where, "labels.system")
    if model is None and len(experiment.models) == 1:
        model = experiment.models[0]
    model = resolve("model", model, given.model, where, "model")
    return qualified_native_id(native, system, model), experiment


def _metadata(tree: SourceTree, rel: str, folders: list[str], index: int) -> dict[str, Any] | None:
    """The experiment folder's ``metadata.yaml``: in the tree, or on disk next to it (so the
    same files give the same provenance whichever folder the user pointed at)."""
    inner = [p for p in posixpath.dirname(rel).split("/") if p]
    depth = len(folders) - 1 - index  # folders between the experiment folder and the file
    text: str | None = None
    if depth <= len(inner):
        folder = "/".join(inner[: len(inner) - depth])
        candidate = posixpath.join(folder, METADATA) if folder else METADATA
        if tree.exists(candidate):
            text = tree.read_bytes(candidate).decode("utf-8", "replace")
    if text is None:
        disk = tree.disk_path(rel)
        if disk is not None:
            candidate_path = Path(disk).parents[depth] / METADATA
            if candidate_path.is_file():
                try:
                    text = candidate_path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    text = None
    if text is None:
        return None
    try:
        loaded = YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return {}  # present but unreadable: the folder is still an experiment
    return loaded if isinstance(loaded, dict) else {}


# --- what the user says at ingest -------------------------------------------------------------


@dataclass(frozen=True)
class Overrides:
    """``--system``, ``--model`` and ``--label KEY=VALUE`` of one ingest."""

    system: str | None = None
    model: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.system or self.model or self.labels)


_CURRENT: contextvars.ContextVar[Overrides] = contextvars.ContextVar("procgrade_overrides", default=Overrides())


@contextlib.contextmanager
def overrides(given: Overrides) -> Iterator[None]:
    """Apply ``given`` to every run read inside the block."""
    token = _CURRENT.set(given)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_overrides() -> Overrides:
    return _CURRENT.get()


def resolve(what: str, archive: str | None, given: str | None, where: str, field_name: str | None = None) -> str | None:
    """The value the run gets: the archive's, else the user's; both and different is an error."""
    if given is not None and archive is not None and given != archive:
        raise InputError(where, None, field_name,
                         f"--{what} {given!r} conflicts with the {what} the archive gives, {archive!r}")
    return archive if archive is not None else given


def qualified_native_id(native: str, system: str | None, model: str | None = None) -> str:
    """``<system>/<native>`` (the system the archive or ``--system`` names, else the raw model),
    so two systems' runs of the same task never share a run id."""
    qualifier = system or model
    return f"{qualifier}/{native}" if qualifier else native


def parse_labels(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings as labels; a malformed pair or a repeated key is an error."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not _LABEL_KEY.match(key):
            raise InputError("--label", None, None, f"expected KEY=VALUE with a key of letters, digits, '_', '.', "
                             f"'-' (starting with a letter), got {pair!r}")
        if key in ("system",):
            raise InputError("--label", None, None, "use --system for the system, not --label system=...")
        if key in labels and labels[key] != value:
            raise InputError("--label", None, None, f"label {key!r} given twice ({labels[key]!r} and {value!r})")
        labels[key] = value
    return labels
