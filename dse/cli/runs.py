"""`dse run`, `dse report` and `dse serve`: explore a study's design space and show its report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dse.cli.common import console, err_console, esc, friendly
from dse.errors import ConfigError, DseError


@friendly
def run_cmd(
    study: Annotated[Path | None, typer.Argument(help="Study YAML (studies/*.yaml).")] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue this run directory.")] = None,
    n_points: Annotated[
        int | None, typer.Option("--n-points", help="Point budget (overrides the study).")
    ] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="ray, process or serial.")] = None,
    out: Annotated[str | None, typer.Option("--out", help="Results root (default results/).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Sampler seed (overrides the study).")] = None,
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster address (or RAY_ADDRESS).")
    ] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start a new run directory.")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip writing report.html.")] = False,
) -> None:
    """Explore a study's design space in parallel; ends with the Pareto front and the report's path."""
    from dse.search import run_study
    from dse.search.interrupts import interrupts_ignored, sigterm_as_interrupt

    if study is None and resume is None:
        raise DseError("give a study file (e.g. studies/llm_serving.yaml) or --resume RUN_DIR")
    if address is not None and executor not in (None, "ray"):
        raise DseError(f"--address joins a Ray cluster; --executor {executor} does not use one")
    with sigterm_as_interrupt():
        summary = run_study(
            study,
            resume=resume,
            n_points=n_points,
            executor=executor,
            out=_nonempty_path(out, "--out"),
            seed=seed,
            address=address,
            progress=console,
            fresh=fresh,
        )
    interrupted = summary.stop_reason.startswith("interrupted")
    with interrupts_ignored():  # a Ctrl-C now would cut the summary or the report
        _show_run(summary)
        if not no_report:
            _write_report(summary.run_dir, None, None)
    if interrupted:
        raise typer.Exit(130)  # what ran is logged and in the report; --resume continues exactly
    if summary.n_feasible == 0:
        why = (  # a budget spent before the first point is the reason, not the points
            f"no point ran before the search stopped ({esc(summary.stop_reason)})"
            if summary.n_points == 0
            else f"all {summary.n_points} points failed or broke a constraint (the report's settings section "
            "lists the reasons)"
        )
        err_console.print(f"[bold red]no feasible point:[/] {why}")
        raise typer.Exit(1)


def _nonempty_path(text: str | None, flag: str) -> Path | None:
    """An output path option as a Path; an empty one (`--out ""`, an unset shell variable) is refused
    rather than read as the working directory, which `Path("")` is."""
    if text is None:
        return None
    if not text.strip():
        raise DseError(f"{flag} is empty: give a path, or omit {flag} for the default")
    return Path(text)


def _show_run(summary: Any) -> None:
    table = Table("", "", title=esc(f"{summary.study}: {summary.run_id}"))
    for label, value in (
        ("points", f"{summary.n_points} ({summary.n_evaluated} evaluated, {summary.n_cached} from the log)"),
        ("feasible / failed", f"{summary.n_feasible} / {summary.n_failed}"),
        ("Pareto front", f"{summary.front_size} points, hypervolume {summary.hypervolume:.4g}"),
        ("stopped because", summary.stop_reason),
        ("time", f"{summary.elapsed_s:.1f} s, {summary.points_per_s:.0f} points/s ({summary.executor})"),
        ("results", str(summary.run_dir)),
    ):
        table.add_row(label, esc(value))
    console.print(table)


def _write_report(
    run_dir: Path, color_by: str | None, out: Path | None, objectives: list[tuple[str, str]] | None = None
) -> Path:
    from dse.report import write_html_report

    fn = _breakdown_fn(run_dir)
    path = write_html_report(run_dir, color_by=color_by, out=out, breakdown_fn=fn, objectives=objectives)
    console.print(f"report: {esc(path)}")
    return path


def _breakdown_fn(run_dir: Path) -> Any:
    """Energy breakdown of a logged point, recomputed from the study (the log keeps metrics only)."""
    from dse.search.breakdown import breakdown_context, logged_point_breakdown

    try:
        run = breakdown_context(run_dir)
    except ConfigError as exc:  # a check added since the run: its points and metrics still make a report
        err_console.print(
            f"warning: report without energy breakdowns: the run's study no longer loads ({esc(exc)})"
        )
        return None
    return None if run is None else (lambda params: logged_point_breakdown(params, *run))


@friendly
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (results/<study>/<run-id>).")],
    color_by: Annotated[
        str | None, typer.Option("--color-by", help="Parameter that colours the points.")
    ] = None,
    out: Annotated[str | None, typer.Option("--out", help="HTML file (default RUN_DIR/report.html).")] = None,
    objective: Annotated[
        list[str] | None,
        typer.Option(
            "--objective",
            help="METRIC[:minimize|maximize] to draw and rank instead of the study's objectives; give two, "
            "e.g. --objective usd_per_million_output_tokens --objective gco2_per_output_token. Without a "
            "direction: the study's for its own objectives, else maximize rates (*_per_s, mfu) and "
            "capacities and minimize the rest. The front, its table and the hypervolume are those of the two "
            "drawn.",
        ),
    ] = None,
) -> None:
    """Write the run's self-contained HTML report (works offline)."""
    chosen = None
    if objective:
        if len(objective) != 2:
            raise DseError(f"--objective: give two (the scatter's x and y), got {len(objective)}")
        chosen = [(o.partition(":")[0].strip(), o.partition(":")[2].strip()) for o in objective]
    path = _nonempty_path(out, "--out")
    # the log is the run's cache and resume point: no output may replace a file of the run but its report
    own = path is not None and path.is_file() and path.parent.resolve() == run_dir.resolve()
    if own and path is not None and path.name != "report.html":
        raise DseError(
            f"--out {path}: is a file of the run directory, which it would replace; name a new file"
        )
    _write_report(run_dir, color_by, path, chosen)


@friendly
def serve_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (results/<study>/<run-id>).")],
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0: any free port).")] = 8000,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Only print the URL.")] = False,
) -> None:
    """Serve the run's report on 127.0.0.1 and open a browser when there is one."""
    from dse.report import serve_report

    serve_report(
        run_dir, port, not no_browser, on_ready=lambda url: console.print(f"serving {url} (Ctrl-C to stop)")
    )
