"""Closed-loop benchmark simulation: hand-computable schedules with constant or simple step times."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.serving_benchmark import max_running_requests, simulate_closed_loop

T = 0.01  # a constant step time: every step, whatever it holds, takes 10 ms


def const(decodes: int, prompt_tokens: int) -> float:
    return T


def run(**kw):
    args = dict(
        concurrency=1, requests=1, input_tokens=100, output_tokens=5, max_running=64, token_budget=8192
    )
    args.update(kw)
    return simulate_closed_loop(const, **args)


def test_single_request_is_one_prefill_then_decode_steps():
    def step_time(decodes: int, prompt_tokens: int) -> float:
        return 0.05 if prompt_tokens else 0.002 * decodes

    r = simulate_closed_loop(step_time, concurrency=1, requests=3, input_tokens=100, output_tokens=11,
                             max_running=8, token_budget=8192)  # fmt: skip
    assert r.ttft_mean_s == pytest.approx(0.05)  # its own prefill step
    assert r.tpot_mean_s == pytest.approx(0.002)  # one decoder per step
    assert r.duration_s == pytest.approx(3 * (0.05 + 10 * 0.002))  # three requests back to back
    assert r.requests == 3 and r.max_admitted == 1


def test_first_wave_fits_one_step():
    r = run(concurrency=8, requests=8)
    assert r.ttft_mean_s == pytest.approx(T)  # 8 x 100 tokens in one 8192-token step
    assert r.tpot_mean_s == pytest.approx(T)


def test_token_budget_splits_the_first_wave():
    # 4 prompts of 100 tokens, 200 tokens per step: step 1 prefills two; in step 2 their two decode tokens
    # count against the budget, leaving 198: prompt 3 and 98 tokens of prompt 4, whose last 2 go in step 3
    r = run(concurrency=4, requests=4, token_budget=200)
    assert r.ttft_mean_s == pytest.approx((T + T + 2 * T + 3 * T) / 4)


def test_chunked_prompt_spans_steps():
    r = run(input_tokens=250, token_budget=100)  # chunks 100, 100, 50
    assert r.ttft_mean_s == pytest.approx(3 * T)
    whole = run(input_tokens=250, token_budget=100, chunked=False)  # alone: taken whole in one step
    assert whole.ttft_mean_s == pytest.approx(T)


def test_whole_prompts_wait_for_a_step_with_room():
    # budget 1000, prompts of 600: without chunking only one fits per step
    r = run(concurrency=2, requests=2, input_tokens=600, token_budget=1000, chunked=False)
    assert r.ttft_mean_s == pytest.approx(1.5 * T)
    chunked = run(concurrency=2, requests=2, input_tokens=600, token_budget=1000)
    # chunked: 600 + 400 tokens, then 1 decode + the last 200: the second prompt also ends in step 2
    assert chunked.ttft_mean_s == pytest.approx(1.5 * T)


def test_queueing_behind_a_full_request():
    # one slot, two clients: the second waits for the first's whole life (1 prefill + 4 decode steps)
    r = run(concurrency=2, requests=2, max_running=1)
    assert r.ttft_mean_s == pytest.approx((T + (5 * T + T)) / 2)
    assert r.max_admitted == 1


def test_reserved_kv_capacity_limits_admission():
    # room for one request's input + output (105 tokens) only
    reserve = run(concurrency=2, requests=2, kv_capacity_tokens=150, reserve_output=True)
    assert reserve.max_admitted == 1 and reserve.ttft_mean_s == pytest.approx(3.5 * T)
    # allocating on demand, two prompts (2 x 100 tokens) do not fit in 150 either
    on_demand = run(concurrency=2, requests=2, kv_capacity_tokens=150, reserve_output=False)
    assert on_demand.max_admitted == 1
    # with 205 tokens both prompts fit at admission though their full sequences (2 x 105) would not
    roomy = run(concurrency=2, requests=2, kv_capacity_tokens=205, reserve_output=False)
    assert roomy.max_admitted == 2 and roomy.ttft_mean_s == pytest.approx(T)


def test_output_spread_keeps_the_mean_and_desynchronizes():
    r = run(concurrency=16, requests=160, output_tokens=100, output_spread=0.2)
    assert r.tpot_mean_s == pytest.approx(T)
    # equal lengths keep all 16 arriving together (TTFT T each); spread lengths finish apart, so the later
    # requests arrive while others decode and still get their prefill in the next step: TTFT stays T
    assert r.ttft_mean_s == pytest.approx(T)
    steps_equal = run(concurrency=16, requests=160, output_tokens=100).steps
    assert r.steps > steps_equal  # prefills no longer all share one step


def test_max_running_requests():
    assert max_running_requests(1000.0, 300.0) == 3
    assert max_running_requests(10.0, 300.0) == 1  # a lone request always runs
    with pytest.raises(ConfigError, match="tokens_per_request"):
        max_running_requests(1000.0, 0.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("concurrency", 0),
        ("requests", 0),
        ("input_tokens", 0),
        ("output_tokens", 1),
        ("token_budget", 0),
        ("output_spread", 2.5),
    ],
)
def test_bad_arguments(field, value):
    with pytest.raises(ConfigError, match=field):
        run(**{field: value})
