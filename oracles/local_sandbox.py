"""The ``local`` sandbox back-end: isolation with what a Linux host has, run as root.

One judgement gets (all verified on the development machine, see the tests):

- **its own file system corner**: a fresh folder holding a size-limited tmpfs
  (``nosuid,nodev``; the workspace's size plus :attr:`Limits.scratch_bytes`) with
  ``workspace/`` (the copy, owned by the sandbox user), ``tests/`` (created only at
  injection; root-owned, read-only to the tested code), ``report/junit.xml`` (a FIFO,
  see below), ``home/`` and ``tmp/`` (the user's ``HOME`` and ``TMPDIR``) and
  ``judge/`` (root only: output log, mount staging);
- **a dedicated unprivileged user**: a numeric uid picked per judgement from
  :data:`UID_RANGE` that no process uses and ``/etc/passwd`` does not name, so
  ``RLIMIT_NPROC`` (counted per real uid) bounds exactly this judgement's processes
  and no other file on the host belongs to it. ``setpriv`` drops every capability,
  clears the bounding set and sets ``no_new_privs`` (setuid programs cannot regain
  root). ``nobody`` is avoided on purpose: it owns the root file system's reserved
  blocks here (``resuid=65534``) and other software runs as it;
- **namespaces** (``unshare``): a network namespace with no interface up (every
  connection fails, loopback included, and abstract Unix sockets, which belong to the
  network namespace, are the sandbox's own), a PID namespace (the tested code sees only
  its own processes, and when its first process ends or the judge kills ``unshare``
  the kernel kills every process left in it, daemons included), an IPC namespace (the
  host's SysV shared memory, semaphores and message queues are invisible, and those the
  run makes go with it), a UTS namespace, and a mount namespace in which the run's
  **root is a fresh tmpfs** (``chroot``) holding only read-only binds of what the judge
  needs: ``/usr`` (and ``/bin``, ``/lib*``, ``/sbin`` as on the host), the judge
  interpreter's prefixes and library folders (a per-task virtualenv, a pyenv build under
  ``/root``; never a checkout an editable install points at), ``/etc/ld.so.cache`` and a
  generated ``/etc/passwd``, the device nodes ``null``, ``zero``, ``full``, ``random``,
  ``urandom``, a new ``/proc``, small empty private tmpfs on ``/dev/shm``, ``/tmp``,
  ``/var/tmp``, ``/run`` and ``/run/lock`` (no Unix socket of the host's services,
  PostgreSQL, MySQL, the Docker engine, exists there), and this sandbox's own folders
  bound back at their own paths. Nothing else of the host exists in it: no other
  checkout, no home folder, not the task package (its controls, reference code and
  sources);
- **a memory cgroup** for the whole run (every process together): cgroup v2 where its
  memory controller is available, else the v1 memory hierarchy (``details.memory`` says
  which, or that none could be made and only rlimits apply);
- **resource limits** (``setrlimit`` by ``prlimit`` just before ``setpriv``; no Python code
  runs between fork and exec, so judging from a threaded program is safe): ``RLIMIT_NPROC`` (fork bombs),
  ``RLIMIT_FSIZE`` (one file cannot fill the disk; the tmpfs bounds the sum),
  ``RLIMIT_AS`` (memory), ``RLIMIT_CPU``, ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` = 0;
- **a wall-clock limit**: on expiry the whole process group is killed (and with it
  the PID namespace), then any process still running as the sandbox uid.

The JUnit report goes through a FIFO the judge reads: the runner's ``open(path, "w")``
writes into a pipe, so every byte anyone writes to that path while the run lasts
reaches the judge in order. A report planted before pytest writes its own, or
rewritten after it (an ``atexit`` hook), arrives as a second document and makes the
report unreadable, never a pass. The tested code cannot read the FIFO, delete it or
create files beside it.

Not isolated (a known limit of this back-end): CPU time is not shared fairly (no CPU
controller is used), and the system folders bound into the root (``/usr``) are the host's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import marshal
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from procgrade.oracles.process_exit import wait_for_exit
from procgrade.oracles.sandbox import (
    BANNED_PROBE,
    RUNNER_PROBE,
    RUNNER_PROBE_PRINT,
    LoadedWorkspace,
    PolicyLines,
    RunOutcome,
    RunSpec,
    Sandbox,
    SandboxError,
    SandboxSession,
    copy_workspace,
)
from procgrade.oracles.task_package import SuiteFile, fill_template

__all__ = ["LocalSandbox", "Limits", "UID_RANGE", "isolation_available"]

#: Where sandbox uids come from: far above any uid a distribution hands out.
UID_RANGE = (1_600_000, 1_700_000)
SANDBOX_USER = "procgrade-sandbox"
MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    nproc: int = 256
    fsize_bytes: int = 256 * MiB
    address_space_bytes: int = 4 * GiB
    nofile: int = 1024
    #: Room on the sandbox's tmpfs beyond the copied workspace (bytes, and files).
    scratch_bytes: int = 512 * MiB
    scratch_inodes: int = 100_000
    #: Size of each private /dev/shm, /tmp, /var/tmp, /run, /run/lock.
    private_tmp_bytes: int = 64 * MiB
    #: The memory cgroup's limit for the whole run (every process together), where one can be made.
    memory_bytes: int = 2 * GiB
    #: RLIMIT_CPU = the wall-clock limit plus this (the wall clock normally ends a run first).
    cpu_margin_sec: int = 30
    #: Largest JUnit report read.
    report_bytes: int = 64 * MiB
    output_tail_bytes: int = 8192


# The shared probe, plus the interpreter's own paths (the sandbox binds them, read-only, into its
# fresh root): its prefixes and the library folders on sys.path (site-packages; not a checkout an
# editable install points at, which would show the tested code that checkout).
_PROBE = RUNNER_PROBE + r"""
prefixes = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)]
def library(p):
    real = os.path.realpath(p)
    return any(real == x or real.startswith(x + os.sep) for x in prefixes) or \
        os.path.basename(real) in ("site-packages", "dist-packages")
paths = [sys.executable, os.path.realpath(sys.executable)] + prefixes + [p for p in sys.path if p and library(p)]
report["paths"] = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})
""" + RUNNER_PROBE_PRINT

_PROBES: dict[str, dict[str, Any]] = {}
_PROBE_LOCK = threading.Lock()

#: The namespaces of a run: no network (abstract Unix sockets belong to the network namespace
#: too), its own mounts and processes, its own SysV IPC objects (gone with it) and host name.
_NAMESPACES = ("--net", "--mount", "--pid", "--ipc", "--uts")

#: Folders replaced by an empty private tmpfs in each run, in this order (``/dev/shm`` first: it
#: holds the keep points; ``/run`` before ``/run/lock``), with the tmpfs mode. A link among them
#: (``/var/run`` -> ``/run`` on Debian) is covered by its target.
_PRIVATE_DIRS = (("/dev/shm", "1777"), ("/tmp", "1777"), ("/var/tmp", "1777"), ("/run", "0755"),
                 ("/var/run", "0755"), ("/run/lock", "1777"), ("/var/lock", "1777"))
_ISOLATION: dict[str, Any] = {}
#: The system's program and library folders bound read-only into the fresh root (a link among
#: them, e.g. ``/bin -> usr/bin`` on merged-/usr systems, is made as the same link).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class _Cgroup:
    """One run's memory (and pids) cgroup: cgroup v2 where its memory controller is available
    to us, else the v1 memory hierarchy; ``None`` from :meth:`make` when neither is writable
    (the run is then bounded by rlimits only, and the verdict says so)."""

    def __init__(self, paths: list[str], procs: str, kind: str) -> None:
        self.paths, self.procs, self.kind = paths, procs, kind

    @staticmethod
    def _v2_root() -> str | None:
        for top in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            try:
                if "memory" in Path(top, "cgroup.controllers").read_text().split():
                    return top
            except OSError:
                continue
        return None

    @classmethod
    def make(cls, name: str, memory_bytes: int, pids: int) -> tuple["_Cgroup | None", str]:
        top = cls._v2_root()
        try:
            if top is not None:
                with contextlib.suppress(OSError):
                    Path(top, "cgroup.subtree_control").write_text("+memory +pids")
                path = Path(top, name)
                path.mkdir(mode=0o755)
                try:
                    (path / "memory.max").write_text(str(memory_bytes))
                    with contextlib.suppress(OSError):
                        (path / "memory.swap.max").write_text("0")
                    with contextlib.suppress(OSError):
                        (path / "pids.max").write_text(str(pids))
                except OSError:
                    path.rmdir()
                    raise
                return cls([str(path)], str(path / "cgroup.procs"), "v2"), f"cgroup v2 memory.max {memory_bytes}"
            v1 = Path("/sys/fs/cgroup/memory")
            if (v1 / "memory.limit_in_bytes").exists() or (v1 / "cgroup.procs").exists():
                path = v1 / name
                path.mkdir(mode=0o755)
                try:
                    (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    with contextlib.suppress(OSError):
                        (path / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                except OSError:
                    path.rmdir()
                    raise
                return cls([str(path)], str(path / "cgroup.procs"), "v1"), \
                    f"cgroup v1 memory.limit_in_bytes {memory_bytes} (no cgroup v2 memory controller here)"
        except OSError as exc:
            return None, f"none: cannot make a memory cgroup ({exc}); rlimits only"
        return None, "none: no writable memory cgroup; rlimits only"

    def remove(self) -> None:
        for path in self.paths:
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


_MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 2, 4, 32

#: The run's prelude: root, in the new namespaces, before anything of the submission runs. It
#: follows the plan (a list of steps the judge marshals into its root-only folder) with
#: ``mount(2)`` calls, one process for all of them, then execs the rest of its arguments
#: (``prlimit ... chroot <new root> setpriv ... /bin/sh -c <command>``). Any failure prints
#: ``procgrade sandbox: ...`` and exits 125 without writing the marker the judge checks.
#: Every judgement waits for it, so it imports only ``ctypes`` besides built-in modules: the plan
#: is read with ``marshal`` (the same interpreter wrote it) and ``mount`` found among the symbols
#: the interpreter already has loaded. With ``json`` and ``ctypes.util`` (which runs ``ldconfig``
#: to find libc) it took 19 ms a judgement, 8 ms without them.
_PRELUDE = r"""
import ctypes, marshal, os, sys
libc = ctypes.CDLL(None, use_errno=True)
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC = 1, 2, 4, 8, 32, 4096, 16384
def fail(what):
    sys.stderr.write("procgrade sandbox: %s\n" % what)
    sys.stderr.flush()
    os._exit(125)
def mount(src, dst, fstype, flags, data, what):
    if libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                  data and data.encode()) != 0:
        fail("%s: %s" % (what, os.strerror(ctypes.get_errno())))
def place(path, folder):
    try:
        os.makedirs(path if folder else os.path.dirname(path), mode=0o755, exist_ok=True)
        if not folder and not os.path.lexists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except OSError as exc:
        fail("place %s: %s" % (path, exc))
os.umask(0o022)
with open(sys.argv[1], "rb") as handle:
    plan = marshal.load(handle)
for step in plan:
    kind = step[0]
    if kind == "cgroup":  # not fatal: the run is then bounded by its rlimits, and the judge says so
        try:
            with open(step[1], "w") as handle:
                handle.write(str(os.getpid()))
        except OSError as exc:
            with open(step[2], "w") as handle:
                handle.write(str(exc))
    elif kind == "tmpfs":
        place(step[1], True)
        flags = NOSUID | (NODEV if step[3] else 0) | (RDONLY if len(step) > 4 and step[4] else 0)
        mount("procgrade-sandbox", step[1], "tmpfs", flags, step[2], "tmpfs " + step[1])
    elif kind == "bind":
        src, dst, ro, nodev, folder = step[1:]
        place(dst, folder)
        mount(src, dst, None, BIND | REC, None, "bind " + src)
        if ro:
            mount(None, dst, None, REMOUNT | BIND | RDONLY | NOSUID | (NODEV if nodev else 0), None, "read-only " + src)
    elif kind == "symlink":
        try:
            os.makedirs(os.path.dirname(step[2]), exist_ok=True)
            os.symlink(step[1], step[2])
        except OSError as exc:
            fail("link %s: %s" % (step[2], exc))
    elif kind == "write":
        try:
            os.makedirs(os.path.dirname(step[1]), exist_ok=True)
            with open(step[1], "w") as handle:
                handle.write(step[2])
        except OSError as exc:
            fail("write %s: %s" % (step[1], exc))
    elif kind == "proc":
        place(step[1], True)
        mount("proc", step[1], "proc", NOSUID | NODEV | NOEXEC, None, "proc")
    elif kind == "marker":
        open(step[1], "w").close()
sys.stdout.flush()
os.execv(sys.argv[2], sys.argv[2:])
"""
_MNT_DETACH = 2
_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        import ctypes
        import ctypes.util

        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _LIBC


def _sys_mount(source: str, target: str, fstype: str, flags: int, data: str) -> None:
    """mount(2) from the judge itself (a ``mount`` process per call costs milliseconds)."""
    import ctypes

    if _libc().mount(source.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(flags), data.encode()) != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"mount {fstype} on {target} ({data}): {os.strerror(err)}")


def _sys_umount(target: str) -> bool:
    libc = _libc()
    if libc.umount2(target.encode(), 0) == 0:
        return True
    return libc.umount2(target.encode(), _MNT_DETACH) == 0


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    env.update(extra or {})
    return env


def _probe_interpreter(python: str) -> dict[str, Any]:
    """What the judge interpreter loads to run pytest, and the folders it needs (cached)."""
    with _PROBE_LOCK:
        if python in _PROBES:
            return _PROBES[python]
        with tempfile.TemporaryDirectory(prefix="procgrade-probe-cwd-") as cwd:
            try:
                done = subprocess.run([python, "-c", _PROBE], cwd=cwd, capture_output=True, text=True, timeout=120,
                                      env=_clean_env({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1",
                                                      "HOME": cwd, "TMPDIR": cwd}))
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SandboxError(f"cannot run the judge interpreter {python}: {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise SandboxError(f"the judge interpreter {python} cannot run pytest: {' | '.join(tail)}")
        info = json.loads(done.stdout.strip().splitlines()[-1])
        info["paths"] = sorted(set(info["paths"]) | set(_link_chain(python)))
        _PROBES[python] = info
        return info


_BANNED: dict[tuple[str, tuple[str, ...]], dict[str, list[str]]] = {}


def _banned_locations(python: str, modules: tuple[str, ...]) -> dict[str, list[str]]:
    """Where these modules are installed for ``python`` (cached)."""
    key = (python, modules)
    with _PROBE_LOCK:
        if key not in _BANNED:
            try:
                done = subprocess.run([python, "-I", "-c", BANNED_PROBE, *modules], capture_output=True, text=True,
                                      timeout=60, env=_clean_env())
                _BANNED[key] = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
            except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
                raise SandboxError(f"cannot locate the banned modules with {python}") from None
        return _BANNED[key]


def _link_chain(path: str) -> list[str]:
    """``path`` and every link target on the way to the real file (all must be reachable)."""
    seen = [os.path.abspath(path)]
    current = seen[0]
    for _ in range(40):
        if not os.path.islink(current):
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
        seen.append(current)
    return [os.path.realpath(os.path.dirname(p)) for p in seen] + [os.path.realpath(path)]


def isolation_available() -> tuple[bool, str]:
    """Whether this host can isolate a run (root, unshare with net/mount/pid/ipc/uts namespaces,
    setpriv, mount); the reason when not. Checked once per process."""
    if "ok" in _ISOLATION:
        return _ISOLATION["ok"], _ISOLATION["why"]
    ok, why = True, "root; unshare --net --mount --pid --ipc --uts; setpriv; tmpfs"
    tools = {name: shutil.which(name, path=_clean_env()["PATH"])
             for name in ("unshare", "setpriv", "mount", "umount", "prlimit", "chroot")}
    missing = [name for name, where in tools.items() if where is None]
    if os.geteuid() != 0:
        ok, why = False, "the local back-end isolates with a dedicated uid and namespaces, which needs root"
    elif missing:
        ok, why = False, f"missing tools: {', '.join(missing)} (util-linux)"
    else:
        try:
            done = subprocess.run([tools["unshare"], *_NAMESPACES, "--fork", "--kill-child", "--mount-proc",
                                   "--", "/bin/sh", "-c", "true"], capture_output=True, text=True, timeout=60,
                                  env=_clean_env())
            if done.returncode != 0:
                ok, why = False, f"unshare (net, mount, pid, ipc, uts namespaces) fails here: {done.stderr.strip()}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, why = False, f"unshare fails here: {exc}"
    _ISOLATION.update(ok=ok, why=why, tools=tools)
    return ok, why


def _uid_in_use(uid: int) -> bool:
    try:
        import pwd

        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    return bool(_pids_of_uid(uid))


def _pids_of_uid(uid: int) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as handle:
                for line in handle:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(name))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _kill_uid(uid: int, deadline_sec: float = 20.0) -> int:
    """SIGKILL every process whose real uid is ``uid`` until none is left; how many were seen."""
    killed: set[int] = set()
    end = time.monotonic() + deadline_sec
    while True:
        pids = _pids_of_uid(uid)
        if not pids:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        if time.monotonic() > end:
            raise SandboxError(f"processes of sandbox uid {uid} survive SIGKILL: {pids[:10]}")
        time.sleep(0.05)


def _reachable_by_others(path: Path) -> bool:
    for part in [path, *path.parents]:
        try:
            if not os.stat(part).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _outermost(paths: Sequence[str]) -> list[str]:
    """``paths`` without those lying under another one of them (sorted)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(_under(path, k) for k in kept):
            kept.append(path)
    return kept


class LocalSandbox(Sandbox):
    """The local back-end (see the module documentation)."""

    backend = "local"

    def __init__(self, python: str | None = None, *, limits: Limits | None = None, base_dir: str | Path | None = None,
                 isolate: bool = True, packages: Sequence[str | Path] = ()) -> None:
        #: The judge interpreter (default: procgrade's own); a task with its own judge
        #: environment gets a virtualenv made from it (:mod:`procgrade.oracles.judge_env`).
        self.python = python or sys.executable
        self.limits = limits or Limits()
        self.base_dir = Path(base_dir or tempfile.gettempdir()).resolve()
        self.isolate = isolate
        self.packages = tuple(str(Path(p).resolve()) for p in packages)

    def environment(self, env: Any) -> Any:
        """The built :class:`~procgrade.oracles.judge_env.JudgeEnv` (a cached virtualenv) for ``env``."""
        from procgrade.oracles.judge_env import EnvBuildError, EnvSpec, ensure_local_env

        spec = EnvSpec(tuple(env.requirements), tuple(env.packages) + self.packages)
        try:
            return ensure_local_env(spec, self.python)
        except EnvBuildError as exc:
            raise SandboxError(f"judge environment: {exc}") from None

    @contextlib.contextmanager
    def session(self, env: Any = None) -> Iterator["LocalSession"]:
        if self.isolate:
            ok, why = isolation_available()
            if not ok:
                raise SandboxError(f"local sandbox unavailable: {why}")
            if not _reachable_by_others(self.base_dir):
                raise SandboxError(f"the sandbox base folder {self.base_dir} is not reachable by an unprivileged user")
        built = self.environment(env) if env is not None else None
        session = LocalSession(self, built.python if built is not None else self.python)
        if built is not None:
            session._details["judge_env"] = built.describe()
        try:
            yield session
        finally:
            session.close()


class LocalSession(SandboxSession):
    def __init__(self, owner: LocalSandbox, python: str | None = None) -> None:
        self.owner = owner
        self.python = python or owner.python
        self.cgroup: _Cgroup | None = None
        self._masks: list[str] = []
        self.limits = owner.limits
        self.isolate = owner.isolate
        self.tools: dict[str, str] = _ISOLATION.get("tools") or {
            name: shutil.which(name, path=_clean_env()["PATH"]) or name for name in ("umount", "prlimit")}
        self.root = Path(tempfile.mkdtemp(prefix="procgrade-sandbox-", dir=owner.base_dir))
        self.mounted = False
        self._swept = False
        self.uid: int | None = None
        self.workspace: Path | None = None
        self.tests: Path | None = None
        self._details: dict[str, Any] = {"backend": "local", "isolated": self.isolate, "root": str(self.root)}
        try:
            os.chmod(self.root, 0o711)
            if self.isolate:
                self._mount_root()
                self.uid = self._pick_uid()
                self.cgroup, memory = _Cgroup.make(f"procgrade-sandbox-{self.uid}-{os.getpid()}",
                                                   self.limits.memory_bytes, self.limits.nproc)
                self._details.update(uid=self.uid, network="none (network namespace)", pid_namespace=True,
                                     limits=asdict(self.limits), memory=memory)
            else:
                self._details.update(uid=os.geteuid(), network="host", pid_namespace=False,
                                     limits={k: v for k, v in asdict(self.limits).items() if k != "nproc"})
            (self.root / "judge").mkdir(mode=0o700)
            self._shared_dir(self.root / "report")
        except BaseException:
            self.close()
            raise

    # --- setup ---------------------------------------------------------------------------------

    def _mount_root(self) -> None:
        _sys_mount("procgrade-sandbox", str(self.root), "tmpfs", _MS_NOSUID | _MS_NODEV, "size=50%,mode=0711")
        self.mounted = True

    def _pick_uid(self) -> int:
        rng = random.SystemRandom()
        for _ in range(200):
            uid = rng.randrange(*UID_RANGE)
            if not _uid_in_use(uid):
                return uid
        raise SandboxError(f"no free sandbox uid in {UID_RANGE}")

    def _chown_tree(self, top: Path) -> None:
        uid = self.uid
        assert uid is not None
        os.lchown(top, uid, uid)
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), uid, uid)

    def _shared_dir(self, path: Path) -> None:
        """A root-owned folder the sandbox user may read but not change (and no one else may read:
        another judgement's sandbox user must not see this one's tests)."""
        path.mkdir(mode=0o700, exist_ok=True)
        if self.uid is not None:
            os.chown(path, 0, self.uid)
            os.chmod(path, 0o750)
        else:
            os.chmod(path, 0o755)

    def _private_dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(mode=0o700)
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)
        return path

    # --- the interface -------------------------------------------------------------------------

    @property
    def details(self) -> dict[str, Any]:
        return dict(self._details)

    def load_workspace(self, source: Path) -> LoadedWorkspace:
        source = Path(source).resolve()
        if not source.is_dir():
            raise SandboxError(f"the workspace {source} is not a folder")
        dest = self.root / "workspace"
        dest.mkdir(mode=0o755)
        try:
            loaded = copy_workspace(source, dest)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise SandboxError(f"the workspace does not fit the sandbox: {exc}") from None
            raise SandboxError(f"cannot copy the workspace: {exc}") from None
        if self.mounted:  # from now on: what the copy uses, plus the scratch room
            st = os.statvfs(self.root)
            size = (st.f_blocks - st.f_bfree) * st.f_frsize + self.limits.scratch_bytes
            inodes = (st.f_files - st.f_ffree) + self.limits.scratch_inodes
            _sys_mount("procgrade-sandbox", str(self.root), "tmpfs", _MS_REMOUNT | _MS_NOSUID | _MS_NODEV,
                       f"size={size},nr_inodes={inodes},mode=0711")
            self._details.update(disk_bytes=size, disk_inodes=inodes)
        if self.uid is not None:
            self._chown_tree(dest)
            os.chmod(dest, 0o700)
        self.workspace = dest
        return loaded

    def runner_modules(self) -> frozenset[str]:
        info = _probe_interpreter(self.python)
        self._details.update(python=info.get("version"), pytest=info.get("pytest"), interpreter=self.python)
        return frozenset(info["modules"])

    def mask_modules(self, modules: Sequence[str]) -> dict[str, list[str]]:
        if not self.isolate or not modules:
            return {}
        runner = set(_probe_interpreter(self.python)["modules"])
        modules = tuple(m for m in modules if m not in runner)
        if not modules:
            return {}
        found = _banned_locations(self.python, modules)
        self._masks = sorted({p for paths in found.values() for p in paths})
        return found

    def inject_tests(self, files: Sequence[SuiteFile]) -> None:
        tests = self.root / "tests"
        self._shared_dir(tests)
        for f in files:
            target = tests / f.name
            for parent in reversed(target.relative_to(tests).parents[:-1]):
                self._shared_dir(tests / parent)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(f.data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            if self.uid is not None:
                os.chown(target, 0, self.uid)
                os.chmod(target, 0o640)
            else:
                os.chmod(target, 0o644)
        self.tests = tests

    def run_tests(self, spec: RunSpec) -> RunOutcome:
        if self.workspace is None or self.tests is None:
            raise SandboxError("run_tests before load_workspace and inject_tests")
        home, tmp = self._private_dir("home"), self._private_dir("tmp")
        fifo = self.root / "report" / "junit.xml"
        os.mkfifo(fifo, 0o600)
        if self.uid is not None:  # root reads; the sandbox user may only write
            os.chown(fifo, 0, self.uid)
            os.chmod(fifo, 0o620)
        else:
            os.chmod(fifo, 0o622)
        command = fill_template(spec.command_template, {
            "workspace": str(self.workspace), "test_dir": str(self.tests),
            "test_files": [str(self.tests / f) for f in spec.test_files],
            "junit_xml": str(fifo), "python": self.python,
        })
        workdir = spec.workdir_template.replace("{workspace}", str(self.workspace))
        env = _clean_env({"HOME": str(home), "TMPDIR": str(tmp), "USER": SANDBOX_USER, "LOGNAME": SANDBOX_USER})
        if self.isolate:
            argv = self._isolated_argv(spec, workdir, command)
            cwd = "/"
        else:
            argv = [*self._prlimit(spec.timeout_sec), "/bin/sh", "-c", command]
            cwd = workdir
        reader = _FifoReader(fifo, self.limits.report_bytes)
        log_path = self.root / "judge" / "output.log"
        timed_out = False
        started = time.monotonic()
        try:
            with open(log_path, "wb") as log:
                try:
                    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                except OSError as exc:
                    raise SandboxError(f"cannot start the test command: {exc}") from None
                if not wait_for_exit(proc, spec.timeout_sec):
                    timed_out = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                duration_ms = int((time.monotonic() - started) * 1000)
                stragglers = _kill_uid(self.uid) if self.uid is not None else 0
                self._swept = True
                if not self.isolate:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
        finally:
            report, report_problem = reader.finish()
        if self.isolate and not (self.root / "judge" / "prelude.ok").exists() and not timed_out:
            raise SandboxError("the sandbox could not be set up: " + _tail(log_path, 2000).strip())
        failed = self.root / "judge" / "cgroup.failed"
        if failed.exists():
            self._details["memory"] = f"none: could not join the memory cgroup ({_tail(failed, 300)}); rlimits only"
        return RunOutcome(exit_code=proc.returncode, timed_out=timed_out, duration_ms=duration_ms, report=report,
                          report_problem=report_problem, output_tail=_tail(log_path, self.limits.output_tail_bytes),
                          command=command, stragglers_killed=stragglers, policy_events=_policy_events(log_path))

    # --- isolation -------------------------------------------------------------------------------

    def _prlimit(self, timeout_sec: float) -> list[str]:
        """``prlimit`` options (setrlimit before exec; no Python runs between fork and exec)."""
        limits = self.limits
        cpu = int(timeout_sec) + limits.cpu_margin_sec
        options = [f"--fsize={limits.fsize_bytes}:{limits.fsize_bytes}",
                   f"--as={limits.address_space_bytes}:{limits.address_space_bytes}",
                   f"--nofile={limits.nofile}:{limits.nofile}", "--core=0:0", f"--cpu={cpu}:{cpu + 5}"]
        if self.isolate:  # counted per real uid: only meaningful for the dedicated uid
            options.insert(0, f"--nproc={limits.nproc}:{limits.nproc}")
        return [self.tools["prlimit"], *options, "--"]

    def _isolated_argv(self, spec: RunSpec, workdir: str, command: str) -> list[str]:
        """The run's command line: ``unshare`` into new namespaces, a prelude (root, in the new
        mount namespace: one Python process making the mounts with ``mount(2)``, see
        :data:`_PRELUDE`) that joins the memory cgroup and builds a fresh root, then
        ``chroot`` and ``setpriv`` down to the sandbox uid.

        The fresh root is a small tmpfs holding only read-only binds of what the judge needs:
        the system's program and library folders (``/usr``, and ``/bin``, ``/lib*``, ``/sbin``
        as on the host), the judge interpreter's prefixes and library folders (a per-task
        virtualenv, a pyenv build under ``/root``...), ``/etc/ld.so.cache`` and a generated
        ``/etc/passwd``; device nodes ``null``, ``zero``, ``full``, ``random``, ``urandom``;
        a new ``/proc``; private tmpfs ``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run``,
        ``/run/lock``; and this sandbox's own folders (workspace and home read-write for the
        sandbox user, tests read-only, the report FIFO). Nothing else of the host exists there:
        no other checkout, no home folder, no host socket, not the task package."""
        root = str(self.root)
        info = _probe_interpreter(self.python)
        system = [top for top in _SYSTEM_DIRS if os.path.lexists(top)]
        needed = _outermost([p for p in info["paths"] if not any(_under(p, top) for top in system
                                                                  if not os.path.islink(top))])
        new = str(self.root / "judge" / "newroot")
        size = self.limits.private_tmp_bytes
        plan: list[list[Any]] = []
        mounts: dict[str, str] = {}

        def bind(src: str, ro: bool = True, nodev: bool = True) -> None:
            plan.append(["bind", src, new + src, ro, nodev, os.path.isdir(src)])

        if self.cgroup is not None:
            plan.append(["cgroup", self.cgroup.procs, str(self.root / "judge" / "cgroup.failed")])
        plan.append(["tmpfs", new, "size=16m,mode=0755", False])
        for top in system:
            if os.path.islink(top):
                plan.append(["symlink", os.readlink(top), new + top])
            else:
                bind(top, nodev=False)
        mounts["/"] = ("fresh tmpfs root; read-only: " + ", ".join(t for t in system if not os.path.islink(t))
                       + (", " + ", ".join(needed) if needed else ""))

        # private temporary and runtime folders, then what lives under them (the sandbox root,
        # an interpreter living in /tmp) bound back at its own path.
        for name, mode in _PRIVATE_DIRS:
            if name in ("/var/run", "/var/lock", "/dev/shm"):
                continue
            plan.append(["tmpfs", new + name, f"size={size},mode={mode}", True])
        plan += [["symlink", "/run", new + "/var/run"], ["symlink", "/run/lock", new + "/var/lock"]]
        for name, _ in _PRIVATE_DIRS:
            if name in ("/var/run", "/var/lock"):
                continue
            real = os.path.realpath(name)
            kept = [p for p in [root, *needed] if _under(p, name) or (real != name and _under(p, real))]
            mounts[name] = f"private tmpfs {size}" + (f", keeping {', '.join(kept)}" if kept else "")
        for path in needed:
            bind(path)
        for path in self._masks:  # banned modules installed in the judge environment
            if os.path.isdir(path):
                plan.append(["tmpfs", new + path, "size=4k,mode=0755", True, True])
            else:
                plan.append(["bind", "/dev/null", new + path, True, True, False])
            mounts[path] = "masked (a banned module)"
        for f in ("/etc/ld.so.cache", "/etc/localtime"):
            if os.path.isfile(f):
                plan.append(["bind", os.path.realpath(f), new + f, True, True, False])
        uid = self.uid
        plan.append(["write", new + "/etc/passwd", f"root:x:0:0:root:/root:/usr/sbin/nologin\n{SANDBOX_USER}:x:{uid}:"
                     f"{uid}:procgrade sandbox:/nonexistent:/usr/sbin/nologin\n"])
        plan.append(["write", new + "/etc/group", f"root:x:0:\n{SANDBOX_USER}:x:{uid}:\n"])
        plan.append(["tmpfs", new + "/dev", "size=64k,mode=0755", False])
        for dev in ("null", "zero", "full", "random", "urandom"):
            plan.append(["bind", f"/dev/{dev}", f"{new}/dev/{dev}", False, False, False])
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                             ("stderr", "/proc/self/fd/2")):
            plan.append(["symlink", target, f"{new}/dev/{name}"])
        plan.append(["tmpfs", new + "/dev/shm", f"size={size},mode=1777", True])
        plan.append(["proc", new + "/proc"])

        # this sandbox's folders: the workspace and home read-write, the tests read-only
        for sub, ro in (("workspace", False), ("tests", True), ("report", False), ("home", False), ("tmp", False)):
            if (self.root / sub).exists():
                bind(f"{root}/{sub}", ro=ro)
        for hidden in spec.hide:  # the task package: in no bound folder unless the interpreter holds it
            real = os.path.realpath(hidden)
            if not any(_under(real, p) for p in [*needed, *system]):
                mounts[real] = "hidden"
        self._details["mounts"] = mounts
        self._details["root_fs"] = "fresh tmpfs root (chroot), read-only binds of the system and interpreter folders"
        plan.append(["marker", str(self.root / "judge" / "prelude.ok")])
        plan_path = self.root / "judge" / "plan.marshal"
        plan_path.write_bytes(marshal.dumps(plan))

        tail = [*self._prlimit(spec.timeout_sec), self.tools["chroot"], new, self.tools["setpriv"], f"--reuid={uid}",
                f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
                "/bin/sh", "-c", 'cd "$1" || exit 126; exec /bin/sh -c "$2"', SANDBOX_USER, workdir, command]
        return [self.tools["unshare"], *_NAMESPACES, "--fork", "--kill-child", "--mount-proc",
                "--propagation", "private", "--", sys.executable, "-I", "-S", "-c", _PRELUDE, str(plan_path), *tail]

    # --- teardown --------------------------------------------------------------------------------

    def close(self) -> None:
        if self.uid is not None and not self._swept:
            with contextlib.suppress(SandboxError):
                _kill_uid(self.uid)
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.mounted:
            if not _sys_umount(str(self.root)):
                subprocess.run([self.tools["umount"], "-l", str(self.root)], capture_output=True, env=_clean_env())
            self.mounted = False
        shutil.rmtree(self.root, ignore_errors=True)


def _policy_events(path: Path) -> list[dict[str, Any]]:
    """The launcher's ``procgrade-policy`` lines in the run's whole output."""
    lines = PolicyLines()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                lines.feed(block)
    except OSError:
        pass
    return lines.finish()


def _tail(path: Path, size: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            handle.seek(max(0, end - size))
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return text.replace("\x00", "")


class _FifoReader:
    """Reads everything written to the report FIFO while the run lasts.

    The judge holds a write end itself so the reader never sees end-of-file between
    two writers (pytest's write, then anyone else's): it sees one stream of every
    byte, and end-of-file only after :meth:`finish`, when the sandbox is dead.
    """

    def __init__(self, fifo: Path, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.read_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.write_fd = os.open(fifo, os.O_WRONLY)
        flags = fcntl.fcntl(self.read_fd, fcntl.F_GETFL)
        fcntl.fcntl(self.read_fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        self.thread = threading.Thread(target=self._run, name="procgrade-junit-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                block = os.read(self.read_fd, 1 << 16)
            except OSError:
                return
            if not block:
                return
            if self.size + len(block) > self.limit:
                self.overflow = True
                continue  # keep draining so no writer blocks
            self.chunks.append(block)
            self.size += len(block)

    def finish(self) -> tuple[bytes | None, str | None]:
        os.close(self.write_fd)
        self.thread.join(timeout=30)
        alive = self.thread.is_alive()
        if not alive:
            os.close(self.read_fd)
        if alive:
            return None, "the report channel was still held open after the run"
        if self.overflow:
            return None, f"the report is larger than {self.limit} bytes"
        data = b"".join(self.chunks)
        return (data or None), None
