"""Iteration-level scheduling of a serving engine under load, simulated step by step.

    result = simulate(requests, SchedulerConfig(max_num_seqs=256, max_batched_tokens=8192,
                      kv_blocks=20_000, block_size_tokens=16, chunked_prefill=True), step_cost,
                      idle_power_w=90.0)

This module knows nothing of GPUs or models: `step_cost(decodes, prompt_tokens, prompts, context_len)`
gives the latency and energy of one engine step (`dse.serving.load` builds it from the kernel model).

Arrivals (`Requests`): closed loop (`concurrency` clients; each sends its next request when its last one
finishes, all first requests at t = 0), or given arrival times (open loop: Poisson; offline: all at 0). A busy
engine schedules its next step without waiting for input, so a client's next request misses the step scheduled
right after its last one's (it comes back in milliseconds of HTTP and tokenization, the engine turns round in
under one) and joins step k + 2 after a finish in step k. With `schedule_ahead` (`dse.serving.presets`: each
step scheduled while the GPU runs the one before) an arrival at a busy engine waits one step more: k + 3, and
an open-loop arrival during step k joins k + 2, not k + 1. An idle engine takes an arrival at once.

Each step, as vLLM V1, SGLang and TensorRT-LLM schedule:

1. Every running request whose prompt is computed decodes one token. Its KV cache grows by one token; a
   request that needs a new block and finds none preempts the most recently admitted running request
   (vLLM's recompute preemption: its blocks are freed and it goes back to the front of the queue, to
   recompute its prompt and the tokens it had generated).
2. The rest of the token budget (`max_batched_tokens`; decode tokens count against it) goes to prompt
   chunks: first of running requests whose prompt is not finished, then of waiting requests in arrival
   order, admitted while fewer than `max_num_seqs` run and the KV pool holds the chunk plus the output
   share the engine reserves (`reserve_output_frac`: 0 for vLLM, which allocates as tokens come; 1 for
   TensorRT-LLM's GUARANTEED_NO_EVICT, which reserves the whole sequence). Without chunked prefill a
   prompt runs whole: it waits for a step whose budget holds it, and a prompt longer than the whole budget
   runs as the only prompt of a step. Where nothing could be scheduled (a prompt in flight waits for
   blocks that a decode's preemption freed too late, or prompts in flight hold the whole pool), the step
   is scheduled again without admissions, preempting the most recently admitted running request until
   the oldest can go on.
3. The step takes `step_cost(...)` plus `host_step_s`; a request whose prompt completes gets its first
   token at the step's end, a decoding request its next one. A finished request frees its blocks.

With `mixed_prefill` off (SGLang's default: `enable_mixed_chunk` is off and its scheduler's
`get_next_batch_to_run` runs a prefill batch whenever one can be formed), a step is either prompt chunks
only, with the whole budget, whenever any can be scheduled, or decodes only: decodes pause while prompts
wait. A closed loop of equal lengths then stays in waves: a wave's prompts all run before any of its
requests decodes, so they finish together and their successors arrive together.

Between events (a completion, an arrival that could be admitted, a block boundary the pool cannot cover)
steps are pure decode steps of one composition, so they are taken together: the cost of a simulation grows
with the number of requests, not steps. Their step cost is taken at the mean context of the stretch.
When nothing runs and nothing waits, the GPU idles at `idle_power_w` until the next arrival.

A closed loop's schedule does not depend on its steps' times: a client sends its next request when the last
one finishes, whenever that is. So where the step cost can cost many steps at once (`BatchStepCost`), the
run is scheduled first and its steps costed after it in one call (for the step table, one kernel-model pass
over only the grid cells the run visits), with the same arithmetic as step by step. So is an offline run
(every request arriving at t = 0). Open loops, whose admissions depend on the time of each arrival, cost
each step as they schedule it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, cast

import numpy as np

from dse.errors import ConfigError

# (decodes, prompt tokens, prompts, mean KV context of the decodes) -> (latency_s, energy_j)
StepCost = Callable[[int, int, int, float], tuple[float, float]]


class BatchStepCost(Protocol):
    """A step cost that can also cost many steps at once (`dse.serving.step_table.StepTable`):
    `costs(steps)` equals `[self(*step) for step in steps]`, at less cost than one call per step."""

    def __call__(
        self, decodes: int, prompt_tokens: int, prompts: int, context_len: float, /
    ) -> tuple[float, float]: ...

    def costs(self, steps: list[tuple[int, int, int, float]], /) -> list[tuple[float, float]]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """What the engine's scheduler allows (see the module docstring)."""

    max_num_seqs: int
    max_batched_tokens: int
    kv_blocks: int
    block_size_tokens: int = 16
    chunked_prefill: bool = True
    reserve_output_frac: float = 0.0
    host_step_s: float = 0.0
    # False: prefill-first steps of prompt chunks only, decodes pausing while any prompt work can be
    # scheduled (SGLang's default scheduler; module docstring). True: decodes and chunks share each step.
    mixed_prefill: bool = True
    # Blocks of the pool each running sequence holds whatever its length: linear attention's recurrent
    # state (`dse.workload.linear_attention`), allocated from the KV pool as vLLM's hybrid allocator does.
    state_blocks: int = 0
    schedule_ahead: bool = False  # steps scheduled while the GPU runs the one before (module docstring)

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_batched_tokens", "kv_blocks", "block_size_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.reserve_output_frac <= 1.0:
            raise ConfigError(f"reserve_output_frac must be in [0, 1], got {self.reserve_output_frac}")
        if not (math.isfinite(self.host_step_s) and self.host_step_s >= 0.0):
            raise ConfigError(f"host_step_s must be a finite number >= 0, got {self.host_step_s}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Requests:
    """The requests of one run: lengths, and either arrival times or a closed-loop concurrency."""

    input_tokens: np.ndarray  # int, [n]
    output_tokens: np.ndarray  # int, [n], >= 1
    arrival_s: np.ndarray | None = None  # open loop / offline; None: closed loop
    concurrency: int | None = None

    def __post_init__(self) -> None:
        n = len(self.input_tokens)
        if n < 1 or len(self.output_tokens) != n:
            raise ConfigError("requests need at least one request and one output length per request")
        if (self.arrival_s is None) == (self.concurrency is None):
            raise ConfigError("give arrival times (open loop) or a concurrency (closed loop), not both")
        if self.arrival_s is not None and len(self.arrival_s) != n:
            raise ConfigError("one arrival time per request")
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if int(np.min(self.input_tokens)) < 1 or int(np.min(self.output_tokens)) < 1:
            raise ConfigError("every request needs >= 1 input and >= 1 output token")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    """Per-request times and the step log of one simulated run (SI)."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    # One row per step or per stretch of identical decode steps: start, end, energy, output tokens
    # emitted, running sequences (time-weighted over the row), KV blocks in use.
    step_start_s: np.ndarray
    step_end_s: np.ndarray
    step_energy_j: np.ndarray
    step_tokens: np.ndarray
    step_running: np.ndarray
    step_blocks: np.ndarray
    steps: int
    preemptions: int
    kv_blocks: int
    peak_blocks: int  # the most KV blocks in use at any moment


@dataclass
class _Log:
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    energy: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)


class _Engine:
    """The simulation's state; `run` drives it (module docstring)."""

    def __init__(
        self,
        req: Requests,
        cfg: SchedulerConfig,
        step_cost: StepCost,
        idle_power_w: float,
        deferred: bool = False,
    ) -> None:
        self.req, self.cfg, self.step_cost, self.idle_power_w = req, cfg, step_cost, idle_power_w
        # Deferred costs (module docstring): the steps are scheduled first and costed after the run, and
        # until then `t` is the index of the last step row (-1: none yet) rather than a time. Only a run
        # whose schedule never reads a time can be: a closed loop, or every request arriving at t = 0.
        if deferred and not time_free(req):
            raise ValueError("deferred step costs need a closed loop or every arrival at t = 0")
        self.deferred = deferred
        self.pending: list[tuple[int, int, int, float]] = []  # deferred: each row's step
        self.row_steps: list[int] = []  # deferred: the engine steps of each row
        n = len(req.input_tokens)
        self.n = n
        self.in_len = [int(x) for x in req.input_tokens]
        self.out_len = [int(x) for x in req.output_tokens]
        self.arrival = (
            np.full(n, np.nan) if req.arrival_s is None else np.asarray(req.arrival_s, float).copy()
        )
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.prompt_len = list(self.in_len)  # tokens to (re)compute before decoding
        self.computed = [0] * n  # prompt tokens computed (their KV is cached)
        self.generated = [0] * n
        self.kv = [0] * n  # tokens in the KV cache
        self.blocks = [0] * n
        self.free_blocks = cfg.kv_blocks
        self.running: list[int] = []
        self.prefilling = 0  # running requests whose prompt is not computed yet
        self.waiting: deque[int] = deque()
        # arrived, in arrival order: (steps taken before it can join one, request) (module docstring)
        self.held: deque[tuple[int, int]] = deque()
        self.next_arrival = 0  # open loop: the next request not yet arrived (arrival order)
        self.order = np.argsort(self.arrival, kind="stable") if req.arrival_s is not None else None
        self.sent = 0  # closed loop: requests sent
        self.done = 0
        self.t = -1.0 if deferred else 0.0
        self.steps = 0
        self.preemptions = 0
        self.peak_blocks = 0
        self.log = _Log()

    # -- arrivals

    def arrive(self) -> None:
        """Queue what has arrived and can join the next step (closed loop: `concurrency` at t = 0)."""
        if self.order is None:
            while self.sent < min(self.req.concurrency or 0, self.n):
                self._send(self.sent)
        else:
            # deferred, every arrival is at t = 0 (`time_free`) while `t` counts rows from -1
            now = math.inf if self.deferred else self.t
            while self.next_arrival < self.n and self.arrival[self.order[self.next_arrival]] <= now:
                self.held.append((self.steps + self.cfg.schedule_ahead, int(self.order[self.next_arrival])))
                self.next_arrival += 1
        held, idle = self.held, not (self.running or self.waiting)
        while held and (idle or held[0][0] <= self.steps):  # an idle engine takes every arrival at once
            self.waiting.append(held.popleft()[1])

    def _send(self, r: int, steps: int = 0) -> None:
        self.arrival[r] = self.t
        self.held.append((self.steps + steps, r))
        self.sent += 1

    def next_arrival_s(self) -> float:
        if self.order is None or self.next_arrival >= self.n:
            return math.inf
        return float(self.arrival[self.order[self.next_arrival]])

    # -- KV blocks

    def _need(self, tokens: int) -> int:
        return -(-tokens // self.cfg.block_size_tokens) + self.cfg.state_blocks

    def _grow(self, r: int, tokens: int) -> bool:
        """Give `r` the blocks for `tokens` cached tokens; False when the pool cannot."""
        extra = self._need(tokens) - self.blocks[r]
        if extra <= 0:
            return True
        if extra > self.free_blocks:
            return False
        self.free_blocks -= extra
        self.blocks[r] += extra
        return True

    def _release(self, r: int) -> None:
        self.free_blocks += self.blocks[r]
        self.blocks[r] = 0
        self.kv[r] = 0

    def _preempt_last(self) -> int:
        """vLLM's recompute preemption of the most recently admitted running request."""
        r = self.running.pop()
        self.prefilling -= self.computed[r] < self.prompt_len[r]
        self._release(r)
        self.prompt_len[r] = self.in_len[r] + self.generated[r]
        self.computed[r] = 0
        self.waiting.appendleft(r)
        self.preemptions += 1
        return r

    def _reserved_blocks(self, extra: int | None = None) -> int:
        """Blocks held plus the output share the engine reserves for running requests (and `extra`): per
        request, its prompt (its cached tokens once it decodes) plus that share of the output still to come,
        so that at 1 a request holds its whole sequence from admission to finish."""
        frac = self.cfg.reserve_output_frac
        if frac == 0.0:
            return self.cfg.kv_blocks - self.free_blocks
        rs = self.running if extra is None else [*self.running, extra]
        held = self.blocks
        return sum(
            max(held[r], self._need(math.ceil(max(self.prompt_len[r], self.kv[r]) + frac * self._left(r))))
            for r in rs
        )

    def _left(self, r: int) -> int:
        return self.out_len[r] - self.generated[r]

    # -- one step

    def _decodes(self) -> list[int]:
        """Running requests that decode this step, with a block for their next token (preempting if not)."""
        computed, prompt_len, kv, blocks = self.computed, self.prompt_len, self.kv, self.blocks
        # a copy either way: `step` walks the decodes while `_emit` removes finished requests from `running`
        decodes = (
            [r for r in self.running if computed[r] >= prompt_len[r]] if self.prefilling else self.running[:]
        )
        bs, state = self.cfg.block_size_tokens, self.cfg.state_blocks
        preempted: set[int] = set()  # a set, not `r in self.running`: that is O(batch) per request
        # Only a request whose next token starts a new block can fail to grow (or change the pool); the
        # state's blocks (held from the first allocation on) hold no tokens.
        for r in [r for r in decodes if kv[r] >= (blocks[r] - state) * bs]:
            while r not in preempted and not self._grow(r, kv[r] + 1):
                victim = self._preempt_last()
                preempted.add(victim)
        return [r for r in decodes if r not in preempted] if preempted else decodes

    def _chunk(self, r: int, budget: int, prompt_tokens: int) -> int:
        left = self.prompt_len[r] - self.computed[r]
        if self.cfg.chunked_prefill:
            return min(left, budget)
        if left <= budget or (left > self.cfg.max_batched_tokens and prompt_tokens == 0):
            return left
        return 0

    def _admissible(self, r: int) -> bool:
        if self.cfg.reserve_output_frac == 0.0:
            return True
        return self._reserved_blocks(extra=r) <= self.cfg.kv_blocks

    def _prompts(self, budget: int, admit: bool = True) -> list[tuple[int, int]]:
        """(request, chunk tokens) of this step: running prompts first, then (if `admit`) admissions."""
        chunks: list[tuple[int, int]] = []
        used = 0
        in_flight = (
            [r for r in self.running if self.computed[r] < self.prompt_len[r]] if self.prefilling else []
        )
        for r in in_flight:
            take = self._chunk(r, budget - used, used)
            if take <= 0 or not self._grow(r, self.computed[r] + take):
                break
            chunks.append((r, take))
            used += take
        while admit and self.waiting and len(self.running) < self.cfg.max_num_seqs and used < budget:
            r = self.waiting[0]
            take = self._chunk(r, budget - used, used)
            if take <= 0 or not self._admissible(r) or not self._grow(r, take):
                break
            self.waiting.popleft()
            self.running.append(r)
            self.prefilling += 1  # computed 0 of a prompt of >= 1 token
            chunks.append((r, take))
            used += take
        return chunks

    def _schedule(self, admit: bool = True) -> tuple[list[int], list[tuple[int, int]]]:
        """(decoding requests, prompt chunks) of the next step."""
        if self.cfg.mixed_prefill:
            decodes = self._decodes()
            return decodes, self._prompts(self.cfg.max_batched_tokens - len(decodes), admit)
        chunks = self._prompts(self.cfg.max_batched_tokens, admit)
        return ([] if chunks else self._decodes()), chunks

    def step(self) -> None:
        decodes, chunks = self._schedule()
        # Prefill-first steps: a chunked prompt blocked on KV blocks, nothing else scheduled, and the decodes'
        # own preemptions (a later request finding no block for its next token) freed blocks only after the
        # prompts were scheduled: schedule again with them. If the prompts in flight still hold the pool
        # with none able to grow, preempt the most recently admitted running request (recompute, as vLLM
        # does) until the oldest can; no admissions meanwhile, so the freed blocks go to the running.
        if not decodes and not chunks and self.running:
            decodes, chunks = self._schedule(admit=False)
        while not decodes and not chunks and len(self.running) > 1:
            self._preempt_last()
            decodes, chunks = self._schedule(admit=False)
        if not decodes and not chunks:
            raise ConfigError(
                "a request cannot be scheduled: its prompt needs more KV-cache blocks than the pool holds"
            )
        d, p = len(decodes), sum(take for _, take in chunks)
        ctx = sum(map(self.kv.__getitem__, decodes)) / d + 1.0 if d else 0.0
        latency_s, energy_j = self._cost(d, p, len(chunks), ctx, 1)
        self._advance(latency_s, energy_j, 1, len(self.running))
        emitted = 0
        kv, generated, out_len = self.kv, self.generated, self.out_len
        for r in decodes:
            kv[r] += 1
            if 1 < generated[r] + 1 < out_len[r]:  # not its first or last token: `_emit` inlined
                generated[r] += 1
                emitted += 1
            else:
                emitted += self._emit(r)
        for r, take in chunks:
            self.computed[r] += take
            self.prefilling -= self.computed[r] >= self.prompt_len[r]
            self.kv[r] = self.computed[r]
            if self.computed[r] >= self.prompt_len[r]:
                emitted += self._emit(r)
        self.log.tokens[-1] = emitted
        self.steps += 1

    def _emit(self, r: int) -> int:
        """`r` emits a token at the end of the step; returns 1."""
        self.generated[r] += 1
        if self.generated[r] == 1:
            self.first[r] = self.t
        if self.generated[r] >= self.out_len[r]:
            self.finish[r] = self.t
            self.running.remove(r)
            self._release(r)
            self.done += 1
            if self.order is None and self.sent < self.n:
                # joins after this step (not in `steps` yet) and the one(s) scheduled before it arrives
                self._send(self.sent, 2 + self.cfg.schedule_ahead)
        return 1

    def _cost(self, d: int, p: int, prompts: int, ctx: float, steps: int) -> tuple[float, float]:
        """One step's (latency, energy); deferred, NaN until `_costed` (the step is noted for it)."""
        if not self.deferred:
            return self.step_cost(d, p, prompts, ctx)
        self.pending.append((d, p, prompts, ctx))
        self.row_steps.append(steps)
        return math.nan, math.nan

    def _advance(self, latency_s: float, energy_j: float, steps: int, running: int) -> None:
        host_s = self.cfg.host_step_s * steps
        start = self.t
        self.t = float(len(self.log.start)) if self.deferred else self.t + (latency_s + host_s)
        self.log.start.append(start)
        self.log.end.append(self.t)
        self.log.energy.append(energy_j + host_s * self.idle_power_w)
        self.log.tokens.append(0)
        self.log.running.append(running)
        self.log.blocks.append(self.cfg.kv_blocks - self.free_blocks)
        self.peak_blocks = max(self.peak_blocks, self.cfg.kv_blocks - self.free_blocks)

    # -- stretches of identical decode steps

    def _stretch(self) -> int:
        """How many pure decode steps can be taken together now (0: take the next step alone)."""
        running = self.running
        if not running or self.prefilling:
            return 0
        d = len(running)
        # Prompt tokens a step can take: what the decodes leave of the budget, or all of it prefill-first.
        room = self.cfg.max_batched_tokens - (d if self.cfg.mixed_prefill else 0)
        can_admit_later = d < self.cfg.max_num_seqs and room > 0
        if self.waiting and can_admit_later and self._head_fits(room):
            return 0  # the head of the queue may be admitted by the next step
        out_len, generated = self.out_len, self.generated
        k = min([out_len[r] - generated[r] for r in running]) - 1  # as `_left`
        if 0.0 < self.cfg.reserve_output_frac < 1.0:
            k = min(k, self.cfg.block_size_tokens)  # the reservation moves as outputs grow: re-check
        if k < 2:
            return 0
        kv = np.array([self.kv[r] for r in running])
        held = np.array([self.blocks[r] for r in running])
        bs = self.cfg.block_size_tokens

        def covered(steps: int) -> bool:  # the pool holds the blocks `steps` more tokens each need
            return bool(
                np.maximum(-(-(kv + steps) // bs) + self.cfg.state_blocks - held, 0).sum() <= self.free_blocks
            )

        lo, hi = (k, k) if covered(k) else (0, k)  # the most steps whose new blocks the pool covers
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if covered(mid) else (lo, mid - 1)
        k = lo
        if self.held:  # a held request joins the step after the `steps` it waits for
            k = min(k, self.held[0][0] - self.steps)
        ta = self.next_arrival_s()
        if math.isfinite(ta) and can_admit_later and k >= 2:
            k = self._steps_before(ta, d, float(kv.mean()) + 1.0, k)
        return k if k >= 2 else 0

    def _steps_before(self, ta: float, d: int, ctx: float, k: int) -> int:
        """The most decode steps (<= k) that end by time `ta`, as `take_stretch` will cost them, so that an
        arrival is admitted at the first step boundary after it, as step by step."""

        def end(j: int) -> float:
            return self.t + j * (self.step_cost(d, 0, 0, ctx + (j - 1) / 2.0)[0] + self.cfg.host_step_s)

        lo, hi = 0, k
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if end(mid) <= ta else (lo, mid - 1)
        return lo

    def _head_fits(self, budget: int) -> bool:
        """The queue's head could start now; if not, decode steps (which only take blocks) keep it out."""
        r = self.waiting[0]
        take = self._chunk(r, budget, 0)
        return take > 0 and self._need(take) <= self.free_blocks and self._admissible(r)

    def take_stretch(self, k: int) -> None:
        """`k` decode steps of the running requests at once, costed at the stretch's mean context."""
        d = len(self.running)
        ctx = sum(map(self.kv.__getitem__, self.running)) / d + 1.0 + (k - 1) / 2.0
        latency_s, energy_j = self._cost(d, 0, 0, ctx, k)
        held_before = self.cfg.kv_blocks - self.free_blocks
        kv, blocks, generated = self.kv, self.blocks, self.generated
        bs, state = self.cfg.block_size_tokens, self.cfg.state_blocks
        for r in self.running:  # `_grow` inlined: this loop runs once per request and stretch
            tokens = kv[r] + k
            extra = -(-tokens // bs) + state - blocks[r]
            if extra > 0:
                if extra > self.free_blocks:
                    raise RuntimeError("internal error: a decode stretch outgrew the free KV blocks")
                self.free_blocks -= extra
                blocks[r] += extra
            kv[r] = tokens
            generated[r] += k
        self._advance(k * latency_s, k * energy_j, k, d)
        self.log.tokens[-1] = d * k
        # the blocks grow through the stretch: log their mean, not the end value, for the utilization
        self.log.blocks[-1] = (held_before + self.log.blocks[-1]) / 2
        self.steps += k

    def idle_until_next_arrival(self) -> None:
        ta = self.next_arrival_s()
        if not math.isfinite(ta):
            raise ConfigError("the simulation stalled: nothing runs, waits or will arrive")
        gap_s = max(ta - self.t, 0.0)
        self.log.start.append(self.t)
        self.log.end.append(self.t + gap_s)
        self.log.energy.append(gap_s * self.idle_power_w)
        self.log.tokens.append(0)
        self.log.running.append(0)
        self.log.blocks.append(self.cfg.kv_blocks - self.free_blocks)
        self.t += gap_s

    def run(self) -> SimResult:
        self.arrive()
        while self.done < self.n:
            if not self.running and not self.waiting:
                self.idle_until_next_arrival()
            else:
                k = self._stretch()
                if k:
                    self.take_stretch(k)
                    self.arrive()  # a request that arrived during the stretch joins the next step
                self.step()
            self.arrive()
        log = self.log
        start, end, energy = np.asarray(log.start), np.asarray(log.end), np.asarray(log.energy)
        if self.deferred:
            start, end, energy = self._costed()
        return SimResult(
            arrival_s=self.arrival,
            first_token_s=self.first,
            finish_s=self.finish,
            input_tokens=np.asarray(self.in_len),
            output_tokens=np.asarray(self.out_len),
            step_start_s=start,
            step_end_s=end,
            step_energy_j=energy,
            step_tokens=np.asarray(log.tokens),
            step_running=np.asarray(log.running),
            step_blocks=np.asarray(log.blocks),
            steps=self.steps,
            preemptions=self.preemptions,
            kv_blocks=self.cfg.kv_blocks,
            peak_blocks=self.peak_blocks,
        )

    def _costed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Deferred: the rows' start, end and energy from their steps' costs, in one `costs` call, and the
        requests' times from the rows they were noted at (the same arithmetic as step by step)."""
        batch = cast(BatchStepCost, self.step_cost)  # `simulate` defers only such costs
        costs = np.array(batch.costs(self.pending), dtype=np.float64).reshape(-1, 2)
        steps = np.array(self.row_steps, float)
        host_s = self.cfg.host_step_s * steps
        end = np.cumsum(steps * costs[:, 0] + host_s)  # sequential sums, as `t += ...` each row
        start = np.concatenate(([0.0], end[:-1]))
        energy = steps * costs[:, 1] + host_s * self.idle_power_w
        noted = (self.arrival, self.first, self.finish) if self.order is None else (self.first, self.finish)
        for times in noted:  # from the rows they were noted at (offline arrivals keep their given zeros)
            row = np.nan_to_num(times, nan=-1.0).astype(int)
            times[:] = np.where(np.isnan(times), np.nan, np.where(row >= 0, end[row], 0.0))
        return start, end, energy


def simulate(
    requests: Requests, config: SchedulerConfig, step_cost: StepCost, *, idle_power_w: float
) -> SimResult:
    """Simulate the engine serving `requests` (module docstring); ConfigError if a request can never run."""
    worst = int(np.max(np.asarray(requests.input_tokens) + np.asarray(requests.output_tokens)))
    if -(-worst // config.block_size_tokens) + config.state_blocks > config.kv_blocks:
        raise ConfigError(
            f"a request of {worst} tokens needs more than the KV cache's "
            f"{config.kv_blocks * config.block_size_tokens} tokens"
        )
    # A closed loop's schedule does not depend on the steps' times (clients send on completion), nor does an
    # offline run's: their steps can be costed after them, together, where the step cost allows.
    deferred = time_free(requests) and callable(getattr(step_cost, "costs", None))
    return _Engine(requests, config, step_cost, idle_power_w, deferred).run()


def time_free(requests: Requests) -> bool:
    """Whether the schedule of `requests` never reads a step's time: a closed loop (a client sends its next
    request when the last one finishes, whenever that is), or every request arriving at t = 0 (offline)."""
    return requests.arrival_s is None or not np.any(np.asarray(requests.arrival_s) != 0.0)
