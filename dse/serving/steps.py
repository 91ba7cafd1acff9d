"""Engine step times for the serving simulations: one engine step predicted by the kernel and power model,
memoized by its shape, and tables of step time over decode and prompt tokens for the closed-loop
simulation (`dse.serving.continuous`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from dse.hardware.catalog import load_gpu
from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.serving.steady import OUTPUT_CONTEXT_FRAC
from dse.workload.engine import ENGINES, engine_step_graph
from dse.workload.llm import LlmArch
from dse.workload.models import load_model_config


@cache
def _arch(name: str) -> LlmArch:
    return load_model_config(name)


@cache
def _gpu(name: str) -> GpuSpec:
    return load_gpu(name)


# (model, gpu, precision, engine, sampling, kv_dtype, input_tokens, context_len, decodes, prefills)
StepKey = tuple[str, str, str, str, str, str | None, int, int, int, int]


def predict_step(
    key: StepKey, point: OperatingPoint | None, coeffs: Any, power_coeffs: Any
) -> tuple[float, float]:
    """(latency, energy) of one engine step (`engine_step_graph`); coeffs None: the shipped set."""
    model, gpu_name, precision, engine, sampling, kv_dtype, i, context, decodes, prefills = key
    gpu = _gpu(gpu_name)
    g = engine_step_graph(
        _arch(model), decodes=decodes, prefills=prefills, input_tokens=i, context_len=context,
        precision=precision, engine=ENGINES[engine], sampling=sampling, kv_dtype=kv_dtype,
    )  # fmt: skip
    coeffs = load_default_coeffs(gpu) if coeffs is None else coeffs
    # the step's mean power under the cap: the exact search of the rule `dse.serving.step_table` computes
    p = predict_graph(g, gpu, point or OperatingPoint(), coeffs, power_coeffs)
    return p.latency_s, p.energy_j


@cache
def _default_step_prediction(key: StepKey) -> tuple[float, float]:
    """`predict_step` at default clocks with the shipped coefficients, cached across calls."""
    return predict_step(key, None, None, None)


def step_predictor(
    point: OperatingPoint | None, coeffs: Any, power_coeffs: Any
) -> Callable[[StepKey], tuple[float, float]]:
    """Memoized `predict_step` at `point` with `coeffs` / `power_coeffs`: the process-wide cache for the
    defaults, a cache of this call's own otherwise (coefficient sets need not be hashable)."""
    if point is None and coeffs is None and power_coeffs is None:
        return _default_step_prediction
    memo: dict[StepKey, tuple[float, float]] = {}

    def predict(key: StepKey) -> tuple[float, float]:
        if key not in memo:
            memo[key] = predict_step(key, point, coeffs, power_coeffs)
        return memo[key]

    return predict


def reserved_tokens_per_request(backend: str, input_tokens: int, output_tokens: int) -> float:
    """KV tokens a running request holds, for the admission limit of the closed-loop simulation.

    TensorRT-LLM's default scheduler (GUARANTEED_NO_EVICT) admits a request only if its whole sequence
    (input + output) fits; vLLM and SGLang allocate as tokens are generated, so a request holds
    input + output / 2 on average over its life.
    """
    if backend == "trtllm":
        return float(input_tokens + output_tokens)
    return input_tokens + OUTPUT_CONTEXT_FRAC * output_tokens


def interp_step_time(table: np.ndarray, d_grid: np.ndarray, p_grid: np.ndarray):
    """step_time(d, p) by bilinear interpolation of a (d, p) table of step latencies."""
    cache_: dict[tuple[int, int], float] = {}

    def step_time(decodes: int, prompt_tokens: int) -> float:
        key = (decodes, prompt_tokens)
        if key not in cache_:
            at_d = np.array([np.interp(decodes, d_grid, table[:, j]) for j in range(len(p_grid))])
            cache_[key] = float(np.interp(prompt_tokens, p_grid, at_d))
        return cache_[key]

    return step_time


def pow2_grid(top: int) -> list[int]:
    grid, v = {0, top}, 1
    while v < top:
        grid.add(v)
        v *= 2
    return sorted(grid)


def prompt_token_grid(input_tokens: int, top: int) -> list[int]:
    """Prompt tokens per step to tabulate: 0, whole prompts in powers of two below `top`, and `top`."""
    whole = {k * input_tokens for k in pow2_grid(top // input_tokens) if k * input_tokens < top}
    return sorted({0, top} | whole)


def prompts_of(prompt_tokens: int, input_tokens: int) -> tuple[int, int]:
    """(prompts, tokens each) standing for `prompt_tokens` of a step: as few prompts of at most
    `input_tokens` as hold them, of equal length. A chunk is costed as a fresh prompt of its length (its
    attention to the prompt's earlier chunks is left out, as for the steady-state mix)."""
    prompts = max(1, math.ceil(prompt_tokens / input_tokens))
    return prompts, max(1, round(prompt_tokens / prompts))


def step_time_table(
    row_key: tuple[str, str, str, str, str, str | None],
    *,
    max_decodes: int,
    input_tokens: int,
    context_len: int,
    max_prompt_tokens: int,
    predict_step: Callable[[StepKey], tuple[float, float]],
) -> Callable[[int, int], float]:
    """step_time(decodes, prompt_tokens) of an engine (`row_key`: model, gpu, precision, engine, sampling,
    kv_dtype), interpolated over a grid of decode tokens (powers of two up to `max_decodes`) and prompt
    tokens per step (whole prompts in powers of two up to `max_prompt_tokens`, and that top).

    The top is the most a step holds: the token budget (a chunked step's prompt tokens fill what the
    decodes leave of it), or one whole prompt longer than the budget (`simulate_closed_loop` without
    chunking). `prompt_tokens` are costed as the fewest equal prompts of <= input_tokens (`prompts_of`).
    """
    i = input_tokens
    d_grid, p_grid = pow2_grid(max_decodes), prompt_token_grid(i, max_prompt_tokens)
    table = np.zeros((len(d_grid), len(p_grid)))
    for a, d in enumerate(d_grid):
        for b, p_tokens in enumerate(p_grid):
            if d or p_tokens:
                k, each = prompts_of(p_tokens, i) if p_tokens else (0, i)
                table[a, b] = predict_step((*row_key, each, context_len, d, k))[0]
    # a step with more prompt tokens takes no less time: the top point's prompts are split evenly
    # (`prompts_of`), so their attention can come out a little below the whole prompts' before it
    table = np.maximum.accumulate(table, axis=1)
    return interp_step_time(table, np.array(d_grid, float), np.array(p_grid, float))
