"""The `dse` command: a thin typer skin over the library (each command loads, calls, prints).

Errors the user can fix (`DseError`) print one line on stderr and exit with code 2, never a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from dse.errors import DseError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Design-space exploration of the energy and latency of AI workloads on GPUs.",
)
gpu_app = typer.Typer(no_args_is_help=True, help="Inspect catalog GPUs and derived what-if GPUs.")
workload_app = typer.Typer(no_args_is_help=True, help="Inspect workload graphs (operators, FLOPs, bytes).")
app.add_typer(gpu_app, name="gpu")
app.add_typer(workload_app, name="workload")
validate_app = typer.Typer(no_args_is_help=True, help="Model error against measured data (MAPE tables).")
app.add_typer(validate_app, name="validate")
measure_app = typer.Typer(
    no_args_is_help=True, help="Measure kernels or whole models on a real NVIDIA GPU (NVML)."
)
app.add_typer(measure_app, name="measure")

console = Console()
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object with SI-unit keys.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a GPU field by dotted path, e.g. --set gpu.num_sms=144 (repeatable)."
    ),
]
MemoryOpt = Annotated[
    str | None,
    typer.Option("--memory", help="Swap the memory technology (hbm3, gddr7, ...; see `dse gpus`)."),
]
BusOpt = Annotated[int | None, typer.Option("--bus-width-bits", help="Memory bus width for --memory.")]
RateOpt = Annotated[
    float | None, typer.Option("--data-rate-gbps", help="Per-pin data rate in Gb/s for --memory.")
]


def _friendly(fn: F) -> F:
    """Turn DseError (and bad values) into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except DseError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=float) + "\n")


def _gpu_from_options(
    name: str,
    memory: str | None,
    bus_width_bits: int | None,
    data_rate_gbps: float | None,
    sets: list[str] | None,
) -> Any:
    from dse.hardware.catalog import load_gpu, parse_set_options

    overrides = parse_set_options(sets)
    if memory is None and (bus_width_bits is not None or data_rate_gbps is not None):
        raise DseError("--bus-width-bits and --data-rate-gbps need --memory TECH")
    if memory is not None:
        overrides["memory.technology"] = memory
        if bus_width_bits is not None:
            overrides["memory.bus_width_bits"] = bus_width_bits
        if data_rate_gbps is not None:
            overrides["memory.data_rate_gbit_per_s"] = data_rate_gbps
    return load_gpu(name, overrides)


@app.command("gpus")
@_friendly
def gpus_cmd(as_json: JsonOpt = False) -> None:
    """List the catalog GPUs and memory technologies."""
    from dse.hardware.catalog import list_gpus, load_gpu
    from dse.hardware.memory import list_memory_technologies

    rows = [load_gpu(name).summary() for name in list_gpus()]
    if as_json:
        _print_json({"gpus": rows, "memory_technologies": list_memory_technologies()})
        return
    console.print(_gpu_table(rows))
    console.print(f"memory technologies: {', '.join(list_memory_technologies())}")


def _gpu_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("name", "GPU", "SMs", "memory", "TB/s", "GiB", "bf16 TFLOP/s", "max MHz", "TDP W")
    for r in rows:
        bf16 = r.get("tensor_bf16_peak_flop_per_s")
        table.add_row(
            str(r["name"]),
            str(r["display_name"]),
            str(r["num_sms"]),
            str(r["memory_technology"]),
            f"{r['memory_bw_bytes_per_s'] / 1e12:.2f}",
            f"{r['memory_capacity_bytes'] / 2**30:.0f}",
            f"{bf16 / 1e12:.0f}" if bf16 else "-",
            f"{r['sm_clock_max_hz'] / 1e6:.0f}",
            f"{r['tdp_w']:.0f}",
        )
    return table


@gpu_app.command("show")
@_friendly
def gpu_show_cmd(
    name: Annotated[str, typer.Argument(help="Catalog name (see `dse gpus`) or path to a GPU YAML file.")],
    memory: MemoryOpt = None,
    bus_width_bits: BusOpt = None,
    data_rate_gbps: RateOpt = None,
    sets: SetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one GPU, optionally with its memory swapped or fields overridden."""
    gpu = _gpu_from_options(name, memory, bus_width_bits, data_rate_gbps, sets)
    if as_json:
        _print_json({**gpu.summary(), "spec": gpu.model_dump()})
        return
    table = Table("field", "value", title=gpu.display_name)
    for key, value in gpu.summary().items():
        table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    console.print(table)


@app.command("models")
@_friendly
def models_cmd(as_json: JsonOpt = False) -> None:
    """List the shipped model configs."""
    from dse.workload.models import list_models, load_model_config

    rows = [_model_row(name, load_model_config(name)) for name in list_models()]
    if as_json:
        _print_json({"models": rows})
        return
    table = Table("name", "family", "layers", "hidden", "heads", "kv heads", "params (B)")
    for r in rows:
        table.add_row(
            r["name"],
            r["family"],
            str(r["num_layers"]),
            str(r["hidden_size"]),
            str(r["num_heads"]),
            str(r["num_kv_heads"]),
            f"{r['num_params'] / 1e9:.3f}",
        )
    console.print(table)


def _model_row(name: str, arch: Any) -> dict[str, Any]:
    return {
        "name": name,
        "family": arch.family,
        "num_layers": arch.num_layers,
        "hidden_size": arch.hidden_size,
        "num_heads": arch.num_heads,
        "num_kv_heads": arch.num_kv_heads,
        "num_params": arch.num_params,
    }


def build_workload(
    model: str | None,
    phase: str,
    batch: int,
    seq_len: int,
    precision: str,
    attention: str,
    kernels: Path | None,
) -> Any:
    """The workload graph named by CLI options (shared by `workload show` and `predict`)."""
    if (model is None) == (kernels is None):
        raise DseError("give exactly one of --model NAME or --kernels FILE")
    if kernels is not None:
        from dse.workload.energaizer import load_kernel_list

        return load_kernel_list(kernels)
    from dse.workload.llm import build_decode_graph, build_prefill_graph
    from dse.workload.models import load_model_config

    arch = load_model_config(model)  # type: ignore[arg-type]
    if phase == "prefill":
        return build_prefill_graph(
            arch, batch=batch, seq_len=seq_len, precision=precision, attention=attention
        )
    if phase == "decode":
        return build_decode_graph(
            arch, batch=batch, context_len=seq_len, precision=precision, attention=attention
        )
    raise DseError(f"--phase '{phase}' is not one of: prefill, decode")


ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model name (see `dse models`) or a config.json path.")
]
KernelsOpt = Annotated[
    Path | None, typer.Option("--kernels", help="EnergAIzer-format kernel-list JSON file.")
]
PhaseOpt = Annotated[str, typer.Option("--phase", help="prefill or decode (one step at context --seq-len).")]
BatchOpt = Annotated[int, typer.Option("--batch", help="Sequences in the batch.")]
SeqOpt = Annotated[
    int, typer.Option("--seq-len", help="Prompt length (prefill) or KV context length (decode).")
]
PrecisionOpt = Annotated[str, typer.Option("--precision", help="fp32, tf32, bf16, fp16 or fp8.")]
AttentionOpt = Annotated[str, typer.Option("--attention", help="flash or eager.")]


@workload_app.command("show")
@_friendly
def workload_show_cmd(
    model: ModelOpt = None,
    kernels: KernelsOpt = None,
    phase: PhaseOpt = "prefill",
    batch: BatchOpt = 1,
    seq_len: SeqOpt = 1024,
    precision: PrecisionOpt = "bf16",
    attention: AttentionOpt = "flash",
    as_json: JsonOpt = False,
) -> None:
    """Operators of a workload with FLOPs and compulsory DRAM bytes, per operator and in total."""
    graph = build_workload(model, phase, batch, seq_len, precision, attention, kernels)
    rows = graph.rows()
    totals = {
        "total_flop": graph.total_flop(),
        "total_min_dram_bytes": graph.total_min_dram_bytes(),
        "num_ops": len(graph),
        "num_kernels": graph.num_kernels,
    }
    num_params = graph.meta.get("num_params")
    if num_params is not None:
        totals["num_params"] = num_params
    if as_json:
        _print_json({"name": graph.name, **totals, "meta": graph.meta, "ops": rows})
        return
    table = Table(title=graph.name)
    table.add_column("op", overflow="fold")
    for header in ("kind", "count", "GFLOP", "MB"):
        table.add_column(header, justify="right" if header != "kind" else "left")
    for r in rows:
        table.add_row(
            str(r["name"]),
            str(r["kind"]),
            str(r["count"]),
            f"{r['total_flop'] / 1e9:.3f}",
            f"{r['total_min_dram_bytes'] / 1e6:.2f}",
        )
    table.add_row(
        "total",
        "",
        str(graph.num_kernels),
        f"{graph.total_flop() / 1e9:.3f}",
        f"{graph.total_min_dram_bytes() / 1e6:.2f}",
        style="bold",
    )
    console.print(table)
    if num_params is not None:
        console.print(f"parameters: {num_params / 1e9:.3f} B")


ClockOpt = Annotated[
    float | None, typer.Option("--clock-mhz", help="Requested SM clock in MHz (default: boost).")
]
CapOpt = Annotated[
    float | None, typer.Option("--power-cap-w", help="Power cap in W (default: the GPU's TDP).")
]
InOpt = Annotated[int | None, typer.Option("--input-tokens", help="Serving: prompt tokens per request.")]
OutOpt = Annotated[int | None, typer.Option("--output-tokens", help="Serving: generated tokens per request.")]
BreakdownOpt = Annotated[bool, typer.Option("--breakdown", help="Energy by hardware module and by operator.")]


def _operating_point(clock_mhz: float | None, power_cap_w: float | None) -> Any:
    from dse.perf.types import OperatingPoint

    if clock_mhz is not None and not clock_mhz > 0:
        raise DseError(f"--clock-mhz must be positive, got {clock_mhz}")
    if power_cap_w is not None and not power_cap_w > 0:
        raise DseError(f"--power-cap-w must be positive, got {power_cap_w}")
    return OperatingPoint(sm_clock_hz=None if clock_mhz is None else clock_mhz * 1e6, power_cap_w=power_cap_w)


def _serving(
    model: str | None,
    gpu: Any,
    batch: int,
    input_tokens: int | None,
    output_tokens: int | None,
    precision: str,
    attention: str,
    point: Any,
) -> Any:
    from dse.serving import ServingRequest, predict_serving
    from dse.workload.models import load_model_config

    if model is None or input_tokens is None or output_tokens is None:
        raise DseError("serving predictions need --model, --input-tokens and --output-tokens")
    request = ServingRequest(
        batch=batch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        precision=precision,
        attention=attention,
    )
    return predict_serving(load_model_config(model), gpu, request, point)


@app.command("predict")
@_friendly
def predict_cmd(
    gpu: Annotated[str, typer.Option("--gpu", help="Catalog GPU name or a GPU YAML path.")] = "h100-sxm",
    model: ModelOpt = None,
    kernels: KernelsOpt = None,
    phase: PhaseOpt = "prefill",
    batch: BatchOpt = 1,
    seq_len: SeqOpt = 1024,
    input_tokens: InOpt = None,
    output_tokens: OutOpt = None,
    precision: PrecisionOpt = "bf16",
    attention: AttentionOpt = "flash",
    clock_mhz: ClockOpt = None,
    power_cap_w: CapOpt = None,
    memory: MemoryOpt = None,
    bus_width_bits: BusOpt = None,
    data_rate_gbps: RateOpt = None,
    sets: SetOpt = None,
    host_gap_us: Annotated[
        float,
        typer.Option(
            "--host-gap-us", help="Host time per kernel launch (eager PyTorch ~20 us); 0 = CUDA graphs."
        ),
    ] = 0.0,
    breakdown: BreakdownOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Predict latency, energy and power: a workload (--kernels, or --model with --phase) or LLM serving
    (--model with --input-tokens and --output-tokens)."""
    spec = _gpu_from_options(gpu, memory, bus_width_bits, data_rate_gbps, sets)
    point = _operating_point(clock_mhz, power_cap_w)
    if input_tokens is not None or output_tokens is not None:
        est = _serving(model, spec, batch, input_tokens, output_tokens, precision, attention, point)
        _show_serving(est, breakdown, as_json)
        return
    from dse.perf.predict import predict_command_payload, predict_graph

    graph = build_workload(model, phase, batch, seq_len, precision, attention, kernels)
    pred = predict_graph(graph, spec, point, host_gap_s=host_gap_us * 1e-6)
    _show_graph(predict_command_payload(pred, kernels=True), pred, breakdown, as_json)


def _show_serving(est: Any, breakdown: bool, as_json: bool) -> None:
    from dse.cli_render import SERVING_ROWS, breakdown_table, metrics_table
    from dse.serving import rollup_by_level

    if as_json:
        _print_json(est.to_dict())
        return
    r = est.request
    title = (
        f"{est.model} on {est.gpu}: batch {r.batch}, {r.input_tokens} in / {r.output_tokens} out, "
        f"{r.precision}, {r.attention} attention"
    )
    console.print(metrics_table(est.metrics(), SERVING_ROWS, title))
    console.print("feasible" if est.feasible else f"[bold red]infeasible:[/] {est.infeasible_reason}")
    if breakdown:
        console.print(breakdown_table(est.energy_j_by_module, "energy by hardware module"))
        console.print(breakdown_table(rollup_by_level(est.energy_j_by_name, 1), "energy by phase"))
        console.print(breakdown_table(est.energy_j_by_name, "energy by operator", limit=25))


def _show_graph(payload: dict[str, Any], pred: Any, breakdown: bool, as_json: bool) -> None:
    from dse.cli_render import GRAPH_ROWS, breakdown_table, metrics_table

    if as_json:
        _print_json(payload)
        return
    console.print(metrics_table(payload, GRAPH_ROWS, f"{pred.name} on {pred.gpu}"))
    console.print(breakdown_table(pred.energy_j_by_module(), "energy by hardware module"))
    if breakdown:
        console.print(breakdown_table(pred.energy_j_by_name(), "energy by operator", limit=25))


@app.command("whatif")
@_friendly
def whatif_cmd(
    gpu: Annotated[str, typer.Argument(help="The baseline GPU (catalog name or YAML path).")],
    model: ModelOpt = "llama-3.1-8b",
    batch: BatchOpt = 32,
    input_tokens: Annotated[int, typer.Option("--input-tokens")] = 1024,
    output_tokens: Annotated[int, typer.Option("--output-tokens")] = 256,
    precision: PrecisionOpt = "bf16",
    attention: AttentionOpt = "flash",
    clock_mhz: ClockOpt = None,
    power_cap_w: CapOpt = None,
    memory: MemoryOpt = None,
    bus_width_bits: BusOpt = None,
    data_rate_gbps: RateOpt = None,
    sets: SetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Baseline GPU against the changed one (--memory ..., --set ...) for one serving workload."""
    if memory is None and not sets:
        raise DseError(
            "say what changes: --memory TECH [--bus-width-bits N --data-rate-gbps X] and/or --set PATH=VALUE"
        )
    point = _operating_point(clock_mhz, power_cap_w)
    base_gpu = _gpu_from_options(gpu, None, None, None, None)
    new_gpu = _gpu_from_options(gpu, memory, bus_width_bits, data_rate_gbps, sets)
    runs = [
        _serving(model, g, batch, input_tokens, output_tokens, precision, attention, point)
        for g in (base_gpu, new_gpu)
    ]
    _show_whatif(base_gpu, new_gpu, runs, as_json)


def _show_whatif(base_gpu: Any, new_gpu: Any, runs: list[Any], as_json: bool) -> None:
    from dse.cli_render import SERVING_ROWS, compare_table

    sides = [{**g.summary(), **est.metrics()} for g, est in zip((base_gpu, new_gpu), runs, strict=True)]
    if as_json:
        _print_json({"baseline": sides[0], "changed": sides[1]})
        return
    rows = (("memory_bw_bytes_per_s", "memory bandwidth (TB/s)", 1e-12, ".2f"), *SERVING_ROWS)
    label = f"{new_gpu.memory.technology} {new_gpu.memory.bus_width_bits}-bit"
    console.print(compare_table(sides[0], sides[1], rows, (base_gpu.name, label)))
    for name, side in (("baseline", sides[0]), ("changed", sides[1])):
        status = "feasible" if side["feasible"] else f"[bold red]infeasible:[/] {side['infeasible_reason']}"
        console.print(f"{name}: {status}")


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
@_friendly
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
@_friendly
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
    for row in rows:
        table.add_row(*(f"{100 * row[k]:.1f}%" if k in percent else str(row[k]) for k in keys))
    return table


@validate_app.command("kernels")
@_friendly
def validate_kernels_cmd(as_json: JsonOpt = False) -> None:
    """Kernel latency MAPE per family and GPU on the held-out 20% (seed 0), fitted vs analytical."""
    from dse.calibrate.validate import validate_kernels

    rows = validate_kernels()
    if as_json:
        _print_json({"rows": rows})
        return
    columns = ("family", "gpu", "dtype", "split", "n_test", "mape_fitted", "mape_analytical")
    title = "kernel latency MAPE (kernels >= 10 us)"
    console.print(_frame_table(rows, title, ("mape_fitted", "mape_analytical"), columns))


@validate_app.command("power")
@_friendly
def validate_power_cmd(as_json: JsonOpt = False) -> None:
    """Power, latency and energy MAPE: A100 DVFS sweep and 900 MHz (held out), A10 forecast, H200 kernels."""
    from dse.calibrate.validate_power import validate_power

    rows = [r.to_dict() for r in validate_power()]
    if as_json:
        _print_json({"rows": rows})
        return
    console.print(_frame_table(rows, "power model MAPE", ("power_mape", "latency_mape", "energy_mape")))


@validate_app.command("serving")
@_friendly
def validate_serving_cmd(as_json: JsonOpt = False) -> None:
    """TTFT, TPOT, power and J/token MAPE against ML.ENERGY (H100) and aiconfigurator silicon rows."""
    from dse.calibrate.validate_serving import validate_serving

    rows = [dict(r) for r in validate_serving()]
    if as_json:
        _print_json({"rows": rows})
        return
    columns = ("source", "metric", "subset", "group", "n", "mape", "bias")
    console.print(_frame_table(rows, "serving MAPE (bias: signed mean error)", ("mape", "bias"), columns))


@app.command("run")
@_friendly
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
@_friendly
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
@_friendly
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
@_friendly
def bench_cmd(
    repeats: Annotated[int, typer.Option("--repeats", help="Timed repeats (median reported).")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """CPU time of one serving predict (Llama-3.1-8B, H100, batch 32, 1024/256) and of one search point."""
    from dse.bench import bench_search_point, bench_serving_predict

    results = [bench_serving_predict(repeats=repeats), bench_search_point(repeats=repeats)]
    if as_json:
        _print_json({"results": [r.to_dict() for r in results]})
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


@app.command("demo")
@_friendly
def demo_cmd() -> None:
    """A tour of what dse can do today (what `make run` runs)."""
    from dse.demo import run_demo

    run_demo(console)


def main() -> None:  # pragma: no cover - console-script convenience
    app()
