"""The iteration-level scheduler simulation (dse.serving.scheduler) with a synthetic step cost.

The step cost stands in for the kernel model: a fixed part (weights streamed once per step), a part per
decode token and per prompt token, and decode attention growing with the context. It makes the physics
checkable by hand: a batch amortizes the fixed part, so throughput grows with concurrency until the
running-sequence limit, and energy per token falls.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dse.serving.scheduler as scheduler_module
from dse.errors import ConfigError
from dse.serving.metrics import request_metrics, steady_window, system_metrics
from dse.serving.scheduler import Requests, SchedulerConfig, SimResult, simulate

FIXED_S, PER_DECODE_S, PER_PROMPT_S, PER_CONTEXT_S = 5e-3, 2e-5, 6e-5, 2e-9
ACTIVE_W, IDLE_W = 400.0, 80.0


def cost(decodes: int, prompt_tokens: int, prompts: int, context: float) -> tuple[float, float]:
    latency_s = (
        FIXED_S + PER_DECODE_S * decodes + PER_PROMPT_S * prompt_tokens + PER_CONTEXT_S * decodes * context
    )
    return latency_s, ACTIVE_W * latency_s


def config(**kw) -> SchedulerConfig:
    return SchedulerConfig(**{"max_num_seqs": 64, "max_batched_tokens": 2048, "kv_blocks": 10_000, **kw})


def lengths(n: int, seed: int = 0, mean_in: int = 256, mean_out: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    inp = np.clip(np.rint(rng.lognormal(np.log(mean_in), 0.4, n)), 1, 4 * mean_in).astype(int)
    out = np.clip(np.rint(rng.lognormal(np.log(mean_out), 0.4, n)), 2, 4 * mean_out).astype(int)
    return inp, out


def closed(c: int, n: int = 400, **kw) -> SimResult:
    inp, out = lengths(n)
    return simulate(Requests(input_tokens=inp, output_tokens=out, concurrency=c), config(**kw), cost,
                    idle_power_w=IDLE_W)  # fmt: skip


def poisson(rate: float, n: int = 400, seed: int = 0, **kw) -> SimResult:
    inp, out = lengths(n)
    gaps = np.random.default_rng(seed + 1).exponential(1.0 / rate, n)
    arrivals = np.cumsum(gaps) - gaps[0]
    return simulate(Requests(input_tokens=inp, output_tokens=out, arrival_s=arrivals), config(**kw), cost,
                    idle_power_w=IDLE_W)  # fmt: skip


def system(sim: SimResult, k: int) -> dict[str, float]:
    return system_metrics(sim, steady_window(sim, k))


def check_invariants(sim: SimResult) -> None:
    assert np.all(sim.first_token_s >= sim.arrival_s)  # no token before its request arrives
    assert np.all(sim.finish_s >= sim.first_token_s)
    assert np.all(np.diff(sim.step_start_s) >= 0) and np.all(sim.step_end_s >= sim.step_start_s)
    # every output token is emitted exactly once, recomputed requests included
    assert int(sim.step_tokens.sum()) == int(sim.output_tokens.sum())
    assert np.all(sim.step_blocks <= sim.kv_blocks)
    assert sim.step_blocks.max() <= sim.peak_blocks <= sim.kv_blocks  # stretches log their mean


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 60),
    concurrency=st.integers(1, 20),
    max_seqs=st.integers(1, 16),
    budget=st.integers(16, 600),
    blocks=st.integers(40, 400),
    block=st.sampled_from([1, 16, 32]),
    chunked=st.booleans(),
    reserve=st.sampled_from([0.0, 0.7, 1.0]),
    open_loop=st.booleans(),
    seed=st.integers(0, 2**16),
    mixed=st.booleans(),
    ahead=st.booleans(),
)
def test_every_request_finishes_after_it_arrives_and_tokens_add_up(
    n, concurrency, max_seqs, budget, blocks, block, chunked, reserve, open_loop, seed, mixed, ahead
) -> None:
    inp, out = lengths(n, seed, mean_in=48, mean_out=24)
    if int((inp + out).max()) > blocks * block:
        blocks = -(-int((inp + out).max()) // block)  # the smallest pool every request fits
    cfg = SchedulerConfig(
        max_num_seqs=max_seqs,
        max_batched_tokens=budget,
        kv_blocks=blocks,
        block_size_tokens=block,
        chunked_prefill=chunked,
        reserve_output_frac=reserve,
        mixed_prefill=mixed,
        schedule_ahead=ahead,
    )
    if open_loop:
        arrivals = np.sort(np.random.default_rng(seed).uniform(0, 2.0, n))
        req = Requests(input_tokens=inp, output_tokens=out, arrival_s=arrivals)
    else:
        req = Requests(input_tokens=inp, output_tokens=out, concurrency=concurrency)
    sim = simulate(req, cfg, cost, idle_power_w=IDLE_W)
    check_invariants(sim)
    assert np.all(np.isfinite(sim.finish_s))


def test_littles_law_in_the_closed_loop_steady_state() -> None:
    for c in (4, 16, 48):
        sim = closed(c, n=1200)
        w = steady_window(sim, c)
        done = (sim.finish_s > w.start_s) & (sim.finish_s <= w.end_s)
        throughput = done.sum() / w.duration_s
        mean_e2e = float((sim.finish_s - sim.arrival_s)[done].mean())
        assert throughput * mean_e2e == pytest.approx(c, rel=0.05)  # L = lambda W, L = C clients


def test_littles_law_under_poisson_arrivals() -> None:
    sim = poisson(rate=40.0, n=2000)
    t0, t1 = float(np.quantile(sim.arrival_s, 0.1)), float(np.quantile(sim.arrival_s, 0.9))
    grid = np.linspace(t0, t1, 4000)
    in_system = (sim.arrival_s[None, :] <= grid[:, None]) & (sim.finish_s[None, :] > grid[:, None])
    mean_in_system = in_system.sum(axis=1).mean()
    arrivals = ((sim.arrival_s >= t0) & (sim.arrival_s < t1)).sum() / (t1 - t0)
    mean_e2e = float((sim.finish_s - sim.arrival_s).mean())
    assert mean_in_system == pytest.approx(arrivals * mean_e2e, rel=0.05)


def test_throughput_does_not_fall_with_concurrency_up_to_the_sequence_limit() -> None:
    levels = (1, 2, 4, 8, 16, 32, 64, 96)
    tput = [system(closed(c, max_num_seqs=64), min(c, 64))["output_tokens_per_s"] for c in levels]
    assert all(b >= a * 0.99 for a, b in zip(tput, tput[1:], strict=False)), tput
    assert tput[-2] > 10 * tput[0]  # batching amortizes the per-step weight traffic
    assert tput[-1] == pytest.approx(tput[-2], rel=0.05)  # saturated: 96 clients, 64 run


def test_energy_per_token_falls_with_batch_until_saturation() -> None:
    levels = (1, 4, 16, 64)
    jpt = [system(closed(c), c)["energy_per_output_token_j"] for c in levels]
    assert all(b < a for a, b in zip(jpt, jpt[1:], strict=False)), jpt


def test_ttft_rises_with_request_rate() -> None:
    ttft = [request_metrics(poisson(rate))["ttft_s"] for rate in (5.0, 40.0, 120.0, 400.0)]
    assert all(b >= a for a, b in zip(ttft, ttft[1:], strict=False)), ttft
    assert ttft[-1] > 5 * ttft[0]  # past capacity requests queue


def test_a_small_kv_pool_preempts_and_still_serves_everything() -> None:
    inp, out = np.full(200, 512), np.full(200, 256)
    req = Requests(input_tokens=inp, output_tokens=out, arrival_s=np.zeros(200))
    roomy = simulate(req, config(kv_blocks=100_000), cost, idle_power_w=IDLE_W)
    tight = simulate(req, config(kv_blocks=1_000), cost, idle_power_w=IDLE_W)
    assert roomy.preemptions == 0 and tight.preemptions > 0
    check_invariants(tight)
    # reserving the whole sequence at admission (TensorRT-LLM) never preempts
    reserved = simulate(req, config(kv_blocks=1_000, reserve_output_frac=1.0), cost, idle_power_w=IDLE_W)
    assert reserved.preemptions == 0
    check_invariants(reserved)


def test_without_chunked_prefill_a_prompt_runs_whole() -> None:
    inp, out = np.array([3000, 100, 100]), np.array([4, 4, 4])
    req = Requests(input_tokens=inp, output_tokens=out, arrival_s=np.zeros(3))
    sim = simulate(req, config(max_batched_tokens=1024, chunked_prefill=False), cost, idle_power_w=IDLE_W)
    # the 3000-token prompt is longer than the budget: it runs alone in the first step
    assert sim.first_token_s[0] == pytest.approx(cost(0, 3000, 1, 0)[0])
    chunked = simulate(req, config(max_batched_tokens=1024), cost, idle_power_w=IDLE_W)
    assert chunked.steps > sim.steps


def test_idle_gaps_are_charged_at_idle_power() -> None:
    inp, out = np.array([64, 64]), np.array([2, 2])
    req = Requests(input_tokens=inp, output_tokens=out, arrival_s=np.array([0.0, 10.0]))
    sim = simulate(req, config(), cost, idle_power_w=IDLE_W)
    busy_j = sum(ACTIVE_W * cost(0, 64, 1, 0)[0] + ACTIVE_W * cost(1, 0, 0, 65)[0] for _ in range(2))
    gap_s = 10.0 - sim.finish_s[0]
    assert sim.step_energy_j.sum() == pytest.approx(busy_j + IDLE_W * gap_s, rel=1e-9)


def test_stretches_of_decode_steps_match_step_by_step_time() -> None:
    # One request alone: no events between its first and last token, so the simulation takes them at once.
    req = Requests(input_tokens=np.array([100]), output_tokens=np.array([50]), concurrency=1)
    sim = simulate(req, config(), cost, idle_power_w=IDLE_W)
    by_step = cost(0, 100, 1, 0)[0] + sum(cost(1, 0, 0, 100 + j + 1)[0] for j in range(49))
    assert sim.finish_s[0] == pytest.approx(by_step, rel=1e-9)
    assert len(sim.step_start_s) < 10 and sim.steps == 50


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_num_seqs": 0}, "max_num_seqs"),
        ({"kv_blocks": -1}, "kv_blocks"),
        ({"reserve_output_frac": 1.5}, "reserve_output_frac"),
        ({"host_step_s": float("nan")}, "host_step_s"),
    ],
)
def test_bad_scheduler_settings_are_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**kwargs)


def test_a_request_larger_than_the_pool_is_refused() -> None:
    req = Requests(input_tokens=np.array([5000]), output_tokens=np.array([10]), concurrency=1)
    with pytest.raises(ConfigError, match="KV cache"):
        simulate(req, config(kv_blocks=100), cost, idle_power_w=IDLE_W)


def test_a_whole_sequence_reservation_holds_for_the_whole_run() -> None:
    # TensorRT-LLM's GUARANTEED_NO_EVICT: a request keeps the blocks of its whole sequence reserved from
    # admission to finish, so the sequences admitted never need more than the pool (no preemption); with
    # spread output lengths a request is admitted while others are mid-way, where a reservation that
    # shrank as outputs grew would let in more than the pool holds
    inp, out = lengths(300, mean_out=256)
    cfg = config(kv_blocks=400, reserve_output_frac=1.0)
    engine = scheduler_module._Engine(
        Requests(input_tokens=inp, output_tokens=out, concurrency=64), cfg, cost, IDLE_W
    )
    need = -(-(inp + out - 1) // cfg.block_size_tokens)  # the last token is emitted, never cached
    peak = 0
    step = engine.step

    def checked_step() -> None:
        nonlocal peak
        step()
        reserved = int(sum(need[r] for r in engine.running))
        assert reserved <= cfg.kv_blocks
        peak = max(peak, reserved)

    engine.step = checked_step  # type: ignore[method-assign]
    sim = engine.run()
    assert sim.preemptions == 0 and peak > 0.8 * cfg.kv_blocks


def context_heavy(decodes: int, prompt_tokens: int, prompts: int, context: float) -> tuple[float, float]:
    # Linear in the context (so a stretch costed at its mean context is exact) and dominated by it, so a
    # stretch sized at its starting context can run past the next arrival.
    latency_s = 1e-3 + 6e-5 * prompt_tokens + 2e-7 * decodes * context
    return latency_s, ACTIVE_W * latency_s


@pytest.mark.parametrize("seed", range(12))
def test_stretches_give_the_step_by_step_answer_under_poisson_arrivals(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Arrivals that fall inside a stretch of decode steps must still join the very next step they can
    # (the one after it where the engine schedules ahead: odd seeds).
    inp, out = lengths(150, seed, mean_in=64, mean_out=400)
    gaps = np.random.default_rng(seed + 7).exponential(1.0 / 20.0, len(inp))
    req = Requests(input_tokens=inp, output_tokens=out, arrival_s=np.cumsum(gaps))
    cfg = config(schedule_ahead=bool(seed % 2))
    fast = simulate(req, cfg, context_heavy, idle_power_w=IDLE_W)
    monkeypatch.setattr(scheduler_module._Engine, "_stretch", lambda self: 0)
    slow = simulate(req, cfg, context_heavy, idle_power_w=IDLE_W)
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=1e-9, atol=1e-12)
    assert fast.step_energy_j.sum() == pytest.approx(slow.step_energy_j.sum(), rel=1e-9)
    assert fast.steps == slow.steps and len(fast.step_start_s) < len(slow.step_start_s)


def _logged_steps(decodes: list[int], prompt_tokens: list[int]):
    def logged(d: int, p: int, k: int, ctx: float) -> tuple[float, float]:
        decodes.append(d)
        prompt_tokens.append(p)
        return cost(d, p, k, ctx)

    return logged


def test_prefill_first_steps_never_mix_and_keep_equal_waves_together() -> None:
    # SGLang's default scheduler: a step runs prompt chunks or decodes, never both; a closed loop of equal
    # lengths then stays in waves, its requests finishing together (here 4 waves of 8).
    decodes: list[int] = []
    prompt_tokens: list[int] = []
    c, n = 8, 32
    req = Requests(input_tokens=np.full(n, 512), output_tokens=np.full(n, 20), concurrency=c)
    cfg = config(max_batched_tokens=1024, mixed_prefill=False)
    sim = simulate(req, cfg, _logged_steps(decodes, prompt_tokens), idle_power_w=IDLE_W)
    check_invariants(sim)
    assert not any(d and p for d, p in zip(decodes, prompt_tokens, strict=True))
    assert len(np.unique(np.round(sim.finish_s, 12))) == n // c
    # within a wave the prompts run first, two per step: TTFT steps up by one prefill step per pair
    first_wave = np.sort(sim.first_token_s[:c])
    step_s = cost(0, 1024, 2, 0.0)[0]
    np.testing.assert_allclose(first_wave, np.repeat(step_s * np.arange(1, 5), 2), rtol=1e-9)


def test_mixed_steps_let_equal_waves_drift_apart_and_cut_ttft() -> None:
    # vLLM's unified steps put prompt chunks beside the decodes: the same closed loop has lower TTFT.
    req = Requests(input_tokens=np.full(32, 512), output_tokens=np.full(32, 20), concurrency=8)
    runs = {
        mixed: simulate(req, config(max_batched_tokens=1024, mixed_prefill=mixed), cost, idle_power_w=IDLE_W)
        for mixed in (True, False)
    }
    ttft = {mixed: float((sim.first_token_s - sim.arrival_s).mean()) for mixed, sim in runs.items()}
    assert ttft[True] < 0.8 * ttft[False]


def test_the_steady_window_covers_whole_waves() -> None:
    # A run in identical waves is periodic: its steady throughput and energy per token are the whole run's
    # (the window must hold as many prefills as decode phases, not one decode phase more).
    c, n, out_len = 8, 80, 20
    req = Requests(input_tokens=np.full(n, 512), output_tokens=np.full(n, out_len), concurrency=c)
    sim = simulate(req, config(max_batched_tokens=1024, mixed_prefill=False), cost, idle_power_w=IDLE_W)
    m = system(sim, c)
    duration_s = float(sim.step_end_s[-1] - sim.step_start_s[0])
    assert m["output_tokens_per_s"] == pytest.approx(n * out_len / duration_s, rel=1e-6)
    assert m["energy_per_output_token_j"] == pytest.approx(sim.step_energy_j.sum() / (n * out_len), rel=1e-6)


@pytest.mark.parametrize("mixed", [True, False])
@pytest.mark.parametrize("budget", [8, 64, 8192])
def test_stretches_match_step_by_step_in_both_scheduling_modes(
    mixed: bool, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prefill-first steps give prompts the whole budget: a stretch must stop at an arrival even when the
    # decodes alone fill the budget (budget 8 with up to 40 running).
    n = 40
    arrivals = np.sort(np.random.default_rng(0).uniform(0.0, 0.5, n))
    req = Requests(input_tokens=np.full(n, 64), output_tokens=np.full(n, 200), arrival_s=arrivals)
    cfg = config(max_batched_tokens=budget, kv_blocks=100_000, mixed_prefill=mixed)
    fast = simulate(req, cfg, context_heavy, idle_power_w=IDLE_W)
    monkeypatch.setattr(scheduler_module._Engine, "_stretch", lambda self: 0)
    slow = simulate(req, cfg, context_heavy, idle_power_w=IDLE_W)
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=1e-9, atol=1e-12)


def test_a_prompt_blocked_by_a_decode_that_preempts_itself_runs_in_the_same_step() -> None:
    """Prefill-first steps: request 0's chunked prompt waits for blocks, request 2 (admitted after it) finds
    no block for its next token and preempts itself, freeing blocks only after the prompts were scheduled.
    The scheduler used to raise 'cannot be scheduled' here although each request fits the pool alone."""
    cfg = SchedulerConfig(
        max_num_seqs=8, max_batched_tokens=11, kv_blocks=20, block_size_tokens=1, chunked_prefill=True,
        mixed_prefill=False,
    )  # fmt: skip
    req = Requests(
        input_tokens=np.array([10, 18, 3]),
        output_tokens=np.array([2, 1, 15]),
        arrival_s=np.array([0, 0, 0.003]),
    )
    sim = simulate(req, cfg, cost, idle_power_w=IDLE_W)
    check_invariants(sim)
    assert np.all(np.isfinite(sim.finish_s)) and sim.preemptions == 1


def test_prompts_in_flight_holding_the_pool_preempt_the_latest_admitted() -> None:
    """Two chunked prompts hold every block, neither can grow and nothing decodes: as vLLM does, the most
    recently admitted one is preempted (recompute) and the oldest prompt goes on in the same step."""
    cfg = SchedulerConfig(
        max_num_seqs=4, max_batched_tokens=8, kv_blocks=20, block_size_tokens=1, chunked_prefill=True,
        mixed_prefill=False,
    )  # fmt: skip
    req = Requests(input_tokens=np.array([16, 16]), output_tokens=np.array([2, 2]), concurrency=2)
    engine = scheduler_module._Engine(req, cfg, cost, IDLE_W)
    engine.arrive()
    engine.waiting.clear()
    engine.running = [0, 1]  # both mid-prompt, 10 blocks each: the pool is full
    engine.prefilling = 2  # the engine's count of running prompts in flight, kept with `running`
    for r in (0, 1):
        engine.computed[r] = engine.kv[r] = engine.blocks[r] = 10
    engine.free_blocks = 0
    engine.step()
    assert engine.running == [0] and list(engine.waiting) == [1] and engine.preemptions == 1
    assert engine.computed[0] == 16 and engine.computed[1] == 0 and engine.free_blocks == 4


def test_a_per_sequence_state_takes_pool_blocks_while_the_sequence_runs() -> None:
    """Linear attention's state (`state_blocks` per running sequence) comes out of the KV pool: a pool of
    1,000 blocks holds ~54 sequences of ~18 blocks (256 + 64 tokens) alone, ~35 with 10 state blocks
    each; every block comes back at the end."""
    base, with_state = closed(64, kv_blocks=1000), closed(64, kv_blocks=1000, state_blocks=10)
    peak_running = lambda sim: max(sim.step_running)  # noqa: E731
    assert peak_running(with_state) < peak_running(base)
    assert with_state.peak_blocks <= 1000
    held = np.asarray(with_state.step_blocks) - 10 * np.asarray(with_state.step_running)
    assert (held >= 0).all()  # the state blocks of the running sequences are always held
    with pytest.raises(ConfigError, match="needs more than"):
        closed(4, kv_blocks=60, state_blocks=50)  # 50 state + up to 64 blocks of tokens never fit 60


@pytest.mark.parametrize("stretches", [True, False])
def test_decode_tokens_take_blocks_beside_the_state(monkeypatch: pytest.MonkeyPatch, stretches: bool) -> None:
    """One request of 16 + 60 tokens in 16-token blocks holds 5 blocks, 7 with 2 state blocks, step by step
    as in stretches (the step path took the state's blocks for the first decode tokens)."""
    if not stretches:
        monkeypatch.setattr(scheduler_module._Engine, "_stretch", lambda self: 0)
    for state, peak in ((0, 5), (2, 7)):
        cfg = config(kv_blocks=1000, block_size_tokens=16, state_blocks=state)
        reqs = Requests(input_tokens=np.array([16]), output_tokens=np.array([60]), concurrency=1)
        assert simulate(reqs, cfg, cost, idle_power_w=IDLE_W).peak_blocks == peak


class _CheckedEngine(scheduler_module._Engine):
    """The engine with its count of running prompts in flight checked against a recount after each step."""

    def _check(self) -> None:
        assert self.prefilling == sum(self.computed[r] < self.prompt_len[r] for r in self.running)

    def step(self) -> None:
        super().step()
        self._check()

    def take_stretch(self, k: int) -> None:
        super().take_stretch(k)
        self._check()


class _Batched:
    """`cost` with a `costs` method: a closed loop through it is costed after scheduling."""

    def __call__(self, *step: float) -> tuple[float, float]:
        return cost(*step)  # type: ignore[arg-type]

    def costs(self, steps: list[tuple[int, int, int, float]]) -> list[tuple[float, float]]:
        return [cost(*step) for step in steps]


@given(
    n=st.integers(1, 40),
    concurrency=st.integers(1, 12),
    max_seqs=st.integers(1, 10),
    budget=st.integers(16, 400),
    blocks=st.integers(8, 200),
    block=st.sampled_from([1, 16]),
    chunked=st.booleans(),
    reserve=st.sampled_from([0.0, 0.7, 1.0]),
    seed=st.integers(0, 2**16),
    mixed=st.booleans(),
    offline=st.booleans(),
    ahead=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_a_closed_loop_costed_after_scheduling_is_the_run_costed_as_it_goes(
    n, concurrency, max_seqs, budget, blocks, block, chunked, reserve, seed, mixed, offline, ahead
) -> None:
    # Deferred costing (a step cost with `costs`) gives every time and energy exactly as step by step, and
    # the engine's count of prompts in flight stays equal to a recount (preemptions included: small pools).
    inp, out = lengths(n, seed, mean_in=48, mean_out=24)
    blocks = max(blocks, -(-int((inp + out).max()) // block))
    cfg = SchedulerConfig(max_num_seqs=max_seqs, max_batched_tokens=budget, kv_blocks=blocks,
                          block_size_tokens=block, chunked_prefill=chunked, reserve_output_frac=reserve,
                          mixed_prefill=mixed, host_step_s=2e-5, schedule_ahead=ahead)  # fmt: skip
    if offline:  # every request at t = 0: no time read either
        req = Requests(input_tokens=inp, output_tokens=out, arrival_s=np.zeros(n))
    else:
        req = Requests(input_tokens=inp, output_tokens=out, concurrency=concurrency)
    deferred = _CheckedEngine(req, cfg, _Batched(), IDLE_W, deferred=True).run()
    as_it_goes = _CheckedEngine(req, cfg, cost, IDLE_W).run()
    for field in dataclasses.fields(deferred):
        x, y = getattr(deferred, field.name), getattr(as_it_goes, field.name)
        assert np.array_equal(x, y, equal_nan=True) if isinstance(x, np.ndarray) else x == y, field.name
    assert simulate(req, cfg, _Batched(), idle_power_w=IDLE_W).steps == as_it_goes.steps


def test_an_open_loop_cannot_be_costed_after_scheduling() -> None:
    # Its admissions read each arrival's time, which a deferred run does not have until the end.
    req = Requests(input_tokens=np.array([100, 100]), output_tokens=np.array([20, 20]),
                   arrival_s=np.array([0.0, 0.05]))  # fmt: skip
    with pytest.raises(ValueError, match="closed loop"):
        scheduler_module._Engine(req, config(), _Batched(), IDLE_W, deferred=True)
    assert not scheduler_module.time_free(req)
    assert scheduler_module.time_free(dataclasses.replace(req, arrival_s=np.zeros(2)))


def one_second(decodes: int, prompt_tokens: int, prompts: int, context: float) -> tuple[float, float]:
    # every step takes 1 s, so times count steps
    return 1.0, ACTIVE_W


@pytest.mark.parametrize(("ahead", "ttft_s"), [(False, 2.0), (True, 3.0)])
def test_a_closed_loop_clients_next_request_misses_the_step_the_engine_schedules_meanwhile(
    ahead: bool, ttft_s: float
) -> None:
    # Two clients; request 0 finishes at the end of step 2 (t = 2) while request 1 keeps the engine busy.
    # The engine schedules step 3 without waiting for client 0's next request (request 2), which joins step
    # 4 (first token at t = 4), or step 5 when the engine scheduled step 4 while step 3 ran (schedule_ahead).
    req = Requests(input_tokens=np.ones(3, int), output_tokens=np.array([2, 10, 2]), concurrency=2)
    sim = simulate(req, config(schedule_ahead=ahead), one_second, idle_power_w=IDLE_W)
    assert sim.arrival_s[2] == 2.0
    assert sim.first_token_s[2] - sim.arrival_s[2] == ttft_s
    assert sim.first_token_s[1] == 1.0  # the first requests arrive at an idle engine: no wait


@pytest.mark.parametrize("ahead", [False, True])
def test_an_idle_engine_takes_a_clients_next_request_at_once(ahead: bool) -> None:
    # One client: nothing runs when its request finishes, so the next one's prompt is the next step.
    req = Requests(input_tokens=np.ones(2, int), output_tokens=np.array([2, 2]), concurrency=1)
    sim = simulate(req, config(schedule_ahead=ahead), one_second, idle_power_w=IDLE_W)
    np.testing.assert_array_equal(sim.first_token_s - sim.arrival_s, [1.0, 1.0])


@pytest.mark.parametrize(("ahead", "first_s"), [(False, 4.0), (True, 5.0)])
def test_an_arrival_at_an_engine_that_schedules_ahead_waits_one_more_step(
    ahead: bool, first_s: float
) -> None:
    # Request 2 arrives at t = 2.5, during step 3, while request 0 keeps the engine busy: a synchronous engine
    # takes it in step 4 (3 -> 4 s); one that scheduled step 4 while step 3 ran, in step 5.
    req = Requests(input_tokens=np.ones(3, int), output_tokens=np.array([10, 10, 2]),
                   arrival_s=np.array([0.0, 0.0, 2.5]))  # fmt: skip
    sim = simulate(req, config(schedule_ahead=ahead), one_second, idle_power_w=IDLE_W)
    assert sim.first_token_s[2] == first_s
