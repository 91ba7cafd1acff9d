"""Ctrl-C while a study stops: the first one stops the run, the ones after it are ignored until the summary
and the report are written.

A second Ctrl-C used to land in the process pool's shutdown (the run hung, its workers and the pool's
manager thread alive) or in the summary (exit 130 with no summary or report), and one during a finished
run's summary lost it too. From the moment the search loop ends, stopped or done, SIGINT and SIGTERM are
ignored (`ignore_interrupts`) until `dse.search.runner.run_study` returns, and `dse run` writes its report
inside `interrupts_ignored` (seconds, either of them). Pool workers ignore SIGINT from their start
(`dse.search.executors`): on the first interrupt the parent terminates them (`Executor.abort`) rather than
wait for their chunks, which `--resume` evaluates again.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["ignore_interrupts", "interrupts_ignored", "sigterm_as_interrupt"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ignore_interrupts() -> Callable[[], None]:
    """Ignore SIGINT and SIGTERM from now; return the function that restores the previous handlers (a no-op
    outside the main thread, where handlers cannot be set)."""
    try:
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _SIGNALS}
    except ValueError:  # not the main thread
        return lambda: None

    def restore() -> None:
        for sig, handler in previous.items():
            if handler is not None:  # None: a handler installed from C, which Python cannot put back
                signal.signal(sig, handler)

    return restore


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside the block."""
    restore = ignore_interrupts()
    try:
        yield
    finally:
        restore()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler, `kill`) stops the block as Ctrl-C does (`dse run`: summary, report, exit 130;
    `dse sweep`: the finished rows, exit 130)."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (tests): keep the default
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
