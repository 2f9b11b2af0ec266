"""How many cores this process may keep busy: what worker counts are sized by.

``os.cpu_count()`` counts the machine's processors. A process may use fewer: its CPU affinity
(``taskset``, a cpuset) and, in a container, its cgroup's CPU quota (``docker run --cpus 1``,
a Kubernetes CPU limit), which lets it run as many processors' worth of time per period and
throttles it past that. Sized by the machine instead, an ingest in a one-core container on an
eight-core host would start four workers that share that one core with the writer.

The quota is read the way container runtimes set it, cgroup v2 (``cpu.max``) and v1
(``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``), at this process's own cgroup and every
ancestor visible to it (the tightest wins), found through ``/proc/self/mountinfo`` and
``/proc/self/cgroup`` so that a container's view of its own cgroup (mounted at the root of
``/sys/fs/cgroup``) reads right. Anything unreadable counts as no quota.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

__all__ = ["usable_cores", "cgroup_cpu_quota"]


def usable_cores() -> int:
    """Cores this process may use: its affinity (else the machine's count), capped by a cgroup
    CPU quota rounded up (a quota of 1.5 cores keeps two processes busy part of the time)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cgroup_cpu_quota(proc: Path = Path("/proc/self")) -> float | None:
    """The tightest CPU quota on this process's cgroups, in cores (None: none set, or not
    Linux). ``proc`` is ``/proc/self`` (another directory of the same layout in tests)."""
    try:  # anything unreadable, undecodable or denied on the way is no quota, never an error
        mounts = (proc / "mountinfo").read_text(errors="surrogateescape").splitlines()
        memberships = (proc / "cgroup").read_text(errors="surrogateescape").splitlines()
        hierarchies = _cpu_cgroup_directories(mounts, memberships)
    except (OSError, ValueError):
        return None
    quotas = []
    for directory, mounted, version in hierarchies:
        try:  # per hierarchy: one denied on the way keeps what another says
            quotas += _quotas_up_from(directory, mounted, version)
        except (OSError, ValueError):
            continue
    return min(quotas) if quotas else None


def _cpu_cgroup_directories(mounts: list[str], memberships: list[str]) -> list[tuple[Path, Path, int]]:
    """(directory of this process's cgroup, the mount point, cgroup version) for each mounted hierarchy that can
    hold a CPU quota: the v2 one, and v1's ``cpu`` controller."""
    paths: dict[str, str] = {}  # controller ("" for v2) -> this process's path in that hierarchy
    for line in memberships:
        _id, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        for controller in controllers.split(",") if controllers else [""]:
            paths.setdefault(controller, path)
    found = []
    for line in mounts:
        fields = line.split(" ")  # one space between fields; whitespace inside one is escaped (\040)
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if dash + 2 >= len(fields) or dash < 5:
            continue
        kind, options = fields[dash + 1], fields[dash + 3].split(",") if dash + 3 < len(fields) else []
        root, mount_point = _unescape(fields[3]), fields[4]
        if kind == "cgroup2" and "" in paths:
            version, path = 2, paths[""]
        elif kind == "cgroup" and "cpu" in options and "cpu" in paths:
            version, path = 1, paths["cpu"]
        else:
            continue
        relative = _inside(path, root)
        if relative is not None:
            mounted = Path(_unescape(mount_point))
            found.append((mounted / relative, mounted, version))
    return found


def _inside(path: str, root: str) -> str | None:
    """``path`` relative to the mount's ``root`` (where in the hierarchy the mount starts), or
    None when the process's cgroup lies outside what is mounted. A container's own cgroup is
    mounted as the root of its view: its path then reads as that root (Docker without a cgroup
    namespace). A path the mount does not show is some other group's business: no quota is read
    for it, as the JVM's container support decides (the mount's root could be any group's)."""
    if ".." in path.split("/"):  # outside a cgroup namespace's root: nothing of it is visible here
        return None
    if root == "/":
        return path.lstrip("/")
    if path == root or path.startswith(root.rstrip("/") + "/"):
        return path[len(root):].lstrip("/")
    return None


def _quotas_up_from(directory: Path, mounted: Path, version: int) -> list[float]:
    """The quotas set at ``directory`` and each ancestor up to the mount point ``mounted``, in cores."""
    quotas = []
    seen = directory
    while True:
        if seen.is_dir():
            quota = _quota_v2(seen) if version == 2 else _quota_v1(seen)
            if quota is not None:
                quotas.append(quota)
        if seen == mounted or not seen.name:
            break
        seen = seen.parent
    return quotas


def _quota_v2(directory: Path) -> float | None:
    try:
        quota, period = (directory / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return _ratio(quota, period)


def _quota_v1(directory: Path) -> float | None:
    try:
        quota = (directory / "cpu.cfs_quota_us").read_text().strip()
        period = (directory / "cpu.cfs_period_us").read_text().strip()
    except (OSError, ValueError):
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        numerator, denominator = int(quota), int(period)
    except ValueError:
        return None
    if numerator <= 0 or denominator <= 0:  # -1: no quota (v1)
        return None
    try:
        return numerator / denominator
    except OverflowError:  # beyond any float: no limit worth the name
        return None


def _unescape(text: str) -> str:
    """mountinfo's octal escapes (a space is ``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), text)
