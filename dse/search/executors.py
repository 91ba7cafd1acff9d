"""Executors: run chunks of points through `evaluate_chunk` and yield results as chunks complete.

    with make_executor("ray", ctx, evaluate_point, workers=None, address=None) as ex:
        tickets = [ex.submit(chunk) for chunk in chunks]  # workers start at once
        for ticket, results in ex.completed():            # completion order
            ...

- `serial`: in the driver (tests, debugging).
- `process`: `concurrent.futures.ProcessPoolExecutor` with the spawn context; a pool broken by a lost
  worker is rebuilt and its unfinished chunks resubmitted (up to `max_retries` times).
- `ray`: one remote task per chunk, `max_retries` for lost workers (Ray retries system failures, not
  application errors, which `evaluate_chunk` catches per point anyway). Connects to an existing cluster
  when `address` is given or RAY_ADDRESS is set, else starts a local instance with all CPUs, no
  dashboard, and worker logs kept out of the driver's terminal. Clusters started by `ray start` (Ray >=
  2.59) use token authentication: a driver joining by address needs RAY_AUTH_MODE=token and the token
  (~/.ray/auth_token or RAY_AUTH_TOKEN). Cluster workers must be able to import `dse` (and any custom
  evaluator's module).

One task = one chunk of tens to hundreds of points: Ray tasks of one 1-ms point are slower than serial
(reference/search-notes.md section 2.1).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from types import TracebackType
from typing import Any

from dse.errors import SearchError
from dse.search._imports import RAY_HINT, try_import
from dse.search.objective import EvalContext, Evaluator, evaluate_chunk

logger = logging.getLogger(__name__)

Chunk = Sequence[dict[str, Any]]
ChunkResult = list[dict[str, Any]]


class Executor:
    """Interface: `submit(chunk)` returns a ticket; `completed()` yields `(ticket, results)` for every chunk
    submitted so far, as they finish, and returns when none is outstanding; `close()` releases workers."""

    kind = "base"
    workers = 1

    def submit(self, chunk: Chunk) -> int:
        raise NotImplementedError

    def completed(self) -> Iterator[tuple[int, ChunkResult]]:
        raise NotImplementedError

    def map_chunks(self, chunks: Sequence[Chunk]) -> Iterator[tuple[int, ChunkResult]]:
        """Submit all chunks; yield `(index, results)` in completion order."""
        tickets = {self.submit(chunk): i for i, chunk in enumerate(chunks)}
        for ticket, result in self.completed():
            yield tickets[ticket], result

    def close(self) -> None:
        """Release workers."""

    def abort(self) -> None:
        """Stop at once (a Ctrl-C): the chunks in flight are dropped, not waited for (they are not in the
        log; `--resume` evaluates them again)."""
        self.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class SerialExecutor(Executor):
    """Evaluates in the driver, in submission order, when results are asked for."""

    kind = "serial"

    def __init__(self, ctx: EvalContext, evaluator: Evaluator) -> None:
        self._ctx, self._evaluator = ctx, evaluator
        self._queue: list[tuple[int, Chunk]] = []
        self._next = 0

    def submit(self, chunk: Chunk) -> int:
        self._next += 1
        self._queue.append((self._next, chunk))
        return self._next

    def completed(self) -> Iterator[tuple[int, ChunkResult]]:
        while self._queue:
            ticket, chunk = self._queue.pop(0)
            yield ticket, evaluate_chunk(chunk, self._ctx, self._evaluator)


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group: the parent stops the run and the pool, a worker's
    # KeyboardInterrupt would only print a traceback (dse.search.interrupts).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # One numerical thread per worker process: the workers already fill the cores.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    # A parent killed outright (SIGKILL, the OOM killer) cannot stop the pool: its workers, waiting on the
    # call queue, would idle under init forever. Each leaves once it is reparented.
    parent = os.getppid()
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _exit_when_orphaned(parent_pid: int, poll_s: float = 1.0) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    os._exit(0)


def _warm_up(evaluator: Evaluator, delay_s: float) -> int:
    time.sleep(delay_s)  # hold this worker so that the next warm-up task needs another one
    return os.getpid()


class ProcessExecutor(Executor):
    """A spawn-context process pool; a pool broken by a dead worker is rebuilt and its chunks resubmitted."""

    kind = "process"

    def __init__(
        self, ctx: EvalContext, evaluator: Evaluator, *, workers: int | None, max_retries: int = 2
    ) -> None:
        self._ctx, self._evaluator = ctx, evaluator
        self.workers = workers or os.cpu_count() or 1
        self._max_retries = max_retries
        self._pool: ProcessPoolExecutor | None = None
        self._chunks: dict[int, Chunk] = {}
        self._futures: dict[Future, int] = {}
        self._next = 0
        self._broken = False

    def _submit_future(self, ticket: int) -> None:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=get_context("spawn"), initializer=_worker_init
            )
            # NOTE: with spawn, the pool starts a worker only when a task finds none idle, and counts
            # finished tasks as idle workers; a trickle of chunks then runs on one process. Submitting one
            # warm-up task per worker back to back starts them all (and imports the evaluator there).
            delay_s, pids = 0.05, set[int]()
            while len(pids) < self.workers and delay_s < 2.0:
                warm = [self._pool.submit(_warm_up, self._evaluator, delay_s) for _ in range(self.workers)]
                pids = {f.result() for f in warm}
                delay_s *= 2
        fut = self._pool.submit(evaluate_chunk, self._chunks[ticket], self._ctx, self._evaluator)
        self._futures[fut] = ticket

    def submit(self, chunk: Chunk) -> int:
        self._next += 1
        self._chunks[self._next] = chunk
        if not self._broken:
            try:
                self._submit_future(self._next)
            except BrokenProcessPool:  # a worker died since the last submit: resubmitted in completed()
                self._broken = True
        return self._next

    def _restart(self, retries: int) -> None:
        if retries > self._max_retries:
            raise SearchError(f"worker processes died {retries} times in one batch; giving up")
        logger.warning(
            "a worker process died; restarting the pool (retry %d of %d)", retries, self._max_retries
        )
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        self._futures.clear()
        self._broken = False
        try:
            for ticket in sorted(self._chunks):
                self._submit_future(ticket)
        except BrokenProcessPool:
            self._broken = True

    def completed(self) -> Iterator[tuple[int, ChunkResult]]:
        retries = 0
        while self._chunks:
            if self._broken or not self._futures:
                retries += 1
                self._restart(retries)
                continue
            done, _ = wait(self._futures, return_when=FIRST_COMPLETED)
            for fut in done:
                ticket = self._futures.pop(fut)
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    self._broken = True
                    continue
                del self._chunks[ticket]
                yield ticket, result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        # workers ignore Ctrl-C (`_worker_init`): a chunk of slow points would hold the stop for minutes
        if self._pool is not None:
            processes = getattr(self._pool, "_processes", None) or {}
            for proc in list(processes.values()):
                with contextlib.suppress(OSError, AttributeError):
                    proc.terminate()
        self.close()


# A loopback port nothing listens on (discard): an HTTP proxy there fails at once, on this machine.
CLOSED_LOCAL_PROXY = "http://127.0.0.1:9"
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
_RAY_CLUSTER_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextlib.contextmanager
def _local_ray_env(*, local: bool) -> Iterator[None]:
    """The environment the processes of a local Ray instance start with (they inherit it, the driver gets
    its own back afterwards).

    - PYTHONPATH: the driver's import path, so workers import the evaluator by module path (a runtime_env
      would cost seconds per worker).
    - HTTP(S)_PROXY at a closed loopback port: Ray's dashboard process asks cloud metadata servers
      (169.254.169.254, metadata.google.internal) which cloud it runs on even with usage statistics off
      (`usage_lib.get_cluster_config_to_report`); through this proxy those requests fail locally, with no
      DNS query and no packet leaving the machine. dse's evaluators make no HTTP requests.
    """
    if not local:
        yield
        return
    saved = {
        k: os.environ.get(k) for k in ("PYTHONPATH", "NO_PROXY", "no_proxy", _RAY_CLUSTER_VAR, *_PROXY_VARS)
    }
    # Ray finds "this node's address" by connecting a UDP socket towards 8.8.8.8 unless clusters are off
    # (its Windows/macOS setting): off, it answers 127.0.0.1. Children read the variable, the driver's
    # copy of the constant is switched for the start (`--address` runs keep Ray's behaviour).
    os.environ[_RAY_CLUSTER_VAR] = "0"
    import ray._private.ray_constants as ray_constants

    cluster_flag = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    if cluster_flag is not None:
        ray_constants.ENABLE_RAY_CLUSTER = False
    old_path = saved["PYTHONPATH"]
    paths = [p for p in sys.path if p] + (old_path.split(os.pathsep) if old_path else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    for var in _PROXY_VARS:
        os.environ[var] = CLOSED_LOCAL_PROXY
    for var in ("NO_PROXY", "no_proxy"):  # gRPC honours the proxy too: Ray's own traffic stays direct
        os.environ[var] = "127.0.0.1,localhost,::1"
    try:
        yield
    finally:
        if cluster_flag is not None:
            ray_constants.ENABLE_RAY_CLUSTER = cluster_flag
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


with try_import(RAY_HINT) as _ray_imports:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ImportError("No module named 'ray'", name="ray")


def _ray_chunk(chunk: Chunk, ctx: EvalContext, evaluator: Evaluator) -> ChunkResult:
    return evaluate_chunk(chunk, ctx, evaluator)


LOCAL_HOST = "127.0.0.1"


class RayExecutor(Executor):
    """One Ray task per chunk on a local instance (started here) or an existing cluster."""

    kind = "ray"

    def __init__(
        self,
        ctx: EvalContext,
        evaluator: Evaluator,
        *,
        workers: int | None,
        address: str | None,
        max_retries: int = 3,
    ) -> None:
        _ray_imports.check()
        import ray

        self._ray = ray
        self._started = False
        address = address or os.environ.get("RAY_ADDRESS") or None
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "logging_level": logging.ERROR,  # keep the CLI quiet (e.g. the token-auth notice)
            }
            if address:
                _check_reachable(address)
                kwargs["address"] = address
            else:
                # "local": a new instance even when `ray start` left a cluster address on this machine.
                kwargs["address"] = "local"
                kwargs["num_cpus"] = workers or os.cpu_count() or 1
                kwargs["object_store_memory"] = 256 * 2**20
                # Local-only: every Ray process binds 127.0.0.1 (no interface lookup through an outside
                # address), and no usage report (whose cloud-provider detection probes metadata servers).
                kwargs["_node_ip_address"] = LOCAL_HOST
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                # Ray's gRPC servers still listen on every interface (Ray 2.60 has no loopback-only
                # option); Ray >= 2.59 starts a new local instance with token authentication, so they
                # refuse callers without the token in ~/.ray/auth_token (unless RAY_AUTH_MODE=disabled).
            try:
                with _local_ray_env(local=not address):
                    ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - any start/connect failure is the user's to fix
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise SearchError(f"could not start or reach {where}: {exc}{_auth_hint(exc)}") from exc
            self._started = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", workers or 1)))
        self._remote = ray.remote(max_retries=max_retries)(_ray_chunk)
        self._ctx_ref = ray.put(ctx)
        self._eval_ref = ray.put(evaluator)
        self._refs: dict[Any, int] = {}
        self._next = 0

    def submit(self, chunk: Chunk) -> int:
        self._next += 1
        self._refs[self._remote.remote(list(chunk), self._ctx_ref, self._eval_ref)] = self._next
        return self._next

    def completed(self) -> Iterator[tuple[int, ChunkResult]]:
        ray = self._ray
        while self._refs:
            done, _ = ray.wait(list(self._refs), num_returns=1)
            for ref in done:
                ticket = self._refs.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - retries exhausted: a lost worker or node
                    raise SearchError(f"a Ray task failed after retries: {exc}") from exc
                yield ticket, result

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False


RAY_CONNECT_TIMEOUT_S = 5.0  # a cluster's GCS answers a TCP connect at once; ray.init retries for minutes


def _check_reachable(address: str) -> None:
    """SearchError at once unless `host:port` (or `ray://host:port`) accepts a TCP connection: ray.init
    would retry an unreachable or mistyped address for minutes. `auto` and other forms are Ray's to read."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError, OverflowError) as exc:
        raise SearchError(f"could not reach the Ray cluster at {address}: {exc}") from None


def _auth_hint(exc: BaseException) -> str:
    """Ray >= 2.59 clusters use token authentication; a driver joining by address must send the token."""
    seen: BaseException | None = exc
    while seen is not None:
        if "AuthToken" in str(seen) or "Authentication" in type(seen).__name__:
            return (
                " (the cluster uses token authentication: set RAY_AUTH_MODE=token and make its token "
                "available as ~/.ray/auth_token or RAY_AUTH_TOKEN; see `ray get-auth-token`)"
            )
        seen = seen.__cause__ or seen.__context__
    return ""


def make_executor(
    kind: str,
    ctx: EvalContext,
    evaluator: Evaluator,
    *,
    workers: int | None = None,
    address: str | None = None,
) -> Executor:
    """The executor named by `kind` (serial, process, ray)."""
    if kind == "serial":
        return SerialExecutor(ctx, evaluator)
    if kind == "process":
        return ProcessExecutor(ctx, evaluator, workers=workers)
    if kind == "ray":
        return RayExecutor(ctx, evaluator, workers=workers, address=address)
    raise SearchError(f"unknown executor '{kind}' (allowed: ray, process, serial)")
