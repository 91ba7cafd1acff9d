"""`dse demo`: a short tour of the catalogs and workloads (the main job is `dse run`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from dse.cost.build import build_cost
from dse.cost.facts import load_cost_facts
from dse.hardware.catalog import list_gpus, load_gpu
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config


def run_demo(console: Console) -> None:
    """Catalog, a memory what-if and an LLM workload, each with the numbers a user would check."""
    table = Table("GPU", "SMs", "memory", "TB/s", "GiB", "bf16 TFLOP/s", title="GPU catalog")
    for name in list_gpus():
        gpu = load_gpu(name)
        bf16 = gpu.sm.tensor_flop_per_clk.get("bf16")
        table.add_row(
            name,
            str(gpu.num_sms),
            gpu.memory.technology,
            f"{gpu.memory.bw_bytes_per_s / 1e12:.2f}",
            f"{gpu.memory.capacity_bytes / 2**30:.0f}",
            f"{gpu.tensor_peak_flop_per_s('bf16') / 1e12:.0f}" if bf16 else "-",
        )
    console.print(table)

    base = load_gpu("h100-sxm")
    gddr7 = load_gpu(
        "h100-sxm",
        {"memory.technology": "gddr7", "memory.bus_width_bits": 512, "memory.data_rate_gbit_per_s": 32},
    )
    what_if = Table(
        "", "H100 SXM (HBM3)", "H100 with GDDR7 512-bit @ 32 Gb/s", title="What if the H100 had GDDR7?"
    )
    for label, fn in (
        ("bandwidth TB/s", lambda g: g.memory.bw_bytes_per_s / 1e12),
        ("capacity GiB", lambda g: g.memory.capacity_bytes / 2**30),
        ("DRAM pJ/bit", lambda g: g.memory.energy_j_per_bit * 1e12),
        ("DRAM power at full bandwidth W", lambda g: g.memory.bw_bytes_per_s * 8 * g.memory.energy_j_per_bit),
    ):
        what_if.add_row(label, f"{fn(base):.2f}", f"{fn(gddr7):.2f}")
    # What an architect asks GDDR7 for: the memory bill and the interposer (dse.cost).
    facts = load_cost_facts()
    costs = [build_cost(g, facts) for g in (base, gddr7)]
    for label, key in (
        ("memory $", "memory_cost_usd"),
        ("package $", "package_cost_usd"),
        ("GPU build $", "gpu_cost_usd"),
    ):
        what_if.add_row(label, *(f"{c.as_dict()[key]:,.0f}" for c in costs))
    console.print(what_if)

    arch = load_model_config("llama-3.1-8b")
    prefill = build_prefill_graph(arch, batch=8, seq_len=1024)
    decode = build_decode_graph(arch, batch=32, context_len=1024)
    work = Table(
        "workload",
        "kernels",
        "TFLOP",
        "min DRAM GB",
        "FLOP/byte",
        title=f"llama-3.1-8b ({arch.num_params / 1e9:.2f} B params)",
    )
    for label, graph in (("prefill b8 s1024", prefill), ("decode step b32 ctx1024", decode)):
        flop, dram = graph.total_flop(), graph.total_min_dram_bytes()
        work.add_row(
            label, str(graph.num_kernels), f"{flop / 1e12:.2f}", f"{dram / 1e9:.2f}", f"{flop / dram:.0f}"
        )
    console.print(work)
    console.print(
        "Next: `dse whatif h100-sxm --memory gddr7 --bus-width-bits 512 --data-rate-gbps 32` (throughput, "
        "J/token and $/Mtoken side by side), `dse workload show --model llama-3.1-8b --phase decode "
        "--batch 32 --seq-len 1024`."
    )
