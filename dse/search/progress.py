"""Progress reporting: the runner calls `progress(ProgressState)` after every chunk; `RichProgress` draws it.

    with RichProgress(console) as bar:
        run_study("studies/llm_serving.yaml", progress=bar)

The bar shows points done of the budget, points/s, feasible and failed counts, front size and hypervolume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressState:
    """A snapshot of a run, passed to progress callbacks."""

    n_points: int
    n_target: int
    n_feasible: int
    n_failed: int
    n_cached: int
    front_size: int
    hypervolume: float
    elapsed_s: float
    points_per_s: float
    done: bool = False
    stop_reason: str = ""


ProgressCallback = Callable[[ProgressState], None]


class RichProgress:
    """A rich progress bar; a context manager and a `ProgressCallback`."""

    def __init__(self, console: Any = None, description: str = "search") -> None:
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = console or Console()
        # At 80 columns: name, bar, n/N, points/s, front size and ETA; wider terminals get the rest.
        wide = console.width >= 110
        # escaped: the column below reads the description as console markup, a name is shown as written
        name = escape(description if len(description) <= 20 else description[:19] + "…")
        columns: list[Any] = [
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=None if wide else 12),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>6.1f} pt/s"),
            TextColumn("front {task.fields[front]}"),
        ]
        if wide:
            columns += [
                TextColumn("feasible {task.fields[feasible]}"),
                TextColumn("failed {task.fields[failed]}"),
                TextColumn("HV {task.fields[hv]:.4g}"),
                TimeElapsedColumn(),
            ]
        columns += [TextColumn("ETA"), TimeRemainingColumn()]
        self._progress = Progress(*columns, console=console, transient=False)
        self._task = self._progress.add_task(
            name, total=None, rate=0.0, feasible=0, failed=0, front=0, hv=0.0
        )
        self._entered = False
        self._started = False

    def __enter__(self) -> RichProgress:
        self._progress.start()
        self._entered = self._started = True
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._entered:  # stopping twice would print the last line twice
            self._progress.stop()
        self._entered = False

    def __call__(self, state: ProgressState) -> None:
        if not self._entered:
            if state.done and self._started:
                return  # already stopped and printed: the final report would print the line again
            self.__enter__()
        self._progress.update(
            self._task,
            completed=state.n_points,
            total=state.n_target,
            rate=state.points_per_s,
            feasible=state.n_feasible,
            failed=state.n_failed,
            front=state.front_size,
            hv=state.hypervolume,
        )
        if state.done and self._entered:
            self.__exit__(None, None, None)


def progress_callback(progress: Any, name: str) -> tuple[ProgressCallback | None, RichProgress | None]:
    """`run_study`'s `progress` as (callback, the bar the run owns and closes): None or False for none, a
    callable as is, a rich Console (or True: rich's default one) for a progress bar drawn on it."""
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    console = None if progress is True else progress
    bar = RichProgress(console, description=name)
    return bar, bar
