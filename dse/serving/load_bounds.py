"""What bounds a server under load: the `bound_by` of a load estimate, for `dse predict` and `dse whatif`.

A simulated run mixes thousands of different engine steps, so its bounds are read off two representative
ones, predicted kernel by kernel (`dse.perf.bounds`): a decode step at the run's mean running batch and
mean context, and a prefill step of the mean prompt. On several GPUs the decode step's communication share
(`comm_time_fraction`) is its `communication` label. Only the CLI asks for this: a search point does not
pay for the two extra predictions.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dse.hardware.spec import GpuSpec
from dse.perf.bounds import combine, summarize
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import WorkloadPrediction, predict_graph
from dse.perf.types import OperatingPoint
from dse.serving.load import LoadEstimate
from dse.serving.step_table import step_graph
from dse.workload.llm import LlmArch

Coeffs = tuple[Any, Any]  # (latency, energy) coefficient sets; None: the shipped one


def _step(
    arch: LlmArch, gpu: GpuSpec, est: LoadEstimate, point: OperatingPoint, coeffs: Coeffs, **step: int
) -> WorkloadPrediction:
    r = est.request
    kv_dtype = est.engine.kv_dtype(r.precision, r.kv_dtype)
    graph = step_graph(
        arch, step["decodes"], step["prefills"], step["each"], step["context_len"], r.precision,
        est.engine.name, est.engine.sampling, kv_dtype, r.parallelism,
    )  # fmt: skip
    # as the load model's steps (`step_table`): the shipped latency corrections unless others are given, the
    # step's mean power under the cap (the exact search of the rule `step_table` computes)
    latency = load_default_coeffs(gpu) if coeffs[0] is None else coeffs[0]
    return predict_graph(graph, gpu, point, latency, coeffs[1])


def _decode_step(
    arch: LlmArch, gpu: GpuSpec, est: LoadEstimate, point: OperatingPoint, coeffs: Coeffs
) -> tuple[WorkloadPrediction, int]:
    """The representative decode step (one GPU of a replica) and the sequences it decodes."""
    v, r = est.values, est.request
    decodes = max(1, round(float(v.get("avg_batch_size") or 1.0)))  # avg_batch_size is per replica
    context = int(r.input_tokens + r.output_tokens // 2)
    step = _step(arch, gpu, est, point, coeffs, decodes=decodes, prefills=0, each=0, context_len=context)
    return step, decodes


def decode_step_breakdown(
    est: LoadEstimate, arch: LlmArch, gpu: GpuSpec, point: OperatingPoint | None = None,
    coeffs: Any = None, power_coeffs: Any = None,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """Energy per output token of the representative decode step, by hardware module and by operator, over
    the GPUs of a replica (kernels only: a step's communication waits are not in it); {} when infeasible.
    `coeffs` and `power_coeffs` as `predict_load` takes them (None: the shipped sets)."""
    if not est.feasible:
        return {}
    step, decodes = _decode_step(arch, gpu, est, point or OperatingPoint(), (coeffs, power_coeffs))
    par = est.request.parallelism
    per_token = par.tp * par.pp / decodes  # every GPU of the replica runs its share of each step
    return {
        "by_module": {k: e * per_token for k, e in step.energy_j_by_module().items()},
        "by_op": {f"decode/{k}": e * per_token for k, e in step.energy_j_by_name().items()},
    }


def with_bounds(
    est: LoadEstimate, arch: LlmArch, gpu: GpuSpec, point: OperatingPoint | None = None,
    coeffs: Any = None, power_coeffs: Any = None,
) -> LoadEstimate:  # fmt: skip
    """`est` with `bound_by` filled: {"decode": {"bound_by", "shares"}, "prefill": {...}} (module docstring);
    an infeasible estimate is returned as it is. `coeffs` and `power_coeffs` as `predict_load` takes them
    (None: the shipped sets)."""
    if not est.feasible:
        return est
    point, sets = point or OperatingPoint(), (coeffs, power_coeffs)
    v, r = est.values, est.request
    decode = _decode_step(arch, gpu, est, point, sets)[0].bound_by_shares()
    comm = float(v.get("comm_time_fraction") or 0.0)
    if comm > 0:  # the step's time: its kernels' shares, and communication beside them
        decode = combine([(decode, 1.0 - comm), ({"communication": 1.0}, comm)])
    each = int(r.input_tokens)  # a prompt's own tokens are its context
    prefill = _step(
        arch, gpu, est, point, sets, decodes=0, prefills=1, each=each, context_len=each
    ).bound_by_shares()
    bound_by: dict[str, Any] = {"decode": summarize(decode), "prefill": summarize(prefill)}
    return dataclasses.replace(est, bound_by=bound_by)
