"""`dse sweep` and `dse compare`: one or two parameters varied over a grid, and one workload on several GPUs.

Both build an `EvalContext` from the serving options (the load modes as in `dse predict`) and evaluate
points with the search's `evaluate_point` (`dse.search.sweep`); `--html FILE` writes an offline plotly
page (`dse.report.figures.sweep`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dse.cli.common import (
    AttentionOpt,
    CapOpt,
    ClockOpt,
    EngineOpt,
    InOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelOpt,
    OutOpt,
    PrecisionOpt,
    SamplingOpt,
    SetOpt,
    check_output_file,
    console,
    err_console,
    esc,
    explain_implied,
    friendly,
    gpu_from_options,
    operating_point,
    print_json,
    print_note,
    resolve_precision,
    with_options,
)
from dse.cli.cost import GPU_FORM, RENT_FLAG, CostArgs, compare_prices, price_line, rent_basis
from dse.cli.load import (
    PREEMPTIONS_PER_REQUEST,
    LoadArgs,
    check_load_attention,
    note_lengths,
    serving_lengths,
)
from dse.config.jsonio import with_nulls
from dse.errors import DseError
from dse.search.interrupts import sigterm_as_interrupt
from dse.units import format_value

HtmlOpt = Annotated[
    Path | None, typer.Option("--html", help="Also write an offline HTML chart (plotly.js inlined) here.")
]
ParamsArg = Annotated[
    list[str],
    typer.Argument(
        help="PATH=START:STOP:STEPS, one or two: a path of `dse gpu fields` (gpu. optional), a cost.* "
        "path of `dse cost facts`, sm_clock_mhz, power_cap_w, batch, concurrency, request_rate_per_s, "
        "input_tokens, output_tokens, or under load num_requests, max_num_seqs, max_batched_tokens, "
        "gpu_memory_utilization, host_step_s or layer_host_s (seconds)."
    ),
]
GpuOpt = Annotated[str, typer.Option("--gpu", help="Catalog GPU name or a GPU YAML path.")]


def _context(gpu: str, model: str | None, load: LoadArgs, tokens: tuple[int | None, int | None],
             command: str = "sweep", swept: tuple[str, ...] = (), **options: Any) -> Any:  # fmt: skip
    """The EvalContext of the serving options (`command`: the command named in errors; `swept`: the paths
    a sweep varies)."""
    from dse.search.objective import EvalContext

    what = f"dse {command} is of an LLM serving workload"
    if model is None:
        raise DseError(f"{what}: give --model")
    from dse.workload.models import load_model_config
    from dse.workload.vision import is_vision_model

    if is_vision_model(str(model)):
        raise DseError(f"{what}; {model} is a vision model (use dse predict)")
    arch = load_model_config(str(model))
    if arch.family == "encoder":
        raise DseError(f"{what}; {model} is an encoder (use dse predict)")
    input_tokens, output_tokens = serving_lengths(*tokens, context_tokens=arch.max_position_embeddings)
    mode = load.mode()
    _check_workload(arch, load, (input_tokens, output_tokens), swept, **options)
    ctx = EvalContext(
        gpu=gpu, model=model, mode=mode, batch=1 if load.batch is None else load.batch,
        input_tokens=input_tokens, output_tokens=output_tokens, concurrency=load.concurrency,
        request_rate_per_s=load.request_rate, num_requests=load.num_requests, length_dist=load.length_dist,
        length_sigma=load.sigma(), request_seed=load.seed, max_num_seqs=load.max_num_seqs,
        max_batched_tokens=load.max_batched_tokens, gpu_memory_utilization=load.gpu_memory_utilization,
        host_step_s=load.host_step_s(), layer_host_s=load.layer_host_s(),
        tp=load.tp, pp=load.pp, ep=load.ep, dp=load.dp, **options,
    )  # fmt: skip
    from dse.search.checks import workload_value_problem

    for key in ("gpu_memory_utilization", "max_num_seqs", "max_batched_tokens", "num_requests"):
        value = getattr(ctx, key)
        problem = None if value is None else workload_value_problem(key, value, under_load=mode != "static")
        if problem is not None:  # every point would fail with it
            raise DseError(f"--{key.replace('_', '-')}: {problem}")
    return ctx


def _check_workload(arch: Any, load: LoadArgs, tokens: tuple[int, int], swept: tuple[str, ...],
                    **options: Any) -> None:  # fmt: skip
    """The workload's flags checked once, as `dse predict` checks them: one that every GPU and point
    refuses alike (--attention foo, --batch 0, --tp 3 of 32 heads, mxfp4 on a dense model) gave a table of
    failed rows and exit code 0. A swept batch is checked against --dp at each point, not here."""
    from dse.cli.load import named_as_flags
    from dse.serving.static import ServingRequest, check_layout
    from dse.workload.llm import check_numerics
    from dse.workload.sharding import Parallelism, check_parallelism

    layout = {"tp": load.tp, "pp": load.pp, "ep": load.ep, "dp": load.dp}
    with named_as_flags():
        if load.mode() != "static":
            check_load_attention(options["attention"])
            load.request(input_tokens=tokens[0], output_tokens=tokens[1], precision=options["precision"],
                         kv_dtype=options["kv_dtype"], engine=options["engine"] or "vllm",
                         sampling=options["sampling"])  # fmt: skip
            check_parallelism(arch, Parallelism(**layout))
        else:
            batch = 1 if load.batch is None else load.batch  # 1: a swept batch's stand-in
            request = ServingRequest(
                batch=batch, input_tokens=tokens[0], output_tokens=tokens[1],
                precision=options["precision"], attention=options["attention"], kv_dtype=options["kv_dtype"],
                engine=options["engine"] or "none", sampling=options["sampling"] or "none", **layout,
            )  # fmt: skip
            if "batch" in swept:
                check_parallelism(arch, request.parallelism)
            else:
                check_layout(arch, request)
        check_numerics(
            arch, options["precision"], options["attention"] if load.mode() == "static" else "flash"
        )


def _no_flag_for_swept(swept: tuple[str, ...], load: LoadArgs, input_tokens: int | None,
                       output_tokens: int | None) -> None:  # fmt: skip
    """DseError for a swept workload key also given as a flag: the flag would be replaced at every point
    without a word (each key of `dse.search.sweep.SWEEP_WORKLOAD_KEYS`, in any unit spelling)."""
    from dse.units import si_key

    given = {
        "batch": load.batch, "concurrency": load.concurrency, "request_rate_per_s": load.request_rate,
        "input_tokens": input_tokens, "output_tokens": output_tokens, "num_requests": load.num_requests,
        "max_num_seqs": load.max_num_seqs, "max_batched_tokens": load.max_batched_tokens,
        "gpu_memory_utilization": load.gpu_memory_utilization, "host_step_s": load.host_step_us,
        "layer_host_s": load.layer_host_us,
    }  # fmt: skip
    for path in swept:
        if given.get(si_key(path)[0]) is not None:
            raise DseError(f"sweep: {path} is swept and also given as a flag; drop the flag")


def _implied_mode(load: LoadArgs, swept: tuple[str, ...]) -> LoadArgs:
    """A swept `concurrency` or `request_rate_per_s` with no mode given implies that load mode (the
    placeholder knob set here is replaced by each point's value)."""
    import dataclasses

    if load.batch is not None or load.max_throughput or load.concurrency or load.request_rate:
        return load
    if "concurrency" in swept:
        return dataclasses.replace(load, concurrency=1)
    if "request_rate_per_s" in swept:
        return dataclasses.replace(load, request_rate=1.0)
    return load


def _check_cost_axes(axes: list[Any], cost: CostArgs) -> None:
    """A swept cost fact beside its own flag (`--pue` with `cost.operation.pue=1:2:2`, `--gpu-price-usd` with
    a swept `cost.gpu_price_usd.*`): the flag won at every point, the rows equal (as `dse predict` refuses
    `--pue` beside `--set`). So did a swept price the renter's rate replaces
    (`cost.operation.electricity_usd_per_kwh` beside --gpu-usd-per-hour)."""
    from dse.cost.operation import renter_ignores, renter_problem

    swept = [axis.path for axis in axes if axis.path.startswith("cost.")]
    owner_only = [f"the swept {path}" for path in swept if renter_ignores(path)]
    if cost.gpu_usd_per_hour is not None and owner_only:
        raise DseError(renter_problem(owner_only, RENT_FLAG))
    for path in swept:
        flag = cost.flag_setting(path)
        if flag is not None:
            raise DseError(f"{flag} and the swept {path} set the same fact; drop one")
    if cost.gpu_usd_per_hour is not None and any(axis.path.startswith("gpu.") for axis in axes):
        err_console.print(  # as `dse compare` says under one rent for several GPUs
            "[bold yellow]warning:[/] one $ per GPU-hour for every swept GPU design (--gpu-usd-per-hour), "
            "so $ per token follows speed alone, not build cost; --gpu-price-usd (the owner's view) moves "
            "with each design's build cost",
            highlight=False,
        )


def _check_operating_axes(axes: list[Any], gpu: str, spec: Any) -> None:
    """A swept clock off the GPU's range, or a swept cap below its lowest settable limit, fails every
    point alike: said once, up front (a cap of -1 W was a failed row and exit code 0). A cap above the TDP
    does not bind, as in a comparison: only the lowest is checked."""
    from dse.perf.dvfs import power_cap_w as cap_in_force
    from dse.perf.types import OperatingPoint

    for axis in axes:
        if axis.path == "sm_clock_mhz":
            for clock in (min(axis.values), max(axis.values)):
                try:
                    operating_point(clock, None, {gpu: spec})
                except DseError as exc:  # "--clock-mhz [VALUE] ..." said of the axis's end
                    said = str(exc).removeprefix("--clock-mhz ")
                    said = said if said.startswith(f"{clock:g} ") else f"{clock:g}: {said}"
                    raise DseError(f"sweep sm_clock_mhz={said}") from None
        if axis.path == "power_cap_w":
            lowest = min(axis.values)
            try:
                cap_in_force(spec, OperatingPoint(power_cap_w=lowest))
            except DseError as exc:
                raise DseError(f"sweep power_cap_w={lowest:g}: {exc}") from None


def _base_params(spec: Any, gpu: str, sets: list[str] | None, clock_mhz: float | None,
                 power_cap_w: float | None) -> dict[str, Any]:  # fmt: skip
    """The fixed point params: `--set` overrides (gpu.* and cost.*) and the operating point (checked by the
    caller on its GPUs). A cost fact goes to every point as its `cost.<path>` (it became `gpu.cost...`:
    every point failed, exit 0)."""
    from dse.cli.cost import CostArgs
    from dse.cost.facts import split_cost_overrides
    from dse.hardware.overrides import parse_set_options

    CostArgs().options(sets)  # the cost facts checked once, as `dse predict` checks them
    gpu_sets, cost_sets = split_cost_overrides(parse_set_options(sets))
    base = {"gpu." + k.removeprefix("gpu."): v for k, v in gpu_sets.items()}
    base |= {f"cost.{k}": v for k, v in cost_sets.items()}
    if clock_mhz is not None:
        base["sm_clock_mhz"] = clock_mhz
    if power_cap_w is not None:
        base["power_cap_w"] = power_cap_w
    return base


def _workload_text(ctx: Any, swept: list[str] | None = None) -> str:
    """What runs: the load (a swept knob says so), the lengths and the precision."""
    knobs = {"static": "batch", "concurrency": "concurrency", "request_rate": "request_rate_per_s"}
    knob = knobs.get(ctx.mode)
    if ctx.mode == "static":
        load = f"static batch of {ctx.batch}"
    elif ctx.mode == "concurrency":
        load = f"concurrency {ctx.concurrency}"
    elif ctx.mode == "request_rate":
        load = f"{ctx.request_rate_per_s:g} requests/s"
    else:
        load = "max throughput"
    if knob in (swept or []):
        load = f"{'static batch' if knob == 'batch' else knob} swept"
    lengths = [
        f"{kind} swept" if f"{kind}_tokens" in (swept or []) else f"{getattr(ctx, f'{kind}_tokens')} {word}"
        for kind, word in (("input", "in"), ("output", "out"))
    ]
    sizes = {k: int(getattr(ctx, k, 1)) for k in ("tp", "pp", "ep", "dp")}
    layout = " ".join(f"{k.upper()}{v}" for k, v in sizes.items() if v > 1)
    gpus = sizes["tp"] * sizes["pp"] * sizes["dp"]
    # a layout said in the title: power and memory rows are per GPU, J per token over all of them
    where = f", {layout} ({gpus} GPUs per point)" if layout else ""
    return f"{load}, {' / '.join(lengths)}, {ctx.precision}{where}"


def _cell(row: dict[str, Any], key: str, scale: float, fmt: str) -> str:
    value = row["metrics"].get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or value != value:
        return "-"
    return format_value(value * scale, fmt)


def _check_html(path: Path | None, command: str = "sweep") -> None:
    """Refuse an --html path that cannot be written before the sweep runs, not after it; `command` names
    the file suggested for a directory."""
    if path is not None:
        check_output_file(path, "--html", f"{command}.html")


def _write_html(path: Path, fig: Any, title: str) -> None:
    from dse.report.figures.sweep import figure_page

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(figure_page(fig, title), encoding="utf-8")
    except OSError as exc:
        raise DseError(f"--html {path}: cannot write ({exc.strerror or exc})") from None
    err_console.print(f"wrote {esc(path)}", highlight=False)


def _with_precision(rows: list[dict[str, Any]], precision: str, note: str | None) -> list[dict[str, Any]]:
    """Each row with the precision it ran at (JSON readers see it; it may be the checkpoint's), and a
    failure about --precision saying where an implied one came from (`explain_implied`)."""
    return [
        {**r, "precision": precision}
        | ({} if r["reason"] is None else {"reason": explain_implied(str(r["reason"]), precision, note)})
        for r in rows
    ]


def _show_sweep(rows: list[dict[str, Any]], paths: list[str], title: str, as_json: bool) -> None:
    from rich.table import Table

    from dse.search.sweep import sweep_metrics

    if as_json:
        print_json(with_nulls(rows))
        return
    metrics = sweep_metrics(paths)
    table = Table(title=esc(title))
    for column in (*map(esc, paths), *(m[1] for m in metrics), "feasible"):
        table.add_column(column, overflow="fold")
    for row in rows:
        status = "yes" if row["reason"] is None else "[red]no[/]"
        cells = [_cell(row, key, scale, fmt) for key, _, scale, fmt in metrics]
        table.add_row(*(f"{row['params'][p]:g}" for p in paths), *cells, status)
    console.print(table)
    wheres = [", ".join(f"{p}={row['params'][p]:g}" for p in paths) for row in rows]
    _print_engines(rows, wheres, group=True)
    _print_overloaded(rows, wheres)
    for row, where in zip(rows, wheres, strict=True):
        if row["reason"] is not None:
            console.print(
                f"{esc(where)}: [bold red]{row['status']}:[/] {esc(row['reason'])}", highlight=False
            )


@friendly
@with_options(load=LoadArgs, cost=CostArgs)
def sweep_cmd(
    params: ParamsArg,
    gpu: GpuOpt = "h100-sxm",
    model: ModelOpt = None,
    input_tokens: InOpt = None,
    output_tokens: OutOpt = None,
    precision: PrecisionOpt = None,
    attention: AttentionOpt = "flash",
    kv_dtype: KvDtypeOpt = None,
    engine: EngineOpt = None,
    sampling: SamplingOpt = None,
    clock_mhz: ClockOpt = None,
    power_cap_w: CapOpt = None,
    sets: SetOpt = None,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    *,
    load: LoadArgs,
    cost: CostArgs,
) -> None:
    """Vary one or two parameters (PATH=START:STOP:STEPS, STEPS points each) for one serving workload: a
    table with one row per point (TTFT, TPOT, tokens/s, J per token, power, feasible). Serving only: a
    training step's settings are swept by a training study (`dse run studies/training.yaml`)."""
    from dse.search.sweep import SweepInterrupted, parse_axis

    if not 1 <= len(params) <= 2:
        raise DseError(f"give one or two PATH=START:STOP:STEPS parameters, not {len(params)}")
    _check_html(html)
    swept = tuple(p.partition("=")[0].strip() for p in params)
    _no_flag_for_swept(swept, load, input_tokens, output_tokens)
    load = _implied_mode(load, swept)
    precision, note = resolve_precision(precision, model)
    options: dict[str, Any] = {"precision": precision, "attention": attention, "kv_dtype": kv_dtype}
    options |= {"engine": engine, "sampling": sampling, "cost": cost.context_fields(sets)}
    # a swept length needs no flag of its own: every point sets it (the smallest valid lengths, 1 in and
    # 2 out under load, only stand in for the base)
    tokens = tuple(low if v is None and k in swept else v for k, v, low in
                   (("input_tokens", input_tokens, 1), ("output_tokens", output_tokens, 2)))  # fmt: skip
    ctx = _context(gpu, model, load, (tokens[0], tokens[1]), "sweep", swept, **options)
    spec = gpu_from_options(gpu, None, None, None, sets)
    operating_point(clock_mhz, power_cap_w, {gpu: spec})
    base = _base_params(spec, gpu, sets, clock_mhz, power_cap_w)
    axes = [parse_axis(p, ctx) for p in params]
    _check_operating_axes(axes, gpu, spec)
    _check_cost_axes(axes, cost)
    note_lengths(*tokens)  # the input checked: an error stays one line
    print_note(note)
    try:
        with sigterm_as_interrupt():  # a scheduler's SIGTERM keeps the finished rows, as Ctrl-C does
            rows, stopped = _run_with_progress(axes, ctx, base), None
    except SweepInterrupted as stop:  # show what was done, then exit as an interrupt
        rows, stopped = stop.rows, stop
        if not rows:
            raise
    rows = _with_precision(rows, precision, note)
    paths = [a.path for a in axes]
    title = f"{ctx.model} on {spec.name}: {_workload_text(ctx, paths)}"
    _show_sweep(rows, paths, title, as_json)
    if html is not None:
        from dse.report.figures.sweep import plot_sweep

        _write_html(html, plot_sweep(rows, paths, title), f"dse sweep: {title}")
    if stopped is not None:
        err_console.print(f"{stopped}: the rows above are the points done", highlight=False)
        raise typer.Exit(130)


# A sweep of at least this many points draws a progress bar (on a terminal's stderr; gone when it ends):
# at ~10-40 ms a point, a 10,000-point sweep runs for minutes.
SWEEP_PROGRESS_MIN_POINTS = 50


def _run_with_progress(axes: list[Any], ctx: Any, base: dict[str, Any]) -> list[dict[str, Any]]:
    """`run_sweep`, with a transient progress bar on stderr when it is a terminal and the grid is large."""
    import math

    from dse.search.sweep import run_sweep

    total = math.prod(len(axis.values) for axis in axes)
    if total < SWEEP_PROGRESS_MIN_POINTS or not err_console.is_terminal:
        return run_sweep(axes, ctx, base)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("sweep", total=total)
        return run_sweep(axes, ctx, base, on_point=lambda done, _total: bar.update(task, completed=done))


def _show_compare(rows: list[dict[str, Any]], title: str, as_json: bool, mode: str, changed: list[str],
                  cost: CostArgs, *, moved: bool = False) -> None:  # fmt: skip
    """The comparison's table (or `--json`): `changed` lists the `--set` changes every GPU ran with, which
    the title and each column say (a pasted table read "l4" for an L4 of 100 SMs). `moved`: one price given
    moved with the other GPUs' build costs (`compare_prices`), which the cost view line says (`price_line`):
    one price for an A100 and an H100 read as the A100's own."""
    from rich.table import Table

    from dse.search.sweep import COMPARE_METRICS

    view = "owner" if cost.gpu_usd_per_hour is None else "renter"
    if as_json:
        print_json(with_nulls({"mode": mode, "changed": changed, "cost_view": view, "gpus": rows}))
        return
    mark = " (changed)" if changed else ""
    table = Table("metric", *(esc(f"{r['params']['gpu']}{mark}") for r in rows), title=esc(title))
    for key, label, scale, fmt in COMPARE_METRICS:
        if all(r["metrics"].get(key) is None for r in rows):
            continue  # a metric the mode does not give (peak power under load): no row of dashes
        table.add_row(label, *(_cell(r, key, scale, fmt) for r in rows))
    table.add_row("feasible", *("yes" if r["reason"] is None else "[red]no[/]" for r in rows))
    console.print(table)
    if any(r["metrics"].get("usd_per_gpu_hour") is not None for r in rows):
        basis = rent_basis({"cost_view": view, "cost_scenario": cost.cost_scenario}, cost.gpu_usd_per_hour,
                           "GPU", GPU_FORM)  # fmt: skip
        given = price_line(cost, str(rows[0]["params"]["gpu"]), "each other GPU's", "GPU", GPU_FORM, moved)
        console.print(esc(basis if given is None else f"{basis}: {given}"), highlight=False)
    _print_engines(rows, [str(r["params"]["gpu"]) for r in rows])
    _print_overloaded(rows, [str(r["params"]["gpu"]) for r in rows])
    for row in rows:
        if row["reason"] is not None:
            gpu, reason = esc(row["params"]["gpu"]), esc(row["reason"])
            console.print(f"{gpu}: [bold red]{row['status']}:[/] {reason}", highlight=False)


def _print_overloaded(rows: list[dict[str, Any]], labels: list[str]) -> None:
    """One line naming the rows (by `labels`) of an open loop whose arrivals outpace the server
    (`dse.serving.metrics.overloaded`), and one naming those whose KV cache thrashes
    (`dse.cli.load.PREEMPTIONS_PER_REQUEST`), as `dse predict` warns under its table."""
    over = [label for row, label in zip(rows, labels, strict=True) if row["metrics"].get("overloaded")]
    if over:
        console.print(
            "[bold yellow]warning:[/] overloaded (arrivals outpace the server, its queue grows: TTFT and "
            "queue figures depend on --num-requests; requests/s is what it sustains): "
            f"{esc('; '.join(over))}",
            highlight=False,
        )
    thrash = [
        f"{label} ({int(m['preemptions'])} in {int(m['num_requests'])})"
        for label, m in zip(labels, (row["metrics"] for row in rows), strict=True)
        if (m.get("preemptions") or 0) > PREEMPTIONS_PER_REQUEST * (m.get("num_requests") or 0)
    ]
    if thrash:
        console.print(
            "[bold yellow]warning:[/] preemptions (the KV cache holds fewer requests than the engine "
            "admits; evicted requests are recomputed, `dse predict` says how many fit): "
            f"{esc('; '.join(thrash))}",
            highlight=False,
        )


def _print_engines(rows: list[dict[str, Any]], labels: list[str], *, group: bool = False) -> None:
    """Under load: the engine settings the rows (named by `labels`) ran with, on one line when they agree,
    else a line per row (`group`: a line per setting, naming its rows); a preset's defaults follow the
    GPU's memory."""
    from dse.cli.load import engine_text

    texts = {label: engine_text(r["engine"]) for r, label in zip(rows, labels, strict=True) if "engine" in r}
    if len(texts) == len(rows) and len(set(texts.values())) == 1:  # every row ran, with the same settings
        console.print(next(iter(texts.values())), highlight=False)
        return
    by_text: dict[str, list[str]] = {}
    for label, text in texts.items():
        by_text.setdefault(text, []).append(label)
    for text, names in by_text.items() if group else ((t, [n]) for n, t in texts.items()):
        line = f"{text}: {esc('; '.join(names))}" if group else f"{esc(names[0])}: {text}"
        console.print(line, highlight=False)
    if len(by_text) > 1:
        console.print(
            "[dim]the engine's defaults follow each GPU (vLLM's at 70 GiB of memory): give --max-num-seqs "
            "and --max-batched-tokens to hold them[/]",
            highlight=False,
        )


@friendly
@with_options(load=LoadArgs, cost=CostArgs)
def compare_cmd(
    gpus: Annotated[list[str], typer.Argument(help="Two or more catalog GPU names or GPU YAML paths.")],
    model: ModelOpt = None,
    input_tokens: InOpt = None,
    output_tokens: OutOpt = None,
    precision: PrecisionOpt = None,
    attention: AttentionOpt = "flash",
    kv_dtype: KvDtypeOpt = None,
    engine: EngineOpt = None,
    sampling: SamplingOpt = None,
    clock_mhz: ClockOpt = None,
    power_cap_w: CapOpt = None,
    sets: SetOpt = None,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    *,
    load: LoadArgs,
    cost: CostArgs,
) -> None:
    """The same serving workload on each GPU, side by side: latency, throughput, power, J per token, memory
    needed against capacity and cost (a static --batch, or a load mode as in `dse predict`; `--set` changes
    every GPU alike, and the title and columns say so; a renter prices each GPU with --gpu-usd-per-hour
    NAME=PRICE,...). Serving only: a training step is predicted per GPU by `dse predict`."""
    from dse.search.sweep import compare_gpus

    if len(gpus) < 2:
        raise DseError("give at least two GPUs to compare")
    _check_html(html, "compare")
    per_gpu = cost.per_gpu(gpus)
    costs = {name: args.context_fields(sets) for name, args in per_gpu.items()}
    precision, note = resolve_precision(precision, model)
    options: dict[str, Any] = {"precision": precision, "attention": attention, "kv_dtype": kv_dtype}
    options |= {"engine": engine, "sampling": sampling, "cost": costs[gpus[0]]}
    ctx = _context(gpus[0], model, load, (input_tokens, output_tokens), "compare", (), **options)
    specs = {name: gpu_from_options(name, None, None, None, sets) for name in gpus}
    operating_point(clock_mhz, power_cap_w, specs)
    # one price given is the first GPU's; the others' move with their build cost, as in `dse whatif`
    prices, moved = compare_prices(cost, specs, sets)
    costs |= {name: per_gpu[name].context_fields(sets, price) for name, price in prices.items()}
    base = _base_params(specs[gpus[0]], gpus[0], sets, clock_mhz, power_cap_w)
    note_lengths(input_tokens, output_tokens)
    print_note(note)
    rows = _with_precision(compare_gpus(gpus, ctx, base, costs), precision, note)
    # the hardware's changes, as `dse whatif` and `dse gpu show` label them (a `cost.` price changes no GPU)
    hardware = [item for item in sets or [] if not item.split("=", 1)[0].strip().startswith("cost.")]
    changed = [f"--set {item}" for item in hardware]
    title = f"{ctx.model}: {_workload_text(ctx)}"
    if changed:
        title += f"; every GPU changed: {' '.join(changed)}"
    _show_compare(rows, title, as_json, ctx.mode, changed, cost, moved=moved)
    if html is not None:
        from dse.report.figures.sweep import plot_compare

        _write_html(html, plot_compare(rows, title), f"dse compare: {title}")
