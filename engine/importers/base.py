"""The importer interface: find the runs of one format in a source tree, and read them.

An importer is a small class registered by name. :meth:`Importer.find` looks at
candidate files (cheaply: the first line, a few keys) and claims the units it
can read: a primary file plus the companion files that belong to it (sub-agent
transcripts, continuation files, outcome reports), which are then no one
else's. :meth:`Importer.read` turns one unit into whole runs through a
:class:`~procgrade.engine.importers.building.RunBuilder`, or raises ``InputError``.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterator, Sequence
from typing import ClassVar, NamedTuple

from procgrade.engine.importers.building import ImportedRun, RunBuilder
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["Importer", "Unit", "REGISTRY", "register", "run_id_for"]


class Unit(NamedTuple):
    """What one read consumes: the primary file and the companions that belong to it."""

    primary: str
    companions: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        return (self.primary, *self.companions)


class Importer:
    """One source format. Subclasses set ``name``, ``title``, ``version`` and implement
    :meth:`sniff` (or :meth:`find`) and :meth:`read`."""

    #: Registry name, used by ``--format`` and in run ids (``<name>/<native id>``).
    name: ClassVar[str] = ""
    #: One line for ``procgrade formats``.
    title: ClassVar[str] = ""
    #: Bumped whenever the events made from the same source change; recorded on every run.
    version: ClassVar[str] = "1"

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        """The units this importer reads among ``candidates`` (sorted relative paths)."""
        return [Unit(rel, tuple(self.companions(tree, rel))) for rel in candidates if self.sniff(tree, rel)]

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        """Whether ``rel`` is a primary file of this format (must not raise)."""
        raise NotImplementedError

    def claims_outright(self, tree: SourceTree, rel: str) -> bool:
        """Whether ``rel``'s name or first bytes show, beyond doubt, that it is a primary file
        of this format (must not raise). Such files are given to this importer before the
        others are asked, so no sniffer parses a big file of another format to decide."""
        return False

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        """Files that belong to the run(s) in ``rel`` (claimed with it)."""
        return []

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        """The run(s) in ``unit``; raises ``InputError`` naming file, record and field."""
        raise NotImplementedError

    def worth_a_worker(self, tree: SourceTree, unit: Unit) -> bool:
        """Whether ``unit`` holds enough runs to read them in a worker process while the
        runs already read are written (:mod:`~procgrade.engine.importers.pipeline`)."""
        return False

    def shared_reading(self, tree: SourceTree, unit: Unit) -> SharedReading | None:
        """How several workers can read ``unit`` at once, each its share of the runs (see
        :class:`SharedReading`), or None when only one reader can (the default)."""
        return None

    def iter_runs(self, tree: SourceTree, unit: Unit) -> Iterator[ImportedRun]:
        """The run(s) in ``unit`` one at a time: what ingest writes from, so a format that
        holds many runs in one file can keep only one in memory (it overrides this)."""
        yield from self.read(tree, unit)

    def builder(self, tree: SourceTree, unit: Unit, native_id: str, *, workspace_root: str | None = None,
                files: Sequence[str] | None = None, record_base: str | None = None) -> RunBuilder:
        """A builder for the run ``<name>/<native_id>`` made from ``unit``'s files (``record_base``:
        where the records of ``tree`` are placed from, when it is not the unit's own tree)."""
        return RunBuilder(tree, run_id=run_id_for(self.name, native_id), format=self.name,
                          importer_version=self.version, files=list(files if files is not None else unit.files),
                          workspace_root=workspace_root, base=posixpath.dirname(unit.primary), record_base=record_base)


#: What a share's reading yields before the runs from which it reads every run, not only its
#: own (a format's fallback that must read on alone from there; the other shares stop counting).
TAKEOVER = "takeover"


class SharedReading:
    """A unit's runs read in ``shares`` parts by as many workers: share ``k`` of ``n`` yields
    the runs at positions ``k``, ``k + n``, ``k + 2n``, ... of :meth:`Importer.iter_runs`'s
    order, the very same runs; interleaved, the shares give the runs and errors in that order.
    At the position where it must read on alone, a share yields :data:`TAKEOVER` and then every
    run from that position on."""

    def read(self, share: int, shares: int) -> Iterator[ImportedRun | str]:
        raise NotImplementedError


def run_id_for(format_name: str, native_id: str) -> str:
    """``<format>/<native id>``, with characters run ids do not allow replaced by ``_``."""
    cleaned = re.sub(r"[^A-Za-z0-9._:@/+-]", "_", native_id).strip("/") or "run"
    run_id = f"{format_name}/{cleaned}"
    if len(run_id) > 200:
        run_id = f"{format_name}/{hashlib.sha256(native_id.encode()).hexdigest()}"
    return run_id


#: name -> importer, in detection order (the order modules register them).
REGISTRY: dict[str, Importer] = {}


def register(cls: type[Importer]) -> type[Importer]:
    if not cls.name or cls.name in REGISTRY:
        raise TypeError(f"{cls.__name__}: importer name must be set and unique, got {cls.name!r}")
    REGISTRY[cls.name] = cls()
    return cls
