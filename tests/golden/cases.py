"""The golden set: a small, fixed set of predictions through the public API, flattened to {name: number}.

Each function returns the values of one golden file (`tests/golden/<name>.json`). The set covers every
kernel family and coefficient group of the shipped latency sets on Hopper and Ampere, whole-model power
and energy (with DVFS, a power cap and host gaps), static-batch serving on several GPUs, the continuous
batching models, and what-if GPUs through the search's override path. Regenerate with
`pytest tests/golden --update-golden` and review the printed diff.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graph, predict_graphs
from dse.perf.types import OperatingPoint
from dse.search.objective import EvalContext, evaluate_point
from dse.serving.continuous import simulate_closed_loop
from dse.serving.static import ServingRequest, predict_serving
from dse.serving.steady import steady_state
from dse.workload.engine import ENGINES, engine_step_graph
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, Op, SoftmaxOp

Values = dict[str, float]


def _gemms() -> Iterator[Op]:
    shapes = (
        (1, 4096, 4096),  # decode GEMV
        (16, 14336, 4096),
        (128, 4096, 4096),
        (512, 1024, 8192),
        (1024, 4096, 4096),
        (4096, 4096, 4096),
        (8192, 28672, 8192),
        (64, 64, 65536),  # split-K / stream-K territory
        (256, 128, 32768),
        (2048, 2048, 256),
    )
    for dtype in ("bf16", "fp16", "fp8", "tf32", "fp32"):
        for m, n, k in shapes:
            out = "bf16" if dtype == "fp8" else None
            yield GemmOp(name=f"gemm/{dtype}/{m}x{n}x{k}", m=m, n=n, k=k, dtype=dtype, out_dtype=out)
    yield GemmOp(name="gemm/fp8_quant", m=512, n=4096, k=4096, dtype="fp8", out_dtype="bf16", act_quant=True)
    yield GemmOp(name="gemm/batched", m=1024, n=1024, k=128, batch=32, dtype="bf16")
    yield GemmOp(name="gemm/shared_b", m=256, n=4096, k=4096, batch=4, b_shared=True, dtype="bf16")


def _attention() -> Iterator[Op]:
    for d in (64, 128, 192, 256):
        for heads, kv in ((32, 32), (32, 8)):
            for s in (512, 8192):
                for dtype in ("bf16", "fp8"):
                    yield AttentionOp(
                        name=f"flash/d{d}/h{heads}kv{kv}/s{s}/{dtype}", batch=2, num_heads=heads,
                        num_kv_heads=kv, head_dim=d, seq_len_q=s, seq_len_kv=s, dtype=dtype,
                    )  # fmt: skip
    for d in (64, 128, 192, 256, 512):
        for kv_dtype in ("bf16", "fp8"):
            for batch, ctx in ((1, 32768), (64, 2048), (256, 1024)):
                yield AttentionOp(
                    name=f"decode/d{d}/{kv_dtype}/b{batch}c{ctx}", batch=batch, num_heads=32, num_kv_heads=8,
                    head_dim=d, seq_len_q=1, seq_len_kv=ctx, backend="decode", kv_dtype=kv_dtype,
                )  # fmt: skip
    yield AttentionOp(
        name="eager", batch=4, num_heads=12, num_kv_heads=12, head_dim=64, seq_len_q=1024, seq_len_kv=1024,
        backend="eager",
    )  # fmt: skip


def _others() -> Iterator[Op]:
    for rows, cols in ((1, 4096), (512, 4096), (16384, 8192), (65536, 1024)):
        yield SoftmaxOp(name=f"softmax/{rows}x{cols}", rows=rows, cols=cols)
        yield NormOp(name=f"layernorm/{rows}x{cols}", rows=rows, cols=cols, kind="layernorm")
        yield NormOp(name=f"rmsnorm/{rows}x{cols}", rows=rows, cols=cols, kind="rmsnorm")
    for kind in ("add", "silu_mul", "gelu", "rotary", "cast", "scale"):
        for n in (4096, 4 * 2**20, 64 * 2**20):
            yield ElementwiseOp(name=f"elementwise/{kind}/{n}", kind=kind, num_elements=n)


def _random_sweep(seed: int = 0) -> Iterator[Op]:
    """Seeded random shapes: with the fixed ones above they reach every group of the shipped latency sets
    (checked by `test_coverage.py`), so a change to any fitted constant moves a golden value."""
    rng = np.random.default_rng(seed)
    for i in range(240):
        m, n, k = (int(2 ** rng.uniform(0, 16)) for _ in range(3))
        dtype = str(rng.choice(["bf16", "fp16", "fp8"]))
        out = "bf16" if dtype == "fp8" else None
        yield GemmOp(name=f"random/gemm{i}/{dtype}/{m}x{n}x{k}", m=m, n=n, k=k, dtype=dtype, out_dtype=out)
    for d in (64, 128, 192, 256, 512):
        for dtype in ("bf16", "fp8"):
            for batch, ctx in ((512, 16), (4096, 64), (128, 256), (8, 512)):
                yield AttentionOp(
                    name=f"grid/decode/d{d}/{dtype}/b{batch}c{ctx}", batch=batch, num_heads=16,
                    num_kv_heads=1, head_dim=d, seq_len_q=1, seq_len_kv=ctx, backend="decode", kv_dtype=dtype,
                )  # fmt: skip
            for heads, kv in ((16, 16), (32, 8)):
                for s in (128, 256, 2048):
                    yield AttentionOp(
                        name=f"grid/flash/d{d}/h{heads}kv{kv}/{dtype}/s{s}", batch=4, num_heads=heads,
                        num_kv_heads=kv, head_dim=d, seq_len_q=s, seq_len_kv=s, dtype=dtype,
                    )  # fmt: skip


def kernel_ops() -> list[Op]:
    """The kernel sweep of the golden set (also what the coefficient-coverage test runs)."""
    return [*_gemms(), *_attention(), *_others(), *_random_sweep()]


def _kernel_values(gpu_name: str) -> Values:
    gpu = load_gpu(gpu_name)
    coeffs = load_default_coeffs(gpu)
    # each kernel as timed in a loop: a pass of one kernel under the cap (`dse.perf.pass_cap`)
    graphs = [WorkloadGraph(name="golden-kernel", ops=(op,)) for op in kernel_ops()]
    out: Values = {}
    for point, tag in ((OperatingPoint(), "default"), (OperatingPoint(sm_clock_hz=1.0e9), "1000mhz")):
        for k in (p.kernels[0] for p in predict_graphs(graphs, gpu, point, coeffs)):
            out[f"{tag}/{k.name}/latency_s"] = k.latency_s
            out[f"{tag}/{k.name}/power_w"] = k.power_w
            out[f"{tag}/{k.name}/effective_clock_hz"] = k.effective_clock_hz
    return out


def kernels() -> Values:
    """Per-kernel latency, power and clock on a Hopper and an Ampere GPU, at boost and at 1000 MHz."""
    return {f"{g}/{k}": v for g in ("h100-sxm", "a100-sxm-80gb") for k, v in _kernel_values(g).items()}


def _prediction(pred: Any) -> Values:
    out: Values = {
        "latency_s": pred.latency_s,
        "energy_j": pred.energy_j,
        "avg_power_w": pred.avg_power_w,
        "peak_power_w": pred.peak_power_w,
        "effective_clock_hz": pred.effective_clock_hz,
    }
    out |= {f"energy_j/{m}": v for m, v in pred.energy_j_by_module().items()}
    return out


def whole_model() -> Values:
    """Whole forward passes: latency, energy, power and the module split (DVFS, cap, host gaps)."""
    cases: list[tuple[str, Callable[[], Any], str, OperatingPoint, str | None]] = [
        ("gpt2-prefill-a100-900mhz-eager", lambda: build_prefill_graph(
            load_model_config("gpt2"), batch=8, seq_len=512, attention="eager"),
         "a100-pcie-40gb", OperatingPoint(sm_clock_hz=900e6), "eager"),
        ("llama8b-prefill-h100", lambda: build_prefill_graph(
            load_model_config("llama-3.1-8b"), batch=4, seq_len=1024), "h100-sxm", OperatingPoint(), None),
        ("llama8b-prefill-h100-fp8", lambda: build_prefill_graph(
            load_model_config("llama-3.1-8b"), batch=4, seq_len=1024, precision="fp8"),
         "h100-sxm", OperatingPoint(), None),
        ("bert-large-prefill-a10", lambda: build_prefill_graph(
            load_model_config("bert-large"), batch=8, seq_len=384), "a10", OperatingPoint(), None),
        ("mistral-decode-l40s", lambda: build_decode_graph(
            load_model_config("mistral-7b"), batch=16, context_len=8192), "l40s", OperatingPoint(), None),
        ("llama8b-decode-h100-cap350", lambda: build_decode_graph(
            load_model_config("llama-3.1-8b"), batch=32, context_len=2048),
         "h100-sxm", OperatingPoint(power_cap_w=350.0), None),
        ("qwen2-prefill-h200-1200mhz", lambda: build_prefill_graph(
            load_model_config("qwen2-1.5b"), batch=16, seq_len=2048),
         "h200-sxm", OperatingPoint(sm_clock_hz=1200e6), None),
    ]  # fmt: skip
    out: Values = {}
    for name, graph_fn, gpu_name, point, launch in cases:
        gpu = load_gpu(gpu_name)
        pred = predict_graph(graph_fn(), gpu, point, load_default_coeffs(gpu), launch=launch)
        out |= {f"{name}/{k}": v for k, v in _prediction(pred).items()}
    return out


SERVING_KEYS = (
    "ttft_s", "tpot_s", "e2e_latency_s", "output_tokens_per_s", "energy_j", "energy_per_output_token_j",
    "avg_power_w", "peak_power_w", "effective_clock_hz", "memory_bytes", "feasible",
)  # fmt: skip


def serving() -> Values:
    """Static-batch serving on several GPUs, precisions and engines."""
    base = dict(batch=32, input_tokens=1024, output_tokens=256)
    cases = [
        ("llama-3.1-8b", "h100-sxm", base, OperatingPoint()),
        ("llama-3.1-8b", "a100-sxm-80gb", base, OperatingPoint()),
        ("llama-3.1-8b", "h200-sxm", dict(batch=64, input_tokens=2048, output_tokens=128, precision="fp8",
                                          engine="vllm", sampling="top_k_top_p", kv_dtype="fp8"),
         OperatingPoint()),
        ("qwen2.5-7b", "l40s", dict(batch=8, input_tokens=512, output_tokens=64), OperatingPoint()),
        ("mistral-7b", "b200", dict(batch=16, input_tokens=4096, output_tokens=512, engine="trtllm",
                                    sampling="greedy"), OperatingPoint()),
        ("llama-3.1-8b", "h100-sxm", dict(batch=32, input_tokens=1024, output_tokens=256),
         OperatingPoint(sm_clock_hz=1200e6, power_cap_w=400.0)),
        ("llama-3.1-70b", "h100-sxm", dict(batch=8, input_tokens=2048, output_tokens=128), OperatingPoint()),
    ]  # fmt: skip
    out: Values = {}
    for i, (model, gpu_name, request, point) in enumerate(cases):
        est = predict_serving(load_model_config(model), load_gpu(gpu_name), ServingRequest(**request), point)
        metrics = est.metrics()
        out |= {f"{i}-{model}-{gpu_name}/{k}": float(metrics[k]) for k in SERVING_KEYS}
        out |= {f"{i}-{model}-{gpu_name}/energy_j/{m}": v for m, v in est.energy_j_by_module.items()}
    return out


WHATIF_POINTS: tuple[dict[str, Any], ...] = (
    {"gpu.memory.technology": "gddr7", "gpu.memory.bus_width_bits": 512,
     "gpu.memory.data_rate_gbit_per_s": 32},
    {"gpu.memory.technology": "hbm3e", "gpu.memory.data_rate_frac": 0.5, "sm_clock_mhz": 1500},
    {"gpu.num_sms": 144, "gpu.sm.tensor_factor": 2.0, "gpu.memory.energy_factor": 0.8},
    {"gpu.l2.l2_mib": 100, "gpu.clocks.sm_clock_max_mhz": 2100, "power_cap_w": 500, "precision": "fp8"},
    {"gpu.memory.technology": "lpddr5x", "gpu.memory.bus_width_bits": 1024, "batch": 8},
    {"gpu.memory.energy_pj_per_bit": 3.5, "engine": "vllm", "kv_dtype": "fp8", "batch": 64},
)  # fmt: skip


def whatif() -> Values:
    """What-if GPUs through the search's override path (`evaluate_point`), metrics and GPU context."""
    ctx = EvalContext(batch=32, input_tokens=1024, output_tokens=256)
    out: Values = {}
    for i, params in enumerate(WHATIF_POINTS):
        metrics = evaluate_point(params, ctx)
        for key in (*SERVING_KEYS, "memory_capacity_bytes", "memory_bw_bytes_per_s", "tdp_w"):
            out[f"{i}/{key}"] = float(metrics[key])
    return out


def continuous() -> Values:
    """Continuous batching: the steady-state step mix and the closed-loop benchmark simulation."""
    out: Values = {}
    h100 = load_gpu("h100-sxm")
    for model, batch, i, o in (("qwen3-8b", 128, 500, 600), ("qwen3-32b", 32, 300, 2000)):
        ss = steady_state(
            load_model_config(model), h100, batch=batch, input_tokens=i, output_tokens=o,
            engine=ENGINES["vllm"], sampling="top_k_top_p",
        )  # fmt: skip
        for key in ("mean_step_s", "median_step_s", "avg_power_w", "energy_per_output_token_j", "ttft_s"):
            out[f"steady/{model}/{key}"] = getattr(ss, key)
    arch = load_model_config("llama-3.1-8b")
    coeffs = load_default_coeffs(h100)

    def step_time(decodes: int, prompt_tokens: int) -> float:
        prefills = -(-prompt_tokens // 1024)
        graph = engine_step_graph(
            arch, decodes=decodes, prefills=prefills, input_tokens=max(1, prompt_tokens // max(prefills, 1)),
            context_len=1024 + 64, engine=ENGINES["vllm"],
        )  # fmt: skip
        return predict_graph(graph, h100, OperatingPoint(), coeffs).latency_s  # a serving step: its own pass

    for chunked in (True, False):
        res = simulate_closed_loop(
            step_time, concurrency=8, requests=40, input_tokens=1024, output_tokens=128, max_running=8,
            token_budget=2048, chunked=chunked, output_spread=0.2,
        )  # fmt: skip
        for key in ("ttft_mean_s", "ttft_median_s", "tpot_mean_s", "duration_s", "steps"):
            out[f"closed_loop/chunked={chunked}/{key}"] = float(getattr(res, key))
    return out


CASES: dict[str, Callable[[], Values]] = {
    "kernels": kernels,
    "whole_model": whole_model,
    "serving": serving,
    "whatif": whatif,
    "continuous": continuous,
}
