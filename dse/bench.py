"""`dse bench`: CPU time of one serving predict and of search evaluations, measured in this process.

CPU time (`time.process_time`) of the calling process, median of repeats after one warm-up call, so the
figure is comparable across machines that are busy with other work (wall time is reported beside it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchResult:
    name: str
    repeats: int
    cpu_s_median: float
    cpu_s_min: float
    wall_s_median: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repeats": self.repeats,
            "cpu_s_median": self.cpu_s_median,
            "cpu_s_min": self.cpu_s_min,
            "wall_s_median": self.wall_s_median,
        }


def time_call(name: str, fn: Callable[[], Any], repeats: int) -> BenchResult:
    fn()  # warm-up: imports, caches, coefficient files
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return BenchResult(
        name=name,
        repeats=repeats,
        cpu_s_median=statistics.median(cpu),
        cpu_s_min=min(cpu),
        wall_s_median=statistics.median(wall),
    )


def bench_serving_predict(
    *,
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    batch: int = 32,
    input_tokens: int = 1024,
    output_tokens: int = 256,
    repeats: int = 20,
) -> BenchResult:
    """One `predict_serving` (prefill + every decode step), the unit of work of a search point."""
    from dse.hardware.catalog import load_gpu
    from dse.serving.static import ServingRequest, predict_serving
    from dse.workload.models import load_model_config

    arch, spec = load_model_config(model), load_gpu(gpu)
    request = ServingRequest(batch=batch, input_tokens=input_tokens, output_tokens=output_tokens)
    name = f"predict_serving {model} on {gpu}, batch {batch}, {input_tokens} in / {output_tokens} out"
    return time_call(name, lambda: predict_serving(arch, spec, request), repeats)


def bench_search_point(repeats: int = 20) -> BenchResult:
    """One search evaluation (`evaluate_point`: GPU overrides + serving predict) with a GDDR7 swap."""
    from dse.search.objective import EvalContext, evaluate_point

    ctx = EvalContext(batch=32, input_tokens=1024, output_tokens=256)
    params = {"gpu.memory.technology": "gddr7", "gpu.memory.bus_width_bits": 512, "sm_clock_mhz": 1500}
    return time_call("evaluate_point (GDDR7 H100 at 1500 MHz)", lambda: evaluate_point(params, ctx), repeats)


def bench_cost_of_point(repeats: int = 20) -> BenchResult:
    """The cost and carbon part of that search point alone (`cost_of_point`: area, yield, ledger, $/Mtoken),
    so `dse bench` shows its share of a search point."""
    from dse.search.objective import EvalContext, build_inputs, cost_of_point, evaluate_point

    ctx = EvalContext(batch=32, input_tokens=1024, output_tokens=256)
    params = {"gpu.memory.technology": "gddr7", "gpu.memory.bus_width_bits": 512, "sm_clock_mhz": 1500}
    inputs, metrics = build_inputs(params, ctx), evaluate_point(params, ctx)
    name = "cost_of_point (the same point's $ and CO2 ledger)"
    return time_call(name, lambda: cost_of_point(params, ctx, inputs, metrics), repeats)


def bench_serving_moe_tp8(repeats: int = 3) -> BenchResult:
    """A TP8/EP8 MoE serving predict under load: Qwen3-235B-A22B fp8 on 8 h100-sxm behind vLLM,
    concurrency 64, 256 requests of 1024/256 tokens (sharded graphs plus collectives per engine step)."""
    from dse.hardware.catalog import load_gpu
    from dse.serving.load import LoadRequest, predict_load
    from dse.workload.models import load_model_config

    arch, spec = load_model_config("qwen3-235b-a22b"), load_gpu("h100-sxm")
    request = LoadRequest(
        mode="concurrency", concurrency=64, num_requests=256, input_tokens=1024, output_tokens=256,
        engine="vllm", precision="fp8", tp=8, ep=8,
    )  # fmt: skip
    name = "serving_moe_tp8 qwen3-235b-a22b fp8 on 8 x h100-sxm, tp 8 ep 8, concurrency 64, 256 requests"
    return time_call(name, lambda: predict_load(arch, spec, request), repeats)


def bench_training_step(repeats: int = 5) -> BenchResult:
    """One training-step prediction: Llama-3.1-8B on 8 h100-sxm, FSDP, micro-batch 2, global batch 64,
    4096 tokens, bf16, selective recompute."""
    from dse.hardware.catalog import load_gpu
    from dse.training.parallel import ParallelLayout
    from dse.training.predict import predict_training
    from dse.training.step import TrainingRequest

    spec = load_gpu("h100-sxm")
    request = TrainingRequest(
        micro_batch=2, global_batch=64, seq_len=4096, precision="bf16", recompute="selective",
        layout=ParallelLayout(num_gpus=8, fsdp=True),
    )  # fmt: skip
    name = "training_step llama-3.1-8b on 8 x h100-sxm, FSDP, 64 x 4096 tokens, bf16"
    return time_call(name, lambda: predict_training("llama-3.1-8b", spec, request), repeats)


def bench_serving_load(repeats: int = 5) -> list[BenchResult]:
    """A concurrency-64 simulation of 1,000 requests (Llama-3.1-8B, h100-sxm, 1024 in / 256 out, vllm):
    the whole `predict_load` (its step table's kernel-model evaluations included), then the scheduler
    simulation alone over an already evaluated table."""
    from dse.hardware.catalog import load_gpu
    from dse.serving.load import LoadRequest, predict_load
    from dse.workload.models import load_model_config

    arch, spec = load_model_config("llama-3.1-8b"), load_gpu("h100-sxm")
    request = LoadRequest(
        mode="concurrency",
        concurrency=64,
        num_requests=1000,
        input_tokens=1024,
        output_tokens=256,
        engine="vllm",
    )
    name = "serving_load_1000 llama-3.1-8b on h100-sxm, concurrency 64, 1000 requests, 1024/256, vllm"
    full = time_call(name, lambda: predict_load(arch, spec, request), repeats)
    return [full, _bench_simulation_only(arch, spec, request, repeats)]


def _bench_simulation_only(arch: Any, spec: Any, request: Any, repeats: int) -> BenchResult:
    import numpy as np

    from dse.perf.types import OperatingPoint
    from dse.serving.load import StepTable, draw_lengths, resolve_preset
    from dse.serving.scheduler import Requests, SchedulerConfig, simulate

    preset = resolve_preset(request, spec)
    inp, out = draw_lengths(request, request.num_requests, arch.max_position_embeddings)
    table = StepTable(
        arch, spec, OperatingPoint(), None, None, precision="bf16", preset=preset, kv_dtype=None,
        mean_input=request.input_tokens, max_decodes=64, max_prompt_tokens=preset.max_batched_tokens,
        context_range=(int(inp.min()), int((inp + out).max())),
    )  # fmt: skip
    config = SchedulerConfig(max_num_seqs=preset.max_num_seqs, max_batched_tokens=preset.max_batched_tokens,
                             kv_blocks=20_000, block_size_tokens=preset.block_size_tokens)  # fmt: skip
    requests = Requests(input_tokens=inp, output_tokens=out, concurrency=64)
    name = "serving_load_1000 (scheduler simulation only, step table evaluated)"
    return time_call(
        name, lambda: simulate(requests, config, table, idle_power_w=float(np.float64(90.0))), repeats
    )
