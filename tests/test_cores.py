"""Worker counts follow the cores this process may use: its affinity and a container's CPU quota
(cgroup v1 and v2), not the machine's processor count. Laid-out ``/proc/self`` trees check each
layout a container runtime makes; on a machine with a writable cgroup CPU controller (this one,
as root) a real child process is put under a real quota."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from procgrade.engine.cores import cgroup_cpu_quota, usable_cores


def _proc(tmp_path: Path, mounts: list[str], memberships: list[str]) -> Path:
    proc = tmp_path / "proc-self"
    proc.mkdir(parents=True)
    (proc / "mountinfo").write_text("".join(line + "\n" for line in mounts))
    (proc / "cgroup").write_text("".join(line + "\n" for line in memberships))
    return proc


def _v2_group(directory: Path, cpu_max: str | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cgroup.controllers").write_text("cpu memory\n")
    if cpu_max is not None:
        (directory / "cpu.max").write_text(cpu_max + "\n")


def _v1_group(directory: Path, quota: int, period: int = 100_000) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cgroup.procs").write_text("")
    (directory / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (directory / "cpu.cfs_period_us").write_text(f"{period}\n")


def _v2_mount(point: Path, root: str = "/") -> str:
    return f"30 23 0:26 {root} {point} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"


def _v1_mount(point: Path, root: str = "/", options: str = "rw,cpu,cpuacct") -> str:
    return f"32 31 0:29 {root} {point} rw,relatime - cgroup cgroup {options}"


def test_cgroup_v2_quota_of_the_process_group_in_cores(tmp_path: Path) -> None:
    mount = tmp_path / "fs" / "cgroup"
    _v2_group(mount, None)  # the root cgroup has no cpu.max
    _v2_group(mount / "system.slice", "max 100000")
    _v2_group(mount / "system.slice" / "job.service", "150000 100000")
    proc = _proc(tmp_path, ["22 1 8:1 / / rw - ext4 /dev/vda rw", _v2_mount(mount)],
                 ["0::/system.slice/job.service"])
    assert cgroup_cpu_quota(proc) == 1.5


def test_the_tightest_quota_on_the_way_up_wins(tmp_path: Path) -> None:
    mount = tmp_path / "cgroup"
    _v2_group(mount, None)
    _v2_group(mount / "kubepods", "50000 100000")  # the pod's limit: half a core
    _v2_group(mount / "kubepods" / "container", "max 100000")
    proc = _proc(tmp_path, [_v2_mount(mount)], ["0::/kubepods/container"])
    assert cgroup_cpu_quota(proc) == 0.5


def test_no_quota_anywhere_is_none(tmp_path: Path) -> None:
    v2 = tmp_path / "unified"
    _v2_group(v2 / "user", "max 100000")
    v1 = tmp_path / "cpu,cpuacct"
    _v1_group(v1, -1)
    _v1_group(v1 / "user", -1)
    proc = _proc(tmp_path, [_v2_mount(v2), _v1_mount(v1)], ["1:cpu,cpuacct:/user", "0::/user"])
    assert cgroup_cpu_quota(proc) is None


def test_cgroup_v1_quota_over_period(tmp_path: Path) -> None:
    mount = tmp_path / "cpu,cpuacct"
    _v1_group(mount, -1)
    _v1_group(mount / "batch", 250_000, 100_000)
    proc = _proc(tmp_path, [_v1_mount(mount), _v1_mount(tmp_path / "memory", options="rw,memory")],
                 ["5:memory:/batch", "3:cpu,cpuacct:/batch", "1:name=systemd:/batch"])
    assert cgroup_cpu_quota(proc) == 2.5


def test_a_containers_own_cgroup_mounted_as_its_root(tmp_path: Path) -> None:
    """Docker without a cgroup namespace: the process's path names the host's group, which the
    container sees mounted as the root of /sys/fs/cgroup/cpu (the mount's root field says so)."""
    mount = tmp_path / "sys" / "fs" / "cgroup" / "cpu"
    _v1_group(mount, 100_000, 100_000)
    proc = _proc(tmp_path, [_v1_mount(mount, root="/docker/0123abcd")], ["4:cpu:/docker/0123abcd"])
    assert cgroup_cpu_quota(proc) == 1.0
    # a path outside what the mount shows: the mount's root is some other group, whose quota is not ours
    proc = _proc(tmp_path / "nested", [_v1_mount(mount, root="/docker/0123abcd")], ["4:cpu:/elsewhere"])
    assert cgroup_cpu_quota(proc) is None
    # the root field escapes a space as mount points do
    proc = _proc(tmp_path / "spaced", [_v1_mount(mount, root="/my\\040box")], ["4:cpu:/my box"])
    assert cgroup_cpu_quota(proc) == 1.0


def test_mount_points_with_escaped_spaces(tmp_path: Path) -> None:
    mount = tmp_path / "a cgroup"
    _v2_group(mount, "200000 100000")
    escaped = str(mount).replace(" ", "\\040")
    proc = _proc(tmp_path, [f"30 23 0:26 / {escaped} rw - cgroup2 cgroup2 rw"], ["0::/"])
    assert cgroup_cpu_quota(proc) == 2.0


def test_a_mount_point_holding_other_whitespace_is_one_field(tmp_path: Path) -> None:
    """mountinfo separates its fields by one space; a no-break space is part of a name."""
    mount = tmp_path / "cgroup\u00a0fs"
    _v2_group(mount, "300000 100000")
    assert cgroup_cpu_quota(_proc(tmp_path, [_v2_mount(mount)], ["0::/"])) == 3.0


def test_one_hierarchy_failing_keeps_what_another_says(tmp_path: Path) -> None:
    """An error on the way through one hierarchy (here a name too long to look up, which raises
    even for root) leaves the quota another hierarchy holds."""
    v2 = tmp_path / "unified"
    _v2_group(v2, "50000 100000")
    v1 = tmp_path / "cpu"
    _v1_group(v1, 300_000)
    proc = _proc(tmp_path, [_v1_mount(v1), _v2_mount(v2)], ["4:cpu:/" + "x" * 300, "0::/"])
    assert cgroup_cpu_quota(proc) == 0.5


@pytest.mark.parametrize("cpu_max", ["", "garbage", "0 100000", "50000 0", "50000"])
def test_unreadable_quota_files_count_as_none(tmp_path: Path, cpu_max: str) -> None:
    mount = tmp_path / "cgroup"
    _v2_group(mount, cpu_max)
    assert cgroup_cpu_quota(_proc(tmp_path, [_v2_mount(mount)], ["0::/"])) is None


def test_the_walk_stays_inside_the_mount(tmp_path: Path) -> None:
    """A quota above the mount point, a path climbing out of a namespace, a quota beyond a float."""
    above = tmp_path / "above"
    _v2_group(above, "10000 100000")  # a cgroup-like directory holding the mount: not this hierarchy's
    _v2_group(above / "mounted", None)
    assert cgroup_cpu_quota(_proc(tmp_path / "a", [_v2_mount(above / "mounted")], ["0::/"])) is None
    _v2_group(above / "other", "20000 100000")
    assert cgroup_cpu_quota(_proc(tmp_path / "b", [_v2_mount(above / "mounted")], ["0::/../other"])) is None
    huge = tmp_path / "huge"
    _v2_group(huge, "1" + "0" * 400 + " 1")
    assert cgroup_cpu_quota(_proc(tmp_path / "c", [_v2_mount(huge)], ["0::/"])) is None


def test_no_proc_files_means_no_quota(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(tmp_path / "missing") is None


def test_odd_proc_files_mean_no_quota_not_an_error(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in a mount point, truncated lines, a group gone since (``(deleted)``)."""
    proc = tmp_path / "proc-self"
    proc.mkdir()
    (proc / "mountinfo").write_bytes(b"30 23 0:26 / /sys/fs/\xff\xfe rw - cgroup2 cgroup2 rw\n"
                                     b"31 23 0:27 / /x rw -\n12\n\n- - -\n")
    (proc / "cgroup").write_bytes(b"0::/gone (deleted)\n1:cpu\n:\n")
    assert cgroup_cpu_quota(proc) is None


def test_usable_cores_is_the_affinity_capped_by_the_quota_rounded_up(monkeypatch: pytest.MonkeyPatch) -> None:
    import procgrade.engine.cores as cores

    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 4, 5, 6, 7})
    for quota, expected in ((None, 8), (0.2, 1), (1.0, 1), (1.5, 2), (4.0, 4), (64.0, 8)):
        monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda quota=quota: quota)
        assert usable_cores() == expected, quota


def _writable_cpu_cgroup() -> tuple[Path, int] | None:
    """(this process's cgroup directory where a child group can get a CPU quota, version), or None."""
    from procgrade.engine.cores import _cpu_cgroup_directories

    try:
        found = _cpu_cgroup_directories(Path("/proc/self/mountinfo").read_text().splitlines(),
                                        Path("/proc/self/cgroup").read_text().splitlines())
    except OSError:
        return None
    for directory, _mounted, version in found:
        try:
            if version == 2 and "cpu" not in (directory / "cgroup.subtree_control").read_text().split():
                continue  # v2 without the cpu controller given to child groups
        except OSError:
            continue
        if os.access(directory, os.W_OK) and (version == 2 or (directory / "cpu.cfs_quota_us").exists()):
            return directory, version
    return None


def test_a_real_cgroup_quota_limits_the_ingest_workers() -> None:
    """A child process put into a real cgroup with half a core's quota (as ``docker run --cpus
    0.5`` does) counts one usable core and prepares its ingest in process (no worker to share
    that core with the writer), whatever the machine has."""
    where = _writable_cpu_cgroup()
    if where is None:
        pytest.skip("no writable cgroup CPU controller here (needs root on a Linux machine with one): "
                    "the laid-out trees above still check every layout")
    directory, version = where
    group = directory / f"procgrade-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if version == 2:
            (group / "cpu.max").write_text("50000 100000\n")
        else:
            (group / "cpu.cfs_quota_us").write_text("50000\n")
        script = ("from procgrade.engine.cores import usable_cores, cgroup_cpu_quota;"
                  "from procgrade.engine.ingest import ingest_workers;"
                  "print(cgroup_cpu_quota(), usable_cores(), ingest_workers())")
        env = {k: v for k, v in os.environ.items() if k != "PROCGRADE_INGEST_WORKERS"}
        # the shell joins the group before it becomes Python: the whole child runs under the quota
        shell = f'echo $$ > "{group}/cgroup.procs" && exec "$0" -c "$1"'
        done = subprocess.run(["sh", "-c", shell, sys.executable, script],
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["0.5", "1", "0"]
    finally:
        group.rmdir()  # the child has exited: the group is empty
    outside = subprocess.run([sys.executable, "-c", "from procgrade.engine.cores import cgroup_cpu_quota;"
                              "print(cgroup_cpu_quota())"], capture_output=True, text=True, timeout=60)
    assert outside.stdout.split() == [str(cgroup_cpu_quota())]  # this test's own process: no quota added
