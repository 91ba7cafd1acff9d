"""`dse run`, `report`, `serve`, `validate ...`, `measure ...` and `bench`: registered on `dse.cli.app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dse.cli_common import (
    BatchOpt,
    JsonOpt,
    SeqOpt,
    app,
    console,
    friendly,
    measure_app,
    print_json,
    validate_app,
)
from dse.errors import DseError


def _clock_list(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise DseError(
            f"--clocks-mhz '{text}': expected a comma-separated list of MHz, e.g. 1410,1980"
        ) from None


NoLockOpt = Annotated[bool, typer.Option("--no-lock", help="Do not lock clocks; observe and record them.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="No GPU: replay recorded or synthetic samples.")]


@measure_app.command("kernels")
@friendly
def measure_kernels_cmd(
    out: Annotated[Path, typer.Option("--out", help="Samples file to write (.parquet or .csv).")],
    suite: Annotated[
        str, typer.Option("--suite", help="gemm, attention, softmax, norm, elementwise, all, smoke.")
    ] = "all",
    clocks_mhz: Annotated[
        str | None, typer.Option("--clocks-mhz", help="Clocks to lock, e.g. 1410,1980.")
    ] = None,
    no_lock: NoLockOpt = False,
    dry_run: DryRunOpt = False,
    replay: Annotated[Path | None, typer.Option("--replay", help="Recorded samples for --dry-run.")] = None,
) -> None:
    """Measure a kernel suite (latency, power, energy per kernel) and write calibration samples."""
    from dse.measure.cli_commands import measure_kernels_command

    path = measure_kernels_command(suite, _clock_list(clocks_mhz), out, no_lock, dry_run, replay=replay)
    console.print(f"samples written to {path}")


@measure_app.command("model")
@friendly
def measure_model_cmd(
    model: Annotated[str, typer.Option("--model", help="Model name (see `dse models`) or config.json path.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to create for the run's files.")],
    batch: BatchOpt = 1,
    seq_len: SeqOpt = 1024,
    no_lock: NoLockOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Measure a whole forward pass (random weights) with a per-operator energy breakdown."""
    from dse.measure.cli_commands import measure_model_command

    path = measure_model_command(model, batch, seq_len, out, no_lock, dry_run=dry_run)
    console.print(f"model run written to {path}")


def _frame_table(
    rows: list[dict[str, Any]], title: str, percent: tuple[str, ...], columns: tuple[str, ...] | None = None
) -> Table:
    table = Table(title=title)
    keys = list(columns or (rows[0] if rows else []))
    for key in keys:
        numeric = key in percent or key.startswith("n")
        table.add_column(key, justify="right" if numeric else "left", overflow="fold")

    def cell(key: str, value: Any) -> str:
        if key not in percent:
            return str(value)
        return "-" if value is None or value != value else f"{100 * value:.1f}%"  # NaN: not measured

    for row in rows:
        table.add_row(*(cell(k, row[k]) for k in keys))
    return table


@validate_app.command("kernels")
@friendly
def validate_kernels_cmd(as_json: JsonOpt = False) -> None:
    """Kernel latency MAPE per family and GPU on the held-out 20% (seed 0), fitted vs analytical."""
    from dse.calibrate.validate import validate_kernels

    rows = validate_kernels()
    if as_json:
        print_json({"rows": rows})
        return
    columns = ("family", "gpu", "dtype", "split", "n_test", "mape_fitted", "mape_analytical")
    title = "kernel latency MAPE (kernels >= 10 us)"
    console.print(_frame_table(rows, title, ("mape_fitted", "mape_analytical"), columns))


@validate_app.command("power")
@friendly
def validate_power_cmd(as_json: JsonOpt = False) -> None:
    """Power, latency and energy MAPE: A100 DVFS sweep and 900 MHz (held out), A10 forecast, H200 kernels."""
    from dse.calibrate.validate_power import validate_power

    rows = [r.to_dict() for r in validate_power()]
    if as_json:
        print_json({"rows": rows})
        return
    console.print(_frame_table(rows, "power model MAPE", ("power_mape", "latency_mape", "energy_mape")))


@validate_app.command("serving")
@friendly
def validate_serving_cmd(as_json: JsonOpt = False) -> None:
    """TTFT, TPOT, power and J/token MAPE against ML.ENERGY (H100) and aiconfigurator silicon rows."""
    from dse.calibrate.validate_serving import validate_serving

    rows = [dict(r) for r in validate_serving()]
    if as_json:
        print_json({"rows": rows})
        return
    columns = ("source", "metric", "subset", "group", "n", "mape", "bias")
    console.print(_frame_table(rows, "serving MAPE (bias: signed mean error)", ("mape", "bias"), columns))


@app.command("run")
@friendly
def run_cmd(
    study: Annotated[Path | None, typer.Argument(help="Study YAML (studies/*.yaml).")] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue this run directory.")] = None,
    n_points: Annotated[
        int | None, typer.Option("--n-points", help="Point budget (overrides the study).")
    ] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="ray, process or serial.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Results root (default results/).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Sampler seed (overrides the study).")] = None,
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster address (or RAY_ADDRESS).")
    ] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start a new run directory.")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip writing report.html.")] = False,
) -> None:
    """Explore a study's design space in parallel; ends with the Pareto front and the report's path."""
    from dse.search import run_study

    if study is None and resume is None:
        raise DseError("give a study file (e.g. studies/llm_serving.yaml) or --resume RUN_DIR")
    summary = run_study(
        study,
        resume=resume,
        n_points=n_points,
        executor=executor,
        out=out,
        seed=seed,
        address=address,
        progress=console,
        fresh=fresh,
    )
    _show_run(summary)
    if not no_report:
        _write_report(summary.run_dir, None, None)


def _show_run(summary: Any) -> None:
    table = Table("", "", title=f"{summary.study}: {summary.run_id}")
    for label, value in (
        ("points", f"{summary.n_points} ({summary.n_evaluated} evaluated, {summary.n_cached} from the log)"),
        ("feasible / failed", f"{summary.n_feasible} / {summary.n_failed}"),
        ("Pareto front", f"{summary.front_size} points, hypervolume {summary.hypervolume:.4g}"),
        ("stopped because", summary.stop_reason),
        ("time", f"{summary.elapsed_s:.1f} s, {summary.points_per_s:.0f} points/s ({summary.executor})"),
        ("results", str(summary.run_dir)),
    ):
        table.add_row(label, value)
    console.print(table)


def _write_report(run_dir: Path, color_by: str | None, out: Path | None) -> Path:
    from dse.report import write_html_report

    path = write_html_report(run_dir, color_by=color_by, out=out, breakdown_fn=_breakdown_fn(run_dir))
    console.print(f"report: {path}")
    return path


def _breakdown_fn(run_dir: Path) -> Any:
    """Energy breakdown of a logged point, recomputed from the study (the log keeps metrics only)."""
    from dse.search.breakdown import breakdown_for_point, context_for_run

    ctx = context_for_run(run_dir)
    return None if ctx is None else (lambda params: breakdown_for_point(params, ctx))


@app.command("report")
@friendly
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (results/<study>/<run-id>).")],
    color_by: Annotated[
        str | None, typer.Option("--color-by", help="Parameter that colours the points.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="HTML file (default RUN_DIR/report.html).")
    ] = None,
) -> None:
    """Write the run's self-contained HTML report (works offline)."""
    _write_report(run_dir, color_by, out)


@app.command("serve")
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


@app.command("bench")
@friendly
def bench_cmd(
    repeats: Annotated[int, typer.Option("--repeats", help="Timed repeats (median reported).")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """CPU time of one serving predict (Llama-3.1-8B, H100, batch 32, 1024/256) and of one search point."""
    from dse.bench import bench_search_point, bench_serving_predict

    results = [bench_serving_predict(repeats=repeats), bench_search_point(repeats=repeats)]
    if as_json:
        print_json({"results": [r.to_dict() for r in results]})
        return
    table = Table("what", "CPU ms (median)", "CPU ms (min)", "wall ms (median)", "repeats")
    for r in results:
        table.add_row(
            r.name,
            f"{r.cpu_s_median * 1e3:.2f}",
            f"{r.cpu_s_min * 1e3:.2f}",
            f"{r.wall_s_median * 1e3:.2f}",
            str(r.repeats),
        )
    console.print(table)
