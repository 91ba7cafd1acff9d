"""`dse gpus`, `dse models`, `dse demo`, `dse gpu show`, `dse workload show`: catalogs and workloads."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import numpy as np
import typer
from rich import box
from rich.table import Table

from dse.cli.common import (
    BusOpt,
    JsonOpt,
    KernelsOpt,
    MemoryOpt,
    ModelOpt,
    PrecisionOpt,
    PredictAttentionOpt,
    PredictPhaseOpt,
    PredictSeqOpt,
    RateOpt,
    SetOpt,
    build_workload,
    console,
    esc,
    friendly,
    gpu_from_options,
    print_json,
    print_note,
    resolve_precision,
)
from dse.cli.one_pass import shape_flags
from dse.cli.training import ImageSizeOpt, MemoryFormatOpt
from dse.errors import DseError
from dse.workload.vision import is_vision_model


@friendly
def gpus_cmd(as_json: JsonOpt = False) -> None:
    """List the catalog GPUs and memory technologies."""
    from dse.hardware.catalog import list_gpus, load_gpu
    from dse.hardware.memory import list_memory_technologies

    rows = [load_gpu(name).summary() for name in list_gpus()]
    if as_json:
        print_json({"gpus": rows, "memory_technologies": list_memory_technologies()})
        return
    console.print(_gpu_table(rows))
    console.print(f"memory technologies: {', '.join(list_memory_technologies())}")


def _gpu_table(rows: list[dict[str, Any]]) -> Table:
    # The catalog name (what commands take) is never cut; the long display name is shown only when the
    # terminal has room for it (80 columns hold the rest).
    wide = console.width >= 110
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("name", no_wrap=True, min_width=max(len(str(r["name"])) for r in rows))
    if wide:
        table.add_column("GPU")
    for header in ("SMs", "memory", "TB/s", "GiB", "bf16 TFLOP/s", "max MHz", "TDP W"):
        table.add_column(header, justify="right" if header != "memory" else "left")
    for r in rows:
        bf16 = r.get("tensor_bf16_peak_flop_per_s")
        table.add_row(
            str(r["name"]),
            *([str(r["display_name"])] if wide else []),
            str(r["num_sms"]),
            str(r["memory_technology"]),
            f"{r['memory_bw_bytes_per_s'] / 1e12:.2f}",
            f"{r['memory_capacity_bytes'] / 2**30:.0f}",
            f"{bf16 / 1e12:.0f}" if bf16 else "-",
            f"{r['sm_clock_max_hz'] / 1e6:.0f}",
            f"{r['tdp_w']:.0f}",
        )
    return table


@friendly
def gpu_show_cmd(
    name: Annotated[str, typer.Argument(help="Catalog name (see `dse gpus`) or path to a GPU YAML file.")],
    memory: MemoryOpt = None,
    bus_width_bits: BusOpt = None,
    data_rate_gbps: RateOpt = None,
    sets: SetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one GPU, optionally with its memory swapped or fields overridden."""
    from dse.cli.cost import CostArgs

    CostArgs().refuse(None, sets, "`dse gpu show`")  # a `--set cost.*` fact would be dropped unsaid
    gpu = gpu_from_options(name, memory, bus_width_bits, data_rate_gbps, sets)
    if as_json:
        print_json({**gpu.summary(), "spec": gpu.model_dump()})
        return
    flags = {"--memory": memory, "--bus-width-bits": bus_width_bits, "--data-rate-gbps": data_rate_gbps}
    changes = [
        f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}"
        for flag, value in flags.items()
        if value is not None
    ]
    changes += [f"--set {item}" for item in sets or []]
    # the catalog's name alone ("H100 SXM5 80GB") titled a 32 GiB GDDR7 what-if
    title = f"{gpu.display_name}, changed: {' '.join(changes)}" if changes else gpu.display_name
    table = Table("field", "value (SI)", "readable", title=esc(title))
    for key, value in gpu.summary().items():
        table.add_row(key, f"{value:.6g}" if isinstance(value, float) else esc(value), human(key, value))
    console.print(table)


def human(key: str, value: Any) -> str:
    """A SI value in the unit people read it in, by the report's display ladders (`dse.report.display`):
    `memory_capacity_bytes` 34359738368 -> "32 GiB"; "" for keys without a unit or values not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    from dse.report.display import display_unit

    unit = display_unit(f"metric.{key}", np.array([float(value)]))
    return f"{unit.convert_one(value):.4g} {unit.unit}" if unit.unit else ""


@friendly
def gpu_fields_cmd(
    name: Annotated[
        str, typer.Argument(help="Catalog name or GPU YAML path (its values are shown).")
    ] = "h100-sxm",
    as_json: JsonOpt = False,
) -> None:
    """Every path of the one override vocabulary (`--set` in predict, whatif, gpu show; `gpu.*` in study
    spaces), in SI and the YAML's human unit, with the GPU's value."""
    from dse.hardware.catalog import load_gpu
    from dse.hardware.overrides import override_fields

    fields = override_fields(load_gpu(name))
    if as_json:
        print_json({"gpu": name, "fields": [dataclasses.asdict(f) for f in fields]})
        return
    table = Table("path (SI)", "or (human unit)", "value", "note", title=esc(f"override paths ({name})"))
    for f in fields:
        value = "" if f.value is None else (f"{f.value:.6g}" if isinstance(f.value, float) else str(f.value))
        table.add_row(f.path, f.human_path or "", esc(value[:40]), f.note)
    console.print(table)
    console.print(
        "A leading `gpu.` is optional. Set a human-unit path in its unit (`clocks.sm_clock_max_mhz=1500`)."
    )


@friendly
def models_cmd(as_json: JsonOpt = False) -> None:
    """List the shipped model configs."""
    from dse.workload.models import list_models, load_model_config

    rows = [_model_row(name, load_model_config(name)) for name in list_models()]
    vision = _vision_rows()
    if as_json:
        print_json({"models": rows, "vision_models": vision})
        return
    table = Table("name", "family", "layers", "hidden", "heads", "kv", "experts", "params (B)", "active (B)")
    for r in rows:
        experts = f"{r['num_experts_per_tok']}/{r['num_experts']}" if r["num_experts"] else "-"
        table.add_row(
            r["name"],
            r["family"],
            str(r["num_layers"]),
            str(r["hidden_size"]),
            str(r["num_heads"]),
            str(r["num_kv_heads"]),
            experts,
            f"{r['num_params'] / 1e9:.2f}",
            f"{r['num_active_params'] / 1e9:.2f}",
        )
    console.print(table)
    vt = Table("name", "family", "params (M)", title="vision models (--batch images; --training)")
    for r in vision:
        vt.add_row(r["name"], r["family"], f"{r['num_params'] / 1e6:.1f}")
    console.print(vt)


def _vision_rows() -> list[dict[str, Any]]:
    from dse.workload.vision import VISION_MODELS, build_vision_graph

    return [
        {"name": name, "family": m.family, "num_params": build_vision_graph(m, batch=1)[1]}
        for name, m in VISION_MODELS.items()
    ]


def _model_row(name: str, arch: Any) -> dict[str, Any]:
    return {
        "name": name,
        "family": arch.family,
        "num_layers": arch.num_layers,
        "hidden_size": arch.hidden_size,
        "num_heads": arch.num_heads,
        "num_kv_heads": arch.num_kv_heads,
        "num_params": arch.num_params,
        "num_active_params": arch.num_active_params,  # per token: the routed experts it uses (MoE)
        "num_experts": arch.num_experts or 0,
        "num_experts_per_tok": arch.num_experts_per_tok or 0,
    }


ShowBatchOpt = Annotated[
    int | None,
    typer.Option("--batch", help="Sequences (images, for a vision model) in the batch (default 1)."),
]


@friendly
def workload_show_cmd(
    model: ModelOpt = None,
    kernels: KernelsOpt = None,
    phase: PredictPhaseOpt = None,
    batch: ShowBatchOpt = None,
    seq_len: PredictSeqOpt = None,
    precision: PrecisionOpt = None,
    attention: PredictAttentionOpt = None,
    image_size: ImageSizeOpt = None,
    memory_format: MemoryFormatOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Operators of a workload with FLOPs and compulsory DRAM bytes, per operator and in total."""
    # the flags a vision model or a kernel list would not read are refused, as in `dse predict`
    phase_, seq, attn = shape_flags(model, kernels, False, None, None, phase, seq_len, attention, batch)
    if (image_size is not None or memory_format is not None) and not (model and is_vision_model(model)):
        raise DseError("--image-size / --memory-format: only for a vision model (see `dse models`)")
    vision = model is not None and is_vision_model(model)
    precision_note = None  # a kernel list: the dtypes it records, unless --precision re-types it
    if kernels is None:
        precision, precision_note = resolve_precision(precision, None if vision else model)
    graph = build_workload(
        model, phase_, 1 if batch is None else batch, seq, precision, attn, kernels,
        image_size=image_size, memory_format=memory_format,
    )  # fmt: skip
    print_note(precision_note)
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
        print_json({"name": graph.name, **totals, "meta": graph.meta, "ops": rows})
        return
    shown = ", ".join(str(graph.meta[k]) for k in ("precision", "memory_format") if graph.meta.get(k))
    table = Table(title=esc(f"{graph.name} ({shown})" if shown else graph.name))
    table.add_column("op", overflow="fold")
    for header in ("kind", "count", "GFLOP", "MB"):
        table.add_column(header, justify="right" if header != "kind" else "left")
    for r in rows:
        table.add_row(
            esc(r["name"]),
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


@friendly
def demo_cmd() -> None:
    """A quick tour: the GPU catalog, a memory what-if and an LLM workload."""
    from dse.cli.demo import run_demo

    run_demo(console)
