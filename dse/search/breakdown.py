"""Energy breakdowns of logged points, for the report (the run log keeps scalar metrics only).

The breakdown of a point is recomputed from its parameters and the run's resolved study: the model is
deterministic, so this is the breakdown the search saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dse.search.objective import EvalContext, build_inputs, predict_inputs
from dse.search.space import SearchSpace
from dse.search.training_point import TRAINING_MODE


def breakdown_context(run_dir: str | Path) -> tuple[EvalContext, SearchSpace] | None:
    """The evaluation context and search space of a run (from study.resolved.yaml); None without one."""
    path = Path(run_dir) / "study.resolved.yaml"
    if not path.is_file():
        return None
    from dse.search.study import load_study

    cfg = load_study(path).config
    return cfg.eval_context(), cfg.search_space()


def logged_point_breakdown(logged: Mapping[str, Any], ctx: EvalContext, space: SearchSpace) -> dict[str, Any]:
    """`breakdown_for_point` of a point read back from the run's table ({path: value}, every path
    present): the parameters its `when`s switched off are left out, as the sampler left them out."""
    return breakdown_for_point(space.active_point(logged), ctx)


def breakdown_for_point(params: Mapping[str, Any], ctx: EvalContext) -> dict[str, Any]:
    """{"by_module": {module: J}, "by_op": {phase/op name: J}, "bound_by": {phase: shares}, "roofline": ...}
    of one design point. A load-mode point (a simulated run of many different engine steps) gives the energy
    per output token of its representative decode step and what bounds its decode and prefill steps
    (`dse.serving.load_bounds`), without a roofline."""
    if params.get("mode", ctx.mode) == TRAINING_MODE:  # a training step keeps no per-op breakdown here
        return {}
    inputs = build_inputs(params, ctx)
    if "load" in inputs:
        return _load_breakdown(inputs)
    estimate = predict_inputs(inputs)
    return {
        "by_module": dict(estimate.energy_j_by_module),
        "by_op": dict(estimate.energy_j_by_name),
        "bound_by": {phase: dict(v) for phase, v in estimate.bound_by.items()},
        "roofline": roofline_for_inputs(inputs),
    }


def _load_breakdown(inputs: Mapping[str, Any]) -> dict[str, Any]:
    from dse.serving.load_bounds import decode_step_breakdown, with_bounds

    arch, gpu, point = inputs["arch"], inputs["gpu"], inputs["point"]
    estimate = predict_inputs(inputs)
    if not estimate.feasible:
        return {}
    bounded = with_bounds(estimate, arch, gpu, point)
    note = "under load: J per output token of a decode step at the run's mean batch and context"
    return {
        **decode_step_breakdown(estimate, arch, gpu, point),
        "bound_by": dict(bounded.bound_by),
        "note": note,
    }


def _phase_kernels(phase: str, graph: Any, gpu: Any, point: Any) -> list[dict[str, Any]]:
    """One row per kernel of `graph`: its work (FLOP, minimum DRAM bytes) and its predicted time."""
    from dse.perf.coeffs import load_default_coeffs
    from dse.perf.predict import predict_graph

    # a serving phase as `predict_serving` prices it: shipped corrections, the phase's mean under the cap
    pred = predict_graph(graph, gpu, point, load_default_coeffs(gpu))
    ops = {op.name: op for op in graph.ops}
    rows = []
    for k in pred.kernels:
        op = ops.get(k.name)
        if op is None:
            continue
        rows.append(
            {
                "phase": phase, "name": k.name, "kind": k.kind, "count": k.count, "latency_s": k.latency_s,
                "flop": float(op.flop), "dram_bytes": float(op.min_dram_bytes), "bound_by": k.bound_by,
            }
        )  # fmt: skip
    return rows


def roofline_for_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The kernels of a static point's prefill and of its middle decode step, with the GPU's roofs at the
    point's clock: what the report's roofline figure draws (DRAM bytes are each op's minimum traffic)."""
    from dse.perf.moe import math_dtype
    from dse.perf.rates import tensor_flop_per_clk
    from dse.workload.engine import apply_engine, with_kv_dtype
    from dse.workload.graph import WorkloadGraph
    from dse.workload.llm import build_decode_graph, build_prefill_graph, gemm_dtype

    arch, gpu, point = inputs["arch"], inputs["gpu"], inputs["point"]
    kw = {"precision": inputs["precision"], "attention": inputs["attention"]}
    context = inputs["input_tokens"] + inputs["output_tokens"] // 2
    graphs = {
        "prefill": build_prefill_graph(arch, batch=inputs["batch"], seq_len=inputs["input_tokens"], **kw),
        "decode": build_decode_graph(arch, batch=inputs["batch"], context_len=context, **kw),
    }
    kernels: list[dict[str, Any]] = []
    for phase, graph in graphs.items():
        ops = tuple(with_kv_dtype(op, inputs["kv_dtype"]) for op in graph.ops)
        graph = apply_engine(
            WorkloadGraph(name=graph.name, ops=ops, meta=graph.meta), arch, engine=inputs["engine"],
            sampling=inputs["sampling"], rows=inputs["batch"],
        )  # fmt: skip
        kernels += _phase_kernels(phase, graph, gpu, point)
    clock_hz = point.sm_clock_hz or gpu.clocks.boost_clock_hz
    # the fastest MMA the point's GEMMs run, by the kernel model's rules: a narrower type on the next wider
    # one, TF32 without TF32 Tensor Cores on the CUDA cores (rate 0), mxfp4 experts in fp4 where it is native
    dtypes: list[str] = [gemm_dtype(inputs["precision"])]
    if inputs["precision"] == "mxfp4":
        dtypes.append(math_dtype(gpu, "bf16", "fp4"))
    tensor = max(tensor_flop_per_clk(gpu, d) for d in dtypes)
    return {
        "kernels": kernels,
        "tensor_peak_flop_per_s": tensor * gpu.num_sms * clock_hz or gpu.fp32_peak_flop_per_s(clock_hz),
        "cuda_peak_flop_per_s": gpu.fp32_peak_flop_per_s(clock_hz),
        "dram_bw_bytes_per_s": gpu.memory.bw_bytes_per_s,
        "l2_bw_bytes_per_s": gpu.l2_bw_bytes_per_s(clock_hz),
        "sm_clock_hz": clock_hz,
        "context_tokens": context,
    }
