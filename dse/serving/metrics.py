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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.serving.scheduler import SimResult

PERCENTILES: tuple[int, ...] = (50, 90, 99)
# A steady window finishes about as many requests as it starts (0.94 or more in the closed loops and
# sub-capacity request rates tried); a ramp of an overloaded open loop finishes a few percent of them.
STEADY_FINISH_SHARE = 0.8


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
