"""The ``docker`` sandbox back-end: one fresh container per judgement (Zero2Repo's judge).

Each session gets, from the judge image (:mod:`procgrade.oracles.judge_image`: Debian bookworm
minbase, Python 3.11, pytest >= 8, user ``judge`` uid 10001):

- **a fresh container**, removed with its volumes when the session ends (always):
  ``network_mode="none"`` (loopback only: no route anywhere), read-only root file
  system, ``cap_drop=["ALL"]`` plus ``CAP_KILL`` for the root supervisor below (the judge
  user's processes have no capability at all: non-root and ``no-new-privileges``),
  ``init`` (reaps orphans), ``mem_limit`` = ``memswap_limit`` (no swap), ``pids_limit``
  (fork bombs), ``nano_cpus`` (a CPU share), ``ulimits`` (open files, no core dumps), a
  private IPC namespace with a small ``/dev/shm``, and no host path mounted: the tested
  code sees nothing of the host (the task package, the repository, other judgements);
- **the workspace at** ``/app`` on a per-session tmpfs-backed volume (``size`` = the
  workspace's pages plus :attr:`DockerLimits.scratch_bytes`, ``nr_inodes`` bounded), owned
  by ``judge``: the tested code may write there and nowhere else but ``/tmp`` (a
  size-limited tmpfs, also ``HOME``), so it cannot fill the host's disk;
- **the hidden tests at** ``/judge/tests``: copied in (``put_archive``) only by
  :meth:`DockerSession.inject_tests`, after the judge's scan, owned by root, folders 0555
  and files 0444, on the session's ``/judge`` volume where ``judge`` can create nothing;
- **the report channel** ``/judge/report/junit.xml``: a FIFO made by the container's main
  process, a root *supervisor*, which reads every byte written to it into ``/judge/out/``
  (root only), holding a write end itself so that two writers (pytest's report and a
  planted or rewritten one) arrive as one stream of two documents (unreadable, never a
  pass). The tested code can write into the FIFO but cannot read it, remove it or reach
  ``/judge/out``; the workspace cannot pre-seed it (it is copied to ``/app`` only).

The run: the test command runs as ``judge`` (``docker exec``) with a wall-clock limit.
When it ends or the limit passes, the judge sends the supervisor SIGUSR1 (through
``docker kill``: no process has to start, so a fork bomb holding every pid cannot
prevent it); the supervisor SIGKILLs every other process (``kill(-1)``; counted as
stragglers), reads the channel to its end, prints its status (the container's log,
which only it writes to) and exits, which stops the container. The report is then
fetched with ``get_archive`` from the stopped container. If the container does not stop in time, it is killed and
the report discarded (``report_problem``).

Back-end failures (engine unreachable, image missing and not buildable, API errors)
raise :class:`~procgrade.oracles.sandbox.SandboxError`: an infrastructure error, never a verdict.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import shutil
import tarfile
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from procgrade.oracles.judge_image import (
    IMAGE_PYTHON,
    JUDGE_UID,
    JUDGE_USER,
    ImageBuildError,
    docker_client,
    ensure_image,
)
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

__all__ = ["DockerSandbox", "DockerSession", "DockerLimits", "WORKSPACE", "TEST_DIR", "REPORT_PATH", "LABEL",
           "leftovers", "remove_leftovers", "engine_available"]

MiB = 1 << 20
GiB = 1 << 30
PAGE = 4096
#: Type bits of Go's os.FileMode (directory, symlink, device, pipe, socket, ...) in a stat from the engine.
_GO_TYPE_BITS = 0xFF000000

#: Paths inside the container.
WORKSPACE = "/app"
JUDGE_DIR = "/judge"
TEST_DIR = "/judge/tests"
REPORT_PATH = "/judge/report/junit.xml"
OUT_DIR = "/judge/out"
HOME = "/tmp"
#: Label on every container and volume this back-end makes (value: the session token).
LABEL = "procgrade.sandbox"

_USER = f"{JUDGE_UID}:{JUDGE_UID}"
_ROOT = "0:0"
_SAYS = "procgrade-supervisor "
_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
        "HOME": HOME, "TMPDIR": HOME, "USER": JUDGE_USER, "LOGNAME": JUDGE_USER}


@dataclass(frozen=True)
class DockerLimits:
    memory_bytes: int = 2 * GiB
    cpus: float = 1.0
    pids: int = 256
    nofile: int = 1024
    #: Room on the workspace's tmpfs beyond the copied files; and its extra inodes.
    scratch_bytes: int = 512 * MiB
    scratch_inodes: int = 100_000
    #: /tmp (also HOME) and /dev/shm.
    tmp_bytes: int = 256 * MiB
    shm_bytes: int = 64 * MiB
    #: Largest JUnit report read.
    report_bytes: int = 64 * MiB
    output_tail_bytes: int = 8192
    #: Time allowed to each clean-up step (killing stragglers, finishing the reader).
    cleanup_sec: float = 20.0


# --- scripts run inside the container -----------------------------------------------------------

#: The container's main process (root, under ``init``, holding only CAP_KILL). It makes the
#: report FIFO and holds both ends (a write end of its own, so the reader sees no end-of-file
#: between two writers), copies every byte written to it into OUT_DIR (up to the limit),
#: and on SIGUSR1 (``docker kill -s SIGUSR1``: no new process is needed, so a fork bomb
#: holding every pid cannot stop it) SIGKILLs every other process of the container, drops
#: its write end, drains to end-of-file, prints its status and exits, which stops the
#: container. Its standard output (the container's log) is written by it alone.
_SUPERVISOR = r"""
import json, os, signal, sys, time
fifo, out, limit, grace = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
me = os.getpid()
killed = set()
def others():
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            pids.append(int(name))
    return pids
wfd = []
def finish(*_):
    end = time.monotonic() + grace
    while True:
        pids = others()
        if not pids or time.monotonic() > end:
            break
        killed.update(pids)
        try:
            os.kill(-1, signal.SIGKILL)  # every process of the namespace but init and this one
        except OSError:
            pass
        time.sleep(0.005)
    if wfd:
        os.close(wfd.pop())
signal.signal(signal.SIGUSR1, finish)
os.mkfifo(fifo, 0o600)
os.chmod(fifo, 0o622)
rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
wfd.append(os.open(fifo, os.O_WRONLY))
os.set_blocking(rfd, True)
data = os.open(os.path.join(out, "junit.xml"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
print("procgrade-supervisor ready", flush=True)
size, overflow = 0, False
while True:
    block = os.read(rfd, 1 << 16)
    if not block:
        break
    if size + len(block) > limit:
        overflow = True
        continue
    view = memoryview(block)
    while view:
        view = view[os.write(data, view):]
    size += len(block)
os.fsync(data)
os.close(data)
status = {"bytes": size, "overflow": overflow, "killed": len(killed), "survivors": len(others())}
print("procgrade-supervisor status " + json.dumps(status), flush=True)
"""

#: As the judge user: what the runner loads (top-level third-party modules) when it runs a test.
_PROBE = RUNNER_PROBE + RUNNER_PROBE_PRINT

_PROBES: dict[tuple[str, str], dict[str, Any]] = {}
_PROBE_LOCK = threading.Lock()
_BANNED: dict[tuple[str, str, tuple[str, ...]], dict[str, list[str]]] = {}


# --- helpers ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _api(what: str) -> Iterator[None]:
    """Docker SDK and transport failures become :class:`SandboxError` (infrastructure)."""
    import docker
    import requests

    try:
        yield
    except SandboxError:
        raise
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        raise SandboxError(f"docker: {what}: {exc.__class__.__name__}: {exc}") from None


def engine_available(client: Any | None = None) -> tuple[bool, str]:
    """Whether the Docker engine answers; the reason when not."""
    try:
        client = client or docker_client(timeout=10)
        version = client.version()
    except ImageBuildError as exc:
        return False, str(exc)
    except Exception as exc:  # noqa: BLE001
        return False, f"{exc.__class__.__name__}: {exc}"
    return True, f"Docker engine {version.get('Version')} (API {version.get('ApiVersion')})"


def leftovers(client: Any, label: str = LABEL) -> tuple[list[Any], list[Any]]:
    """Containers and volumes this back-end made that still exist (``label``: ``KEY`` or
    ``KEY=VALUE``, default every one)."""
    flt = {"label": label}
    return client.containers.list(all=True, filters=flt), client.volumes.list(filters=flt)


def remove_leftovers(client: Any) -> int:
    """Remove every container and volume this back-end left (a crashed judge); how many."""
    containers, volumes = leftovers(client)
    for c in containers:
        with contextlib.suppress(Exception):
            c.remove(force=True, v=True)
    for v in volumes:
        with contextlib.suppress(Exception):
            v.remove(force=True)
    return len(containers) + len(volumes)


def _pages(n: int) -> int:
    return -(-n // PAGE) * PAGE


def _workspace_tar(root: Path, out: Any) -> tuple[int, int]:
    """Write ``root``'s tree (the judged copy) as a tar owned by the judge user into ``out``;
    return (tmpfs bytes it needs, entries)."""
    need, entries = 0, 0

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        nonlocal need, entries
        info.uid = info.gid = JUDGE_UID
        info.uname = info.gname = JUDGE_USER
        entries += 1
        need += _pages(info.size) + PAGE
        return info

    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(os.listdir(root)):
            tar.add(str(root / name), arcname=name, recursive=True, filter=owned)
    return need, entries


def _suite_tar(files: Sequence[SuiteFile]) -> bytes:
    buf = io.BytesIO()
    now = int(time.time())
    dirs = {"tests"}
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add_dir(name: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, 0o555, 0, 0, now
            tar.addfile(info)

        add_dir("tests")
        for f in files:
            parts = f.name.split("/")
            if f.name.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise SandboxError(f"a suite file name must be a relative path inside the tests folder: {f.name!r}")
            for depth in range(1, len(parts)):
                d = "tests/" + "/".join(parts[:depth])
                if d not in dirs:
                    dirs.add(d)
                    add_dir(d)
            info = tarfile.TarInfo("tests/" + f.name)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(f.data), 0o444, 0, 0, now
            tar.addfile(info, io.BytesIO(f.data))
    return buf.getvalue()


class _Tail:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.error: BaseException | None = None
        self.policy = PolicyLines()

    def add(self, chunk: bytes) -> None:
        self.policy.feed(chunk)
        self.buf += chunk
        if len(self.buf) > 2 * self.limit:
            del self.buf[:-self.limit]

    def text(self) -> str:
        return bytes(self.buf[-self.limit:]).decode("utf-8", "replace").replace("\x00", "")


# --- the back-end --------------------------------------------------------------------------------------


class DockerSandbox(Sandbox):
    """The docker back-end (see the module documentation).

    ``image``: the judge image's tag (default: :func:`procgrade.oracles.judge_image.ensure_image`,
    which builds it when missing unless ``build_image`` is false). A task with its own
    judge environment (:mod:`procgrade.oracles.judge_env`) is judged in an image layered on it
    (built once, with the engine's network off, and cached by its pins); ``packages`` are
    local packages added to every such layer.
    """

    backend = "docker"

    def __init__(self, image: str | None = None, *, limits: DockerLimits | None = None, client: Any | None = None,
                 build_image: bool = True, labels: dict[str, str] | None = None,
                 packages: Sequence[str | Path] = ()) -> None:
        self.packages = tuple(str(Path(p).resolve()) for p in packages)
        self.limits = limits or DockerLimits()
        #: Extra labels on every container and volume (e.g. who made them, to find leftovers).
        self.labels = dict(labels or {})
        self._image = image
        self._client = client
        self.build_image = build_image
        self._lock = threading.Lock()

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    self._client = docker_client()
                except ImageBuildError as exc:
                    raise SandboxError(str(exc)) from None
            return self._client

    def image(self) -> str:
        client = self.client()
        with self._lock:
            if self._image is None:
                try:
                    with _api("find the judge image"):
                        self._image = ensure_image(client, build=self.build_image)
                except ImageBuildError as exc:
                    raise SandboxError(f"judge image: {exc}") from None
            return self._image

    def environment(self, env: Any) -> Any:
        """The built :class:`~procgrade.oracles.judge_env.JudgeEnv` (an image layer) for ``env``."""
        from procgrade.oracles.judge_env import EnvBuildError, EnvSpec, ensure_env_image

        spec = EnvSpec(tuple(env.requirements), tuple(env.packages) + self.packages)
        try:
            with _api("build the task's judge environment"):
                return ensure_env_image(self.client(), self.image(), spec)
        except EnvBuildError as exc:
            raise SandboxError(f"judge environment: {exc}") from None

    @contextlib.contextmanager
    def session(self, env: Any = None) -> Iterator[DockerSession]:
        if env is None:
            session = DockerSession(self, self.client(), self.image())
        else:
            built = self.environment(env)
            session = DockerSession(self, self.client(), built.name, python=built.python)
            session._details["judge_env"] = built.describe()
        try:
            yield session
        finally:
            session.close()

    def banned_locations(self, image: str, python: str, modules: tuple[str, ...]) -> dict[str, list[str]]:
        """Where these modules are installed in the image (cached per image id, interpreter, names)."""
        client = self.client()
        with _api("inspect the judge image"):
            image_id = client.images.get(image).id
        key = (image_id, python, modules)
        with _PROBE_LOCK:
            if key not in _BANNED:
                with _api("locate the banned modules"):
                    out = client.containers.run(
                        image_id, [python, "-I", "-c", BANNED_PROBE, *modules], user=_USER, environment=_ENV,
                        network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
                        remove=True, stdout=True, stderr=False, labels={**self.labels, LABEL: "probe"})
                try:
                    _BANNED[key] = json.loads(out.decode().strip().splitlines()[-1])
                except (ValueError, IndexError):
                    raise SandboxError(f"cannot locate the banned modules in {image}: {out[-300:]!r}") from None
            return _BANNED[key]

    def probe(self, image: str | None = None, python: str = IMAGE_PYTHON) -> dict[str, Any]:
        """What the image's interpreter loads to run pytest (cached per image id and interpreter)."""
        client, tag = self.client(), image or self.image()
        with _api("inspect the judge image"):
            image_id = client.images.get(tag).id
        with _PROBE_LOCK:
            if (image_id, python) in _PROBES:
                return _PROBES[(image_id, python)]
            with _api("probe the judge image"):
                out = client.containers.run(
                    image_id, [python, "-c", _PROBE], user=_USER, environment=_ENV, network_mode="none",
                    read_only=True, tmpfs={HOME: f"rw,nosuid,nodev,size={64 * MiB},mode=1777"}, cap_drop=["ALL"],
                    security_opt=["no-new-privileges"], remove=True, stdout=True, stderr=False,
                    labels={**self.labels, LABEL: "probe"})
            try:
                info = json.loads(out.decode().strip().splitlines()[-1])
            except (ValueError, IndexError):
                raise SandboxError(f"the judge image {tag} cannot run pytest: {out[-500:]!r}") from None
            _PROBES[(image_id, python)] = info
            return info


class DockerSession(SandboxSession):
    def __init__(self, owner: DockerSandbox, client: Any, image: str, python: str = IMAGE_PYTHON) -> None:
        self.owner, self.client, self.image, self.python = owner, client, image, python
        self._masks: list[str] = []
        self.limits = owner.limits
        self.token = secrets.token_hex(6)
        self.host_dir = Path(tempfile.mkdtemp(prefix="procgrade-docker-"))
        os.chmod(self.host_dir, 0o700)
        self.container: Any = None
        self.volume: Any = None
        self.loaded: LoadedWorkspace | None = None
        self.injected = False
        self.ran = False
        lim = self.limits
        self._details: dict[str, Any] = {
            "backend": "docker", "image": image, "user": f"{JUDGE_USER} ({_USER})", "network": "none",
            "read_only_rootfs": True, "cap_drop": ["ALL"], "cap_add": ["KILL (root's supervisor only: the judge user has none)"],
            "security_opt": ["no-new-privileges"], "init": True,
            "mounts": {WORKSPACE: "workspace: tmpfs volume owned by the judge user",
                       JUDGE_DIR: "volume: tests (root, 0555/0444), report FIFO, reader output (root only)",
                       HOME: f"tmpfs {lim.tmp_bytes}",
                       "host": "nothing mounted: the task package and the repository are not visible"},
            "limits": asdict(lim),
        }

    # --- the interface -----------------------------------------------------------------------------

    @property
    def details(self) -> dict[str, Any]:
        return dict(self._details)

    def runner_modules(self) -> frozenset[str]:
        info = self.owner.probe(self.image, self.python)
        self._details.update(python=info.get("version"), pytest=info.get("pytest"))
        return frozenset(info["modules"])

    def load_workspace(self, source: Path) -> LoadedWorkspace:
        if self.loaded is not None:
            raise SandboxError("load_workspace called twice in one session")
        source = Path(source).resolve()
        if not source.is_dir():
            raise SandboxError(f"the workspace {source} is not a folder")
        dest = self.host_dir / "workspace"
        dest.mkdir(mode=0o755)
        loaded = copy_workspace(source, dest)  # the judged bytes: scanned on the host, sent as they are
        lim = self.limits
        with tempfile.SpooledTemporaryFile(max_size=32 * MiB, dir=self.host_dir) as archive:
            need, entries = _workspace_tar(dest, archive)
            size = need + PAGE + lim.scratch_bytes
            inodes = entries + 16 + lim.scratch_inodes
            self._start_container(size, inodes)
            archive.seek(0)
            with _api("copy the workspace in"):
                if not self.container.put_archive(WORKSPACE, archive):
                    raise SandboxError("docker: copying the workspace in was refused")
        self._details.update(disk_bytes=size, inodes=inodes)
        self.loaded = loaded
        return loaded

    def mask_modules(self, modules: Sequence[str]) -> dict[str, list[str]]:
        """Banned packages installed in the image get an empty read-only tmpfs over their folder
        (a single-file module is left to the launcher's in-process ban and not listed)."""
        if self.container is not None:
            raise SandboxError("mask_modules after load_workspace")
        if not modules:
            return {}
        runner = set(self.owner.probe(self.image, self.python)["modules"])
        modules = tuple(m for m in modules if m not in runner)
        if not modules:
            return {}
        found = self.owner.banned_locations(self.image, self.python, modules)
        kept = {m: [p for p in paths if not p.endswith(".py")] for m, paths in found.items()}
        kept = {m: paths for m, paths in kept.items() if paths}
        self._masks = sorted({p for paths in kept.values() for p in paths})
        self._details["mounts"] = {**self._details["mounts"],
                                   **{p: "masked (a banned module): empty read-only tmpfs" for p in self._masks}}
        return kept

    def inject_tests(self, files: Sequence[SuiteFile]) -> None:
        if self.loaded is None or self.container is None:
            raise SandboxError("inject_tests before load_workspace")
        if self.injected:
            raise SandboxError("inject_tests called twice in one session")
        data = _suite_tar(files)
        with _api("inject the tests"):
            if not self.container.put_archive(JUDGE_DIR, data):
                raise SandboxError("docker: injecting the tests was refused")
        self.injected = True

    def run_tests(self, spec: RunSpec) -> RunOutcome:
        if self.container is None or not self.injected:
            raise SandboxError("run_tests before load_workspace and inject_tests")
        if self.ran:
            raise SandboxError("one run per session: open a new session")
        self.ran = True
        lim = self.limits
        api = self.client.api
        command = fill_template(spec.command_template, {
            "workspace": WORKSPACE, "test_dir": TEST_DIR,
            "test_files": [f"{TEST_DIR}/{f}" for f in spec.test_files],
            "junit_xml": REPORT_PATH, "python": self.python,
        })
        workdir = spec.workdir_template.replace("{workspace}", WORKSPACE)
        self._wait_ready()

        with _api("start the test command"):
            exec_id = api.exec_create(
                self.container.id, ["/bin/sh", "-c", 'cd "$1" || exit 126; exec /bin/sh -c "$2"', JUDGE_USER,
                                    workdir, command],
                user=_USER, environment=_ENV, stdout=True, stderr=True, stdin=False, tty=False)["Id"]
        tail = _Tail(lim.output_tail_bytes)
        started = time.monotonic()
        with _api("start the test command"):
            stream = api.exec_start(exec_id, stream=True)
        with contextlib.suppress(Exception):  # a quiet test must not hit the client's read timeout
            api._disable_socket_timeout(api._get_raw_response_socket(stream._response))
        thread = threading.Thread(target=self._drain, args=(stream, tail), name="procgrade-docker-output",
                                  daemon=True)
        thread.start()
        timed_out = self._wait_exit(exec_id, thread, started + spec.timeout_sec)
        duration_ms = int((time.monotonic() - started) * 1000)

        # The supervisor kills every other process (the command itself on a timeout), drains
        # the report channel, prints its status and exits: the container stops.
        problem = self._stop_supervisor()
        thread.join(lim.cleanup_sec)
        exit_code = self._exit_code(exec_id)
        status = self._read_status() if problem is None else None
        report, report_problem = None, problem
        if status is not None:
            if status.get("survivors"):
                report_problem = f"{status['survivors']} processes of the sandbox survived SIGKILL"
            elif status.get("overflow"):
                report_problem = f"the report is larger than {lim.report_bytes} bytes"
            elif status.get("bytes"):
                report = self._fetch(f"{OUT_DIR}/junit.xml", int(status["bytes"]))
        elif report_problem is None:
            report_problem = "the sandbox's report channel gave no status (its supervisor ended early)"
        return RunOutcome(exit_code=exit_code, timed_out=timed_out, duration_ms=duration_ms, report=report,
                          report_problem=report_problem, output_tail=tail.text(), command=command,
                          stragglers_killed=int(status.get("killed", 0)) if status else 0,
                          policy_events=tail.policy.finish())

    # --- steps ----------------------------------------------------------------------------------------

    def _start_container(self, size: int, inodes: int) -> None:
        from docker.types import LogConfig, Mount, Ulimit

        lim = self.limits
        labels = {**self.owner.labels, LABEL: self.token}
        name = f"procgrade-judge-{self.token}"
        with _api("create the workspace volume"):
            self.volume = self.client.volumes.create(
                f"{name}-workspace", driver="local", labels=labels,
                driver_opts={"type": "tmpfs", "device": "tmpfs",
                             "o": f"size={size},nr_inodes={inodes},uid={JUDGE_UID},gid={JUDGE_UID},mode=0755,"
                                  "nosuid,nodev"})
        with _api("create the container"):
            self.container = self.client.containers.create(
                self.image, [IMAGE_PYTHON, "-c", _SUPERVISOR, REPORT_PATH, OUT_DIR, str(lim.report_bytes),
                             str(lim.cleanup_sec)], name=name, labels=labels, hostname="judge", user=_ROOT,
                init=True, detach=True, network_mode="none", read_only=True, working_dir="/",
                environment={k: v for k, v in _ENV.items() if k in ("PATH", "LANG")},
                mounts=[Mount(WORKSPACE, self.volume.name, type="volume"), Mount(JUDGE_DIR, None, type="volume")],
                tmpfs={HOME: f"rw,nosuid,nodev,size={lim.tmp_bytes},mode=1777",
                       **{path: "ro,nosuid,nodev,size=4k,mode=0755" for path in self._masks}},
                log_config=LogConfig(type="json-file", config={"max-size": "1m"}),
                cap_drop=["ALL"], cap_add=["KILL"], security_opt=["no-new-privileges"], ipc_mode="private",
                shm_size=lim.shm_bytes,
                mem_limit=lim.memory_bytes, memswap_limit=lim.memory_bytes, pids_limit=lim.pids,
                nano_cpus=int(lim.cpus * 1e9),
                ulimits=[Ulimit(name="nofile", soft=lim.nofile, hard=lim.nofile), Ulimit(name="core", soft=0, hard=0)],
            )
        self._details["container"] = self.container.id[:12]
        with _api("start the container"):
            self.container.start()

    def _supervisor_said(self, word: str) -> str | None:
        """The last line the supervisor printed starting with ``word``, without it."""
        with _api("read the supervisor's log"):
            log = self.container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        lines = [line[len(_SAYS + word):].strip() for line in log.splitlines() if line.startswith(_SAYS + word)]
        return lines[-1] if lines else None

    def _wait_ready(self) -> None:
        end = time.monotonic() + self.limits.cleanup_sec
        while self._supervisor_said("ready") is None:
            with _api("inspect the container"):
                self.container.reload()
            if self.container.status != "running" or time.monotonic() > end:
                with _api("read the container's log"):
                    log = self.container.logs(tail=20).decode("utf-8", "replace").strip()[-500:]
                raise SandboxError(f"docker: the sandbox's supervisor did not start ({self.container.status}): {log}")
            time.sleep(0.01)

    def _wait_exit(self, exec_id: str, thread: threading.Thread, deadline: float) -> bool:
        """Wait for the test command's process to end; True when the deadline came first. The
        engine decides: the output stream can end before the process (it closed its output)
        or after it (a daemon it left behind holds the output open)."""
        poll = 0.02
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            if thread.is_alive():
                thread.join(min(poll, remaining))
            else:
                time.sleep(min(poll, remaining))
            with _api("inspect the test command"):
                if not self.client.api.exec_inspect(exec_id).get("Running"):
                    return False
            poll = min(poll * 1.5, 0.25)

    @staticmethod
    def _drain(stream: Any, tail: _Tail) -> None:
        try:
            for chunk in stream:
                tail.add(chunk)
        except Exception as exc:  # noqa: BLE001 - the container was stopped under the stream
            tail.error = exc

    def _stop_supervisor(self) -> str | None:
        """Signal the supervisor and wait for the container to stop; a problem when it does not."""
        import docker

        with _api("stop the sandbox"):
            try:
                self.container.kill(signal="SIGUSR1")
            except docker.errors.APIError as exc:
                if "is not running" not in str(exc):
                    raise
                return "the sandbox's supervisor ended during the run; the report was discarded"
            try:
                self.container.wait(timeout=self.limits.cleanup_sec + 10)
                return None
            except Exception:  # noqa: BLE001 - requests' ReadTimeout / ConnectionError
                pass
            self._kill_container()
            return "the report channel was still held open after the run"

    def _exit_code(self, exec_id: str) -> int | None:
        with _api("inspect the test command"):
            info = self.client.api.exec_inspect(exec_id)
        return None if info.get("Running") else info.get("ExitCode")

    def _kill_container(self) -> None:
        import docker

        with _api("kill the container"):
            try:
                self.container.kill()
            except docker.errors.APIError as exc:
                if "is not running" not in str(exc):
                    raise
            self.container.wait(timeout=60)

    def _read_status(self) -> dict[str, Any] | None:
        said = self._supervisor_said("status")
        if said is None:
            return None
        try:
            return json.loads(said)
        except ValueError:
            raise SandboxError(f"docker: the supervisor's status is not JSON: {said[:200]!r}") from None

    def _fetch(self, path: str, size: int | None) -> bytes:
        """One regular file from the (stopped) container, of ``size`` bytes when given."""
        import docker

        try:
            chunks, info = self.container.get_archive(path)
        except docker.errors.NotFound as exc:
            raise SandboxError(f"docker: {path} is missing") from exc
        except Exception as exc:  # noqa: BLE001
            raise SandboxError(f"docker: fetch {path}: {exc.__class__.__name__}: {exc}") from None
        limit = (size if size is not None else 1 * MiB)
        if int(info.get("mode", 0)) & _GO_TYPE_BITS or info.get("linkTarget") or int(info.get("size", -1)) > limit \
                or (size is not None and info.get("size") != size):
            raise SandboxError(f"docker: {path} is not what the supervisor wrote ({info})")
        buf = io.BytesIO()
        with _api(f"fetch {path}"):
            for chunk in chunks:
                buf.write(chunk)
                if buf.tell() > limit + 64 * 1024:
                    raise SandboxError(f"docker: the archive of {path} is larger than the file")
        buf.seek(0)
        with tarfile.open(fileobj=buf, mode="r:") as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member is not None and member.isfile() else None
            if handle is None:
                raise SandboxError(f"docker: the archive of {path} holds no file")
            data = handle.read()
        if size is not None and len(data) != size:
            raise SandboxError(f"docker: fetched {len(data)} bytes of {path}, expected {size}")
        return data

    # --- teardown -------------------------------------------------------------------------------------

    def close(self) -> None:
        problems = []
        if self.container is not None:
            try:
                self.container.remove(force=True, v=True)
            except Exception as exc:  # noqa: BLE001
                if "No such container" not in str(exc):
                    problems.append(f"container {self.container.id[:12]}: {exc}")
            self.container = None
        if self.volume is not None:
            for attempt in range(20):
                try:
                    self.volume.remove(force=True)
                    break
                except Exception as exc:  # noqa: BLE001
                    if "no such volume" in str(exc).lower():
                        break
                    if attempt == 19:
                        problems.append(f"volume {self.volume.name}: {exc}")
                    time.sleep(0.1)
            self.volume = None
        shutil.rmtree(self.host_dir, ignore_errors=True)
        if problems:
            warnings.warn("procgrade docker sandbox left behind: " + "; ".join(problems), RuntimeWarning, stacklevel=2)
