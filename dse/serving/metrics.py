"""Serving metrics of a simulated run: per-request latencies, percentiles and the steady-state window.

Per request (as vLLM's `benchmark_serving`, genai-perf and MLPerf define them):

    TTFT   first token time - arrival time
    TPOT   (finish - first token) / (output tokens - 1), for requests with >= 2 output tokens
    e2e    finish - arrival

Means and the p50 / p90 / p99 percentiles (linear interpolation) are over all requests of the run.

System metrics come from the steady-state window, as serving benchmarks measure energy (ML.ENERGY: from
when the first `k` requests have their first token to when all but `k + 1` requests have finished, with
`k` the engine's concurrency; here the end is the last first token by then, so that both edges fall on the
same kind of event and a run in waves is measured over whole periods): the ramp-up, when the batch fills,
and the drain, when it empties, are left out. `k` is the closed-loop concurrency, the running-sequence
limit for offline runs, and a tenth of the requests for Poisson arrivals. If the window is empty (too few
requests), or is no steady state (fewer than STEADY_FINISH_SHARE as many requests finish inside it as get
their first token: the running batch grows, as when arrivals outpace the server and the KV cache holds
them, down to a run in one wave where none finishes), the whole run is used, as a benchmark reports an
overloaded run.

    output_tokens_per_s         tokens emitted in the window / its duration
    requests_per_s              output_tokens_per_s / the requests' mean output tokens: the finish rate in a
                                steady state, and still the server's request throughput where the window
                                is not one (an overloaded open loop, whose finishes lag its tokens)
    avg_batch_size              time-weighted mean of the running sequences over the window
    avg_power_w                 energy in the window / its duration (per GPU)
    energy_per_output_token_j   energy in the window / tokens emitted in it (prefill energy included)
    energy_per_request_j        energy_per_output_token_j x mean output tokens
    kv_cache_utilization        time-weighted mean share of the KV blocks in use over the window

Steps that straddle a window edge count in proportion to their time inside it.

An open loop is overloaded (`overloaded`) when its arrivals outpace the server, so that its queue grows
with every request and its TTFT percentiles depend on how many requests the run simulates. Either queue
shows it: at least OVERLOAD_QUEUE_SHARE of the run's requests wait for their first token when the last
one arrives (the engine admits no more: its running limit or KV cache is full), or, over the arrivals, the
server emits tokens for fewer than STEADY_FINISH_SHARE of the requests per second that arrive while the
arrivals span more than OVERLOAD_SPAN_DECODES times a request's median decode time (the running batch
grows instead). Over a shorter span a server that keeps up is itself still filling its batch: 20
requests of 2,000 tokens at 1 per second emit half their tokens' worth while they arrive and finish after,
which is no overload. So a run too short to fill its batch, without a queue, is not called overloaded
where a longer one would be (Llama-3.1-8B on an H100 at 1.25x its offline throughput, 600 requests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.serving.scheduler import SimResult

PERCENTILES: tuple[int, ...] = (50, 90, 99)
# A steady window finishes about as many requests as it starts (0.94 or more in the closed loops and
# sub-capacity request rates tried); a ramp of an overloaded open loop finishes a few percent of them.
STEADY_FINISH_SHARE = 0.8
# A server that keeps up admits an arrival within a step or two: at most 1 of 600 requests waits for its
# first token at the last arrival in the runs tried (Llama-3.1-8B on an L40S and an H100, 512/128, 1024/256
# and 2048/64 tokens, up to 0.8x the offline throughput); at 1.5-3x it, 5.5-65% of them do.
OVERLOAD_QUEUE_SHARE = 0.05
# Over a span of k decode times a server that keeps up emits about 1 - 1 / (2k) of the arrivals' tokens (the
# first decode time is a ramp): 0.88 at 4 (lognormal lengths: 0.81 or more in those runs).
OVERLOAD_SPAN_DECODES = 4.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    start_s: float
    end_s: float
    whole_run: bool  # True when the steady-state window was empty and the whole run is used

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def steady_window(sim: SimResult, k: int) -> Window:
    """From the k-th first token to the last first token by the (n - k - 1)-th finish (module docstring):
    both edges at first tokens, so that a run in waves (SGLang's prefill-first steps with equal lengths)
    is measured over whole periods, as many prefills as decode phases; elsewhere the end moves by less
    than the gap between two first tokens."""
    n = len(sim.finish_s)
    first = np.sort(sim.first_token_s)
    finish = np.sort(sim.finish_s)
    k = max(1, min(k, n))
    start = float(first[k - 1])
    end_index = n - k - 1
    end = -np.inf
    if end_index >= 1:
        last = int(np.searchsorted(first, finish[end_index - 1], side="right")) - 1
        end = float(first[last]) if last >= 0 else -np.inf
    if end > start:
        started = np.count_nonzero((first > start) & (first <= end))
        finished = np.count_nonzero((finish > start) & (finish <= end))
        if finished > 0 and finished >= STEADY_FINISH_SHARE * started:  # a steady state, not a ramp
            return Window(start_s=start, end_s=end, whole_run=False)
    return Window(start_s=float(sim.step_start_s[0]), end_s=float(sim.step_end_s[-1]), whole_run=True)


def _overlap(sim: SimResult, w: Window) -> np.ndarray:
    """Share of each logged step's time inside the window (a zero-length step counts if inside)."""
    start, end = sim.step_start_s, sim.step_end_s
    inside = np.clip(np.minimum(end, w.end_s) - np.maximum(start, w.start_s), 0.0, None)
    length = end - start
    zero = length <= 0
    share = np.divide(inside, length, out=np.zeros_like(inside), where=~zero)
    share[zero] = ((start[zero] >= w.start_s) & (start[zero] <= w.end_s)).astype(float)
    return share


def request_metrics(sim: SimResult) -> dict[str, float]:
    """Means and percentiles of TTFT, TPOT and e2e latency over the requests."""
    ttft = sim.first_token_s - sim.arrival_s
    e2e = sim.finish_s - sim.arrival_s
    many = sim.output_tokens >= 2
    tpot = (sim.finish_s[many] - sim.first_token_s[many]) / (sim.output_tokens[many] - 1)
    out: dict[str, float] = {
        "ttft_s": float(ttft.mean()),
        "tpot_s": float(tpot.mean()) if len(tpot) else 0.0,
        "e2e_latency_s": float(e2e.mean()),
    }
    for q in PERCENTILES:
        out[f"ttft_p{q}_s"] = float(np.percentile(ttft, q))
        out[f"tpot_p{q}_s"] = float(np.percentile(tpot, q)) if len(tpot) else 0.0
        out[f"e2e_latency_p{q}_s"] = float(np.percentile(e2e, q))
    return out


def system_metrics(sim: SimResult, window: Window) -> dict[str, float]:
    """Throughput, batch, power and energy per token over `window` (module docstring)."""
    share = _overlap(sim, window)
    duration_s = window.duration_s
    time_s = (sim.step_end_s - sim.step_start_s) * share
    tokens = float(np.dot(sim.step_tokens, share))
    energy_j = float(np.dot(sim.step_energy_j, share))
    tokens_per_s = tokens / duration_s if duration_s > 0 else 0.0
    j_per_token = energy_j / tokens if tokens > 0 else 0.0
    return {
        "output_tokens_per_s": tokens_per_s,
        "requests_per_s": tokens_per_s / float(sim.output_tokens.mean()),
        "avg_batch_size": float(np.dot(sim.step_running, time_s) / duration_s) if duration_s > 0 else 0.0,
        "avg_power_w": energy_j / duration_s if duration_s > 0 else 0.0,
        "energy_per_output_token_j": j_per_token,
        "energy_per_request_j": j_per_token * float(sim.output_tokens.mean()),
        "kv_cache_utilization": (
            float(np.dot(sim.step_blocks, time_s) / duration_s / sim.kv_blocks) if duration_s > 0 else 0.0
        ),
        "window_s": duration_s,
    }


def overloaded(sim: SimResult) -> bool:
    """Whether an open loop's arrivals outpace the server (module docstring). Its rates are the run's
    own: the arrivals as they came (a Poisson stream of a few hundred requests strays by a few % from the
    rate asked for) and the tokens emitted while they came (not after: the drain of a short run's last
    requests says nothing of the server's pace)."""
    n = len(sim.arrival_s)
    if n < 2:
        return False
    arrival = np.sort(sim.arrival_s)
    first, last = float(arrival[0]), float(arrival[-1])
    queued = np.count_nonzero((sim.arrival_s < last) & (sim.first_token_s > last))
    if queued >= OVERLOAD_QUEUE_SHARE * n:
        return True
    span_s = last - first
    if span_s <= OVERLOAD_SPAN_DECODES * float(np.median(sim.finish_s - sim.first_token_s)):
        return False  # too short to tell a growing batch from one still filling
    during = system_metrics(sim, Window(start_s=first, end_s=last, whole_run=False))
    return bool(during["requests_per_s"] < STEADY_FINISH_SHARE * (n - 1) / span_s)
