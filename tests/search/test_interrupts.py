"""Ctrl-C while a study stops (`dse.search.interrupts`): the first interrupt stops the run, later ones are
ignored until its summary and report are written; pool workers leave Ctrl-C to the parent."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from dse.search.executors import _worker_init
from dse.search.interrupts import ignore_interrupts, interrupts_ignored
from dse.search.runner import run_study

from .toy import schaffer


def _interrupt_self() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)  # the handler runs between bytecodes of the main thread


def test_interrupts_are_ignored_inside_and_restored_after() -> None:
    before = signal.getsignal(signal.SIGINT)
    with interrupts_ignored():
        _interrupt_self()  # would raise KeyboardInterrupt
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) == before
    restore = ignore_interrupts()
    _interrupt_self()
    restore()
    assert signal.getsignal(signal.SIGINT) == before


def test_a_pool_worker_leaves_ctrl_c_to_the_parent() -> None:
    before = signal.getsignal(signal.SIGINT)
    try:
        _worker_init()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def _interrupting_evaluator(params: dict, ctx: object) -> dict:
    """Schaffer's points; the third is a Ctrl-C (raised here: a test worker may ignore SIGINT itself)."""
    _interrupting_evaluator.calls += 1  # type: ignore[attr-defined]
    if _interrupting_evaluator.calls == 3:  # type: ignore[attr-defined]
        raise KeyboardInterrupt
    return schaffer(params, ctx)


_interrupting_evaluator.calls = 0  # type: ignore[attr-defined]
_interrupting_evaluator.metric_names = schaffer.metric_names  # type: ignore[attr-defined]


def test_a_stopped_run_writes_its_summary_and_restores_ctrl_c(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: stop\nspace: {x: {values: [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]}}\n"
        "objectives: {f1: minimize, f2: minimize}\n"
        "search: {sampler: grid, n_points: 6, batch_size: 1, executor: serial}\n",
        encoding="utf-8",
    )
    before = signal.getsignal(signal.SIGINT)
    _interrupting_evaluator.calls = 0  # type: ignore[attr-defined]
    summary = run_study(path, out=tmp_path, evaluator=_interrupting_evaluator)
    assert summary.stop_reason.startswith("interrupted (Ctrl-C or SIGTERM)")  # dse run maps SIGTERM to it
    assert (summary.run_dir / "summary.json").is_file() and summary.n_points >= 2
    assert signal.getsignal(signal.SIGINT) == before  # Ctrl-C works again once the run has returned


def test_a_run_that_fails_gives_ctrl_c_back(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A run stopped by an error (here the log cannot be appended) has no summary to protect: Ctrl-C is
    restored before the error propagates (library callers would otherwise be left unable to interrupt)."""
    import pytest

    from dse.errors import RunFailed
    from dse.search import rundir

    def full_disk(self, records) -> None:  # noqa: ANN001
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rundir.PointLog, "append", full_disk)
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: full\nspace: {x: {values: [0.0, 0.5]}}\nobjectives: {f1: minimize, f2: minimize}\n"
        "search: {sampler: grid, n_points: 2, executor: serial}\n",
        encoding="utf-8",
    )
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(RunFailed, match="No space left"):
        run_study(path, out=tmp_path, evaluator=schaffer)
    assert signal.getsignal(signal.SIGINT) == before


def test_aborting_a_process_pool_does_not_wait_for_its_chunks() -> None:
    """After a Ctrl-C the pool's workers are terminated (they ignore SIGINT): a chunk of slow points no
    longer holds the stop for its whole duration (the run resumes them)."""
    from dse.search.executors import ProcessExecutor
    from dse.search.objective import EvalContext

    from .toy import sleepy

    pool = ProcessExecutor(EvalContext(), sleepy, workers=1)
    pool.submit([{"x": 0.5}])
    time.sleep(2.0)  # the worker is inside its 30 s point
    start = time.monotonic()
    pool.abort()
    assert time.monotonic() - start < 15.0
