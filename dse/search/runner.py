"""The search driver: sampler ask/tell in batches, chunks to an executor, the append-only log, the front.

    summary = run_study("studies/llm_serving.yaml", n_points=500, executor="process", progress=console)
    summary = run_study(resume="results/llm-serving-h100/20260101T120000Z-1a2b3c4d")
    print(summary.stop_reason, summary.front_size, summary.run_dir)

Each batch: ask `batch_size` points; a point already in this run (a duplicate suggestion) or in the log (a
resumed or repeated run) is answered from there, the others are split into chunks and evaluated by the
executor; every finished chunk is appended to points.jsonl at once; then every ask is told, in ask order, so
the sampler's state (and the next batch) does not depend on which chunk finished first. Replaying a run
with the same seed therefore proposes the same points, and a killed run resumed from its log ends with the
same points, the same `seq` numbers and the same front as one that was never interrupted; a batch is cut
short only by the point budget, as the run's last, so a finished run continued with a larger budget ends as
one given that budget from the start. Logged points a run does not meet again stay in its results.

A point is feasible when the model says so (`feasible`, e.g. the memory fits) and every study constraint
holds; infeasible points are logged with the reason and kept out of the front. Optuna sees the constraint
violations through `trial.set_constraint`, so NSGA-II ranks feasible points first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dse.errors import DseError, RunFailed, os_failure
from dse.search.feasibility import MODEL_REASON_PREFIX, classify, clean_metrics, constraint_check
from dse.search.interrupts import ignore_interrupts
from dse.search.objective import Evaluator, evaluate_point, finite
from dse.search.pareto import (
    RunFront,
    default_reference_point,
    hypervolume,
    pareto_mask,
    unbeaten_reference_warning,
)
from dse.search.progress import ProgressCallback, ProgressState, progress_callback
from dse.search.rundir import (
    ENV_FILE,
    POINTS_FILE,
    STUDY_FILE,
    SUMMARY_FILE,
    PointLog,
    PointRecord,
    env_info,
    evaluator_name,
    prepare_run_dir,
    trials_frame,
    write_atomic,
    write_json,
    write_tables,
)
from dse.search.space import point_id
from dse.search.study import StudyConfig, resolved_yaml, study_hash

logger = logging.getLogger(__name__)

_MAX_IDLE_BATCHES = 20  # batches in a row with no new point: the sampler is going round in circles
_EXACT_SIZE_LIMIT = 200_000  # count a finite space exactly up to this many combinations
# Aim for about this much evaluation work per chunk (a ceiling once a point's cost is known; at most four
# chunks per worker per batch set the size before that): a Ray task costs ~2 ms of CPU across the driver,
# raylet and worker on a 2-core machine (measured), ~1% of 0.2 s; 0.05 s made chunks of 2-6 points for
# `llm_serving` (8.4 ms each, timed at up to 25 ms on a loaded machine), up to 13% of the CPU in overhead.
CHUNK_TARGET_S = 0.2


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What a run did and why it stopped (the content of summary.json, plus the run directory)."""

    study: str
    run_id: str
    run_dir: Path
    objectives: list[dict[str, str]]
    constraints: list[dict[str, Any]]
    parameters: list[dict[str, Any]]
    n_points: int
    n_feasible: int
    n_failed: int
    n_evaluated: int
    n_cached: int
    front_size: int
    hypervolume: float
    reference_point: list[float] | None
    stop_reason: str
    elapsed_s: float
    points_per_s: float
    sampler: str
    executor: str
    seed: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["run_dir"] = str(self.run_dir)
        extra = data.pop("extra")
        return {**data, **extra}

    def lines(self) -> list[str]:
        """A short human summary (the CLI prints these)."""
        hv = f"{self.hypervolume:.6g}" if self.reference_point else "n/a"
        return [
            f"study {self.study}, run {self.run_id}",
            f"stopped: {self.stop_reason}",
            f"points: {self.n_points} ({self.n_evaluated} evaluated now, {self.n_cached} from the log), "
            f"feasible {self.n_feasible}, failed {self.n_failed}",
            f"front: {self.front_size} points, hypervolume {hv}",
            f"time: {self.elapsed_s:.1f} s, {self.points_per_s:.1f} points/s "
            f"({self.executor}, {self.sampler}, seed {self.seed})",
            f"results: {self.run_dir}",
        ]


# --- the driver ------------------------------------------------------------------------------------------


def _keep_signals() -> None:
    """Nothing to restore: the search loop has not ended."""


class _Run:
    def __init__(
        self,
        cfg: StudyConfig,
        run_dir: Path,
        evaluator: Evaluator,
        progress: ProgressCallback | None,
        address: str | None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.evaluator = evaluator
        self.progress = progress
        self.address = address
        self.restore_signals: Callable[[], None] = _keep_signals  # set when the search loop ends
        self.space = cfg.search_space()
        self.directions = cfg.directions
        self.metric_names = list(cfg.objectives)
        self.known: dict[str, PointRecord] = {}
        self.n_cached = 0
        self.n_evaluated = 0
        self.eval_s = 0.0
        self.n_feasible = 0
        self.n_failed = 0
        ref = cfg.reference_point
        self.front = RunFront(
            directions=self.directions,
            ref=[ref[m] for m in self.metric_names] if ref else None,
            min_improvement=cfg.search.min_improvement,
        )
        self.executor: Any = None
        self.t0 = time.perf_counter()
        self.space_size = self._space_size()

    def _target(self) -> int:
        """Points the run will reach: n_points, or the whole space when it holds fewer (a grid study's bar
        then ends full instead of stopping at 120 of 1,000)."""
        n = self.cfg.search.n_points
        return n if self.space_size is None else min(n, self.space_size)

    def _space_size(self) -> int | None:
        if not self.space.is_finite or self.space.grid_size_bound() > _EXACT_SIZE_LIMIT:
            return None
        return sum(1 for _ in self.space.iter_grid())

    # -- records

    def _record(self, pid: str, seq: int, point: dict[str, Any], result: Mapping[str, Any]) -> PointRecord:
        metrics = clean_metrics(result.get("metrics") or {})
        feasible, reason, error = classify(metrics, result.get("error"), self.cfg)
        return PointRecord(
            point_id=pid,
            params=point,
            metrics=metrics,
            feasible=feasible,
            reason=reason,
            error=error,
            t_eval_s=float(result.get("t_eval_s", 0.0)),
            seq=seq,
        )

    def _outcome(self, rec: PointRecord) -> Any:
        from dse.search.samplers import Outcome

        metrics = rec.metrics
        values = [v for v in (metrics.get(m) for m in self.metric_names) if finite(v)]
        if rec.error or len(values) != len(self.metric_names):
            return Outcome(values=None)
        constraints = {"model": 1.0 if rec.reason.startswith(MODEL_REASON_PREFIX) else 0.0}
        for i, c in enumerate(self.cfg.constraints):
            constraints[f"c{i}"] = constraint_check(c, metrics)[1]
        return Outcome(values=tuple(float(v) for v in values), constraints=constraints)

    def _count(self, rec: PointRecord) -> None:
        self.n_feasible += rec.feasible
        self.n_failed += rec.error is not None

    # -- front

    def _objective_row(self, rec: PointRecord) -> list[float] | None:
        if not rec.feasible or rec.error:
            return None
        values = [float(v) for v in (rec.metrics.get(m) for m in self.metric_names) if finite(v)]
        return values if len(values) == len(self.metric_names) else None

    def _update_front(self, batch: Sequence[PointRecord]) -> None:
        """Add a batch's feasible points to the front and count the batch for `patience` (`RunFront`)."""
        rows = {rec.point_id: row for rec in batch if (row := self._objective_row(rec)) is not None}
        self.front.add(list(rows), list(rows.values()))

    # -- progress

    def _report(self, done: bool = False, reason: str = "") -> None:
        if self.progress is None:
            return
        elapsed = time.perf_counter() - self.t0
        self.progress(
            ProgressState(
                n_points=len(self.known),
                n_target=self._target(),
                n_feasible=self.n_feasible,
                n_failed=self.n_failed,
                n_cached=self.n_cached,
                front_size=len(self.front.ids),
                hypervolume=self.front.hv,
                elapsed_s=elapsed,
                points_per_s=len(self.known) / elapsed if elapsed > 0 else 0.0,
                done=done,
                stop_reason=reason,
            )
        )

    # -- main loop

    def _stop_reason(self, idle_batches: int) -> str:
        s = self.cfg.search
        if len(self.known) >= s.n_points:
            return f"point budget reached ({s.n_points} points)"
        if self.space_size is not None and len(self.known) >= self.space_size:
            return f"search space exhausted (all {self.space_size} points evaluated)"
        if s.time_budget_s is not None and time.perf_counter() - self.t0 >= s.time_budget_s:
            return f"time budget reached ({s.time_budget_s:g} s)"
        if s.patience is not None and self.front.stalled >= s.patience:
            return (
                f"hypervolume stalled for {s.patience} batches (gain below {s.min_improvement:g}, and no new "
                "front point outside the reference box)"
            )
        if idle_batches >= _MAX_IDLE_BATCHES:
            return f"sampler proposed only evaluated points for {idle_batches} batches"
        return ""

    def _executor(self) -> Any:
        if self.executor is None:
            from dse.search.executors import make_executor

            c = self.cfg
            self.executor = make_executor(
                c.search.executor,
                c.eval_context(),
                self.evaluator,
                workers=c.search.workers,
                address=self.address,
            )
        return self.executor

    def _chunk_size(self, start: bool = False) -> int:
        if start and self.executor is None:
            self._executor()  # started on the first point that needs evaluating (not on a pure replay)
        size = self.cfg.search.chunk_size
        if size is None:
            # At most four chunks per worker per batch, and about CHUNK_TARGET_S of work per chunk once the
            # cost of a point is known: a generation waits for its slowest chunk, so small chunks keep the
            # workers busy at the end of a batch; chunks of cheap points stay large to amortize task overhead.
            workers = getattr(self.executor, "workers", 1) or 1
            size = max(1, min(256, math.ceil(self.cfg.search.effective_batch_size / (4 * workers))))
            if self.n_evaluated:
                mean_s = self.eval_s / self.n_evaluated
                size = max(1, min(size, round(CHUNK_TARGET_S / max(mean_s, 1e-9))))
        return size

    def _ask_batch(
        self, sampler: Any, cached: Mapping[str, PointRecord], next_seq: int
    ) -> tuple[
        list[Any], list[str], list[PointRecord], dict[int, list[tuple[int, str, dict[str, Any]]]], int
    ]:
        """Ask one batch: (asks, their point ids, records answered without evaluation, submitted chunks by
        ticket, the next sequence number). Duplicates within the run are answered later from `known`.

        A batch is cut short only once it holds the points the budget lacks, which makes it the run's last:
        no ask is told mid-batch, so its asks are the first ones a larger budget's batch makes from the same
        state, and a run continued with a larger budget meets every logged point again, in order. (Cutting
        it at `n_points - known` asks left a batch with duplicates short of the budget; the batches after
        it were told in between and drew NSGA-II's next parents from an incomplete generation, so a larger
        budget's replay proposed other points and lost the logged ones.)
        """
        asks, pids, fresh = [], [], []
        pending: set[str] = set()
        chunks: dict[int, list[tuple[int, str, dict[str, Any]]]] = {}
        buffer: list[tuple[int, str, dict[str, Any]]] = []
        for _ in range(self.cfg.search.effective_batch_size):
            if len(self.known) + len(pending) >= self.cfg.search.n_points:
                break
            got = sampler.ask(1)
            if not got:
                break
            ask, pid = got[0], point_id(got[0].point)
            asks.append(ask)
            pids.append(pid)
            if pid in self.known or pid in pending:
                continue  # a duplicate: answered from this run
            seq, next_seq = next_seq, next_seq + 1
            if pid in cached:  # a resumed or repeated run: answered from the log
                rec = dataclasses.replace(cached[pid], seq=seq)
                self.known[pid] = rec
                self._count(rec)
                self.n_cached += 1
                fresh.append(rec)
                continue
            pending.add(pid)
            buffer.append((seq, pid, ask.point))
            if len(buffer) >= self._chunk_size(start=True):
                chunks[self.executor.submit([p for _, _, p in buffer])] = buffer
                buffer = []
        if buffer:
            chunks[self._executor().submit([p for _, _, p in buffer])] = buffer
        return asks, pids, fresh, chunks, next_seq

    def run(self, log: PointLog) -> str:
        """Batches until a stop rule fires; returns the stop reason.

        Within a batch, points are asked one by one and each full chunk goes to the executor at once, so
        evaluation overlaps the sampler's work; tells happen after the last ask, in ask order, as soon as
        each point's record is there. The sequence of sampler calls never depends on timing.
        """
        from dse.search.samplers import build_sampler

        sampler = build_sampler(self.cfg)
        next_seq = 0
        idle = 0
        try:
            while True:
                reason = self._stop_reason(idle)
                if reason:
                    return reason
                batch = self._ask_batch(sampler, log.records, next_seq)
                asks, pids, fresh, chunks, next_seq = batch
                if not asks:
                    return f"search space exhausted (grid of {len(self.known)} points done)"
                told = 0
                if chunks:
                    for ticket, results in self.executor.completed():
                        recs = [
                            self._record(pid, seq, p, r)
                            for (seq, pid, p), r in zip(chunks.pop(ticket), results, strict=True)
                        ]
                        log.append(recs)
                        for rec in recs:
                            self.known[rec.point_id] = rec
                            self._count(rec)
                        self.n_evaluated += len(recs)
                        self.eval_s += sum(r.t_eval_s for r in recs)
                        fresh.extend(recs)
                        while told < len(asks) and pids[told] in self.known:
                            sampler.tell(asks[told], self._outcome(self.known[pids[told]]))
                            told += 1
                        self._report()
                    log.sync()
                for ask, pid in zip(asks[told:], pids[told:], strict=True):
                    sampler.tell(ask, self._outcome(self.known[pid]))
                idle = 0 if fresh else idle + 1
                if fresh:
                    self._update_front(fresh)
                self._report()
        except KeyboardInterrupt:
            self.restore_signals = ignore_interrupts()  # a second Ctrl-C cuts nothing (dse.search.interrupts)
            if self.executor is not None:
                self.executor.abort()  # the chunks in flight are not logged: --resume redoes them
            return "interrupted (Ctrl-C or SIGTERM); resume with --resume"
        finally:  # stopping or done: no Ctrl-C cuts the shutdown or the summary
            if self.restore_signals is _keep_signals:
                self.restore_signals = ignore_interrupts()
            sampler.close()
            if self.executor is not None:
                self.executor.close()

    # -- outputs

    def _keep_unreached(self, logged: Mapping[str, PointRecord]) -> None:
        """Logged points this run did not meet again stay in its results, numbered after its own: it
        stopped before its replay of the log reached them (a time budget, patience, Ctrl-C), or the sampler
        proposes other points now (another Optuna). The log is the cache: an evaluated point never leaves
        the tables, the front or the report while points.jsonl holds it."""
        unreached = sorted((r for pid, r in logged.items() if pid not in self.known), key=lambda r: r.seq)
        if not unreached:
            return
        logger.warning(
            "%d points of the log were not proposed again before the run stopped; its results keep them",
            len(unreached),
        )
        next_seq = max((r.seq for r in self.known.values()), default=-1) + 1
        for i, logged_rec in enumerate(unreached):
            rec = dataclasses.replace(logged_rec, seq=next_seq + i)
            self.known[rec.point_id] = rec
            self._count(rec)
        self.n_cached += len(unreached)

    def _final_front(self, records: Sequence[PointRecord]) -> tuple[dict[str, bool], float, list[str]]:
        """(on the front by point id, hypervolume, warnings) over all of the run's feasible points."""
        ok = [r for r in records if self._objective_row(r) is not None]
        if not ok:
            return {}, 0.0, []
        vals = np.asarray([self._objective_row(r) for r in ok])
        mask = pareto_mask(vals, self.directions)
        if self.front.ref is None:  # only logged points the run did not meet again are feasible
            self.front.ref = default_reference_point(vals, self.directions)
        warning = unbeaten_reference_warning(vals, self.front.ref, self.directions, self.metric_names)
        if warning:
            logger.warning("%s", warning)
        on_front = {r.point_id: bool(m) for r, m in zip(ok, mask, strict=True)}
        return (
            on_front,
            hypervolume(vals[mask], self.front.ref, self.directions),
            [warning] if warning else [],
        )

    def finish(self, reason: str, logged: Mapping[str, PointRecord]) -> RunSummary:
        self._keep_unreached(logged)
        records = sorted(self.known.values(), key=lambda r: r.seq)
        on_front, hv, warnings = self._final_front(records)
        elapsed = time.perf_counter() - self.t0
        df = trials_frame(records, self.space.paths, on_front)
        write_tables(self.run_dir, df, self.metric_names)
        s = self.cfg.search
        summary = RunSummary(
            study=self.cfg.name,
            run_id=self.run_dir.name,
            run_dir=self.run_dir,
            objectives=[{"metric": m, "direction": d} for m, d in self.cfg.objectives.items()],
            constraints=[
                {"metric": c.metric, "op": c.op, "value": c.value, "text": c.text}
                for c in self.cfg.constraints
            ],
            parameters=self.space.describe(),
            n_points=len(records),
            n_feasible=sum(r.feasible for r in records),
            n_failed=sum(r.error is not None for r in records),
            n_evaluated=self.n_evaluated,
            n_cached=self.n_cached,
            front_size=sum(on_front.values()),
            hypervolume=hv,
            reference_point=self.front.ref,
            stop_reason=reason,
            elapsed_s=elapsed,
            points_per_s=self.n_evaluated / elapsed if elapsed > 0 else 0.0,
            sampler=s.sampler.kind,
            executor=s.executor,
            seed=s.seed,
            extra={
                "n_target": s.n_points,
                "batch_size": s.effective_batch_size,
                "evaluator": evaluator_name(self.evaluator),
                "reference_point_source": "study" if self.cfg.reference_point else "first feasible batch",
                "warnings": warnings,
            },
        )
        write_json(self.run_dir / SUMMARY_FILE, summary.to_dict())
        self.front.hv = hv
        self._report(done=True, reason=reason)
        return summary


def run_study(
    study: str | Path | StudyConfig | None = None,
    *,
    resume: str | Path | None = None,
    n_points: int | None = None,
    executor: str | None = None,
    out: str | Path | None = None,
    seed: int | None = None,
    address: str | None = None,
    workers: int | None = None,
    time_budget_s: float | None = None,
    evaluator: Evaluator = evaluate_point,
    progress: ProgressCallback | Any | None = None,
    fresh: bool = False,
) -> RunSummary:
    """Run (or continue) a study and return its summary (a Ctrl-C stops it, the next ones are ignored until
    it returns: `dse.search.interrupts`); results land in `<out>/<study>/<run-id>/`.

    Args:
        study: a study file, or a StudyConfig; resume: a run directory to continue (its resolved study).
        n_points, executor, seed, workers, time_budget_s: override the study's `search:` values (CLI flags).
        out: results root (default `results`); a rerun of the same study continues its newest run there.
        address: a Ray cluster address (implies the ray executor); RAY_ADDRESS works too.
        evaluator: the per-point function (module-level, picklable); default `evaluate_point`.
        progress: a callable taking ProgressState, or a rich Console (a progress bar is drawn on it).
        fresh: always start a new run directory (not continue one).
    Raises:
        ConfigError: a bad study file (file:line: field: message) or bad arguments.
        SearchError: the search cannot run (executor failure, damaged log).
    """
    if address is not None and executor is None:
        executor = "ray"
    overrides: dict[str, Any] = {"n_points": n_points, "executor": executor, "seed": seed, "workers": workers}
    overrides["time_budget_s"] = time_budget_s
    cfg, run_dir, lock = prepare_run_dir(study, resume, out, evaluator, fresh, overrides)
    with lock:  # no other dse run writes the directory meanwhile (dse.search.runlock)
        return _run_locked(cfg, run_dir, lock.created, evaluator, progress, address)


def _run_locked(
    cfg: StudyConfig,
    run_dir: Path,
    created: bool,
    evaluator: Evaluator,
    progress: ProgressCallback | Any | None,
    address: str | None,
) -> RunSummary:
    """`run_study` in its run directory, which this process holds (`created`: the run made it)."""
    name = evaluator_name(evaluator)
    try:
        write_atomic(run_dir / STUDY_FILE, resolved_yaml(cfg))
        write_json(run_dir / ENV_FILE, env_info(name, cfg.search.executor, study_hash(cfg, name)))
        log = PointLog(run_dir / POINTS_FILE, cfg.search_space())  # lines of no point of the study: skipped
    except OSError as exc:
        raise os_failure(f"cannot write the run directory {run_dir}: {exc.strerror or exc}", exc) from None

    callback, owned = progress_callback(progress, cfg.name)
    run = _Run(cfg, run_dir, evaluator, callback, address)
    from dse.search.samplers import quiet_optuna  # lazy, as the samplers (optuna loads on use)

    try:
        with quiet_optuna():
            reason = run.run(log)
    except BaseException as exc:
        run.restore_signals()  # no summary follows: Ctrl-C works again
        if created and not log.records and isinstance(exc, DseError):
            # refused before any point (an unreachable Ray cluster): leave no empty run behind
            log.close()
            shutil.rmtree(run_dir, ignore_errors=True)
            with contextlib.suppress(OSError):  # the study's folder too, if this run was all it held
                run_dir.parent.rmdir()
        if not isinstance(exc, OSError):
            raise
        # the log could not be appended: what it holds stays valid
        raise RunFailed(
            f"cannot write to {run_dir} ({exc.strerror or exc}); every point its log holds is kept (a line "
            f"cut short is dropped): fix it and continue with `dse run --resume {run_dir}`"
        ) from None
    finally:
        with contextlib.suppress(OSError):  # reported above; every complete line is already in the log
            log.close()
        if owned is not None:
            owned.__exit__(None, None, None)
    try:
        return run.finish(reason, log.records)
    except OSError as exc:
        raise RunFailed(
            f"cannot write the run's tables in {run_dir} ({exc.strerror or exc}); its points are in "
            f"{POINTS_FILE}: fix it and run `dse run --resume {run_dir}`"
        ) from None
    finally:
        run.restore_signals()
