"""An open loop whose arrivals outpace the server is `overloaded` (`dse.serving.metrics.overloaded`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dse.hardware.catalog import load_gpu
from dse.serving.load import LoadRequest, predict_load
from dse.serving.metrics import overloaded
from dse.serving.scheduler import SimResult
from dse.serving.static import ServingRequest, predict_serving
from dse.workload.models import load_model_config

ARCH = load_model_config("llama-3.1-8b")
L40S = load_gpu("l40s")
H100 = load_gpu("h100-sxm")
LENGTHS = {"input_tokens": 512, "output_tokens": 128, "length_dist": "lognormal"}


@pytest.fixture(scope="module")
def capacity_per_s() -> float:
    """The most requests per second the L40S serves: an offline run, every request queued at the start,
    keeps its batch full from the first step to the last."""
    req = LoadRequest(mode="max_throughput", num_requests=600, **LENGTHS)
    return float(predict_load(ARCH, L40S, req).metrics()["requests_per_s"])


def _at_rate(rate: float, n: int, gpu=L40S, **kw) -> dict:
    req = LoadRequest(mode="request_rate", request_rate_per_s=rate, num_requests=n, **{**LENGTHS, **kw})
    return predict_load(ARCH, gpu, req).metrics()


def test_three_times_what_the_server_completes_is_overloaded_and_its_ttft_grows_with_the_run(
    capacity_per_s: float,
) -> None:
    # Requests arrive 3x as fast as the GPU can finish them: the queue grows by 2/3 of the arrivals, so a
    # run twice as long leaves its last requests waiting about twice as long for their first token.
    short, long = _at_rate(3 * capacity_per_s, 300), _at_rate(3 * capacity_per_s, 600)
    assert short["overloaded"] is True and long["overloaded"] is True
    assert short["feasible"] is True  # the engine runs: feasibility is about memory, not the queue
    assert long["ttft_p99_s"] > 1.6 * short["ttft_p99_s"]
    # what it serves is what it can: no more than offline, where the batch is full from the first step
    assert 0.6 * capacity_per_s < long["requests_per_s"] <= 1.05 * capacity_per_s


def test_half_of_what_the_server_completes_is_not_overloaded_and_its_ttft_holds(
    capacity_per_s: float,
) -> None:
    short, long = _at_rate(0.5 * capacity_per_s, 300), _at_rate(0.5 * capacity_per_s, 600)
    assert short["overloaded"] is False and long["overloaded"] is False
    assert long["ttft_p99_s"] == pytest.approx(short["ttft_p99_s"], rel=0.5)
    assert long["requests_per_s"] == pytest.approx(0.5 * capacity_per_s, rel=0.1)


def test_a_run_shorter_than_its_requests_is_not_overloaded_though_they_finish_after_the_arrivals() -> None:
    # 20 requests at 1 per second, each decoding ~2,000 tokens (~10 s on an H100 at a batch of up to 20,
    # far below the 1,024 it may run): most are still decoding when the last one arrives, so completions
    # lag arrivals over the run, but none waits for the engine: every one gets its first token at once.
    m = _at_rate(1.0, 20, H100, input_tokens=512, output_tokens=2000)
    assert m["requests_per_s"] < 0.8  # completions lag the 1 per second that arrive
    assert m["ttft_p99_s"] < 0.2 and m["overloaded"] is False


def test_closed_loops_offline_runs_and_static_batches_are_never_overloaded() -> None:
    # A closed loop sends a request only when one finishes; offline, the queue at t = 0 is the workload
    # itself (requests_per_s is the server's), and a static batch has no arrivals.
    closed = LoadRequest(mode="concurrency", concurrency=600, num_requests=600, **LENGTHS)
    offline = dataclasses.replace(closed, mode="max_throughput", concurrency=None)
    for req in (closed, offline):
        assert predict_load(ARCH, L40S, req).metrics()["overloaded"] is False
    static = predict_serving(ARCH, L40S, ServingRequest(batch=8, input_tokens=512, output_tokens=128))
    assert static.metrics()["overloaded"] is False


def _run(*, emitted_per_s: float, decode_s: float, queued: int = 0) -> SimResult:
    """1,000 requests of 100 tokens arriving at 10 per second over 99.9 s, each admitted 0.05 s after it
    arrives (but the last `queued` before the end, still waiting), decoding for `decode_s`; the engine
    emits `emitted_per_s` tokens a second, logged one second at a time."""
    n, rate = 1000, 10.0
    arrival = np.arange(n) / rate
    first = arrival + 0.05
    first[n - 1 - queued : n - 1] = arrival[-1] + 1.0  # waiting for the engine when the last one arrives
    seconds = np.arange(200.0)
    return SimResult(
        arrival_s=arrival, first_token_s=first, finish_s=first + decode_s,
        input_tokens=np.full(n, 100), output_tokens=np.full(n, 100),
        step_start_s=seconds, step_end_s=seconds + 1.0, step_energy_j=np.full(200, 300.0),
        step_tokens=np.full(200, emitted_per_s), step_running=np.full(200, 20.0),
        step_blocks=np.full(200, 10.0), steps=200, preemptions=0, kv_blocks=100, peak_blocks=10,
    )  # fmt: skip


def test_overload_is_read_from_the_run_itself() -> None:
    # 10 requests of 100 tokens arrive each second: 1,000 tokens a second to keep up with
    assert not overloaded(_run(emitted_per_s=1000.0, decode_s=2.0))
    assert not overloaded(_run(emitted_per_s=850.0, decode_s=2.0))  # within the noise of a ramp
    # 700 a second over 50 decode times: the running batch grows by 3 requests a second
    assert overloaded(_run(emitted_per_s=700.0, decode_s=2.0))
    # the same pace over 4 decode times or fewer is what a server that keeps up shows while its batch fills
    assert not overloaded(_run(emitted_per_s=700.0, decode_s=25.0))
    # requests waiting for admission at the last arrival: a queue, however short the run
    assert overloaded(_run(emitted_per_s=1000.0, decode_s=25.0, queued=50))
    assert not overloaded(_run(emitted_per_s=1000.0, decode_s=25.0, queued=49))  # under 5% of them
