"""Where procgrade's embarrassingly parallel work runs: one interface, two engines.

Scoring, score verification and archive verification are maps of a pure function over
chunks of runs. An :class:`Executor` runs such a map and hands the results back **in
task order**, whatever order workers finish in, so the caller (the one writer) stores
the same bytes whatever the partitioning, worker count or failures. Two executors:

* :class:`LocalExecutor` (default): the calling process (``workers=1``) or a process
  pool on this machine; workers die with their parent (``PR_SET_PDEATHSIG`` on Linux).
* :class:`RayExecutor`: a Ray cluster (``pip install 'procgrade[ray]'``; ``address``
  ``auto`` joins the cluster started with ``ray start``, ``ray://HOST:PORT`` a remote
  one through Ray Client, ``local`` starts one in this process). Ray is imported only
  here, only when chosen. A worker killed mid-task is retried (``max_retries``); the
  retried task's result is the only one the driver ever sees, so nothing is written twice.

Extension point: any further map (``judge`` over many runs, importing many files) is a
module-level function of picklable arguments returning a picklable result, submitted
through :meth:`Executor.map` with a weight per task for the progress bar.
"""

from __future__ import annotations

import os
import signal
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from procgrade.engine.errors import InputError, ProcgradeError

__all__ = ["Executor", "LocalExecutor", "RayExecutor", "make_executor", "EXECUTORS", "plan_chunks",
           "WORKER_MIN_EVENTS", "worker_min_events"]

EXECUTORS = ("local", "ray")
#: Smallest work per task, in events: at ~200-500k events/s a task costs >= ~100 ms, so
#: scheduling overhead (pickling, Ray's ~1 ms per task) stays a small fraction.
MIN_TASK_EVENTS = 50_000
#: Largest work per task (~1 s): the progress bar moves often and a lost task costs little.
MAX_TASK_EVENTS = 250_000

#: Least work, in events scored, for which a local pool's workers pay for their start-up. A spawned
#: worker imports the scoring modules and opens the store before its first task: about 0.5 s of
#: CPU each (0.35 s imports, 0.17 s the first open_store), and with the re-import of the driver's
#: main module more. The second core saves half of ~5 us an event, so two workers break even near
#: 200k events on an idle machine (and never on a loaded one: 200k events took 3.7 s wall with
#: two workers, 2.4 s with one). Below this, ``--workers N`` scores in the calling process.
WORKER_MIN_EVENTS = 500_000

Task = tuple[Any, ...]


def worker_min_events() -> int:
    """:data:`WORKER_MIN_EVENTS`, or ``PROCGRADE_WORKER_MIN_EVENTS`` when set (tests that need
    real workers on small inputs set it to 0)."""
    given = os.environ.get("PROCGRADE_WORKER_MIN_EVENTS", "").strip()
    if not given:
        return WORKER_MIN_EVENTS
    try:
        value = int(given)
    except ValueError:
        raise InputError("environment", None, "PROCGRADE_WORKER_MIN_EVENTS",
                         f"must be a whole number of events, got {given!r}") from None
    if value < 0:
        raise InputError("environment", None, "PROCGRADE_WORKER_MIN_EVENTS", f"must be at least 0, got {value}")
    return value


def plan_chunks(items: Sequence[Any], weights: Sequence[int], workers: int, *,
                min_weight: int | None = None, per_worker: int = 4) -> list[list[Any]]:
    """Consecutive chunks of ``items`` (order kept), each of weight >= ``min_weight`` where
    possible, and about ``per_worker`` chunks per worker so a slow chunk does not stall the end."""
    total = sum(weights)
    low = MIN_TASK_EVENTS if min_weight is None else min_weight
    target = max(low, min(MAX_TASK_EVENTS, -(-total // max(1, workers * per_worker))))
    chunks: list[list[Any]] = []
    current: list[Any] = []
    weight = 0
    for item, w in zip(items, weights):
        current.append(item)
        weight += w
        if weight >= target:
            chunks.append(current)
            current, weight = [], 0
    if current:
        chunks.append(current)
    return chunks


class Executor(ABC):
    """Runs ``fn(*task)`` for every task; yields the results in task order."""

    name: str = ""
    workers: int = 1

    @abstractmethod
    def map(self, fn: Callable[..., Any], tasks: Sequence[Task], *, weights: Sequence[int] | None = None,
            on_done: Callable[[int], None] | None = None) -> Iterator[Any]:
        """``on_done(weight)`` is called in the driver as each task finishes (any order)."""

    def for_events(self, events: int) -> "Executor":
        """The executor to run ``events`` events' worth of work on: this one, or the calling
        process when the work is too small to pay for starting workers (see :class:`LocalExecutor`)."""
        return self

    def close(self) -> None:
        """Release the workers (idempotent)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise InputError("command line", None, "--workers", f"must be at least 1, got {workers}")
        self.workers = workers
        self._pool: Any = None

    def for_events(self, events: int) -> Executor:
        """Work under :func:`worker_min_events` events runs in this process: starting the pool
        would cost more than the other cores save (a pool already started is used)."""
        if self.workers > 1 and self._pool is None and events < worker_min_events():
            return LocalExecutor(1)
        return self

    def map(self, fn: Callable[..., Any], tasks: Sequence[Task], *, weights: Sequence[int] | None = None,
            on_done: Callable[[int], None] | None = None) -> Iterator[Any]:
        weights = list(weights) if weights is not None else [1] * len(tasks)
        if self.workers == 1 or len(tasks) < 2:
            for task, weight in zip(tasks, weights):
                result = fn(*task)
                if on_done is not None:
                    on_done(weight)
                yield result
            return
        from concurrent.futures import FIRST_COMPLETED, wait

        from procgrade.engine.interrupts import interrupts_blocked

        # Workers are started by these submits: they are born with Ctrl-C blocked and then ignore it
        # (their initializer), so only the driver answers it (by shutting the pool down).
        with interrupts_blocked():
            pool = self._ensure_pool()
            futures = [pool.submit(fn, *task) for task in tasks]
        index = {future: i for i, future in enumerate(futures)}
        pending = set(futures)
        done_results: dict[int, Any] = {}
        following = 0
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    i = index[future]
                    done_results[i] = future.result()
                    if on_done is not None:
                        on_done(weights[i])
                while following in done_results:
                    yield done_results.pop(following)
                    following += 1
        finally:
            for future in pending:
                future.cancel()

    def _ensure_pool(self) -> Any:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawn: workers never inherit the driver's threads (rich's refresher) mid-lock, and
            # their parent is the driver itself, so PR_SET_PDEATHSIG ends them with it (a
            # forkserver outlives a driver killed with SIGKILL, and so would its workers).
            self._pool = ProcessPoolExecutor(max_workers=self.workers,
                                             mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_worker_init)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _worker_init() -> None:
    """A pool worker dies with the driver and leaves Ctrl-C to it."""
    from procgrade.engine.interrupts import worker_ignores_interrupts

    _die_with_parent()
    worker_ignores_interrupts()


def _die_with_parent() -> None:
    """In a pool worker: be SIGKILLed when the driver dies, never left running under PID 1
    holding the driver's output."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() == 1:
        os._exit(1)


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, address: str = "auto", *, max_retries: int = 3,
                 init_options: dict[str, Any] | None = None) -> None:
        self.ray = _import_ray()
        self.max_retries = max_retries
        self._started = False
        if not self.ray.is_initialized():
            options = dict(init_options or {})
            options.setdefault("logging_level", "ERROR")
            options.setdefault("log_to_driver", False)
            try:
                self.ray.init(address=address, **options)  # "local": always a new cluster, never a found one
            except ConnectionError as exc:
                raise ProcgradeError(f"no Ray cluster at {address}: start one with `ray start --head` "
                                     f"(or use --address local): {exc}") from exc
            self._started = True
        self.workers = max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def map(self, fn: Callable[..., Any], tasks: Sequence[Task], *, weights: Sequence[int] | None = None,
            on_done: Callable[[int], None] | None = None) -> Iterator[Any]:
        ray = self.ray
        weights = list(weights) if weights is not None else [1] * len(tasks)
        remote = ray.remote(num_cpus=1, max_retries=self.max_retries, retry_exceptions=False)(
            self._task_function(fn))
        refs = [remote.remote(*task) for task in tasks]
        index = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        done_results: dict[int, Any] = {}
        following = 0
        try:
            while pending:
                finished, pending = ray.wait(pending, num_returns=1)
                for ref in finished:
                    i = index[ref]
                    try:
                        done_results[i] = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        cause = exc.as_instanceof_cause()
                        if isinstance(cause, ProcgradeError):
                            raise cause from None
                        raise ProcgradeError(f"task {i} of {len(tasks)} failed on the Ray cluster: {exc}") from exc
                    except ray.exceptions.RayError as exc:
                        raise ProcgradeError(f"task {i} of {len(tasks)} failed on the Ray cluster after "
                                             f"{self.max_retries} retries: {exc}") from exc
                    if on_done is not None:
                        on_done(weights[i])
                while following in done_results:
                    yield done_results.pop(following)
                    following += 1
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def _task_function(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """The function Ray runs for ``fn`` (tests wrap it to kill a worker mid-task)."""
        return fn

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ProcgradeError("the Ray executor needs Ray: pip install 'procgrade[ray]'") from exc
    return ray


def make_executor(kind: str = "local", *, workers: int = 1, address: str | None = None,
                  max_retries: int = 3) -> Executor:
    """The executor a command line names (``--executor``, ``--workers``, ``--address``)."""
    if kind == "local":
        if address is not None:
            raise InputError("command line", None, "--address", "is for --executor ray")
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(address or "auto", max_retries=max_retries)
    raise InputError("command line", None, "--executor", f"unknown executor {kind!r}: one of {', '.join(EXECUTORS)}")
