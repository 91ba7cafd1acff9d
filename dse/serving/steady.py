"""The steady-state step mix of continuous batching: TPOT, power and J/token at a running batch.

B sequences run; each request has i input and o output tokens. Every engine step emits one token per
running sequence, so B / o requests finish per step and as many new ones take their slots: arrivals per
step are lambda = B / o, taken as Poisson. A step with k arrivals is one fused forward pass (chunked
prefill, as vLLM and TensorRT-LLM schedule it): the weight GEMMs, norms and elementwise ops run on
(B - k) + k * i tokens, decode attention covers the B - k decoding sequences at a KV context of c, a
flash (causal) attention covers the k prompts of i tokens, and the LM head has B rows. Its latency t(k)
and energy e(k) come from `predict_graph` (default clocks, TDP cap, CUDA graphs), plus the engine's host
time per step at idle power (`host_step_s`, 0 by default).
Over the step mix P(k) = Poisson(lambda):

    mean step          sum P(k) t(k)                   = mean ITL; the per-request TPOT of a benchmark
    median step        t(k*), first k with CDF >= 0.5  = median ITL (every token of a step shares its t)
    average power      sum P(k) e(k) / sum P(k) t(k)
    J / output token   sum P(k) e(k) / B               (prefill energy is charged to the output tokens)
    TTFT               0.5 * mean step (waiting for the step in flight) + the mean duration of a step
                       holding this prompt and Poisson(lambda) others (no queueing)

KV context c = i + f * o with f = 1/2 by default: a running sequence is on average half-way through
its output. This is the step-weighted mean for fixed output lengths; with spread-out lengths the long
requests are over-represented among the running ones (length-biased sampling: c = i + E[o^2] / (2 E[o]),
f = (1 + CV^2) / 2 for a coefficient of variation CV of the output lengths), so f = 1/2 underestimates
the attention work of real traffic.

The engine prefills at most `max_num_batched_tokens` (8192) per step; a step's tokens above that spill
into the next step. This is ignored: the work is the same and time is near-linear in tokens at that size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.engine import EngineProfile, engine_step_graph
from dse.workload.llm import LlmArch

# Share of the KV context c = i + output_context_frac * o (half-way through the output on average).
OUTPUT_CONTEXT_FRAC = 0.5
# The step mix is truncated where the Poisson tail is below this.
POISSON_TAIL = 1e-4


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyState:
    """Steady-state continuous batching at a running batch (see the module docstring)."""

    batch: int
    input_tokens: int
    output_tokens: int
    context_len: int
    arrivals_per_step: float
    decode_step_s: float  # t(0): a step with no prefill
    mean_step_s: float
    median_step_s: float
    avg_power_w: float
    energy_per_output_token_j: float
    ttft_s: float  # without queueing


def _poisson(lam: float) -> tuple[np.ndarray, np.ndarray]:
    """k = 0..K and P(k), truncated where the tail is below POISSON_TAIL and renormalized."""
    ks, ps = [0], [math.exp(-lam)]
    while 1.0 - sum(ps) > POISSON_TAIL:
        k = len(ks)
        ks.append(k)
        ps.append(ps[-1] * lam / k)
    p = np.array(ps)
    return np.array(ks), p / p.sum()


def steady_state(
    arch: LlmArch,
    gpu: GpuSpec,
    *,
    batch: int,
    input_tokens: int,
    output_tokens: int,
    precision: str = "bf16",
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
    output_context_frac: float = OUTPUT_CONTEXT_FRAC,
    engine: EngineProfile | None = None,
    sampling: str = "none",
    kv_dtype: str | None = None,
    host_step_s: float = 0.0,
) -> SteadyState:
    """Steady-state step mix of continuous batching (module docstring); no queueing.

    `engine`, `sampling` and `kv_dtype` shape each step (`dse.workload.engine`); the defaults give the
    model's own operator graph. `host_step_s`: the engine's CPU time per step, the GPU idle at its idle
    power meanwhile (`dse.serving.presets`: vLLM 0.10-0.12 without async scheduling).
    """
    point = point or OperatingPoint()
    context = max(1, round(input_tokens + output_context_frac * output_tokens))
    context = min(context, arch.max_position_embeddings - 1)
    lam = batch / output_tokens

    step_cache: dict[int, tuple[float, float]] = {}

    # None = the shipped latency corrections of the GPU's generation (as predict_serving does).
    latency_coeffs = load_default_coeffs(gpu) if coeffs is None else coeffs

    def step(k: int) -> tuple[float, float]:
        if k not in step_cache:
            g = engine_step_graph(
                arch,
                decodes=max(batch - k, 0),
                prefills=k,
                input_tokens=input_tokens,
                context_len=context,
                precision=precision,
                engine=engine,
                sampling=sampling,
                kv_dtype=kv_dtype,
            )
            # the step's mean power under the cap: the exact search of the rule `step_table` computes
            p = predict_graph(g, gpu, point, latency_coeffs, power_coeffs)
            step_cache[k] = (p.latency_s, p.energy_j)
        return step_cache[k]

    ks, pk = _poisson(lam)
    from dse.serving.step_table import run_idle_power_w  # lazy: step_table builds on this module

    gap_j = host_step_s * run_idle_power_w(gpu, point) if host_step_s else 0.0
    t = np.array([step(int(k))[0] for k in ks]) + host_step_s
    e = np.array([step(int(k))[1] for k in ks]) + gap_j
    mean_t, mean_e = float(pk @ t), float(pk @ e)
    median_t = float(t[int(np.searchsorted(np.cumsum(pk), 0.5))])
    # TTFT: this prompt plus Poisson(lambda) others in its step, after half a step of waiting.
    t_with = np.array([step(int(k) + 1)[0] for k in ks]) + host_step_s
    ttft = 0.5 * mean_t + float(pk @ t_with)
    return SteadyState(
        batch=batch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        context_len=context,
        arrivals_per_step=lam,
        decode_step_s=float(t[0]),
        mean_step_s=mean_t,
        median_step_s=median_t,
        avg_power_w=mean_e / mean_t,
        energy_per_output_token_j=mean_e / batch,
        ttft_s=ttft,
    )
