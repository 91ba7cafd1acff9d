"""LLM serving predictions: a batch of requests, prefilled together, then decoded step by step.

Metric definitions (as serving benchmarks such as vLLM's `benchmark_serving` and MLPerf define them, for a
static batch whose requests all arrive at t = 0 and share input and output lengths):

    ttft_s                     time to first token: the prefill of the whole batch (its LM head emits token 1)
    tpot_s                     time per output token after the first: (e2e - ttft) / (output_tokens - 1),
                               i.e. the mean decode step; equals the mean inter-token latency (ITL)
    e2e_latency_s              ttft + all decode steps: when the last token of every request is out
    output_tokens_per_s        batch * output_tokens / e2e_latency_s
    energy_j                   whole-GPU energy of prefill and all decode steps (idle power included)
    energy_per_output_token_j  energy_j / (batch * output_tokens): prefill is charged to the output tokens,
                               as the ML.ENERGY leaderboard does
    energy_per_request_j       energy_j / batch
    avg_power_w                energy_j / e2e_latency_s
    peak_power_w               highest predicted power of any kernel
    memory_bytes               weights + KV cache at the last step + peak prefill activations; the point is
                               infeasible when it exceeds USABLE_MEMORY_FRAC of the GPU's capacity

`engine` and `sampling` (default "none": one kernel per operator, no sampler) shape the prefill and
every decode step as a serving engine runs them (`dse.workload.engine`: its kernel fusions, and the
sampler's kernels for one token per sequence).

`kv_dtype` (default: the activation dtype of the precision, bf16 for bf16 and fp8) sets the KV-cache
dtype: `fp8` halves the cache's bytes per token, so the decode attention reads half the KV traffic, the
KV write stores half and the cache takes half the memory (vLLM / TensorRT-LLM `--kv-cache-dtype fp8`).

Decode is evaluated without a Python loop over steps: every op of a decode step except attention is the
same at every step (its shapes depend on the batch only), so it is predicted once and multiplied by the
number of steps; the attention of all steps (KV cache of input_tokens, input_tokens + 1, ...) is one
vectorized call over an array of context lengths.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.bounds import combine, summarize
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graphs
from dse.perf.types import OperatingPoint
from dse.serving.memory import USABLE_MEMORY_FRAC
from dse.workload.engine import apply_engine, check_engine_options, kv_bytes_per_token, with_kv_dtype
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import (
    LlmArch,
    build_decode_graph,
    build_prefill_graph,
    prefill_activation_bytes,
    weight_bytes,
)
from dse.workload.ops import AttentionOp


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRequest:
    """A static batch of identical requests."""

    batch: int
    input_tokens: int
    output_tokens: int
    precision: str = "bf16"
    attention: str = "flash"
    kv_dtype: str | None = None  # None: the activation dtype of `precision`
    engine: str = "none"  # dse.workload.engine.ENGINES: kernel fusions of a serving engine
    sampling: str = "none"  # dse.workload.engine.SAMPLINGS: the sampler after each LM head

    def __post_init__(self) -> None:
        for name in ("batch", "input_tokens", "output_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        check_engine_options(engine=self.engine, sampling=self.sampling, kv_dtype=self.kv_dtype)


# The keys of `dse.serving.load.LOAD_KEYS` a static batch reports too (`ServingEstimate._load_view`).
LOAD_VIEW_KEYS: tuple[str, ...] = (
    "num_gpus",
    *(f"{name}_p{q}_s" for name in ("ttft", "tpot", "e2e_latency") for q in (50, 90, 99)),
    "requests_per_s",
    "avg_batch_size",
    "total_power_w",
    "kv_cache_utilization",
    "preemptions",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingEstimate:
    """Predicted serving metrics (SI) plus the energy breakdowns; see the module docstring."""

    model: str
    gpu: str
    request: ServingRequest
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    energy_j: float
    prefill_energy_j: float
    decode_energy_j: float
    energy_per_output_token_j: float
    energy_per_request_j: float
    avg_power_w: float
    peak_power_w: float
    effective_clock_hz: float
    weight_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    memory_bytes: float
    memory_capacity_bytes: float
    feasible: bool
    infeasible_reason: str
    energy_j_by_module: dict[str, float] = field(hash=False)
    energy_j_by_name: dict[str, float] = field(hash=False)
    # What bounds each phase (dse.perf.bounds): {"prefill"|"decode": {"bound_by": label, "shares": {...}}}
    bound_by: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False)

    def metrics(self) -> dict[str, float | bool | str]:
        """Flat scalar metrics (what the search logs and `--json` prints at its top level)."""
        out: dict[str, float | bool | str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool | str | float | int) and f.name not in ("model", "gpu"):
                out[f.name] = value
        out["effective_clock_mhz"] = self.effective_clock_hz / 1e6
        out |= self._load_view()
        return out

    def _load_view(self) -> dict[str, float]:
        """The keys every serving mode reports (`dse.serving.load`), for this batch: its requests are
        identical and start together, so every percentile is the mean and the batch is the running batch."""
        out: dict[str, float] = {"num_gpus": 1.0}
        for q in (50, 90, 99):
            out[f"ttft_p{q}_s"] = self.ttft_s
            out[f"tpot_p{q}_s"] = self.tpot_s
            out[f"e2e_latency_p{q}_s"] = self.e2e_latency_s
        batch = self.request.batch
        out["requests_per_s"] = batch / self.e2e_latency_s if self.e2e_latency_s > 0 else 0.0
        out["avg_batch_size"] = float(batch)
        out["total_power_w"] = self.avg_power_w
        pool = USABLE_MEMORY_FRAC * self.memory_capacity_bytes - self.weight_bytes - self.activation_bytes
        out["kv_cache_utilization"] = self.kv_cache_bytes / pool if pool > 0 else 0.0
        out["preemptions"] = 0.0
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "mode": "static",
            **dataclasses.asdict(self.request),
            **self.metrics(),
            "bound_by": {phase: dict(v) for phase, v in self.bound_by.items()},
            "energy_j_by_module": dict(self.energy_j_by_module),
            "energy_j_by_name": dict(self.energy_j_by_name),
        }


def _with_kv(graph: WorkloadGraph, kv_dtype: str | None, *, prefill: bool) -> WorkloadGraph:
    """The graph with its KV cache in `kv_dtype`: the cache write always, the attention in decode only
    (a prefill attends to its fresh keys and values in the activation dtype)."""
    if kv_dtype is None:
        return graph
    ops = tuple(
        op if prefill and isinstance(op, AttentionOp) else with_kv_dtype(op, kv_dtype) for op in graph.ops
    )
    return WorkloadGraph(name=graph.name, ops=ops, meta={**graph.meta, "kv_dtype": kv_dtype})


def _engine_graph(
    graph: WorkloadGraph, arch: LlmArch, request: ServingRequest, *, prefill: bool
) -> WorkloadGraph:
    """A prefill or decode pass of the batch as `request`'s engine runs it: KV dtype, fusions, sampler."""
    graph = _with_kv(graph, request.kv_dtype, prefill=prefill)
    return apply_engine(graph, arch, engine=request.engine, sampling=request.sampling, rows=request.batch)


def _split_decode_graph(graph: WorkloadGraph) -> tuple[WorkloadGraph, tuple[AttentionOp, ...]]:
    """Context-independent ops of a decode step, and its attention ops (the ones that grow with the cache)."""
    attention = tuple(op for op in graph.ops if isinstance(op, AttentionOp))
    rest = tuple(op for op in graph.ops if not isinstance(op, AttentionOp))
    return WorkloadGraph(name=graph.name, ops=rest, meta=graph.meta), attention


_ATTENTION_FIELDS = tuple(f.name for f in dataclasses.fields(AttentionOp))


def _with_kv_len(op: AttentionOp, seq_len_kv: int) -> AttentionOp:
    """`op` attending to `seq_len_kv` keys. The op was validated once; growing the cache keeps it valid, so
    the copy skips re-validation (hundreds of steps per prediction make that a quarter of its time), and
    sets the slots directly (3x faster than copy.copy, which goes through __reduce_ex__)."""
    new = object.__new__(AttentionOp)
    for name in _ATTENTION_FIELDS:
        object.__setattr__(new, name, getattr(op, name))
    object.__setattr__(new, "seq_len_kv", seq_len_kv)
    return new


def _attention_over_steps(
    attention: tuple[AttentionOp, ...], context_lens: range, arch: LlmArch
) -> WorkloadGraph:
    """One attention op per (decode step, attention op of the step); names keep the op's name."""
    ops = tuple(
        _with_kv_len(op, arch.decode_keys(context + 1)) for context in context_lens for op in attention
    )
    return WorkloadGraph(name="decode-attention", ops=ops)


def _add(into: dict[str, float], parts: dict[str, float], scale: float = 1.0, prefix: str = "") -> None:
    for key, value in parts.items():
        into[prefix + key] = into.get(prefix + key, 0.0) + value * scale


def _check_context(arch: LlmArch, request: ServingRequest) -> None:
    """ConfigError unless `arch`'s context holds the request's input and output tokens."""
    i, o = request.input_tokens, request.output_tokens
    if i + o > arch.max_position_embeddings:
        raise ConfigError(
            f"input_tokens + output_tokens = {i + o} exceeds {arch.name}'s context of "
            f"{arch.max_position_embeddings}"
        )


def _memory_fields(arch: LlmArch, gpu: GpuSpec, request: ServingRequest) -> dict[str, Any]:
    """The memory fields of a `ServingEstimate`: weights, the KV cache at the last step and the peak
    prefill activations, against the usable share of the GPU's memory."""
    b, i, o = request.batch, request.input_tokens, request.output_tokens
    w_bytes = weight_bytes(arch, request.precision)
    kv_bytes = b * (i + o) * kv_bytes_per_token(arch, request.precision, request.kv_dtype)
    act_bytes = prefill_activation_bytes(
        arch, request.precision, batch=b, seq_len=i, attention=request.attention
    )
    memory_bytes = w_bytes + kv_bytes + act_bytes
    usable_bytes = USABLE_MEMORY_FRAC * gpu.memory.capacity_bytes
    feasible = memory_bytes <= usable_bytes
    reason = (
        ""
        if feasible
        else (
            f"needs {memory_bytes / 2**30:.1f} GiB (weights {w_bytes / 2**30:.1f}, "
            f"KV cache {kv_bytes / 2**30:.1f}, "
            f"activations {act_bytes / 2**30:.1f}) > {usable_bytes / 2**30:.1f} GiB usable "
            f"({USABLE_MEMORY_FRAC:.0%} of {gpu.memory.capacity_bytes / 2**30:.0f} GiB)"
        )
    )
    return {
        "weight_bytes": w_bytes,
        "kv_cache_bytes": kv_bytes,
        "activation_bytes": act_bytes,
        "memory_bytes": memory_bytes,
        "memory_capacity_bytes": gpu.memory.capacity_bytes,
        "feasible": feasible,
        "infeasible_reason": reason,
    }


def _decode_graphs(arch: LlmArch, request: ServingRequest) -> tuple[WorkloadGraph, WorkloadGraph]:
    """The decode steps: the context-independent ops of one step, and the attention of every step."""
    b, i, num_steps = request.batch, request.input_tokens, request.output_tokens - 1
    decode_graph = build_decode_graph(
        arch, batch=b, context_len=i, precision=request.precision, attention=request.attention
    )
    step_graph = _engine_graph(decode_graph, arch, request, prefill=False)
    fixed_graph, attention = _split_decode_graph(step_graph)
    return fixed_graph, _attention_over_steps(attention, range(i, i + num_steps), arch)


def predict_serving(
    arch: LlmArch,
    gpu: GpuSpec,
    request: ServingRequest,
    point: OperatingPoint | None = None,
    *,
    coeffs: Any = None,
    power_coeffs: Any = None,
) -> ServingEstimate:
    """Serving metrics of `request` for model `arch` on `gpu` at `point` (default clocks, TDP cap).

    `coeffs` (latency corrections) and `power_coeffs` default to the shipped sets of the GPU's generation.
    """
    if arch.family != "decoder":
        raise ConfigError(f"{arch.name} is an encoder: serving (prefill + decode) needs a decoder model")
    point = point or OperatingPoint()
    # The fitted latency corrections of the GPU's generation (None in dse.perf = uncorrected).
    if coeffs is None:
        coeffs = load_default_coeffs(gpu)
    _check_context(arch, request)
    b, i, o = request.batch, request.input_tokens, request.output_tokens
    memory = _memory_fields(arch, gpu, request)

    prefill_graph = build_prefill_graph(
        arch, batch=b, seq_len=i, precision=request.precision, attention=request.attention
    )
    num_steps = o - 1
    graphs = [_engine_graph(prefill_graph, arch, request, prefill=True)]
    if num_steps > 0:
        graphs += _decode_graphs(arch, request)
    # One kernel-model pass over prefill and decode (each kernel is independent of the others).
    prefill, *decode = predict_graphs(graphs, gpu, point, coeffs, power_coeffs)
    by_module = dict(prefill.energy_j_by_module())
    by_name: dict[str, float] = {}
    _add(by_name, prefill.energy_j_by_name(), prefix="prefill/")
    decode_latency_s = decode_energy_j = 0.0
    bound_by = {"prefill": summarize(prefill.bound_by_shares())}
    peak_power_w = prefill.peak_power_w
    clock_time_s = prefill.effective_clock_hz * prefill.latency_s
    if decode:
        fixed, steps = decode
        decode_latency_s = fixed.latency_s * num_steps + steps.latency_s
        decode_energy_j = fixed.energy_j * num_steps + steps.energy_j
        _add(by_module, fixed.energy_j_by_module(), num_steps)
        _add(by_module, steps.energy_j_by_module())
        _add(by_name, fixed.energy_j_by_name(), num_steps, prefix="decode/")
        _add(by_name, steps.energy_j_by_name(), prefix="decode/")
        peak_power_w = max(peak_power_w, fixed.peak_power_w, steps.peak_power_w)
        clock_time_s += fixed.effective_clock_hz * fixed.latency_s * num_steps
        clock_time_s += steps.effective_clock_hz * steps.latency_s
        decode_shares = combine(
            [
                (fixed.bound_by_shares(), fixed.latency_s * num_steps),
                (steps.bound_by_shares(), steps.latency_s),
            ]
        )
        bound_by["decode"] = summarize(decode_shares)

    ttft_s = prefill.latency_s
    e2e_s = ttft_s + decode_latency_s
    energy_j = prefill.energy_j + decode_energy_j
    return ServingEstimate(
        model=arch.name,
        gpu=gpu.name,
        request=request,
        ttft_s=ttft_s,
        tpot_s=decode_latency_s / num_steps if num_steps else 0.0,
        e2e_latency_s=e2e_s,
        output_tokens_per_s=b * o / e2e_s,
        energy_j=energy_j,
        prefill_energy_j=prefill.energy_j,
        decode_energy_j=decode_energy_j,
        energy_per_output_token_j=energy_j / (b * o),
        energy_per_request_j=energy_j / b,
        avg_power_w=energy_j / e2e_s,
        peak_power_w=peak_power_w,
        effective_clock_hz=clock_time_s / e2e_s,
        **memory,
        energy_j_by_module=by_module,
        energy_j_by_name=by_name,
        bound_by=bound_by,
    )


def rollup_by_level(energy_j_by_name: dict[str, float], depth: int) -> dict[str, float]:
    """Sum a by-name breakdown at a hierarchy depth: 1 = phase, 2 = model, 3 = layer/block, ..."""
    out: dict[str, float] = {}
    for name, energy_j in energy_j_by_name.items():
        key = "/".join(name.split("/")[:depth])
        out[key] = out.get(key, 0.0) + energy_j
    return out


__all__ = [
    "ServingEstimate",
    "ServingRequest",
    "predict_serving",
    "rollup_by_level",
]
