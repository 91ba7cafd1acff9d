"""LLM serving predictions: a batch of requests, prefilled together, then decoded step by step.

Metric definitions (as serving benchmarks such as vLLM's `benchmark_serving` and MLPerf define them, for a
static batch whose requests all arrive at t = 0 and share input and output lengths):

    ttft_s                     time to first token: the prefill of the whole batch (its LM head emits token 1)
    tpot_s                     time per output token after the first: (e2e - ttft) / (output_tokens - 1),
                               i.e. the mean decode step; equals the mean inter-token latency (ITL)
    e2e_latency_s              ttft + all decode steps: when the last token of every request is out
    output_tokens_per_s        batch * output_tokens / e2e_latency_s
    energy_j                   whole-GPU energy of prefill and all decode steps (idle power included), over
                               all GPUs
    energy_per_output_token_j  energy_j / (batch * output_tokens): prefill is charged to the output tokens,
                               as the ML.ENERGY leaderboard does
    energy_per_request_j       energy_j / batch
    avg_power_w                energy_j / e2e_latency_s per GPU (total_power_w: all GPUs)
    peak_power_w               highest predicted power of any kernel
    memory_bytes               weights + KV cache at the last step + peak prefill activations, per GPU; the
                               point is infeasible when it exceeds USABLE_MEMORY_FRAC of the GPU's capacity
    comm_time_fraction         share of e2e_latency_s in collectives and stage hand-offs (0 on one GPU)

Several GPUs (`tp`, `pp`, `ep`, `dp`: `dse.workload.sharding`, as under load): each of the dp replicas
prefills and decodes batch / dp requests; one GPU of a replica runs the sharded graphs, and each phase's
collectives and stage hand-offs are priced per step as the load model prices them (`dse.serving.parallel`:
in series with the kernels; a GPU in a collective draws idle plus link power; with pp the waiting stages
draw idle power). `bound_by` gets a `communication` share. TP = PP = EP = DP = 1 is the one-GPU path.

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
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.bounds import combine, summarize
from dse.perf.coeffs import load_default_coeffs
from dse.perf.dvfs import idle_power_w, requested_clock_hz
from dse.perf.first_pass import FirstPass
from dse.perf.host import gpu_only_coeffs
from dse.perf.predict import WorkloadPrediction, predict_graphs
from dse.perf.rates import check_serving_precision
from dse.perf.types import OperatingPoint
from dse.serving.memory import USABLE_MEMORY_FRAC
from dse.serving.parallel import StepComm, combine_step, step_comm
from dse.units import MAX_COUNT
from dse.workload.engine import apply_engine, check_engine_options, kv_bytes_per_token, with_kv_dtype
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import (
    LlmArch,
    build_decode_graph,
    build_prefill_graph,
    decode_keys_rule,
    prefill_activation_bytes,
    weight_bytes,
)
from dse.workload.ops import AttentionOp
from dse.workload.sharding import Parallelism, check_parallelism, shard_arch, shard_graph, weight_arch

# A batch or a length past this is a typo (studies refuse what does not fit 64 bits; 2^31 keeps every
# product of them finite and far from float rounding).
MAX_REQUEST_INT = MAX_COUNT


def check_decoder(arch: LlmArch) -> None:
    """ConfigError for a model that cannot serve (an encoder has no decode)."""
    if arch.family != "decoder":
        raise ConfigError(f"{arch.name} is an encoder: serving (prefill + decode) needs a decoder model")


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
    # The GPU layout (dse.workload.sharding.Parallelism); dp replicas split the batch evenly.
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for name in ("batch", "input_tokens", "output_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_REQUEST_INT:
                raise ConfigError(f"{name} must be an integer in [1, {MAX_REQUEST_INT}], got {value!r}")
        check_engine_options(engine=self.engine, sampling=self.sampling, kv_dtype=self.kv_dtype)
        self.parallelism  # noqa: B018 (validates tp, pp, ep, dp)

    @property
    def parallelism(self) -> Parallelism:
        return Parallelism(tp=self.tp, pp=self.pp, ep=self.ep, dp=self.dp)

    @property
    def replica_batch(self) -> int:
        """The requests one of the dp replicas prefills and decodes (`check_layout`: dp divides batch)."""
        return self.batch // self.dp


def check_layout(arch: LlmArch, request: ServingRequest) -> None:
    """ConfigError naming the flag unless `arch` can be split as `request` says (`check_parallelism`) and
    the dp replicas can share the batch evenly."""
    check_parallelism(arch, request.parallelism)
    if request.batch % request.dp:
        raise ConfigError(
            f"--dp {request.dp} must divide the batch of {request.batch} (each replica's share)"
        )


# The keys of `dse.serving.load.LOAD_KEYS` a static batch reports too (`ServingEstimate._load_view`).
LOAD_VIEW_KEYS: tuple[str, ...] = (
    "num_gpus",
    *(f"{name}_p{q}_s" for name in ("ttft", "tpot", "e2e_latency") for q in (50, 90, 99)),
    "requests_per_s",
    "avg_batch_size",
    "total_power_w",
    "kv_cache_utilization",
    "preemptions",
    "overloaded",
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
    comm_time_fraction: float = 0.0  # share of e2e_latency_s in collectives and stage hand-offs

    @property
    def num_gpus(self) -> int:
        return self.request.parallelism.num_gpus

    def metrics(self) -> dict[str, float | bool | str | None]:
        """Flat scalar metrics (what the search logs and `--json` prints at its top level; None: no value,
        as under load)."""
        out: dict[str, float | bool | str | None] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool | str | float | int) and f.name not in ("model", "gpu"):
                out[f.name] = value
        out["effective_clock_mhz"] = self.effective_clock_hz / 1e6
        out["overloaded"] = False  # as under load: no arrivals to outpace the batch
        out |= self._load_view()
        return out

    def _load_view(self) -> dict[str, float | None]:
        """The keys every serving mode reports (`dse.serving.load`), for this batch: its requests are
        identical and start together, so every percentile is the mean and the batch is the running batch."""
        out: dict[str, float | None] = {"num_gpus": float(self.num_gpus)}
        for q in (50, 90, 99):
            out[f"ttft_p{q}_s"] = self.ttft_s
            out[f"tpot_p{q}_s"] = self.tpot_s
            out[f"e2e_latency_p{q}_s"] = self.e2e_latency_s
        batch = self.request.batch
        out["requests_per_s"] = batch / self.e2e_latency_s if self.e2e_latency_s > 0 else 0.0
        # one engine replica's running sequences, as under load (`dse.serving.metrics`)
        out["avg_batch_size"] = float(self.request.replica_batch)
        out["total_power_w"] = self.avg_power_w * self.num_gpus
        pool = USABLE_MEMORY_FRAC * self.memory_capacity_bytes - self.weight_bytes - self.activation_bytes
        # the cache's share of the memory left for it; above 1 the batch does not fit (`feasible` false), and
        # with no memory left at all there is no share to give (null)
        out["kv_cache_utilization"] = self.kv_cache_bytes / pool if pool > 0 else None
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
    rows = request.replica_batch
    return apply_engine(graph, arch, engine=request.engine, sampling=request.sampling, rows=rows)


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
    rules = [(op, decode_keys_rule(arch, op)) for op in attention]
    ops = tuple(_with_kv_len(op, keys(context + 1)) for context in context_lens for op, keys in rules)
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


@functools.lru_cache(maxsize=256)
def _request_bytes(arch: LlmArch, request: ServingRequest) -> tuple[float, float, float]:
    """(weights, KV cache at the last step, peak prefill activations) per GPU: they do not depend on the
    GPU, so a search, which varies the GPU far more often than the workload, reads them once."""
    b, i, o, par = request.replica_batch, request.input_tokens, request.output_tokens, request.parallelism
    gpu_arch = weight_arch(arch, par)
    w_bytes = weight_bytes(gpu_arch, request.precision) / par.pp
    kv_bytes = b * (i + o) * kv_bytes_per_token(gpu_arch, request.precision, request.kv_dtype) / par.pp
    act_bytes = prefill_activation_bytes(
        shard_arch(arch, par), request.precision, batch=b, seq_len=i, attention=request.attention
    )
    return w_bytes, kv_bytes, act_bytes


def _memory_fields(arch: LlmArch, gpu: GpuSpec, request: ServingRequest) -> dict[str, Any]:
    """The memory fields of a `ServingEstimate`, per GPU: weights, the KV cache at the last step and the
    peak prefill activations, against the usable share of the GPU's memory (a pipeline stage holds 1 / pp
    of the layers' weights and cache, as in `dse.serving.load`)."""
    w_bytes, kv_bytes, act_bytes = _request_bytes(arch, request)
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


@functools.lru_cache(maxsize=256)
def _graphs(arch: LlmArch, request: ServingRequest) -> tuple[WorkloadGraph, ...]:
    """What one GPU runs (`dse.workload.sharding`): the prefill, then (with more than one output token)
    the context-independent ops of one decode step and the attention of every step. Cached: the graphs do
    not depend on the GPU or the clock, which a search varies far more often than the workload (graphs
    are immutable values)."""
    par = request.parallelism
    gpu_arch = shard_arch(arch, par)
    b, i, num_steps = request.replica_batch, request.input_tokens, request.output_tokens - 1
    prefill = build_prefill_graph(
        gpu_arch, batch=b, seq_len=i, precision=request.precision, attention=request.attention
    )
    graphs = [shard_graph(_engine_graph(prefill, gpu_arch, request, prefill=True), arch, par)]
    if num_steps == 0:
        return tuple(graphs)
    decode_graph = build_decode_graph(
        gpu_arch, batch=b, context_len=i, precision=request.precision, attention=request.attention
    )
    step_graph = shard_graph(_engine_graph(decode_graph, gpu_arch, request, prefill=False), arch, par)
    fixed_graph, attention = _split_decode_graph(step_graph)
    return (*graphs, fixed_graph, _attention_over_steps(attention, range(i, i + num_steps), gpu_arch))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Phase:
    """Prefill, or all decode steps, on one GPU of a replica: kernels, then communication in series."""

    kernel_s: float
    kernel_j: float
    shares: dict[str, float]  # bound shares of the kernels' time (dse.perf.bounds)
    steps: int = 1
    latency_s: float = 0.0  # kernels + communication (set by `_with_comm`; kernel_s on one GPU)
    energy_j: float = 0.0  # per GPU
    comm_s: float = 0.0  # collectives and stage hand-offs on the critical path
    comm_j: float = 0.0  # collectives (idle + link power) and hand-offs' link energy, per GPU


def _kernel_phases(
    prefill: WorkloadPrediction, decode: list[WorkloadPrediction], num_steps: int
) -> dict[str, _Phase]:
    """The phases as the kernel model predicts them on one GPU (no communication)."""
    phases = {"prefill": _Phase(kernel_s=prefill.latency_s, kernel_j=prefill.energy_j,
                                shares=prefill.bound_by_shares())}  # fmt: skip
    if decode:
        fixed, steps = decode
        shares = combine(
            [
                (fixed.bound_by_shares(), fixed.latency_s * num_steps),
                (steps.bound_by_shares(), steps.latency_s),
            ]
        )
        phases["decode"] = _Phase(
            kernel_s=fixed.latency_s * num_steps + steps.latency_s,
            kernel_j=fixed.energy_j * num_steps + steps.energy_j,
            shares=shares,
            steps=num_steps,
        )
    return phases


def _with_comm(
    phase: _Phase,
    arch: LlmArch,
    gpu: GpuSpec,
    request: ServingRequest,
    point: OperatingPoint,
    *,
    decode: bool,
) -> _Phase:
    """`phase` with its collectives and hand-offs per step (`dse.serving.parallel`, as under load): a
    prefill is one step of batch x input tokens per replica, a decode step one token per sequence."""
    par = request.parallelism
    if par.is_single:
        return dataclasses.replace(phase, latency_s=phase.kernel_s, energy_j=phase.kernel_j)
    tokens = request.replica_batch * (1 if decode else request.input_tokens)
    clock_hz = point.sm_clock_hz or gpu.clocks.sm_clock_default_hz or None
    one = step_comm(
        arch, gpu, par, tokens=np.array([tokens]), engine=request.engine, precision=request.precision,
        decode_only=np.array([decode]), sm_clock_hz=clock_hz,
    )  # fmt: skip
    n = phase.steps  # every step of the phase exchanges the same bytes
    comm = StepComm(
        latency_s=one.latency_s * n, energy_j=one.energy_j * n,
        handoff_s=one.handoff_s * n, handoff_link_j=one.handoff_link_j * n,
    )  # fmt: skip
    idle_w = float(idle_power_w(gpu, clock_hz or gpu.clocks.sm_clock_max_hz))
    # combine_step is linear in the kernels' time and energy: the phase's totals give the sum of its steps
    latency_s, energy_j = combine_step(
        np.array([phase.kernel_s]), np.array([phase.kernel_j]), comm, par, idle_power_w=idle_w
    )
    comm_s = float(comm.total_s[0])
    return dataclasses.replace(
        phase,
        latency_s=float(latency_s[0]),
        energy_j=float(energy_j[0]),
        comm_s=comm_s,
        comm_j=float(comm.energy_j[0] + comm.handoff_link_j[0]) / par.pp,
        shares=combine([(phase.shares, phase.kernel_s), ({"communication": 1.0}, comm_s)]),
    )


def _breakdowns(
    prefill: WorkloadPrediction, decode: list[WorkloadPrediction], phases: dict[str, _Phase], par: Parallelism
) -> tuple[dict[str, float], dict[str, float]]:
    """Energy by module and by name, over all GPUs. Several GPUs add `communication` (a module and a
    name per phase) and, with pp, the stages' wait at idle power (`idle`; `<phase>/pipeline_wait`)."""
    ranks = par.num_gpus // par.pp  # GPUs that each run every layer's kernels once, over the stages
    by_module: dict[str, float] = {}
    by_name: dict[str, float] = {}
    _add(by_module, prefill.energy_j_by_module(), ranks)
    _add(by_name, prefill.energy_j_by_name(), ranks, prefix="prefill/")
    if decode:
        num_steps = phases["decode"].steps
        for part, scale in zip(decode, (num_steps, 1), strict=True):
            _add(by_module, part.energy_j_by_module(), scale * ranks)
            _add(by_name, part.energy_j_by_name(), scale * ranks, prefix="decode/")
    if par.is_single:
        return by_module, by_name
    for name, phase in phases.items():
        comm_j = phase.comm_j * par.num_gpus
        wait_j = (phase.energy_j - phase.kernel_j / par.pp) * par.num_gpus - comm_j
        _add(by_module, {"communication": comm_j, "idle": wait_j if par.pp > 1 else 0.0})
        _add(by_name, {"communication": comm_j}, prefix=f"{name}/")
        if par.pp > 1:
            _add(by_name, {"pipeline_wait": wait_j}, prefix=f"{name}/")
    return by_module, by_name


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
    On several GPUs (`request.tp` ...) one GPU of a replica is predicted (`dse.workload.sharding`), its
    collectives and stage hand-offs in series with its kernels (`dse.serving.parallel`); power and memory
    are per GPU, energy and rates count every GPU (ConfigError when the model cannot be split so).
    """
    check_decoder(arch)
    point = point or OperatingPoint()
    # The fitted latency corrections of the GPU's generation (None in dse.perf = uncorrected).
    if coeffs is None:
        coeffs = load_default_coeffs(gpu)
    _check_context(arch, request)
    check_serving_precision(gpu, request.precision, request.kv_dtype)
    par = request.parallelism
    check_layout(arch, request)
    memory = _memory_fields(arch, gpu, request)
    b, o, num_steps = request.batch, request.output_tokens, request.output_tokens - 1
    # One kernel-model pass over prefill and decode. The power cap holds each phase's mean (the GPU's
    # limiter averages over about a second, `dse.perf.pass_cap`): the prefill as one pass, every decode
    # step together as another (its step-independent ops run once per step).
    graphs = _graphs(arch, request)
    passes, runs = ([[0], [1, 2]], [1.0, float(num_steps), 1.0]) if len(graphs) == 3 else ([[0]], [1.0])
    prefill, *decode = predict_graphs(graphs, gpu, point, coeffs, power_coeffs, passes=passes, runs=runs)
    phases = {
        name: _with_comm(phase, arch, gpu, request, point, decode=name == "decode")
        for name, phase in _kernel_phases(prefill, decode, num_steps).items()
    }
    by_module, by_name = _breakdowns(prefill, decode, phases, par)
    clock_time_s = prefill.effective_clock_hz * prefill.latency_s
    for part, scale in zip(decode, (num_steps, 1), strict=False):
        clock_time_s += part.effective_clock_hz * part.latency_s * scale
    peak_power_w = max(p.peak_power_w for p in (prefill, *decode))

    first = phases["prefill"]
    rest = phases.get("decode", _Phase(kernel_s=0.0, kernel_j=0.0, shares={}))
    e2e_s = first.latency_s + rest.latency_s
    gpu_energy_j = first.energy_j + rest.energy_j
    energy_j = gpu_energy_j * par.num_gpus
    return ServingEstimate(
        model=arch.name,
        gpu=gpu.name,
        request=request,
        ttft_s=first.latency_s,
        tpot_s=rest.latency_s / num_steps if num_steps else 0.0,
        e2e_latency_s=e2e_s,
        output_tokens_per_s=b * o / e2e_s,
        energy_j=energy_j,
        prefill_energy_j=first.energy_j * par.num_gpus,
        decode_energy_j=rest.energy_j * par.num_gpus,
        energy_per_output_token_j=energy_j / (b * o),
        energy_per_request_j=energy_j / b,
        avg_power_w=gpu_energy_j / e2e_s,
        peak_power_w=peak_power_w,
        effective_clock_hz=clock_time_s / (first.kernel_s + rest.kernel_s),
        **memory,
        energy_j_by_module=by_module,
        energy_j_by_name=by_name,
        bound_by={name: summarize(phase.shares) for name, phase in phases.items()},
        comm_time_fraction=(first.comm_s + rest.comm_s) / e2e_s,
    )


def first_pass(arch: LlmArch, gpu: GpuSpec, request: ServingRequest, point: OperatingPoint) -> FirstPass:
    """What `predict_serving`'s first kernel-model pass runs (the ops of its graphs at the requested clock,
    with its coefficients), for a search chunk to run the GEMMs of many points' first passes together
    (`dse.perf.first_pass`). Raises as `predict_serving` would for a request the model cannot take."""
    check_decoder(arch)
    _check_context(arch, request)
    check_layout(arch, request)
    ops = [op for graph in _graphs(arch, request) for op in graph.ops]
    return FirstPass(ops, gpu, requested_clock_hz(gpu, point), gpu_only_coeffs(load_default_coeffs(gpu)))


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
    "check_layout",
    "first_pass",
    "predict_serving",
    "rollup_by_level",
]
