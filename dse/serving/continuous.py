"""A closed-loop serving benchmark, simulated step by step over an engine's step-time function.

    result = simulate_closed_loop(step_time, concurrency=64, requests=640, input_tokens=1024,
                                  output_tokens=128, max_running=64, token_budget=8192, chunked=True)
    result.ttft_mean_s, result.tpot_mean_s

What the benchmark does (vLLM `benchmark_serving --max-concurrency N`, genai-perf / aiperf
`--concurrency N`, the InferenceMAX runs): N clients each send a request, wait for its last token and send
the next, until `requests` have been sent. All N first requests arrive together at t = 0. TTFT (time to
first token) and TPOT ((e2e - TTFT) / (output_tokens - 1)) are per request, averaged over all requests.

What the engine does each step (continuous batching, as vLLM V1, SGLang and TensorRT-LLM schedule):

1. Every admitted request that has its prompt prefilled decodes one token (d tokens).
2. The rest of the step's token budget (`token_budget`, vLLM `max_num_batched_tokens`, TensorRT-LLM
   `max_num_tokens`; decode tokens count against it) goes to prompts in arrival order: first the prompt
   being prefilled, then new requests, admitted while fewer than `max_running` are admitted and the KV
   cache has room (`kv_capacity_tokens`): with `reserve_output` (TensorRT-LLM's GUARANTEED_NO_EVICT) a
   request must fit input + output tokens on top of what the admitted ones reserved; without (vLLM,
   SGLang, which allocate as tokens are generated) its prompt must fit in what the running requests hold
   now (preemption when they later outgrow the cache is not modelled: TTFT is out by then, TPOT is an
   underestimate in such rows). With `chunked` a prompt may be split over steps. Without, a prompt is
   taken whole if it fits in what the decodes and the prompts before it left of the budget, else it (and
   the requests behind it) waits for a later step: TensorRT-LLM's scheduler with chunking off stops at the
   first context request whose tokens would take the step past `max_num_tokens`, so a step never holds
   more than the budget. A prompt longer than the whole budget could never fit; it runs as the only
   prompt of a step (with the decodes), a fallback: TensorRT-LLM rejects such a request and vLLM without
   chunked prefill requires a budget of at least the model's context.
3. The step takes step_time(d, p) for d decode tokens and p prompt tokens. A request whose prompt ends in
   this step gets its first token at the end of the step; its last token comes output_tokens - 1 decode
   steps later, when its client sends the next request.

Between events (a completion, or prompt work to schedule) steps are pure decode steps of the same
composition, so the simulation jumps over them: its cost grows with the number of requests, not steps.
The KV context of decoding requests is not tracked per step: `step_time` takes it as a constant (the
caller's mean context).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dse.errors import ConfigError

StepTime = Callable[[int, int], float]


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkResult:
    """Per-request means of a simulated closed-loop benchmark (SI)."""

    requests: int
    ttft_mean_s: float
    ttft_median_s: float
    tpot_mean_s: float
    duration_s: float
    steps: int
    max_running: int
    max_admitted: int


def max_running_requests(kv_capacity_tokens: float, tokens_per_request: float) -> int:
    """Requests whose KV cache fits: capacity / tokens reserved per request, at least 1."""
    if tokens_per_request <= 0:
        raise ConfigError(f"tokens_per_request must be > 0, got {tokens_per_request}")
    return max(1, int(kv_capacity_tokens // tokens_per_request))


def _check_arguments(
    *,
    concurrency: int,
    requests: int,
    input_tokens: int,
    output_tokens: int,
    max_running: int,
    token_budget: int,
    output_spread: float,
) -> None:
    """ConfigError unless the benchmark's counts are positive integers (two output tokens at least)."""
    if not 0.0 <= output_spread < 2.0:
        raise ConfigError(f"output_spread must be in [0, 2), got {output_spread}")
    for field, value in (("concurrency", concurrency), ("requests", requests), ("input_tokens", input_tokens),
                         ("max_running", max_running),
                         ("token_budget", token_budget)):  # fmt: skip
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{field} must be an integer >= 1, got {value!r}")
    if not isinstance(output_tokens, int) or output_tokens < 2:
        raise ConfigError(
            f"output_tokens must be an integer >= 2 (TPOT needs two tokens), got {output_tokens!r}"
        )


class _ClosedLoop:
    """The simulation's state: the clients' queue, the admitted requests and the completion calendar."""

    def __init__(
        self,
        step_time: StepTime,
        *,
        requests: int,
        input_tokens: int,
        output_tokens: int,
        max_running: int,
        token_budget: int,
        chunked: bool,
        output_spread: float,
        kv_capacity_tokens: float,
        reserve_output: bool,
    ) -> None:
        self.step_time = step_time
        self.requests = requests
        self.i = input_tokens
        self.output_tokens = output_tokens
        self.max_running = max_running
        self.token_budget = token_budget
        self.chunked = chunked
        self.output_spread = output_spread
        self.kv_capacity_tokens = kv_capacity_tokens
        self.reserve_output = reserve_output
        self.waiting: deque[tuple[float, int]] = deque()  # not yet admitted: [submit time, output tokens]
        self.sent = 0
        # admitted, prompt not done: [submit time, prompt tokens left, output tokens]
        self.prefilling: deque[list[float]] = deque()
        self.decoding = 0
        self.admitted = 0
        self.max_admitted = 0
        self.reserved = 0.0  # reserve_output: input + output tokens of the admitted requests
        self.sum_first_step = 0  # on demand: sum over decoding requests of the step of their first token
        # completion step -> first-token times of the requests finishing at the end of that step
        self.finishing: dict[int, list[tuple[float, int]]] = {}
        self.heap: list[int] = []
        self.ttfts: list[float] = []
        self.tpots: list[float] = []
        self.t = 0.0
        self.step = 0

    def output_len(self, j: int) -> int:
        u = (j * 0.6180339887498949) % 1.0
        spread = self.output_spread
        return (
            max(2, round(self.output_tokens * (1.0 + spread * (u - 0.5)))) if spread else self.output_tokens
        )

    def room_for(self, out: int) -> bool:
        """The KV cache has room for one more request with `out` output tokens (module docstring)."""
        if self.admitted == 0:
            return True  # a lone request always runs
        if self.reserve_output:
            return self.reserved + self.i + out <= self.kv_capacity_tokens
        held = self.admitted * self.i + self.decoding * self.step - self.sum_first_step
        return held + self.i <= self.kv_capacity_tokens

    def fits_whole(self, budget: int, prompt_tokens: int) -> bool:
        """Without chunking: a whole prompt fits the step's budget left, or runs as its only prompt."""
        return self.i <= budget or (self.i > self.token_budget and prompt_tokens == 0)

    def can_admit(self) -> bool:
        """A waiting request could start its prompt in this step."""
        ok = bool(self.waiting) and self.admitted < self.max_running and self.room_for(self.waiting[0][1])
        if not self.chunked:
            ok = ok and self.fits_whole(self.token_budget - self.decoding, 0)
        return ok

    def decode_steps(self) -> None:
        """Pure decode steps up to the next completion."""
        last = self.heap[0]
        self.t += (last - self.step + 1) * self.step_time(self.decoding, 0)
        self.step = last

    def mixed_step(self) -> None:
        """One step of the decodes plus the prompt tokens the budget leaves room for."""
        prefilling, waiting, chunked, i = self.prefilling, self.waiting, self.chunked, self.i
        budget = self.token_budget - self.decoding
        prompt_tokens = 0
        done_prefill: list[tuple[float, int]] = []
        while budget > 0:
            if not prefilling:
                if not waiting or self.admitted >= self.max_running or not self.room_for(waiting[0][1]):
                    break
                if not chunked and not self.fits_whole(budget, prompt_tokens):
                    break  # a whole prompt waits for a step with room
                submitted, out = waiting.popleft()
                prefilling.append([submitted, float(i), float(out)])
                self.admitted += 1
                self.reserved += i + out
                self.max_admitted = max(self.max_admitted, self.admitted)
            head = prefilling[0]
            take = head[1] if not chunked else min(head[1], budget)
            head[1] -= take
            budget -= int(take)
            prompt_tokens += int(take)
            if head[1] <= 0:
                done_prefill.append((head[0], int(head[2])))
                prefilling.popleft()
        t = self.t = self.t + self.step_time(self.decoding, prompt_tokens)
        step, finishing = self.step, self.finishing
        for submitted, out in done_prefill:  # first tokens at the end of this step
            self.ttfts.append(t - submitted)
            end = step + out - 1
            if end not in finishing:
                finishing[end] = []
                heapq.heappush(self.heap, end)
            finishing[end].append((t, out))
        self.decoding += len(done_prefill)
        self.sum_first_step += step * len(done_prefill)

    def complete(self) -> None:
        """The requests whose last token comes at the end of this step; their clients send the next."""
        heap, step, t = self.heap, self.step, self.t
        if not heap or heap[0] != step:
            return
        heapq.heappop(heap)
        done = self.finishing.pop(step)
        for first, out in done:
            self.tpots.append((t - first) / (out - 1))
            self.reserved -= self.i + out
            self.sum_first_step -= step - out + 1
            if self.sent < self.requests:
                self.waiting.append((t, self.output_len(self.sent)))
                self.sent += 1
        self.decoding -= len(done)
        self.admitted -= len(done)

    def run(self, n_clients: int) -> BenchmarkResult:
        """All `n_clients` first requests arrive at t = 0; steps run until every request is done."""
        self.waiting.extend((0.0, self.output_len(j)) for j in range(n_clients))
        self.sent = n_clients
        ttfts, requests, prefilling, heap = self.ttfts, self.requests, self.prefilling, self.heap
        while len(ttfts) < requests or self.decoding:
            if not prefilling and not self.can_admit():
                if not heap:
                    break  # nothing running and nothing admissible (cannot happen with max_running >= 1)
                self.decode_steps()
            else:
                self.mixed_step()
            self.complete()
            self.step += 1
        ttft = np.array(ttfts)
        return BenchmarkResult(
            requests=len(self.ttfts),
            ttft_mean_s=float(ttft.mean()),
            ttft_median_s=float(np.median(ttft)),
            tpot_mean_s=float(np.mean(self.tpots)),
            duration_s=self.t,
            steps=self.step,
            max_running=self.max_running,
            max_admitted=self.max_admitted,
        )


def simulate_closed_loop(
    step_time: StepTime,
    *,
    concurrency: int,
    requests: int,
    input_tokens: int,
    output_tokens: int,
    max_running: int,
    token_budget: int,
    chunked: bool = True,
    output_spread: float = 0.0,
    kv_capacity_tokens: float = math.inf,
    reserve_output: bool = True,
) -> BenchmarkResult:
    """Simulate the benchmark (module docstring); `step_time(decode_tokens, prompt_tokens)` in seconds.

    `output_spread` > 0 gives request j an output length of output_tokens * (1 + spread * (u_j - 1/2)),
    u_j the fractional part of j * golden ratio (deterministic, evenly spread, mean output_tokens).
    """
    _check_arguments(
        concurrency=concurrency,
        requests=requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        max_running=max_running,
        token_budget=token_budget,
        output_spread=output_spread,
    )
    loop = _ClosedLoop(
        step_time,
        requests=requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        max_running=max_running,
        token_budget=token_budget,
        chunked=chunked,
        output_spread=output_spread,
        kv_capacity_tokens=kv_capacity_tokens,
        reserve_output=reserve_output,
    )
    return loop.run(min(concurrency, requests))


__all__ = ["BenchmarkResult", "StepTime", "max_running_requests", "simulate_closed_loop"]
