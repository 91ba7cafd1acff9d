"""Closed-loop benchmark simulation: hand-computable schedules with constant or simple step times."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.serving.continuous import max_running_requests, simulate_closed_loop

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


def _recorded(**kw):
    calls: list[tuple[int, int]] = []

    def step_time(decodes: int, prompt_tokens: int) -> float:
        calls.append((decodes, prompt_tokens))
        return 1.0  # one second per step: a TTFT is the step count at its first token

    args = dict(max_running=8, chunked=False)
    args.update(kw)
    return simulate_closed_loop(step_time, **args), calls


def test_whole_prompt_waits_while_decodes_fill_the_budget():
    # budget 5 tokens, prompts of 4, 3 tokens out (first token at the prefill step, then 2 decode steps):
    #   step 0: d=0, A's 4 tokens (1 left: B waits)            -> A's first token at t=1
    #   step 1: d=1 (A), B's 4 tokens (5 of 5)                 -> B's first token at t=2
    #   step 2: d=2 (A, B), 3 left < 4: C waits; A's last token
    #   step 3: d=1 (B), C's 4 tokens (5 of 5); B's last token -> C's first token at t=4
    #   steps 4-5: C decodes alone
    r, calls = _recorded(concurrency=3, requests=3, input_tokens=4, output_tokens=3, token_budget=5)
    assert r.ttft_mean_s == pytest.approx((1 + 2 + 4) / 3)
    assert calls[:4] == [(0, 4), (1, 4), (2, 0), (1, 4)]
    assert all(d + p <= 5 for d, p in calls)  # a step never holds more than the budget
    assert r.duration_s == pytest.approx(6.0) and r.steps == 6


def test_prompt_longer_than_the_budget_is_its_steps_only_prompt():
    # budget 3 < prompt 4: each prompt runs as the only prompt of a step, beside the decodes
    #   step 0: A alone (B cannot share the step) -> t=1; step 1: d=1 (A's last token), B -> t=2
    r, calls = _recorded(concurrency=2, requests=2, input_tokens=4, output_tokens=2, token_budget=3)
    assert r.ttft_mean_s == pytest.approx((1 + 2) / 2)
    assert calls[:2] == [(0, 4), (1, 4)]
