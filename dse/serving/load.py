"""Serving under load: a server simulated step by step at a concurrency, a request rate or flat out.

    est = predict_load(arch, gpu, LoadRequest(mode="concurrency", concurrency=64, input_tokens=1024,
                                              output_tokens=256, engine="vllm"))
    est.metrics()["ttft_p90_s"], est.metrics()["energy_per_output_token_j"]

Modes (how requests arrive):

    concurrency     closed loop: C clients, each sends its next request when its last one finishes
                    (vLLM `benchmark_serving --max-concurrency C`, genai-perf `--concurrency C`)
    request_rate    open loop: Poisson arrivals at R requests/s (`--request-rate R`)
    max_throughput  offline: every request queued at t = 0; the engine's limits set the batch

The engine (`dse.serving.presets`) sets the scheduler's limits, the KV-cache size and block, chunked
prefill, CUDA-graph padding of decode steps, the sampler and the KV dtype; each can be overridden here.
`dse.serving.scheduler` simulates the iteration-level scheduling; each engine step's latency and energy
come from the kernel and power model (`engine_step_graph` through `predict_graph`) at the operating point,
interpolated over a grid of decode tokens (powers of two), prompt tokens per step (one token, whole mean
prompts in powers of two, and the step budget) and KV context (three points from the shortest prompt to the
longest sequence). The grid's steps (~100) are predicted in one vectorized pass of the kernel model
(`dse.serving.step_table`, which says how the power cap applies).

Lengths: `fixed` gives every request `input_tokens` and `output_tokens`; `lognormal` draws each with that
mean and a log-space standard deviation `length_sigma` (0.5 by default, a coefficient of variation of
0.53); `exponential` with that mean. Draws are rounded and capped so that input + output fit the model's
context (outputs >= 2, so every request has a TPOT), reproducibly from `seed`; fixed lengths that do not fit
are an error.

Metrics: `dse.serving.metrics` (per-request means and percentiles; throughput, power and energy over the
steady-state window).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.rates import check_serving_precision
from dse.perf.types import OperatingPoint
from dse.serving.memory import CHUNK_TOKENS, kv_capacity_tokens
from dse.serving.metrics import Window, overloaded, request_metrics, steady_window, system_metrics
from dse.serving.parallel import combine_uneven, scale_metrics
from dse.serving.presets import ENGINE_NAMES, EnginePreset, engine_preset
from dse.serving.scheduler import Requests, SchedulerConfig, SimResult, simulate
from dse.serving.static import check_decoder
from dse.serving.step_table import StepTable, run_idle_power_w
from dse.units import MAX_COUNT
from dse.workload.engine import check_engine_options, kv_bytes_per_token
from dse.workload.linear_attention import state_bytes
from dse.workload.llm import LlmArch, activation_dtype, prefill_activation_bytes, weight_bytes
from dse.workload.sharding import SINGLE, Parallelism, check_parallelism, weight_arch

MODES: tuple[str, ...] = ("concurrency", "request_rate", "max_throughput")
# How requests arrive in each serving mode (the static batch included), as the CLI and the report say it.
MODE_TEXT: dict[str, str] = {
    "static": "static batch",
    "concurrency": "closed loop",
    "request_rate": "Poisson arrivals",
    "max_throughput": "offline, all requests queued",
}
LENGTH_DISTS: tuple[str, ...] = ("fixed", "lognormal", "exponential")
# The simulation holds every request and logs every step: beyond these a single point costs minutes and
# gigabytes (10,000 clients x 10 requests each simulate in ~10 s), so they are refused rather than run.
MAX_CONCURRENCY = 10_000
MAX_REQUESTS = 200_000
SIMULATION_LIMITS = {"concurrency": MAX_CONCURRENCY, "num_requests": MAX_REQUESTS}  # per replica
# Slower arrivals (under one request in 12 days) leave the server idle between requests: the run spans
# more seconds than its float sums keep apart (1e-307 requests/s gave NaN power), and no server runs so.
MIN_REQUEST_RATE_PER_S = 1e-6
MAX_STEPS = 500_000  # engine steps of one simulation (~0.25 ms each: about 2 minutes)
DEFAULT_LENGTH_SIGMA = 0.5
# Requests per run when not given: enough waves for a steady state between ramp-up and drain.
WAVES = 10
MIN_REQUESTS = 200
RATE_REQUESTS = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadRequest:
    """A serving workload under load (module docstring); None fields take the engine preset's value."""

    mode: str
    input_tokens: int
    output_tokens: int
    concurrency: int | None = None
    request_rate_per_s: float | None = None
    num_requests: int | None = None
    length_dist: str = "fixed"
    length_sigma: float = DEFAULT_LENGTH_SIGMA
    seed: int = 0
    precision: str = "bf16"
    kv_dtype: str | None = None
    engine: str = "vllm"
    sampling: str | None = None
    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    chunked_prefill: bool | None = None
    host_step_s: float | None = None  # CPU time per engine step the GPU waits for (presets' docstring)
    layer_host_s: float | None = None  # CPU time per dense layer (10 launches) without CUDA graphs (presets)
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        self.parallelism  # noqa: B018 (validates tp, pp, ep, dp)
        if self.mode not in MODES:
            raise ConfigError(f"mode '{self.mode}' is not one of {', '.join(MODES)}")
        _positive_int("input_tokens", self.input_tokens)
        _positive_int("output_tokens", self.output_tokens, least=2)
        wants = {"concurrency": "concurrency", "request_rate": "request_rate_per_s"}.get(self.mode)
        for name in ("concurrency", "request_rate_per_s"):
            given = getattr(self, name) is not None
            if given != (name == wants):
                raise ConfigError(f"mode {self.mode} {'needs' if not given else 'takes no'} {name}")
        if self.concurrency is not None:
            _positive_int("concurrency", self.concurrency)
            _at_most("concurrency", self.concurrency, self.dp)
        rate = self.request_rate_per_s
        if rate is not None and not (
            isinstance(rate, int | float) and math.isfinite(rate) and MIN_REQUEST_RATE_PER_S <= rate <= 1e9
        ):
            raise ConfigError(
                f"request_rate_per_s must be a number in [{MIN_REQUEST_RATE_PER_S:g}, 1e9] requests/s, "
                f"got {rate!r}"
            )
        for name in ("num_requests", "max_num_seqs", "max_batched_tokens"):
            if getattr(self, name) is not None:
                _positive_int(name, getattr(self, name))
        for name in ("max_num_seqs", "max_batched_tokens"):  # as a study bounds them: 1e23 tokens per step
            value = getattr(self, name)  # ran closed loop, and at a rate failed in an op's element count
            if value is not None and value > MAX_COUNT:
                raise ConfigError(f"{name} must be an integer in [1, {MAX_COUNT}], got {value!r}")
        if self.num_requests is not None:
            _at_most("num_requests", self.num_requests, self.dp)
        if (
            self.concurrency is not None
            and self.num_requests is not None
            and self.num_requests < self.concurrency
        ):
            raise ConfigError(
                f"num_requests {self.num_requests} (--num-requests) is below concurrency {self.concurrency}: "
                "the closed loop would never have that many requests in flight"
            )
        if self.length_dist not in LENGTH_DISTS:
            raise ConfigError(f"length_dist '{self.length_dist}' is not one of {', '.join(LENGTH_DISTS)}")
        if not (math.isfinite(self.length_sigma) and 0 < self.length_sigma <= 3):
            raise ConfigError(f"length_sigma must be in (0, 3], got {self.length_sigma}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed must be an integer in [0, 2^32), got {self.seed!r}")
        for name, most in (("host_step_s", 1.0), ("layer_host_s", 0.1)):
            host = getattr(self, name)
            number = isinstance(host, int | float) and not isinstance(host, bool)
            if host is not None and not (number and math.isfinite(host) and 0 <= host <= most):
                raise ConfigError(f"{name} must be a number of seconds in [0, {most:g}], got {host!r}")
        frac = self.gpu_memory_utilization
        if frac is not None and not (math.isfinite(frac) and 0 < frac <= 1):
            raise ConfigError(f"gpu_memory_utilization must be in (0, 1], got {frac}")
        activation_dtype(self.precision)  # a known precision
        if self.engine not in ENGINE_NAMES:
            raise ConfigError(f"engine '{self.engine}' is not one of {', '.join(ENGINE_NAMES)}")
        check_engine_options(engine=self.engine, sampling=self.sampling or "none", kv_dtype=self.kv_dtype)

    @property
    def parallelism(self) -> Parallelism:
        """The GPUs' layout (`dse.workload.sharding`); `concurrency`, `request_rate_per_s`,
        `num_requests` and `max_num_seqs` are the whole deployment's except `max_num_seqs`, per replica."""
        return Parallelism(tp=self.tp, pp=self.pp, ep=self.ep, dp=self.dp)


def _positive_int(name: str, value: Any, least: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ConfigError(f"{name} must be an integer >= {least}, got {value!r}")


def _at_most(name: str, value: int, dp: int) -> None:
    problem = per_replica_problem(name, value, dp)
    if problem is not None:
        raise ConfigError(problem)


def per_replica_problem(name: str, value: int, dp: int) -> str | None:
    """One simulation runs one replica: its share of `value` (rounded up) is what must stay within
    `SIMULATION_LIMITS[name]`; studies and sweeps check their values up front with it."""
    most = SIMULATION_LIMITS[name]
    if -(-value // dp) <= most:
        return None
    per = f" ({-(-value // dp):,} per replica at dp {dp})" if dp > 1 else ""
    return f"{name} {value}{per} is above the {most:,} one simulation handles"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadEstimate:
    """Predicted serving metrics under load (SI); `metrics()` is what `--json` and studies see."""

    model: str
    gpu: str
    request: LoadRequest
    engine: EnginePreset
    values: dict[str, float | None]
    feasible: bool
    infeasible_reason: str
    overloaded: bool = False  # an open loop's arrivals outpace the server (`dse.serving.metrics.overloaded`)
    # What bounds the decode and prefill steps (`dse.serving.load_bounds.with_bounds`; empty unless asked).
    bound_by: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False)

    def metrics(self) -> dict[str, float | bool | str | None]:
        """Flat metrics; the numbers are None when the workload cannot run (see infeasible_reason)."""
        out: dict[str, float | bool | str | None] = dict(self.values)
        out["feasible"] = self.feasible
        out["infeasible_reason"] = self.infeasible_reason
        out["overloaded"] = self.overloaded if self.feasible else None  # no run, no verdict
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            **dataclasses.asdict(self.request),
            # the sigma shapes lognormal lengths only: null beside fixed or exponential ones
            "length_sigma": self.request.length_sigma if self.request.length_dist == "lognormal" else None,
            **engine_settings(self.engine, self.request),
            "num_gpus": self.request.parallelism.num_gpus,
            **self.metrics(),
            **({"bound_by": self.bound_by} if self.bound_by else {}),
        }


def engine_settings(engine: EnginePreset, load: LoadRequest) -> dict[str, Any]:
    """The engine settings a simulation ran with (the preset after the request's overrides), as the JSON
    outputs name them; `kv_dtype` is the cache's dtype as run."""
    return {
        "engine": engine.name,
        "kv_dtype": engine.kv_dtype(load.precision, load.kv_dtype) or activation_dtype(load.precision),
        "sampling": engine.sampling,
        "gpu_memory_utilization": engine.gpu_memory_utilization,
        "max_num_seqs": engine.max_num_seqs,
        "max_batched_tokens": engine.max_batched_tokens,
        "chunked_prefill": engine.chunked_prefill,
        "kv_block_tokens": engine.block_size_tokens,
        "host_step_s": engine.host_step_s,
        "layer_host_s": engine.eager_layer_host_s,
    }


def resolve_preset(load: LoadRequest, gpu: GpuSpec) -> EnginePreset:
    """The engine's preset with the request's overrides applied."""
    preset = engine_preset(load.engine, gpu)
    updates: dict[str, Any] = {}
    for name in ("max_num_seqs", "max_batched_tokens", "gpu_memory_utilization", "sampling", "host_step_s"):
        if getattr(load, name) is not None:
            updates[name] = getattr(load, name)
    if load.chunked_prefill is not None:
        updates["chunked_prefill"] = load.chunked_prefill
    if load.layer_host_s is not None:
        updates["eager_layer_host_s"] = load.layer_host_s
    preset = dataclasses.replace(preset, **updates)
    if preset.name == "vllm" and preset.max_batched_tokens < preset.max_num_seqs:
        # vLLM's SchedulerConfig refuses it: every running sequence must fit one step's token budget
        raise ConfigError(
            f"max_batched_tokens {preset.max_batched_tokens} (--max-batched-tokens) is below max_num_seqs "
            f"{preset.max_num_seqs} (--max-num-seqs): vLLM refuses a step budget smaller than its batch"
        )
    return preset.with_graph_limit()


def draw_lengths(load: LoadRequest, n: int, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(input, output) lengths of `n` requests (module docstring), reproducible from `load.seed`."""
    rng = np.random.default_rng(load.seed)
    mean_in, mean_out = float(load.input_tokens), float(load.output_tokens)
    if load.length_dist == "fixed":
        if load.input_tokens + load.output_tokens > max_tokens:
            raise ConfigError(
                f"input_tokens {load.input_tokens} + output_tokens {load.output_tokens} exceed the model's "
                f"context of {max_tokens} tokens"
            )
        inp, out = np.full(n, mean_in), np.full(n, mean_out)
    elif load.length_dist == "lognormal":
        s = load.length_sigma  # mean of a lognormal = exp(mu + s^2 / 2)
        inp = rng.lognormal(math.log(mean_in) - s * s / 2, s, n)
        out = rng.lognormal(math.log(mean_out) - s * s / 2, s, n)
    else:
        inp, out = rng.exponential(mean_in, n), rng.exponential(mean_out, n)
    inp = np.clip(np.rint(inp), 1, max_tokens - 2).astype(np.int64)
    out = np.clip(np.rint(out), 2, None).astype(np.int64)
    return inp, np.minimum(out, max_tokens - inp)


def length_spread(load: LoadRequest) -> float:
    """1 + CV^2 of the output lengths: 1 fixed, 2 exponential, exp(sigma^2) lognormal. The requests a run
    needs for its mean length, and so its throughput, to settle grow with it (the variance of a sample
    mean is CV^2 / n): a lognormal of sigma 1.5 over the 640 requests of a concurrency-64 default read
    Little's law 13% off, 2% over 6,000."""
    if load.length_dist == "lognormal":
        return math.exp(load.length_sigma**2)
    return 2.0 if load.length_dist == "exponential" else 1.0


def default_num_requests(load: LoadRequest, preset: EnginePreset) -> int:
    """Requests one replica's simulation runs: those asked for (its share), else the mode's default times
    the lengths' `length_spread`, at most MAX_REQUESTS (offline, 4 x max_num_seqs of a huge --max-num-seqs
    asked for billions of requests)."""
    if load.num_requests is not None:
        return load.num_requests
    spread = length_spread(load)
    if load.mode == "concurrency":
        base = max(MIN_REQUESTS, WAVES * int(load.concurrency or 1))
    elif load.mode == "request_rate":
        base = RATE_REQUESTS
    else:
        base = max(1000, 4 * preset.max_num_seqs)
    return min(math.ceil(base * spread), MAX_REQUESTS)


def _requests(load: LoadRequest, inp: np.ndarray, out: np.ndarray, dp: int = 1) -> Requests:
    """The simulated replica's requests (`load` is its share, `_replica_load`). At a rate, the deployment's
    Poisson stream is dealt round-robin: a replica of dp gets every dp-th arrival, so its gaps are sums of dp
    exponential gaps at the whole rate (Erlang), less bursty than a Poisson stream at rate / dp."""
    n = len(inp)
    if load.mode == "concurrency":
        return Requests(input_tokens=inp, output_tokens=out, concurrency=load.concurrency)
    if load.mode == "max_throughput":
        return Requests(input_tokens=inp, output_tokens=out, arrival_s=np.zeros(n))
    rng = np.random.default_rng([load.seed, 1])  # arrivals independent of the lengths' stream
    rate = float(load.request_rate_per_s or 1.0) * dp  # the deployment's
    if dp == 1:
        gaps = rng.exponential(1.0 / rate, n)
        return Requests(input_tokens=inp, output_tokens=out, arrival_s=np.cumsum(gaps) - gaps[0])
    # the deployment's stream starts at t = 0 with this replica's first request; a sum of dp exponential gaps
    # is a gamma (Erlang) gap, drawn as one so that memory stays per request whatever dp is
    gaps = rng.gamma(dp, 1.0 / rate, n - 1)
    return Requests(input_tokens=inp, output_tokens=out, arrival_s=np.concatenate(([0.0], np.cumsum(gaps))))


def _infeasible(
    arch: LlmArch, gpu: GpuSpec, load: LoadRequest, preset: EnginePreset, reason: str
) -> LoadEstimate:
    values: dict[str, float | None] = {key: None for key in LOAD_KEYS}
    values["num_gpus"] = float(load.parallelism.num_gpus)  # an input: known even when nothing runs
    return LoadEstimate(
        model=arch.name, gpu=gpu.name, request=load, engine=preset,
        values=values, feasible=False, infeasible_reason=reason,
    )  # fmt: skip


def unfit_layout(arch: LlmArch, gpu: GpuSpec, load: LoadRequest) -> LoadEstimate | None:
    """An infeasible estimate when `arch` cannot be split as `load` says (`check_parallelism`), else
    None: a search treats such a layout as a point that cannot run, where `predict_load` raises for
    `dse predict` to name the flag."""
    try:
        check_parallelism(arch, load.parallelism)
    except ConfigError as exc:
        reason = f"layout tp={load.tp} pp={load.pp} ep={load.ep} dp={load.dp}: {str(exc).replace('--', '')}"
        return _infeasible(arch, gpu, load, engine_preset(load.engine, gpu), reason)
    return None


# The keys of every load estimate (`LoadEstimate.metrics`) but feasible / infeasible_reason: numbers, and
# `overloaded` (a bool, 0 / 1 in a study's log), all null where the workload cannot run.
LOAD_KEYS: tuple[str, ...] = (
    "num_gpus", "ttft_s", "tpot_s", "e2e_latency_s",
    "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
    "e2e_latency_p50_s", "e2e_latency_p90_s", "e2e_latency_p99_s",
    "output_tokens_per_s", "requests_per_s", "avg_batch_size", "avg_power_w", "total_power_w",
    "energy_per_output_token_j", "energy_per_request_j", "kv_cache_utilization", "preemptions",
    "energy_j", "duration_s", "window_s", "num_requests", "steps", "kv_capacity_tokens",
    "weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes", "memory_capacity_bytes",
    "comm_time_fraction", "input_tokens_mean", "output_tokens_mean", "overloaded",
)  # fmt: skip


def predict_load(
    arch: LlmArch,
    gpu: GpuSpec,
    load: LoadRequest,
    point: OperatingPoint | None = None,
    *,
    coeffs: Any = None,
    power_coeffs: Any = None,
) -> LoadEstimate:
    """Serving metrics of `arch` on `gpu` under `load` at `point` (module docstring).

    Infeasible (metrics None, with the reason) when the weights leave no room for a KV cache or one
    request's sequence does not fit in it. On several GPUs (`load.tp` ...) one replica is simulated
    as one of its GPUs (`dse.serving.parallel`) with its share of the clients, rate and requests
    (ConfigError when the model cannot be split so).
    """
    check_decoder(arch)
    point = point or OperatingPoint()
    check_serving_precision(gpu, load.precision, load.kv_dtype)
    request, par = load, load.parallelism
    if not par.is_single:
        check_parallelism(arch, par)
        if load.concurrency is not None and load.concurrency % par.dp:
            return _uneven_replicas(arch, gpu, load, point, coeffs, power_coeffs)
        load = _replica_load(load, par)
    preset = resolve_preset(load, gpu)
    kv_dtype = preset.kv_dtype(load.precision, load.kv_dtype)
    check_engine_options(engine=preset.name, sampling=preset.sampling, kv_dtype=kv_dtype)
    capacity = kv_capacity_tokens(
        weight_arch(arch, par), gpu, load.precision, kv_dtype, engine=preset.name,
        memory_frac=preset.gpu_memory_utilization, layers_frac=1.0 / par.pp,
    )  # fmt: skip
    kv_blocks = int(capacity // preset.block_size_tokens)
    if kv_blocks < 1:
        return _infeasible(arch, gpu, request, preset, "the weights leave no memory for a KV cache")
    n = default_num_requests(load, preset)
    inp, out = draw_lengths(load, n, arch.max_position_embeddings)
    state = _state_blocks(arch, par, load.precision, kv_dtype, preset.block_size_tokens)
    config = SchedulerConfig(
        max_num_seqs=preset.max_num_seqs, max_batched_tokens=preset.max_batched_tokens, kv_blocks=kv_blocks,
        block_size_tokens=preset.block_size_tokens, chunked_prefill=preset.chunked_prefill,
        reserve_output_frac=preset.reserve_output_frac, host_step_s=preset.host_step_s,
        mixed_prefill=preset.mixed_prefill, state_blocks=state, schedule_ahead=preset.schedule_ahead,
    )  # fmt: skip
    pool_tokens = kv_blocks * preset.block_size_tokens  # the engine's pool: whole blocks, as vLLM logs it
    state_tokens = state * preset.block_size_tokens
    longest = int((inp + out).max())
    if longest + state_tokens > pool_tokens:
        held = f" with its linear-attention state ({state} blocks)" if state else ""
        reason = f"a request of {longest} tokens{held} does not fit the KV cache ({pool_tokens} tokens)"
        return _infeasible(arch, gpu, request, preset, reason)
    running_cap = min(preset.max_num_seqs, n, load.concurrency or n)
    _check_steps(inp, out, running_cap, pool_tokens=pool_tokens, state_tokens=state_tokens)

    table = StepTable(
        arch, gpu, point, coeffs, power_coeffs, precision=load.precision, preset=preset, kv_dtype=kv_dtype,
        mean_input=max(1, round(float(inp.mean()))), max_decodes=preset.padded_decodes(running_cap),
        max_prompt_tokens=max(preset.max_batched_tokens, int(inp.max())),
        context_range=(int(inp.min()), longest - 1),  # the last token's KV is never read
        par=par,
    )  # fmt: skip
    sim = simulate(_requests(load, inp, out, par.dp), config, table, idle_power_w=table.idle_w)
    values: dict[str, float | None] = {**_values(sim, load, preset, running_cap, table.idle_w)}
    over = load.mode == "request_rate" and overloaded(sim)  # one replica's arrivals against its own pace
    values |= _memory(arch, gpu, load.precision, kv_dtype, sim, preset, pool_tokens, par)
    values["comm_time_fraction"] = 0.0
    # the lengths as drawn: a distribution's tail is clipped to the model's context (`draw_lengths`)
    values["input_tokens_mean"], values["output_tokens_mean"] = float(inp.mean()), float(out.mean())
    if not par.is_single:
        scale_metrics(values, par)
        values["comm_time_fraction"] = table.comm_fraction(float(values["avg_batch_size"] or 1.0))
        load = request
    return LoadEstimate(
        model=arch.name, gpu=gpu.name, request=load, engine=preset,
        values=values, feasible=True, infeasible_reason="", overloaded=over,
    )  # fmt: skip


def _check_steps(
    inp: np.ndarray, out: np.ndarray, running_cap: int, pool_tokens: int, state_tokens: int
) -> None:
    """ConfigError when the simulation would run more than MAX_STEPS engine steps. The KV pool bounds the
    running batch as well as `running_cap`: a sequence holds its prompt and, on average, half its output."""
    held_tokens = float(inp.mean() + out.mean() / 2) + state_tokens
    running = max(1, min(running_cap, int(pool_tokens / held_tokens)))
    steps = float(out.sum()) / running  # about this many decode steps (more with preemptions)
    if steps > MAX_STEPS:
        raise ConfigError(
            f"{len(out)} requests of ~{float(out.mean()):.0f} output tokens, about {running} at a time, "
            f"would take ~{steps:,.0f} engine steps to simulate (at most {MAX_STEPS:,}): lower "
            "--num-requests or --output-tokens (a study's num_requests or output_tokens)"
        )


def _uneven_replicas(
    arch: LlmArch, gpu: GpuSpec, load: LoadRequest, point: OperatingPoint, coeffs: Any, power_coeffs: Any
) -> LoadEstimate:
    """Concurrency C not a multiple of dp: C mod dp replicas run C // dp + 1 clients, the others C // dp.
    Both even splits are simulated and mixed (`combine_uneven`). Replicas without a client idle, except
    for an MoE model, whose MoE layers the dp ranks share (split by experts with `--ep`, else by each
    expert's width) and run in lock-step (vLLM and SGLang run dummy batches on ranks without requests to
    join every MoE layer): there they draw the busier replicas' power."""
    dp, conc = load.dp, int(load.concurrency or 0)
    lo, n_hi = divmod(conc, dp)

    def even(per_replica: int) -> LoadEstimate:
        n = (
            None
            if load.num_requests is None
            else min(max(per_replica, round(load.num_requests * per_replica / conc)), MAX_REQUESTS) * dp
        )
        sub = dataclasses.replace(load, concurrency=per_replica * dp, num_requests=n)
        return predict_load(arch, gpu, sub, point, coeffs=coeffs, power_coeffs=power_coeffs)

    hi_est = even(lo + 1)
    lo_est = even(lo) if lo > 0 else None
    for est in (hi_est, lo_est):
        if est is not None and not est.feasible:
            return dataclasses.replace(est, request=load)
    empty_w = run_idle_power_w(gpu, point)
    if arch.is_moe:  # with ep 1 too: each rank holds 1 / dp of every expert (a newcomer's finding)
        empty_w = float(hi_est.values["avg_power_w"] or empty_w)
    values = combine_uneven(hi_est.values, None if lo_est is None else lo_est.values, n_hi / dp, empty_w)
    return dataclasses.replace(hi_est, request=load, values=values)


def _replica_load(load: LoadRequest, par: Parallelism) -> LoadRequest:
    """One dp replica's share of `load`, what is simulated (round-robin: 1 / dp of each)."""
    if par.dp == 1:
        return load
    share: dict[str, Any] = {}
    if load.concurrency is not None:  # a multiple of dp here (`_uneven_replicas` takes the rest)
        share["concurrency"] = load.concurrency // par.dp
    if load.request_rate_per_s is not None:
        share["request_rate_per_s"] = load.request_rate_per_s / par.dp
        if share["request_rate_per_s"] < MIN_REQUEST_RATE_PER_S:
            raise ConfigError(
                f"--request-rate {load.request_rate_per_s:g} over --dp {par.dp} replicas is below "
                f"{MIN_REQUEST_RATE_PER_S:g} requests/s per replica"
            )
    if load.num_requests is not None:
        share["num_requests"] = -(-load.num_requests // par.dp)  # rounded up: at least those asked for
    return dataclasses.replace(load, **share)


def _values(
    sim: SimResult, load: LoadRequest, preset: EnginePreset, running_cap: int, idle_w: float
) -> dict[str, float]:
    window = _window(sim, load, running_cap)
    if load.mode == "request_rate" and window.whole_run:
        # Too few requests for a steady state: the run is measured until the stream's next arrival is due
        # (n / rate from the first one at t = 0), the GPU idling meanwhile; a few requests served at once
        # once gave a throughput of dp x 80 the arrival rate.
        horizon_s = len(sim.finish_s) / float(load.request_rate_per_s or 1.0)
        if horizon_s > window.end_s:
            sim = _with_idle_tail(sim, horizon_s, idle_w)
            window = dataclasses.replace(window, end_s=horizon_s)
    values = request_metrics(sim) | system_metrics(sim, window)
    values["num_gpus"] = 1.0
    values["total_power_w"] = values["avg_power_w"]
    values["preemptions"] = float(sim.preemptions)
    values["energy_j"] = float(sim.step_energy_j.sum())
    values["duration_s"] = float(sim.step_end_s[-1] - sim.step_start_s[0])
    values["num_requests"] = float(len(sim.finish_s))
    values["steps"] = float(sim.steps)
    return values


def _with_idle_tail(sim: SimResult, end_s: float, idle_w: float) -> SimResult:
    """`sim` with one idle row from its last step to `end_s` (no tokens, no one running, blocks as left)."""
    last = float(sim.step_end_s[-1])
    return dataclasses.replace(
        sim,
        step_start_s=np.append(sim.step_start_s, last),
        step_end_s=np.append(sim.step_end_s, end_s),
        step_energy_j=np.append(sim.step_energy_j, (end_s - last) * idle_w),
        step_tokens=np.append(sim.step_tokens, 0),
        step_running=np.append(sim.step_running, 0),
        step_blocks=np.append(sim.step_blocks, sim.step_blocks[-1]),
    )


def _state_blocks(arch: LlmArch, par: Parallelism, precision: str, kv_dtype: str | None, block: int) -> int:
    """KV-pool blocks one running sequence's linear-attention state takes on a GPU (0 without linear
    layers): its bytes over a block's, the state split over tp like the heads, over pp like the layers."""
    if not arch.linear_layers:
        return 0
    gpu_arch = weight_arch(arch, par)
    per_token = kv_bytes_per_token(gpu_arch, precision, kv_dtype)
    return math.ceil(state_bytes(gpu_arch) / (per_token * block))


def _window(sim: SimResult, load: LoadRequest, running_cap: int) -> Window:
    """The steady-state window whose metrics are reported (`dse.serving.metrics.steady_window`). A closed
    loop's k is the batch it runs: the running cap, or fewer where the KV cache holds fewer sequences (with
    the cap, the window of a run of a few waves fell between two waves' prefills: half the throughput)."""
    sustained = int(round(float(sim.step_running.max()))) if len(sim.step_running) else running_cap
    closed = max(1, min(running_cap, sustained))
    k = {"concurrency": closed, "max_throughput": closed}.get(load.mode, len(sim.finish_s) // 10)
    return steady_window(sim, k)


def _memory(
    arch: LlmArch, gpu: GpuSpec, precision: str, kv_dtype: str | None, sim: SimResult, preset: EnginePreset,
    capacity: float, par: Parallelism = SINGLE,
) -> dict[str, float]:  # fmt: skip
    """Per GPU: weights, the most KV cache in use, the activation reserve of one step, and the GPU's
    capacity (a pipeline stage holds 1 / pp of the layers' weights and cache)."""
    gpu_arch = weight_arch(arch, par)
    weights = weight_bytes(gpu_arch, precision) / par.pp
    kv_token = kv_bytes_per_token(gpu_arch, precision, kv_dtype) / par.pp
    kv = float(sim.peak_blocks) * preset.block_size_tokens * kv_token
    act = prefill_activation_bytes(gpu_arch, precision, batch=1, seq_len=CHUNK_TOKENS, attention="flash")
    return {
        "kv_capacity_tokens": float(capacity),
        "weight_bytes": float(weights),
        "kv_cache_bytes": kv,
        "activation_bytes": float(act),
        "memory_bytes": float(weights + kv + act),
        "memory_capacity_bytes": float(gpu.memory.capacity_bytes),
    }
