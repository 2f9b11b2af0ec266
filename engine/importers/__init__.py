"""Importers: real runs from the harnesses people use, read as procgrade events.

One module per format family, each registering its importers (see ``base.py``);
:data:`IMPORTER_MODULES` fixes the order in which ``--format auto`` asks them, most
specific first (a Harbor trial directory before the ATIF trajectory inside it).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

from procgrade.engine.errors import InputError
from procgrade.engine.importers.base import REGISTRY, Importer, Unit
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["IMPORTER_MODULES", "importers", "get_importer", "Plan", "plan_imports"]

IMPORTER_MODULES = (
    "procgrade.engine.importers.harbor",
    "procgrade.engine.importers.terminal_bench",
    "procgrade.engine.importers.claude_code",
    "procgrade.engine.importers.codex",
    "procgrade.engine.importers.openhands",
    "procgrade.engine.importers.swe_agent",
    "procgrade.engine.importers.inspect_ai",
    "procgrade.engine.importers.devai",
)


def importers() -> dict[str, Importer]:
    """Every importer by name, in detection order."""
    for module in IMPORTER_MODULES:  # each registers its importers once, on first import
        importlib.import_module(module)
    # Detection order is the module order, whatever order the modules happened to be imported in.
    rank = {module: index for index, module in enumerate(IMPORTER_MODULES)}
    ordered = sorted(REGISTRY.items(), key=lambda item: rank.get(type(item[1]).__module__, len(rank)))
    return dict(ordered)


def get_importer(name: str) -> Importer:
    known = importers()
    if name not in known:
        raise KeyError(f"unknown format {name!r} (known: {', '.join(known)})")
    return known[name]


@dataclass(frozen=True)
class Plan:
    """Which importer reads which unit of a tree, and the files no importer recognised."""

    tree: SourceTree
    units: list[tuple[Importer, Unit]]
    unrecognised: list[str]


def plan_imports(tree: SourceTree, format: str = "auto", *, skip: Sequence[str] = ()) -> Plan:
    """Assign the tree's selected files to importers (one named importer, or each in
    detection order); companions are claimed with their primary file. ``skip`` are files
    already handled elsewhere (native logs)."""
    chosen = list(importers().values()) if format == "auto" else [get_importer(format)]
    remaining = [f for f in tree.selected if f not in set(skip)]
    claimed: set[str] = set()
    units: list[tuple[Importer, Unit]] = []

    def claim(importer: Importer, candidates: list[str]) -> None:
        for unit in importer.find(tree, candidates):
            if unit.primary in claimed:
                continue
            if any(f in claimed for f in unit.companions):  # another unit got there first
                unit = Unit(unit.primary, tuple(f for f in unit.companions if f not in claimed))
            units.append((importer, unit))
            claimed.update(unit.files)

    # Files whose name or first bytes say for certain what they are go to their importer first:
    # other sniffers would parse a big file whole to see it is not theirs.
    for importer in chosen:
        certain = [f for f in remaining if f not in claimed and importer.claims_outright(tree, f)]
        if certain:
            claim(importer, certain)
    for importer in chosen:
        claim(importer, [f for f in remaining if f not in claimed])
    unrecognised = [f for f in remaining if f not in claimed]
    if not units and not skip:
        tried = "any known format" if format == "auto" else f"the {format} format"
        raise InputError(tree.label_root, None, None,
                         f"nothing here is in {tried} (known: {', '.join(importers())}, native)")
    return Plan(tree, sorted(units, key=lambda pair: pair[1].primary), unrecognised)
