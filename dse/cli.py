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


@app.command("demo")
@_friendly
def demo_cmd() -> None:
    """A tour of what dse can do today (what `make run` runs)."""
    from dse.demo import run_demo

    run_demo(console)


def main() -> None:  # pragma: no cover - console-script convenience
    app()
