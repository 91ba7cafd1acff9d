"""Executors: run chunks of points through `evaluate_chunk` and yield results as chunks complete.

    with make_executor("ray", ctx, evaluate_point, workers=None, address=None) as ex:
        for index, results in ex.map_chunks(chunks):   # completion order
            ...

- `serial`: in the driver (tests, debugging).
- `process`: `concurrent.futures.ProcessPoolExecutor` with the spawn context; a pool broken by a lost
  worker is rebuilt and its unfinished chunks resubmitted (up to `max_retries` times).
- `ray`: one remote task per chunk, `max_retries` for lost workers (Ray retries system failures, not
  application errors, which `evaluate_chunk` catches per point anyway). Connects to an existing cluster
  when `address` is given or RAY_ADDRESS is set, else starts a local instance with all CPUs, no
  dashboard, and worker logs kept out of the driver's terminal.

One task = one chunk of tens to hundreds of points: Ray tasks of one 1-ms point are slower than serial
(reference/search-notes.md section 2.1).
"""

from __future__ import annotations

import logging
import os
import sys
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
    """Interface: `map_chunks(chunks)` yields `(index, results)` as chunks finish; `close()` releases."""

    kind = "base"
    workers = 1

    def map_chunks(self, chunks: Sequence[Chunk]) -> Iterator[tuple[int, ChunkResult]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class SerialExecutor(Executor):
    kind = "serial"

    def __init__(self, ctx: EvalContext, evaluator: Evaluator) -> None:
        self._ctx, self._evaluator = ctx, evaluator

    def map_chunks(self, chunks: Sequence[Chunk]) -> Iterator[tuple[int, ChunkResult]]:
        for i, chunk in enumerate(chunks):
            yield i, evaluate_chunk(chunk, self._ctx, self._evaluator)


def _worker_init() -> None:
    # One numerical thread per worker process: the workers already fill the cores.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


class ProcessExecutor(Executor):
    kind = "process"

    def __init__(
        self, ctx: EvalContext, evaluator: Evaluator, *, workers: int | None, max_retries: int = 2
    ) -> None:
        self._ctx, self._evaluator = ctx, evaluator
        self.workers = workers or os.cpu_count() or 1
        self._max_retries = max_retries
        self._pool: ProcessPoolExecutor | None = None

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"), initializer=_worker_init)

    def map_chunks(self, chunks: Sequence[Chunk]) -> Iterator[tuple[int, ChunkResult]]:
        pending = set(range(len(chunks)))
        retries = 0
        while pending:
            if self._pool is None:
                self._pool = self._new_pool()
            futures: dict[Future, int] = {
                self._pool.submit(evaluate_chunk, chunks[i], self._ctx, self._evaluator): i
                for i in sorted(pending)
            }
            broken = False
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for fut in done:
                    i = futures.pop(fut)
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    pending.discard(i)
                    yield i, result
                if broken:
                    break
            if broken:
                retries += 1
                logger.warning(
                    "a worker process died; restarting the pool (retry %d of %d)", retries, self._max_retries
                )
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
                if retries > self._max_retries:
                    raise SearchError(f"worker processes died {retries} times in one batch; giving up")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


with try_import(RAY_HINT) as _ray_imports:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ImportError("No module named 'ray'", name="ray")


def _ray_chunk(chunk: Chunk, ctx: EvalContext, evaluator: Evaluator) -> ChunkResult:
    return evaluate_chunk(chunk, ctx, evaluator)


class RayExecutor(Executor):
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
                "logging_level": logging.WARNING,
                "configure_logging": True,
                # Workers import the evaluator by module path: give them the driver's import path.
                "runtime_env": {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}},
            }
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = workers or os.cpu_count() or 1
                kwargs["object_store_memory"] = 256 * 2**20
            try:
                ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - any start/connect failure is the user's to fix
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise SearchError(f"could not start or reach {where}: {exc}") from exc
            self._started = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", workers or 1)))
        self._remote = ray.remote(max_retries=max_retries)(_ray_chunk)
        self._ctx_ref = ray.put(ctx)
        self._eval_ref = ray.put(evaluator)

    def map_chunks(self, chunks: Sequence[Chunk]) -> Iterator[tuple[int, ChunkResult]]:
        ray = self._ray
        refs = {
            self._remote.remote(list(chunk), self._ctx_ref, self._eval_ref): i
            for i, chunk in enumerate(chunks)
        }
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                i = refs.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - retries exhausted: a lost worker or node
                    raise SearchError(f"a Ray task failed after retries: {exc}") from exc
                yield i, result

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False


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
